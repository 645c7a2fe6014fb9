"""Issue #39, done when: anyone on call stops the line from chat, and it starts again by itself.

The whole server (``create_app``: the controller, the GitHub and Slack front ends) runs against
the API server emulator, the fake GitHub and the fake Slack, on a clock the test moves. prod
auto-promotes. ``/freeze prod for 2h "incident 4711"`` typed in Slack holds the auto-promotion
of a new Freight Pending and makes ``/promote`` in a pull request comment refuse, saying why and
until when; ``/unfreeze prod`` lets the held Promotion start. A freeze with an end ends by itself
when the clock reaches it, and someone who is not among prod's promoters may not freeze it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from promoter.chat.grammar import FREEZE_SLASH, UNFREEZE_SLASH
from promoter.control.freezes import freeze_of
from promoter.resources import annotations as ann
from tests.support import objects
from tests.support.chatserver import comment_reply, running_chat_server
from tests.support.clock import FakeClock
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.github import FakeGitHub, running_fake_github
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.kube import running_apiserver
from tests.support.slack import FakeSlack, running_fake_slack, slash
from tests.support.waiting import eventually

NS = "shop"
REPO = "example/app"
START = datetime(2026, 12, 3, 21, 0, tzinfo=UTC)  # a Thursday evening
STEPS = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]


@dataclass
class World:
    kube: k.Kube
    github: FakeGitHub
    slack: FakeSlack
    http: TestClient[Any, Any]
    clock: FakeClock
    issue: int
    git: RemoteRepo
    answers: int = 0

    async def slack_command(self, command: str, text: str, user: str = "U0ALICE") -> str:
        """``command text`` typed in Slack by ``user``; the bot's ephemeral answer."""
        self.answers += 1
        return await slash(
            self.http, self.slack, text, user=user, answer=f"a{self.answers}", command=command
        )

    async def comment(self, body: str, user: str = "alice") -> str:
        """A comment on the issue; the bot's reply to it."""
        reply = await comment_reply(self.http, self.github, REPO, self.issue, body, user=user)
        return str(reply["body"])

    async def new_freight(self, alias: str) -> dict[str, Any]:
        """A new commit, its Freight, and the auto-promotion prod gets, once it exists."""
        name = self.git.commit_files("main", {"app.txt": alias}, f"release {alias}")
        commit = {"repoURL": f"https://github.com/{REPO}.git", "id": name, "branch": "main"}
        freight = objects.freight(name, namespace=NS, alias=alias, warehouse="shop")
        freight["commits"] = [commit]
        await self.kube.create(k.FREIGHT, freight)

        async def promoted() -> dict[str, Any] | None:
            items, _ = await self.kube.list(k.PROMOTIONS, NS)
            return next((p for p in items if p["spec"]["freight"] == name), None)

        return await eventually(promoted, f"the auto-promotion of {alias}")

    async def held(self, promotion: dict[str, Any], why: str) -> dict[str, Any]:
        """The Promotion, once its status says it waits for ``why``; still Pending."""
        found = await wait_for_object(
            self.kube,
            k.PROMOTIONS,
            NS,
            promotion["metadata"]["name"],
            lambda p: why in str((p.get("status") or {}).get("message")),
        )
        assert found["status"].get("phase", "Pending") == "Pending"
        return found


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock = FakeClock(START)
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            running_apiserver(namespaces=[NS], bookmark_interval=0.2, clock=clock.now)
        )
        github = await stack.enter_async_context(running_fake_github())
        slack = await stack.enter_async_context(running_fake_slack())
        git = make_remote(tmp_path, {"README": "app\n"}, name="app")
        github.add_repo(REPO, git)
        for login in ("alice", "bob"):
            github.set_permission(REPO, login, "write")
        kube = k.Kube(server.api_client())
        prod = objects.stage(
            "prod",
            namespace=NS,
            warehouse="shop",
            steps=STEPS,
            annotations={
                ann.AUTO_PROMOTE: "true",
                ann.SLACK_PROMOTERS: "U0ALICE",
                ann.GITHUB_PROMOTERS: "alice, bob",
            },
        )
        await kube.create(k.STAGES, prod)
        http = await stack.enter_async_context(
            running_chat_server(
                server, github, slack, project=NS, work=tmp_path / "work", clock=clock
            )
        )
        try:
            yield World(
                kube, github, slack, http, clock, github.add_issue(REPO, "incident 4711"), git
            )
        finally:
            await kube.close()
            assert github.contract_problems == []


async def test_a_freeze_from_slack_holds_auto_promotion_refuses_promote_and_unfreeze_starts_it(
    world: World,
) -> None:
    answer = await world.slack_command(FREEZE_SLASH, 'prod for 2h "incident 4711"')
    assert "Stage `prod` is frozen until Thu 23:00 UTC: incident 4711" in answer
    frozen = await wait_for_object(
        world.kube,
        k.STAGES,
        NS,
        "prod",
        lambda s: bool(((s.get("status") or {}).get("promotionWindowStatus") or {}).get("closed")),
    )
    # Recorded on the cluster: who, why, until when; and shown where kubectl shows windows.
    recorded = freeze_of(frozen)
    assert recorded is not None
    assert (recorded.by, recorded.reason, recorded.until) == (
        f"slack:{world.slack.team}/U0ALICE",
        "incident 4711",
        datetime(2026, 12, 3, 23, 0, tzinfo=UTC),
    )
    assert frozen["status"]["promotionWindowStatus"] == {
        "closed": True,
        "reason": "frozen by slack:T0TEAM/U0ALICE: incident 4711",
        "nextOpen": "2026-12-03T23:00:00Z",
    }

    # A new Freight: prod's auto-promotion is made and held, saying what holds it.
    auto = await world.new_freight("frozen-tauntaun")
    await world.held(auto, "incident 4711")

    # Its promote: check run on the Freight's commit says what holds it, and until when.
    async def shown() -> dict[str, Any] | None:
        runs = [r for r in world.github.check_runs(REPO) if r["name"] == "promote: prod"]
        said = str(runs[0].get("output")) if runs else ""
        return runs[0] if "incident 4711" in said and "Thu 23:00 UTC" in said else None

    await eventually(shown, "the promote: prod check run to show the freeze")

    # /promote from a pull request comment is refused with the reason and the end.
    reply = await world.comment("/promote frozen-tauntaun to prod")
    assert "refused" in reply and "frozen until Thu 23:00 UTC" in reply
    assert "incident 4711" in reply
    items, _ = await world.kube.list(k.PROMOTIONS, NS)
    assert len(items) == 1

    # /status in Slack says it too.
    status = await world.slack_command("/promote", "status prod")
    assert "frozen until Thu 23:00 UTC" in status and "incident 4711" in status

    # So does the project's page, on prod's card in the graph.
    page = await (await world.http.get(f"/ui/projects/{NS}")).text()
    assert (
        "frozen until 2026-12-03 23:00 UTC: frozen by slack:T0TEAM/U0ALICE: incident 4711" in page
    )

    # /unfreeze: the held Promotion starts, well before the freeze's end.
    answer = await world.slack_command(UNFREEZE_SLASH, "prod")
    assert "Stage `prod` is unfrozen" in answer
    done = await wait_terminal(world.kube, NS, auto["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"
    assert world.clock.now() == START
    assert freeze_of(await world.kube.get(k.STAGES, NS, "prod")) is None


async def test_a_freeze_with_an_end_ends_by_itself(world: World) -> None:
    answer = await world.slack_command(FREEZE_SLASH, "prod for 30m db migration")
    assert "frozen until Thu 21:30 UTC: db migration" in answer
    auto = await world.new_freight("wise-wampa")
    await world.held(auto, "db migration")
    world.clock.advance(29 * 60)
    assert (await world.kube.get(k.PROMOTIONS, NS, auto["metadata"]["name"]))["status"].get(
        "phase", "Pending"
    ) == "Pending"
    world.clock.advance(60)
    done = await wait_terminal(world.kube, NS, auto["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"
    opened = await wait_for_object(
        world.kube,
        k.STAGES,
        NS,
        "prod",
        lambda s: s["status"].get("promotionWindowStatus", {}).get("closed") is False,
    )
    assert "reason" not in opened["status"]["promotionWindowStatus"]


async def test_someone_who_may_not_promote_to_prod_may_not_freeze_it(world: World) -> None:
    answer = await world.slack_command(FREEZE_SLASH, "prod for 2h", user="U0MALLORY")
    assert "<@U0MALLORY> may not act on Stage prod" in answer and "Nothing was changed" in answer
    reply = await world.comment("/freeze prod for 2h", user="carol")
    assert "refused" in reply and "needs write access" in reply
    assert freeze_of(await world.kube.get(k.STAGES, NS, "prod")) is None
    # A promoter on GitHub may freeze and unfreeze it (bob: listed, with write access).
    reply = await world.comment("/freeze prod until 23:30 release night", user="bob")
    assert "Stage `prod` is frozen until Thu 23:30 UTC: release night" in reply
    reply = await world.comment("/unfreeze prod", user="bob")
    assert "Stage `prod` is unfrozen (the freeze by github:bob)" in reply
