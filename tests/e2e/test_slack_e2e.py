"""Issue #6, done when: ``/promote <freight> to prod`` from a signed slash command, confirmed, and
ONE channel message that follows the Promotion to Succeeded; Abort works on a second run.

Everything real except Slack: the controller runs against the Kubernetes API server emulator,
the Slack integration is mounted on aiohttp and reached with requests signed as Slack signs
them, and the bot talks to the fake Slack Web API over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.controller.reconciler import Controller
from promoter.resources import annotations as ann
from slack.app import SlackIntegration, setup_slack
from slack.messages import ABORT, CONFIRM
from slack.settings import SlackSettings
from tests.support import objects
from tests.support.controller import Gate, registry_with, running_controller, wait_for_object
from tests.support.kube import running_apiserver
from tests.support.slack import (
    SIGNING_SECRET,
    TEAM,
    TOKEN,
    FakeSlack,
    SlackMessage,
    button_click,
    running_fake_slack,
    signed_headers,
    slash_command,
)

NS = "shop"
CHANNEL = "C0PROD"


@dataclass
class World:
    kube: k.Kube
    controller: Controller
    gate: Gate
    slack: FakeSlack
    client: TestClient[Any, Any]
    integration: SlackIntegration

    async def signed(self, body: str) -> int:
        response = await self.client.post("/slack/events", data=body, headers=signed_headers(body))
        return response.status

    async def promote(self, text: str, url: str) -> dict[str, Any]:
        """Run the slash command and return the confirmation prompt it answers with."""
        body = slash_command(text, user="U0ALICE", response_url=self.slack.response_url(url))
        assert await self.signed(body) == 200
        await self.slack.wait_for(lambda: self.slack.responses[url], what="the prompt")
        return self.slack.responses[url][0]

    async def click(self, button: dict[str, Any], url: str, user: str = "U0ALICE") -> None:
        body = button_click(button, user=user, response_url=self.slack.response_url(url))
        assert await self.signed(body) == 200
        await self.slack.wait_for(lambda: self.slack.responses[url], what=f"answer on {url}")

    async def message(self, index: int, phase: str) -> SlackMessage:
        def found() -> SlackMessage | None:
            msgs = self.slack.channel(CHANNEL)
            return msgs[index] if len(msgs) > index and phase in msgs[index].text else None

        result: SlackMessage = await self.slack.wait_for(found, within=20, what=phase)
        return result


def buttons_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in answer.get("blocks") or () for e in b.get("elements") or ()}


@pytest.fixture
async def world(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[World]:
    gate = Gate()
    async with (
        running_fake_slack() as slack,
        running_apiserver(namespaces=[NS], bookmark_interval=0.2) as server,
    ):
        kube = k.Kube(server.api_client())
        await kube.create(
            k.STAGES,
            objects.stage(
                "prod",
                namespace=NS,
                warehouse="shop",
                annotations={
                    ann.SLACK_CONFIRM: "true",
                    ann.SLACK_CHANNEL: CHANNEL,
                    ann.SLACK_PROMOTERS: "U0ALICE",
                },
                steps=[
                    {"uses": "compose-output", "as": "build", "config": {"x": "1"}},
                    {"uses": "gate", "as": "hold", "config": {"name": "${{ ctx.promotion }}"}},
                    {"uses": "compose-output", "as": "summary", "config": {"y": "2"}},
                ],
            ),
        )
        for name, alias in (("1a2b3c4d5e6f", "frozen-tauntaun"), ("9f8e7d6c5b4a", "wise-wampa")):
            commit = {"repoURL": "https://example.com/shop.git", "id": name + "0" * 28}
            await kube.create(
                k.FREIGHT,
                objects.freight(
                    name, namespace=NS, alias=alias, warehouse="shop", commits=[commit]
                ),
            )
        async with running_controller(
            server, tmp_path / "work", registry=registry_with(gate=gate)
        ) as controller:
            settings = SlackSettings(
                bot_token=TOKEN,
                signing_secret=SIGNING_SECRET,
                api_url=slack.url,
                namespace=NS,
                update_interval=0.05,
                verify_poll=0.1,
                verify_window=2,
            )
            app = web.Application()
            integration = setup_slack(app, settings, ClusterPromotions(kube, controller))
            controller.listeners.append(integration.on_promotion)
            client = await aiohttp_client(app)
            yield World(kube, controller, gate, slack, client, integration)
            controller.listeners.clear()
            await client.close()


async def test_promote_confirm_follow_to_success_then_abort_a_second_run(world: World) -> None:
    slack = world.slack
    # 1. /promote frozen-tauntaun to prod: a confirmation, and nothing created yet.
    prompt = await world.promote("frozen-tauntaun to prod", "cmd1")
    assert "Promote *frozen-tauntaun* to *prod*" in prompt["text"]
    items, _ = await world.kube.list(k.PROMOTIONS, NS)
    assert items == []

    # 2. Confirm: the Promotion is created, with the Slack user as its actor.
    await world.click(buttons_of(prompt)[CONFIRM], "confirm1")
    assert "Confirmed" in slack.responses["confirm1"][0]["text"]
    items, _ = await world.kube.list(k.PROMOTIONS, NS)
    [promotion] = items
    name = promotion["metadata"]["name"]
    assert promotion["metadata"]["annotations"]["longshoreman.dev/create-actor"] == (
        f"slack:{TEAM}/U0ALICE"
    )

    # 3. One message follows it: Running at the gate, then Succeeded.
    running = await world.message(0, "Running")
    assert ABORT in running.buttons
    world.gate.open(name)
    done = await world.message(0, "Succeeded")
    assert "(3/3 steps)" in done.text and ABORT not in done.buttons
    assert done.ts == running.ts and len(slack.channel(CHANNEL)) == 1
    assert any("Running" in v["text"] for v in done.versions)
    stored = await wait_for_object(
        world.kube,
        k.PROMOTIONS,
        NS,
        name,
        lambda o: (
            '"final":true' in (o["metadata"].get("annotations") or {}).get(ann.SLACK_MESSAGE, "")
        ),
    )
    record = json.loads(stored["metadata"]["annotations"][ann.SLACK_MESSAGE])
    assert (record["channel"], record["ts"]) == (CHANNEL, done.ts)

    # 4. A second run stops at the gate; its Abort button aborts it, and its own message says so.
    prompt = await world.promote("wise-wampa to prod", "cmd2")
    await world.click(buttons_of(prompt)[CONFIRM], "confirm2")
    second = await world.message(1, "Running")
    assert second.ts != done.ts
    await world.click(second.buttons[ABORT], "abort2", user="U0BOB")
    assert "may not act on Stage prod" in slack.responses["abort2"][0]["text"]
    await world.click(second.buttons[ABORT], "abort3")
    aborted = await world.message(1, "Aborted")
    assert "U0ALICE" in json.dumps(aborted.blocks) and ABORT not in aborted.buttons
    assert len(slack.channel(CHANNEL)) == 2
    # The first message was left alone.
    assert "Succeeded" in slack.channel(CHANNEL)[0].text


async def test_a_restarted_bot_continues_the_same_message(world: World) -> None:
    prompt = await world.promote("frozen-tauntaun to prod", "cmd1")
    await world.click(buttons_of(prompt)[CONFIRM], "confirm1")
    running = await world.message(0, "Running")
    items, _ = await world.kube.list(k.PROMOTIONS, NS)
    name = items[0]["metadata"]["name"]
    await wait_for_object(
        world.kube,
        k.PROMOTIONS,
        NS,
        name,
        lambda o: ann.SLACK_MESSAGE in o["metadata"]["annotations"],
    )
    # The bot restarts: a new integration that knows nothing but what is on the Promotion.
    world.controller.listeners.remove(world.integration.on_promotion)
    await world.integration.close()
    settings = SlackSettings(
        bot_token=TOKEN,
        signing_secret=SIGNING_SECRET,
        api_url=world.slack.url,
        namespace=NS,
        update_interval=0.05,
    )
    restarted = setup_slack(
        web.Application(), settings, ClusterPromotions(world.kube, world.controller)
    )
    await restarted.start()
    world.controller.listeners.append(restarted.on_promotion)
    try:
        world.gate.open(name)
        done = await world.message(0, "Succeeded")
        await restarted.idle()
    finally:
        await restarted.close()
    assert done.ts == running.ts and len(world.slack.channel(CHANNEL)) == 1
    assert len(world.slack.calls_to("chat.postMessage")) == 1


async def test_a_lost_answer_to_the_first_post_still_makes_one_message(world: World) -> None:
    # Slack posts the message and the connection drops before its answer: the bot finds the
    # message in the channel's history (by its metadata) instead of posting it again.
    world.slack.lose_answer("chat.postMessage", "drop")
    prompt = await world.promote("frozen-tauntaun to prod", "cmd1")
    await world.click(buttons_of(prompt)[CONFIRM], "confirm1")
    running = await world.message(0, "Running")
    items, _ = await world.kube.list(k.PROMOTIONS, NS)
    name = items[0]["metadata"]["name"]
    world.gate.open(name)
    done = await world.message(0, "Succeeded")
    await world.integration.idle()
    assert done.ts == running.ts and len(world.slack.channel(CHANNEL)) == 1
    assert len(world.slack.calls_to("chat.postMessage")) == 1
    assert [c.status for c in world.slack.calls_to("conversations.history")] == [200]
    stored = await wait_for_object(
        world.kube,
        k.PROMOTIONS,
        NS,
        name,
        lambda o: ann.SLACK_MESSAGE in (o["metadata"].get("annotations") or {}),
    )
    assert json.loads(stored["metadata"]["annotations"][ann.SLACK_MESSAGE])["ts"] == done.ts
