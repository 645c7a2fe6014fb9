"""A project's own webhook receivers (ProjectConfig ``webhookReceivers``), beside the operator's.

Over HTTP: a receiver listens at Kargo's path (``sha256(project + name + secret)``) under
``/webhooks/<sender>/``, authenticates as its sender does with its own Secret, and refreshes
only its project's Warehouses; a path no receiver has is 404. End to end: the whole server on its
embedded cluster reads the Secret a ProjectConfig names, publishes where the receiver listens in
``status.webhookReceivers``, and a push there refreshes the project's Warehouse.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.receivers.routes import setup_receivers
from app.receivers.settings import ReceiverSettings
from app.server import create_app, wait_started
from app.settings import Settings
from promoter.warehouses.project_receivers import ProjectReceiver, project_receivers
from tests.support import objects
from tests.support.controller import wait_for_object
from tests.support.fixtures import webhook_body
from tests.support.processes import QUIET
from tests.support.promotions import FakePromotions

SECRET = "project-secret-0123456789abcdef"


def test_paths_are_kargo_s_and_secrets_are_read_by_sender() -> None:
    specs = [
        {"name": "hub", "dockerhub": {"secretRef": {"name": "s"}}},
        {"name": "harbor", "harbor": {"secretRef": {"name": "s"}}},
        {"name": "gh", "github": {"secretRef": {"name": "s"}}},
        {"name": "lost", "quay": {"secretRef": {"name": "nope"}}},
        {"name": "keyless", "gitlab": {"secretRef": {"name": "s"}}},
    ]
    data = {"secret": SECRET, "auth-header": "Bearer h-0123456789abcdef"}
    found, problems, notes = project_receivers(
        "team-a", specs, lambda n: data if n == "s" else None
    )
    digest = hashlib.sha256(("team-a" + "hub" + SECRET).encode()).hexdigest()
    assert [(r.name, r.path) for r in found] == [
        ("hub", f"/webhooks/dockerhub/{digest}"),
        (
            "harbor",
            "/webhooks/harbor/"
            + hashlib.sha256(
                ("team-a" + "harbor" + "Bearer h-0123456789abcdef").encode()
            ).hexdigest(),
        ),
    ]
    assert notes == [
        "webhook receiver `gh` is not served: GitHub events reach Longshoreman through "
        "its GitHub App (POST /github/webhook)"
    ]
    assert problems == [
        "spec.webhookReceivers[3] (lost): Secret 'nope' not found in namespace 'team-a'",
        "spec.webhookReceivers[4] (keyless): Secret 's' has no 'secret-token' key",
    ]
    assert SECRET not in repr(found)


async def test_a_project_receiver_refreshes_only_its_project_s_warehouses() -> None:
    service = FakePromotions("team-a")
    image = {"repoURL": "docker.io/acme/app"}
    service.warehouse_list[:] = [
        objects.warehouse("app", namespace="team-a", subscriptions=[{"image": image}]),
        objects.warehouse("app", namespace="team-b", subscriptions=[{"image": image}]),
    ]
    hub = project_receivers(
        "team-a",
        [{"name": "hub", "dockerhub": {"secretRef": {"name": "s"}}}],
        lambda name: {"secret": SECRET},
    )[0][0]
    harbor = ProjectReceiver("team-a", "h", "harbor", "/webhooks/harbor/abc", "Bearer h-0123456789")
    table = {hub.path: hub, harbor.path: harbor}
    app = web.Application()
    # The operator runs no receivers of their own: the projects' are still served.
    mounted = setup_receivers(app, ReceiverSettings(), lambda: service, lambda: table)
    async with TestClient(TestServer(app)) as http:
        body = json.dumps(webhook_body("dockerhub.push")).encode()
        response = await http.post(hub.path, data=body)
        assert response.status == 202, await response.text()
        assert (await response.json())["warehouses"] == ["team-a/app"]
        await mounted.drain()
        assert service.asked("refresh-warehouse") == [("team-a", "app")]
        # Another hash, or the right hash under another sender: no such receiver.
        assert (await http.post("/webhooks/dockerhub/" + "0" * 64, data=body)).status == 404
        assert (await http.post(hub.path.replace("dockerhub", "quay"), data=body)).status == 404
        # A header-authenticated sender still needs its header.
        harbor_body = json.dumps(webhook_body("harbor.push_artifact")).encode()
        assert (await http.post(harbor.path, data=harbor_body)).status == 401


async def test_the_server_serves_a_project_config_s_receiver_where_its_status_says(
    tmp_path: Path,
) -> None:
    ns = "kargo-demo"
    settings = Settings.from_env(
        {
            **QUIET,
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_PUBLIC_URL": "https://longshoreman.example.com",
        }
    )
    app = create_app(settings)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        assert state.kube is not None and state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 20)
        kube = state.kube
        secret = base64.b64encode(SECRET.encode()).decode()
        await kube.create(
            k.SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "hub-secret", "namespace": ns},
                "data": {"secret": secret},
            },
        )
        image = {"repoURL": "docker.io/acme/app"}
        await kube.create(
            k.WAREHOUSES,
            objects.warehouse("acme", namespace=ns, subscriptions=[{"image": image}]),
        )
        receivers = [{"name": "hub", "dockerhub": {"secretRef": {"name": "hub-secret"}}}]
        await kube.create(k.PROJECT_CONFIGS, objects.project_config(ns, webhookReceivers=receivers))
        config = await wait_for_object(
            kube,
            k.PROJECT_CONFIGS,
            ns,
            ns,
            lambda c: bool((c.get("status") or {}).get("webhookReceivers")),
        )
        digest = hashlib.sha256((ns + "hub" + SECRET).encode()).hexdigest()
        path = f"/webhooks/dockerhub/{digest}"
        assert config["status"]["webhookReceivers"] == [
            {"name": "hub", "path": path, "url": f"https://longshoreman.example.com{path}"}
        ]
        response = await client.post(path, data=json.dumps(webhook_body("dockerhub.push")))
        assert response.status == 202, await response.text()
        assert (await response.json())["warehouses"] == [f"{ns}/acme"]
        refreshed = await wait_for_object(
            kube,
            k.WAREHOUSES,
            ns,
            "acme",
            lambda w: any("refresh" in key for key in (w["metadata"].get("annotations") or {})),
        )
        assert refreshed["metadata"]["annotations"]
