"""Issue #29 end to end: a project's ProjectConfig drives auto-promotion and promotion windows.

Everything real except Slack: the controller runs against the API server emulator on a clock
the test moves (a Saturday in January first), slash commands arrive signed as Slack signs them,
and the bot answers through the fake Slack Web API. A Deny window on prod refuses ``/promote``
with its reopening time, holds an auto-promotion Pending with the window's name, and the
Promotion starts by itself when the window opens; an Allow window opens only its hours.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.controller.reconciler import Controller
from promoter.resources import annotations as ann
from slack.app import setup_slack
from slack.settings import SlackSettings
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import running_controller, wait_for_object, wait_terminal
from tests.support.kube import running_apiserver
from tests.support.slack import (
    SIGNING_SECRET,
    TOKEN,
    FakeSlack,
    running_fake_slack,
    signed_headers,
    slash_command,
)

NS = "shop"
SATURDAY = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
MONDAY_0900_BERLIN = datetime(2026, 1, 12, 8, 0, tzinfo=UTC)
STEPS = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]

WEEKEND_FREEZE = {
    "name": "weekend-freeze",
    "kind": "Deny",
    "stageSelector": {"name": "prod"},
    "rrule": "FREQ=WEEKLY;BYDAY=FR",
    "dtstart": "TZID=Europe/Berlin:20260102T180000",
    "dtend": "TZID=Europe/Berlin:20260105T090000",
}
BUSINESS_HOURS = {
    "name": "business-hours",
    "kind": "Allow",
    "stageSelector": {"matchLabels": {"tier": "production"}},
    "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
    "dtstart": "TZID=America/New_York:20260105T090000",
    "dtend": "TZID=America/New_York:20260105T170000",
}


@dataclass
class World:
    kube: k.Kube
    controller: Controller
    slack: FakeSlack
    client: TestClient[Any, Any]
    clock: FakeClock

    async def command(self, text: str, url: str) -> str:
        """Run ``/promote <text>`` signed as Slack signs it; the bot's answer's text."""
        body = slash_command(text, user="U0ALICE", response_url=self.slack.response_url(url))
        response = await self.client.post("/slack/events", data=body, headers=signed_headers(body))
        assert response.status == 200
        await self.slack.wait_for(lambda: self.slack.responses[url], what=f"the answer on {url}")
        return str(self.slack.responses[url][-1].get("text"))

    async def promotions(self) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(k.PROMOTIONS, NS)
        return items


def stage(name: str, channel: str | None = None, **labels: str) -> dict[str, Any]:
    annotations = {ann.SLACK_PROMOTERS: "U0ALICE"}
    if channel:
        annotations[ann.SLACK_CHANNEL] = channel
    return objects.stage(
        name,
        namespace=NS,
        warehouse="shop",
        steps=STEPS,
        labels=labels or None,
        annotations=annotations,
    )


def freight(name: str, alias: str) -> dict[str, Any]:
    commit = {"repoURL": "https://example.com/shop.git", "id": name + "0" * 28}
    return objects.freight(name, namespace=NS, alias=alias, warehouse="shop", commits=[commit])


@pytest.fixture
async def world(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[World]:
    clock = FakeClock(SATURDAY)
    async with (
        running_fake_slack() as slack,
        running_apiserver(namespaces=[NS], bookmark_interval=0.2, clock=clock.now) as server,
    ):
        kube = k.Kube(server.api_client())
        async with running_controller(server, tmp_path / "work", clock=clock) as controller:
            settings = SlackSettings(
                bot_token=TOKEN,
                signing_secret=SIGNING_SECRET,
                api_url=slack.url,
                namespace=NS,
                update_interval=0.05,
            )
            app = web.Application()
            integration = setup_slack(
                app, settings, ClusterPromotions(kube, controller), clock=clock
            )
            controller.listeners.append(integration.on_promotion)
            client = await aiohttp_client(app)
            yield World(kube, controller, slack, client, clock)
            controller.listeners.clear()
            await client.close()


async def _configure(
    world: World, *, policies: list[dict[str, Any]], windows: list[dict[str, Any]]
) -> None:
    config = objects.project_config(NS, policies=policies, windows=windows)
    await world.kube.create(k.PROJECT_CONFIGS, config)
    # The controller reads it from its cache: wait until what is in force is written back.
    await wait_for_object(
        world.kube,
        k.PROJECT_CONFIGS,
        NS,
        NS,
        lambda o: any(
            c["type"] == "Ready" for c in (o.get("status") or {}).get("conditions") or ()
        ),
    )


async def test_a_deny_window_refuses_promote_holds_auto_promotion_and_opens_on_time(
    world: World,
) -> None:
    await world.kube.create(k.STAGES, stage("prod"))
    await world.kube.create(k.FREIGHT, freight("1a2b3c4d5e6f", "frozen-tauntaun"))
    await _configure(
        world,
        policies=[{"stageSelector": {"name": "glob:p*"}, "autoPromotionEnabled": True}],
        windows=[WEEKEND_FREEZE],
    )

    # Auto-promotion (turned on by the ProjectConfig, not the Stage) creates the Promotion;
    # the closed window holds it Pending and says until when.
    held = await wait_for_object(
        world.kube,
        k.STAGES,
        NS,
        "prod",
        lambda s: bool((s.get("status") or {}).get("promotionWindowStatus")),
    )
    assert held["status"]["autoPromotionEnabled"] is True
    assert held["status"]["promotionWindowStatus"] == {
        "closed": True,
        "reason": "Deny window `weekend-freeze` is in effect",
        "nextOpen": "2026-01-12T08:00:00Z",
    }
    (auto,) = await _wait_promotions(world, 1)
    auto = await wait_for_object(
        world.kube,
        k.PROMOTIONS,
        NS,
        auto["metadata"]["name"],
        lambda p: bool((p.get("status") or {}).get("message")),
    )
    assert ann.created_by(auto) == "longshoreman:auto-promotion"
    assert auto["status"].get("phase", "Pending") == "Pending"
    assert auto["status"]["message"] == (
        "waiting for promotion window `weekend-freeze`: opens Mon 09:00 Europe/Berlin"
    )

    # A person is told at once, and nothing is created.
    answer = await world.command("frozen-tauntaun to prod", "r1")
    assert "prod is frozen until Mon 09:00 Europe/Berlin (window `weekend-freeze`)" in answer
    assert len(await world.promotions()) == 1
    status = await world.command("status prod", "r2")
    assert "frozen until Mon 09:00 Europe/Berlin (window `weekend-freeze`)" in status

    # Sunday: still closed. Monday 09:00 Berlin: the held Promotion starts by itself.
    world.clock.advance((datetime(2026, 1, 11, 12, tzinfo=UTC) - SATURDAY).total_seconds())
    assert (await world.kube.get(k.PROMOTIONS, NS, auto["metadata"]["name"]))["status"].get(
        "phase", "Pending"
    ) == "Pending"
    world.clock.advance((MONDAY_0900_BERLIN - world.clock.now()).total_seconds())
    done = await wait_terminal(world.kube, NS, auto["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"
    opened = await wait_for_object(
        world.kube,
        k.STAGES,
        NS,
        "prod",
        lambda s: s["status"]["promotionWindowStatus"]["closed"] is False,
    )
    assert opened["status"]["promotionWindowStatus"] == {
        "closed": False,
        "nextClose": "2026-01-16T17:00:00Z",
        "nextCloseReason": "Deny window `weekend-freeze` is in effect",
    }


async def test_kubectl_created_promotions_are_held_in_their_order(world: World) -> None:
    await world.kube.create(k.STAGES, stage("prod"))
    await world.kube.create(k.FREIGHT, freight("1a2b3c4d5e6f", "frozen-tauntaun"))
    await world.kube.create(k.FREIGHT, freight("9f8e7d6c5b4a", "wise-wampa"))
    await _configure(world, policies=[], windows=[WEEKEND_FREEZE])
    for name, ref in (("first", "1a2b3c4d5e6f"), ("second", "9f8e7d6c5b4a")):
        promotion = objects.promotion(name, "prod", namespace=NS, freight=ref, steps=STEPS)
        await world.kube.create(k.PROMOTIONS, promotion)
        world.clock.advance(1)  # creation order is the queue's order
    second = await wait_for_object(
        world.kube,
        k.PROMOTIONS,
        NS,
        "second",
        lambda p: "weekend-freeze" in str((p.get("status") or {}).get("message")),
    )
    assert second["status"].get("phase", "Pending") == "Pending"
    world.clock.advance((MONDAY_0900_BERLIN - world.clock.now()).total_seconds())
    first = await wait_terminal(world.kube, NS, "first")
    second = await wait_terminal(world.kube, NS, "second")
    assert first["status"]["phase"] == second["status"]["phase"] == "Succeeded"
    assert first["status"]["finishedAt"] <= second["status"]["startedAt"]


async def test_an_allow_window_opens_only_its_hours(world: World) -> None:
    await world.kube.create(k.STAGES, stage("prod", tier="production"))
    await world.kube.create(k.STAGES, stage("test"))
    await world.kube.create(k.FREIGHT, freight("1a2b3c4d5e6f", "frozen-tauntaun"))
    await _configure(world, policies=[], windows=[BUSINESS_HOURS])

    # Saturday: prod (labelled production) is outside its Allow window; test is not selected.
    answer = await world.command("frozen-tauntaun to prod", "r1")
    assert "prod is frozen until Mon 09:00 America/New_York (window `business-hours`)" in answer
    answer = await world.command("frozen-tauntaun to test", "r2")
    assert "is frozen" not in answer and "created" in answer
    # Monday 10:00 New York: inside the window, the same command promotes.
    world.clock.advance((datetime(2026, 1, 12, 15, tzinfo=UTC) - SATURDAY).total_seconds())
    answer = await world.command("frozen-tauntaun to prod", "r3")
    assert "is frozen" not in answer and "created" in answer
    to_prod = [p for p in await world.promotions() if p["spec"]["stage"] == "prod"]
    assert len(to_prod) == 1
    assert (await wait_terminal(world.kube, NS, to_prod[0]["metadata"]["name"]))["status"][
        "phase"
    ] == "Succeeded"
    # 17:00 New York: closed again until Tuesday 09:00.
    world.clock.advance(7 * 3600)
    answer = await world.command("frozen-tauntaun to prod", "r4")
    assert "prod is frozen until Tue 09:00 America/New_York (window `business-hours`)" in answer


async def _wait_promotions(world: World, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = await world.promotions()
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} Promotions: {await world.promotions()}")


async def test_deep_links_are_in_the_promotion_s_slack_message(world: World) -> None:
    await world.kube.create(k.STAGES, stage("prod", channel="C0PROD"))
    await world.kube.create(k.FREIGHT, freight("1a2b3c4d5e6f", "frozen-tauntaun"))
    await world.kube.create(
        k.CLUSTER_CONFIGS,
        objects.cluster_config(
            freightLinks=[{"title": "Commit", "url": "https://git/{{ .freight.metadata.name }}"}]
        ),
    )
    await _configure(
        world,
        policies=[],
        windows=[],
    )
    await world.kube.patch(
        k.PROJECT_CONFIGS,
        NS,
        NS,
        {
            "spec": {
                "stageLinks": [
                    {
                        "title": "Grafana",
                        "url": "https://grafana/d/shop?env=${{ stage.metadata.name }}",
                        "if": 'stage.metadata.name == "prod"',
                    }
                ]
            }
        },
    )
    await wait_for_object(
        world.kube,
        k.PROJECT_CONFIGS,
        NS,
        NS,
        lambda c: (
            (c.get("status") or {}).get("observedGeneration") == c["metadata"].get("generation")
        ),
    )
    world.clock.advance(3 * 24 * 3600)  # a weekday, not that any window applies here
    answer = await world.command("frozen-tauntaun to prod", "r1")
    assert "created" in answer

    def linked() -> Any:
        for message in world.slack.channel("C0PROD"):
            if "Succeeded" in message.text and "Grafana" in str(message.blocks):
                return message
        return None

    message = await world.slack.wait_for(linked, within=20, what="the message with its links")
    facts = str(message.blocks)
    assert "<https://grafana/d/shop?env=prod|Grafana>" in facts
    assert "<https://git/1a2b3c4d5e6f|Commit>" in facts
