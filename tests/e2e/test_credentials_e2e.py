"""Issue 27's "done when", with real servers: a project's credential Secrets open private ones.

The whole server (``create_app``) runs against the Kubernetes API emulator. A git server that
demands Basic auth (``git http-backend`` behind a small auth front, tests/support/githttp.py) and
Debian's docker-registry with htpasswd auth hold the project's private repositories. Team A keeps
Kargo-format credential Secrets in its namespace: its Warehouse discovers the commit and the
image, and its Promotion clones, commits, pushes and ``oci-push``es with them. Team B has the
same Warehouse and no Secret: its status says "no credentials for <repoURL>". Team C's Secret
holds a wrong password: the registry's 401 is in the Warehouse's status. No password is in any
log line, Warehouse or Promotion.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from tests.support import objects
from tests.support.controller import wait_terminal
from tests.support.githttp import GitServer, running_git_server
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.kube import running_apiserver
from tests.support.registry import Registry, running_registry
from tests.support.waiting import eventually

TEAM_A, TEAM_B, TEAM_C = "team-a", "team-b", "team-c"
GIT_USER, GIT_PASSWORD = "deploy-bot", "git-pa55word-0f-team-a"
REGISTRY_USER, REGISTRY_PASSWORD = "robot", "registry-pa55word-0f-team-a"
WRONG_PASSWORD = "not-the-registry-pa55word"


def credential_secret(
    name: str, namespace: str, kind: str, repo_url: str, user: str, password: str, **more: str
) -> dict[str, Any]:
    """A Secret exactly as a Kargo project keeps it."""
    data = {"repoURL": repo_url, "username": user, "password": password, **more}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kargo.akuity.io/cred-type": kind},
        },
        "data": {key: base64.b64encode(v.encode()).decode() for key, v in data.items()},
    }


@dataclass
class World:
    kube: k.Kube
    git: GitServer
    registry: Registry
    app_url: str
    gitops_url: str
    gitops: RemoteRepo
    app_head: str

    def warehouse(self, namespace: str) -> dict[str, Any]:
        return objects.warehouse(
            "app",
            namespace=namespace,
            interval="1h",
            subscriptions=[
                {"git": {"repoURL": self.app_url, "branch": "main"}},
                {"image": {"repoURL": self.registry.repo("acme/app")}},
            ],
        )

    async def warehouse_status(self, namespace: str, what: str) -> dict[str, Any]:
        async def ready_condition() -> dict[str, Any] | None:
            found = await self.kube.get(k.WAREHOUSES, namespace, "app")
            for condition in (found.get("status") or {}).get("conditions") or ():
                if condition.get("type") == "Ready" and condition.get("status") == "False":
                    return found
            return None

        return await eventually(ready_condition, what)

    async def freight(self, namespace: str) -> dict[str, Any]:
        async def made() -> dict[str, Any] | None:
            items, _ = await self.kube.list(k.FREIGHT, namespace)
            return items[0] if items else None

        return await eventually(made, f"Freight in {namespace}")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with (
        running_apiserver(namespaces=[TEAM_A, TEAM_B, TEAM_C], bookmark_interval=0.2) as api,
        running_git_server(GIT_USER, GIT_PASSWORD) as git,
        running_registry(tmp_path, htpasswd=(REGISTRY_USER, REGISTRY_PASSWORD)) as registry,
    ):
        app = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        gitops = make_remote(tmp_path, {"stage/version.txt": "0\n"}, name="gitops")
        app_url, gitops_url = git.add("app", app), git.add("gitops", gitops)
        await registry.push_image("acme/app", "1.0.0")
        settings = Settings.from_env(
            {
                "KUBECONFIG": str(api.kubeconfig_path),
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
                "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
                # Kargo's ALLOW_CREDENTIALS_OVER_HTTP: the git server here speaks plain HTTP.
                "LONGSHOREMAN_ALLOW_CREDENTIALS_OVER_HTTP": "true",
            }
        )
        kube = k.Kube(api.api_client())
        server = create_app(settings)
        async with TestClient(TestServer(server, host="127.0.0.1")) as http:
            await wait_started(http.app)
            head = app.head("main")
            assert head is not None
            yield World(kube, git, registry, app_url, gitops_url, gitops, head)
            await kube.close()


async def test_a_projects_secrets_open_private_git_and_registry_to_discovery_and_promotion(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    kube, registry = world.kube, world.registry
    # Team A: one exact git URL, one pattern for the registry (the image and the copy's target).
    await kube.create(
        k.SECRETS,
        credential_secret("git", TEAM_A, "git", world.app_url.removesuffix(".git"),
                          GIT_USER, GIT_PASSWORD),
    )  # fmt: skip
    await kube.create(
        k.SECRETS,
        credential_secret("gitops", TEAM_A, "git", world.gitops_url, GIT_USER, GIT_PASSWORD),
    )
    await kube.create(
        k.SECRETS,
        credential_secret("registry", TEAM_A, "image", f"^{registry.host}/acme/",
                          REGISTRY_USER, REGISTRY_PASSWORD, repoURLIsRegex="true"),
    )  # fmt: skip
    # Team C: the right user, a wrong password.
    await kube.create(
        k.SECRETS,
        credential_secret("git", TEAM_C, "git", world.app_url, GIT_USER, GIT_PASSWORD),
    )
    await kube.create(
        k.SECRETS,
        credential_secret("registry", TEAM_C, "image", registry.repo("acme/app"),
                          REGISTRY_USER, WRONG_PASSWORD),
    )  # fmt: skip
    steps: list[dict[str, Any]] = [
        {
            "uses": "git-clone",
            "config": {
                "repoURL": world.gitops_url,
                "checkout": [{"branch": "main", "path": "./out"}],
            },
        },
        {
            "uses": "file-write",
            "config": {
                "path": "./out/stage/version.txt",
                "contents": '${{ commitFrom("' + world.app_url + '").ID }}\n',
                "overwrite": True,
            },
        },
        {"uses": "git-commit", "config": {"path": "./out", "message": "Deploy"}},
        {"uses": "git-push", "as": "push", "config": {"path": "./out"}},
        {
            "uses": "oci-push",
            "as": "copy",
            "config": {
                "srcRef": registry.repo("acme/app") + ":1.0.0",
                "destRef": registry.repo("acme/promoted") + ":test",
            },
        },
    ]
    await kube.create(k.STAGES, objects.stage("test", namespace=TEAM_A, warehouse="app",
                                              steps=steps))  # fmt: skip
    for namespace in (TEAM_A, TEAM_B, TEAM_C):
        await kube.create(k.WAREHOUSES, world.warehouse(namespace))

    # Team A: discovery read both private repositories with the project's Secrets.
    freight = await world.freight(TEAM_A)
    assert [c["id"] for c in freight["commits"]] == [world.app_head]
    assert [i["tag"] for i in freight["images"]] == ["1.0.0"]
    await kube.create(
        k.PROMOTIONS,
        objects.promotion("to-test", "test", namespace=TEAM_A,
                          freight=freight["metadata"]["name"]),
    )  # fmt: skip
    done = await wait_terminal(kube, TEAM_A, "to-test", within=60)
    assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)
    assert world.gitops.read_file("main", "stage/version.txt") == f"{world.app_head}\n"
    manifest = await registry.session.get(
        f"http://{registry.host}/v2/acme/promoted/manifests/test",
        headers={**registry._headers("acme/promoted"),
                 "Accept": "application/vnd.oci.image.manifest.v1+json"},
    )  # fmt: skip
    assert manifest.status == 200
    pushes = [h for h in world.git.hits if h.path.endswith("/git-receive-pack")]
    assert pushes and {h.user for h in pushes} == {GIT_USER}

    # Team B: the same Warehouse, no Secret: a clear message, no Freight.
    failed = await world.warehouse_status(TEAM_B, "team B's discovery to fail")
    ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
    assert f"no credentials for {world.app_url}" in ready["message"], ready
    assert (await kube.list(k.FREIGHT, TEAM_B))[0] == []

    # Team C: git opens, the registry answers 401 to the wrong password.
    failed = await world.warehouse_status(TEAM_C, "team C's discovery to fail")
    ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
    assert "401" in ready["message"] and "no credentials" not in ready["message"], ready
    assert registry.repo("acme/app") in ready["message"] or "/v2/acme/app/" in ready["message"]

    # No password anywhere it could leak.
    shown = caplog.text + json.dumps(done) + json.dumps(failed)
    for name in (TEAM_A, TEAM_B, TEAM_C):
        shown += json.dumps(await kube.get(k.WAREHOUSES, name, "app"))
    for secret in (GIT_PASSWORD, REGISTRY_PASSWORD, WRONG_PASSWORD):
        assert secret not in shown
        assert base64.b64encode(secret.encode()).decode() not in shown
