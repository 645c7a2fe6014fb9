"""Issue #29, Freight approval, done when: ``/approve`` lets unverified Freight into prod.

Everything real but GitHub and Slack (:func:`tests.support.chat.running_chat_cluster`): the
controller runs against the Kubernetes API server emulator, the chat front ends reach it through
the real cluster port, GitHub's webhooks arrive signed from the fake GitHub (with real git behind
its pull requests) and Slack's slash commands signed as Slack signs them. ``prod`` takes Freight
only once it is verified in ``test``; the hotfix Freight never was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.controller.reconciler import Controller
from promoter.resources import annotations as ann
from tests.support import objects
from tests.support.chat import running_chat_cluster
from tests.support.controller import (
    freight_cached,
    wait_for_object,
    wait_terminal,
)
from tests.support.github_env import GitHubEnv
from tests.support.slack import (
    TEAM,
    FakeSlack,
    slash,
)
from tests.support.waiting import eventually

NS = "shop"
STEPS = [{"uses": "compose-output", "as": "deploy", "config": {"stage": "${{ ctx.stage }}"}}]


@dataclass
class World:
    kube: k.Kube
    controller: Controller
    github: GitHubEnv
    slack: FakeSlack
    client: TestClient[Any, Any]
    hotfix: str  # the Freight holding the merge commit of alice's pull request

    async def slash(self, command: str, text: str, user: str, answer: str) -> str:
        """Run a signed slash command as ``user``; Slack's ephemeral answer."""
        return await slash(self.client, self.slack, text, user=user, answer=answer, command=command)

    async def freight(self, name: str) -> dict[str, Any]:
        return await self.kube.get(k.FREIGHT, NS, name)

    async def promotions_to(self, stage: str) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(k.PROMOTIONS, NS)
        return [p for p in items if p["spec"]["stage"] == stage]


@pytest.fixture
async def world(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[World]:
    async with running_chat_cluster(tmp_path, aiohttp_client, NS) as chat:
        kube, github = chat.kube, chat.github
        # With steps: a Stage without any is a control-flow Stage and would pass Freight on.
        await kube.create(
            k.STAGES, objects.stage("test", namespace=NS, warehouse="shop", steps=STEPS)
        )
        await kube.create(
            k.STAGES,
            objects.stage(
                "prod",
                namespace=NS,
                warehouse="shop",
                upstream=["test"],
                steps=STEPS,
                annotations={
                    ann.GITHUB_APPROVERS: "alice, example/release-team",
                    ann.SLACK_APPROVERS: "U0ALICE U0DANA",
                    ann.SELF_APPROVAL: "false",
                },
            ),
        )
        for user in ("alice", "carol", "erin"):
            github.fake.set_permission(github.repo, user, "write")
        github.fake.add_team_member("example", "release-team", "carol")
        # alice's hotfix, merged: its merge commit is in the hotfix Freight.
        pull = await github.open_pull(
            "hotfix", {"main.go": "package main // fixed\n"}, title="Hotfix", merge=True
        )
        hotfix = "1a2b3c4d5e6f"
        commit = {
            "repoURL": github.git_url,
            "id": pull["merge_commit_sha"],
            "author": "Dana <dana@example.com>",
        }
        await kube.create(
            k.FREIGHT,
            objects.freight(
                hotfix, namespace=NS, alias="hot-fix", warehouse="shop", commits=[commit]
            ),
        )
        await kube.create(
            k.FREIGHT,
            objects.freight("9f8e7d6c5b4a", namespace=NS, alias="wise-wampa", warehouse="shop"),
        )
        await wait_for_object(kube, k.FREIGHT, NS, hotfix, lambda o: True)
        await freight_cached(chat.controller, NS, hotfix)
        yield World(kube, chat.controller, github, chat.slack, chat.client, hotfix)


async def test_approve_on_a_pull_request_lets_unverified_freight_into_prod(world: World) -> None:
    github = world.github
    # Not verified in test: prod refuses it, and says how to let it in.
    [reply] = await github.comment("/promote hot-fix to prod", user="carol")
    assert "not available to Stage `prod`" in reply["body"]
    assert "`/approve hot-fix for prod`" in reply["body"]
    # erin may promote but is no approver of prod.
    [reply] = await github.comment("/approve hot-fix for prod", user="erin")
    assert "not listed in Stage prod's longshoreman.dev/github-approvers" in reply["body"]
    # alice is an approver, but the hotfix is her own pull request: prod forbids that.
    [reply] = await github.comment("/approve hot-fix for prod", user="alice")
    assert "carries a change of yours" in reply["body"]
    assert "approvedFor" not in ((await world.freight(world.hotfix)).get("status") or {})
    # carol, through her team, approves it: recorded on the Freight with who did it.
    [reply] = await github.comment("/approve hot-fix for prod", user="carol")
    assert reply["body"].startswith("@carol: Freight `hot-fix` approved for Stage `prod`")
    approval = (await world.freight(world.hotfix))["status"]["approvedFor"]["prod"]
    assert approval["approvedBy"] == "github:carol" and approval["approvedAt"]
    events, _ = await world.kube.list(k.EVENTS, NS)
    assert any(
        e["reason"] == "FreightApproved"
        and e["message"] == 'Freight approved for Stage "prod" by "github:carol"'
        for e in events
    )
    # Approving again changes nothing and says who approved it.
    [reply] = await github.comment("/approve hot-fix for prod", user="carol")
    assert "already approved" in reply["body"] and "github:carol" in reply["body"]
    # Now /promote takes it into prod, though it was never verified in test.
    await _cached_approval(world, world.hotfix)
    [reply] = await github.comment("/promote hot-fix to prod", user="carol")
    assert "Promotion `prod." in reply["body"]
    [promotion] = await world.promotions_to("prod")
    done = await wait_terminal(world.kube, NS, promotion["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"


async def test_approve_slash_command_lets_unverified_freight_into_prod(world: World) -> None:
    # The hotfix carries commits, and a Slack account is no GitHub account: Slack cannot tell
    # whose change it is (a commit's "Author: Dana" line is free text), so prod refuses it
    # there, for everyone, and says where to approve it.
    said = await world.slash("/approve", "hot-fix for prod", "U0DANA", "a1")
    assert "cannot tell whether Freight `hot-fix` carries a change of yours" in said
    assert "a pull request comment" in said
    # Someone not in slack-approvers is refused.
    said = await world.slash("/approve", "wise-wampa for prod", "U0BOB", "a2")
    assert "may not approve Freight for Stage prod" in said
    # Freight without commits (an image) is nobody's change: approved from Slack.
    said = await world.slash("/approve", "wise-wampa for prod", "U0ALICE", "a3")
    assert "*wise-wampa* is approved for *prod*" in said
    approval = (await world.freight("9f8e7d6c5b4a"))["status"]["approvedFor"]["prod"]
    assert approval["approvedBy"] == f"slack:{TEAM}/U0ALICE"
    # /promote approve is the same command; the approval stands.
    said = await world.slash("/promote", "approve wise-wampa for prod", "U0ALICE", "a4")
    assert "already approved" in said
    # And the Freight goes to prod from Slack.
    await _cached_approval(world, "9f8e7d6c5b4a")
    said = await world.slash("/promote", "wise-wampa to prod", "U0ALICE", "p1")
    assert "created" in said
    [promotion] = await world.promotions_to("prod")
    done = await wait_terminal(world.kube, NS, promotion["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"


async def test_an_approval_written_with_kubectl_counts_too(world: World) -> None:
    await world.kube.patch_status(
        k.FREIGHT,
        NS,
        "9f8e7d6c5b4a",
        {"approvedFor": {"prod": {"approvedAt": "2025-01-01T00:00:00Z"}}},
        resource_version=None,
    )
    await _cached_approval(world, "9f8e7d6c5b4a")
    [reply] = await world.github.comment("/promote wise-wampa to prod", user="carol")
    assert "Promotion `prod." in reply["body"]
    [reply] = await world.github.comment("/approve wise-wampa for prod", user="carol")
    assert "was already approved for Stage `prod`" in reply["body"]


async def _cached_approval(world: World, name: str) -> None:
    """Wait until the informer saw the approval (a kubectl write comes back through it)."""

    async def seen() -> bool | None:
        obj = world.controller.freight.get(NS, name) or {}
        return "prod" in ((obj.get("status") or {}).get("approvedFor") or {}) or None

    await eventually(seen, f"the approval of {name} in the informer")
