"""Project webhook receivers for Bitbucket, Gitea and Azure, and the generic receiver with
Kargo's ``actions``, over HTTP (Kargo's pkg/webhook/external/{bitbucket,gitea,azure,generic}
_test.go cases, with Warehouses in the project): authentication as each sender does it, which
Warehouses a delivery refreshes, and the generic receiver's per-action results."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.receivers.routes import Receivers, setup_receivers
from app.receivers.settings import ReceiverSettings
from promoter.warehouses.project_receivers import ProjectReceiver, project_receivers
from tests.support import objects
from tests.support.promotions import FakePromotions

SECRET = "project-secret-0123456789abcdef"
REPO = "https://bitbucket.org/example/repo"


def receiver(sender: str, name: str = "r", **config: Any) -> ProjectReceiver:
    [found], problems, _ = project_receivers(
        "team-a",
        [{"name": name, sender: {"secretRef": {"name": "s"}, **config}}],
        lambda _: {"secret": SECRET},
    )
    assert not problems
    return found


def git_warehouse(name: str, repo: str, branch: str = "main", **extra: Any) -> dict[str, Any]:
    return objects.warehouse(
        name,
        namespace="team-a",
        subscriptions=[{"git": {"repoURL": repo, "branch": branch}}],
        **extra,
    )


class World:
    def __init__(self, service: FakePromotions, receivers: Receivers, http: Any) -> None:
        self.service, self.receivers, self.http = service, receivers, http

    async def post(self, who: ProjectReceiver, payload: Any, **headers: str) -> tuple[int, Any]:
        body = json.dumps(payload).encode()
        response = await self.http.post(who.path, data=body, headers=headers)
        await self.receivers.drain()
        return response.status, await response.json()

    def refreshed(self) -> list[tuple[Any, ...]]:
        return self.service.asked("refresh-warehouse")


RECEIVERS = {
    "bitbucket": receiver("bitbucket"),
    "gitea": receiver("gitea"),
    "azure": receiver("azure"),
}


@pytest.fixture
async def world() -> AsyncIterator[World]:
    service = FakePromotions("team-a")
    service.warehouse_list[:] = [
        git_warehouse("bitbucket-main", REPO),
        git_warehouse("bitbucket-dev", REPO, branch="dev"),
        git_warehouse("gitea-main", "https://gitea.example.com/example/repo"),
        git_warehouse("devops-main", "https://dev.azure.com/org/project/_git/repo"),
        objects.warehouse(
            "acr", namespace="team-a",
            subscriptions=[{"image": {"repoURL": "example.azurecr.io/example/app",
                                      "constraint": "^1.0.0"}}],
        ),
        objects.warehouse("other-project", namespace="team-b",
                          subscriptions=[{"git": {"repoURL": REPO, "branch": "main"}}]),
    ]  # fmt: skip
    table = {r.path: r for r in RECEIVERS.values()}
    generic = receiver("generic", name="g", actions=GENERIC_ACTIONS)
    table[generic.path] = generic
    app = web.Application()
    receivers = setup_receivers(app, ReceiverSettings(), lambda: service, lambda: table)
    async with TestClient(TestServer(app)) as http:
        yield World(service, receivers, http)


def sign(payload: Any, prefix: str = "sha256=") -> str:
    body = json.dumps(payload).encode()
    return prefix + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


BITBUCKET_PUSH = {
    "push": {"changes": [{"new": {"type": "branch", "name": "main"}}]},
    "repository": {"links": {"html": {"href": REPO}}},
}


async def test_a_signed_bitbucket_push_refreshes_the_branchs_warehouse(world: World) -> None:
    status, answer = await world.post(
        RECEIVERS["bitbucket"], BITBUCKET_PUSH,
        **{"X-Event-Key": "repo:push", "X-Hub-Signature": sign(BITBUCKET_PUSH)},
    )  # fmt: skip
    assert (status, answer["warehouses"]) == (202, ["team-a/bitbucket-main"])
    assert world.refreshed() == [("team-a", "bitbucket-main")]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"X-Event-Key": "repo:push"}, 401),  # missing signature
        ({"X-Event-Key": "repo:push", "X-Hub-Signature": "sha256=" + "0" * 64}, 401),
        ({"X-Event-Key": "issue:created", "X-Hub-Signature": sign(BITBUCKET_PUSH)}, 400),
    ],
)
async def test_bitbucket_refusals(world: World, headers: dict[str, str], status: int) -> None:
    got, _ = await world.post(RECEIVERS["bitbucket"], BITBUCKET_PUSH, **headers)
    assert got == status
    assert world.refreshed() == []


async def test_a_bitbucket_pull_request_event_is_acknowledged(world: World) -> None:
    payload = {"pullrequest": {"links": {"html": {"href": f"{REPO}/pull-requests/1"}}}}
    status, _ = await world.post(
        RECEIVERS["bitbucket"], payload,
        **{"X-Event-Key": "pullrequest:fulfilled", "X-Hub-Signature": sign(payload)},
    )  # fmt: skip
    assert status == 200 and world.refreshed() == []


async def test_a_gitea_push_is_signed_and_filtered_by_ref(world: World) -> None:
    push = {
        "ref": "refs/heads/main",
        "repository": {"clone_url": "https://gitea.example.com/example/repo.git"},
        "commits": [{"added": ["a.yaml"], "modified": [], "removed": []}],
        "total_commits": 1,
    }
    signed = {"X-Gitea-Event": "push", "X-Gitea-Signature": sign(push, prefix="")}
    status, answer = await world.post(RECEIVERS["gitea"], push, **signed)
    assert (status, answer["warehouses"]) == (202, ["team-a/gitea-main"])
    other = {**push, "ref": "refs/heads/feature"}
    status, answer = await world.post(
        RECEIVERS["gitea"], other,
        **{"X-Gitea-Event": "push", "X-Gitea-Signature": sign(other, prefix="")},
    )  # fmt: skip
    assert (status, answer["warehouses"]) == (200, [])
    status, _ = await world.post(
        RECEIVERS["gitea"], push, **{"X-Gitea-Event": "issues",
                                     "X-Gitea-Signature": sign(push, prefix="")},
    )  # fmt: skip
    assert status == 501


async def test_azure_container_registry_and_devops(world: World) -> None:
    acr = {
        "action": "push",
        "target": {
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "repository": "example/app",
            "tag": "1.2.3",
        },
        "request": {"host": "example.azurecr.io"},
    }
    status, answer = await world.post(
        RECEIVERS["azure"], acr, **{"User-Agent": "AzureContainerRegistry/1.0"}
    )
    assert (status, answer["warehouses"]) == (202, ["team-a/acr"])
    status, answer = await world.post(
        RECEIVERS["azure"], {**acr, "target": {**acr["target"], "tag": "0.9.0"}},
        **{"User-Agent": "AzureContainerRegistry/1.0"},
    )  # fmt: skip
    assert (status, answer["warehouses"]) == (200, [])
    devops = {
        "eventType": "git.push",
        "resource": {
            "refUpdates": [{"name": "refs/heads/main"}],
            "repository": {"remoteUrl": "https://dev.azure.com/org/project/_git/repo"},
        },
    }
    status, answer = await world.post(
        RECEIVERS["azure"], devops, **{"User-Agent": "VSServices/16.255"}
    )
    assert (status, answer["warehouses"]) == (202, ["team-a/devops-main"])
    status, answer = await world.post(RECEIVERS["azure"], {}, **{"User-Agent": "curl/8"})
    assert status == 400
    assert world.refreshed() == [("team-a", "acr"), ("team-a", "devops-main")]


GENERIC_ACTIONS = [
    {
        "action": "Refresh",
        "whenExpression": "request.header('X-Event-Type') == 'push'",
        "targetSelectionCriteria": [
            {
                "kind": "Warehouse",
                "indexSelector": {
                    "matchIndices": [
                        {
                            "key": "subscribedURLs",
                            "operator": "Equals",
                            "value": "${{ normalizeGit(request.body.repository.url) }}",
                        }
                    ]
                },
            }
        ],
    },
    {"action": "Refresh", "whenExpression": "request.header('X-Event-Type') == 'tag'"},
]


async def test_the_generic_receiver_runs_kargos_actions(world: World) -> None:
    generic = next(r for r in world.receivers.project_receivers().values() if r.sender == "generic")
    status, answer = await world.post(
        generic, {"repository": {"url": REPO + ".git"}}, **{"X-Event-Type": "push"}
    )
    assert status == 200, answer
    first, second = answer["results"]
    assert first["matchedWhenExpression"] is True
    # Both of the project's Warehouses on that repository; never another project's.
    assert first["selectedTargets"] == [
        {"namespace": "team-a", "name": "bitbucket-dev", "success": True},
        {"namespace": "team-a", "name": "bitbucket-main", "success": True},
    ]
    assert (first["result"], first["summary"]) == ("Success", "Refreshed 2 of 2 selected resources")
    assert (second["result"], second["summary"]) == (
        "NotApplicable", "Request did not match whenExpression",
    )  # fmt: skip
    assert world.refreshed() == [("team-a", "bitbucket-dev"), ("team-a", "bitbucket-main")]
    status, answer = await world.post(generic, {"x": 1}, **{"X-Event-Type": "push"})
    assert status == 500
    assert answer["results"][0]["summary"] == "Error evaluating targetSelectionCriteria"
