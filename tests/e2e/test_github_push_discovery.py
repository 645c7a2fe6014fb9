"""Issue 27's first "done when", end to end over HTTP: a push to a private repository on a GitHub
Enterprise where the App is installed makes the head commit's Freight through Warehouse
discovery, with the App's installation token.

The whole server (``create_app``) runs against the Kubernetes API emulator with the App
configured for the fake GitHub Enterprise (``LONGSHOREMAN_GITHUB_API_URL``), whose git host lets
git in only with a valid installation token. The Warehouse polls once an hour, so only the push
webhook (signed as GitHub signs it) can make the new commit's Freight appear. Before issue 27,
discovery ran git with no credentials and failed "could not read Username". A redelivery of the
same push refreshes again and creates nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from handlers.webhook import WEBHOOK_PATH
from tests.support import objects
from tests.support.github import FakeGitHub, running_fake_github, webhook_request
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.kube import running_apiserver
from tests.support.waiting import eventually

NS = "demo"
REPO = "example/app"
SECRET = "webhook-secret"


@dataclass
class World:
    kube: k.Kube
    fake: FakeGitHub
    git: RemoteRepo
    http: TestClient[Any, Any]

    async def deliver(self, payload: dict[str, Any], delivery: str) -> None:
        headers, body = webhook_request("push", payload, SECRET, delivery=delivery)
        response = await self.http.post(WEBHOOK_PATH, data=body, headers=headers)
        assert response.status == 202, await response.text()

    async def freight(self) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(k.FREIGHT, NS)
        return items

    async def freight_of(self, commit: str) -> dict[str, Any]:
        async def made() -> dict[str, Any] | None:
            for item in await self.freight():
                if [c["id"] for c in item.get("commits") or ()] == [commit]:
                    return item
            return None

        return await eventually(made, f"Freight of {commit[:12]}")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with (
        running_apiserver(namespaces=[NS], bookmark_interval=0.2) as api,
        running_fake_github() as fake,
    ):
        git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        fake.add_repo(REPO, git)
        settings = Settings.from_env(
            {
                "KUBECONFIG": str(api.kubeconfig_path),
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
                "LONGSHOREMAN_GITHUB_APP_ID": str(fake.app_id),
                "LONGSHOREMAN_GITHUB_PRIVATE_KEY": fake.private_key,
                "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": SECRET,
                # A GitHub Enterprise Server (plain HTTP on 127.0.0.1 here).
                "LONGSHOREMAN_GITHUB_API_URL": fake.url,
                "LONGSHOREMAN_GITHUB_PROJECT": NS,
            }
        )
        kube = k.Kube(api.api_client())
        async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as http:
            await wait_started(http.app)
            yield World(kube, fake, git, http)
            await kube.close()


async def test_a_signed_push_makes_the_head_commits_freight_with_the_apps_token(
    world: World,
) -> None:
    first = world.git.head("main")
    assert first is not None
    await world.kube.create(
        k.WAREHOUSES,
        objects.warehouse(
            "app",
            namespace=NS,
            interval="1h",
            subscriptions=[{"git": {"repoURL": world.fake.git_url(REPO), "branch": "main"}}],
        ),
    )
    # Created: discovered once, with the App's token (the private repository lets nobody else in).
    await world.freight_of(first)
    assert world.fake.tokens_issued >= 1
    assert any(r.allowed for r in world.fake.git_requests)

    head = world.git.commit_files("main", {"main.go": "package main // v2\n"}, "v2")
    payload = world.fake.push_payload(REPO, "main", first)
    await world.deliver(payload, "delivery-1")
    freight = await world.freight_of(head)
    assert freight["origin"] == {"kind": "Warehouse", "name": "app"}
    assert freight["commits"][0]["message"] == "v2"
    warehouse = await world.kube.get(k.WAREHOUSES, NS, "app")
    ready = next(c for c in warehouse["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", json.dumps(warehouse["status"], indent=1)

    # GitHub redelivers the same push (a new delivery id): a refresh, no new Freight.
    handled = warehouse["status"].get("lastHandledRefresh")
    await world.deliver(payload, "delivery-2")

    async def refreshed_again() -> bool | None:
        found = await world.kube.get(k.WAREHOUSES, NS, "app")
        status = found.get("status") or {}
        return True if status.get("lastHandledRefresh") not in (None, handled) else None

    await eventually(refreshed_again, "the redelivery's refresh")
    assert len(await world.freight()) == 2
