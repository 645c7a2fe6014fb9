"""Live Promotion messages against the fake Slack: one message per Promotion, updated in place,
coalesced, thread replies, rate limits and outages, restarts and leadership."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest

from promoter.errors import TemporaryError
from promoter.resources import annotations as ann
from slack.api import SlackApi
from slack.app import SlackIntegration
from slack.live import LiveMessages
from slack.messages import ABORT, PROMOTE_NEXT, REVERIFY
from slack.settings import SlackSettings
from tests.support.promotions import FakePromotions
from tests.support.slack import (
    SIGNING_SECRET,
    TOKEN,
    FakeSlack,
    SlackMessage,
    running_fake_slack,
)

CHANNEL = "C0PROD"


@dataclass
class Live:
    slack: FakeSlack
    service: FakePromotions
    settings: SlackSettings
    integration: SlackIntegration

    @asynccontextmanager
    async def replica(self) -> AsyncIterator[SlackIntegration]:
        """Another (or a restarted) replica listening to the same Promotions."""
        other = SlackIntegration(self.settings, self.service)
        await other.start()
        self.service.listeners.append(other.on_promotion)
        try:
            yield other
        finally:
            self.service.listeners.remove(other.on_promotion)
            await other.close()

    async def stop(self) -> None:
        self.service.listeners.remove(self.integration.on_promotion)
        await self.integration.close()

    def messages(self) -> list[SlackMessage]:
        return self.slack.channel(CHANNEL)

    async def message_where(self, predicate: Callable[[SlackMessage], bool]) -> SlackMessage:
        def found() -> SlackMessage | None:
            msgs = self.messages()
            return msgs[0] if len(msgs) == 1 and predicate(msgs[0]) else None

        result: SlackMessage = await self.slack.wait_for(found, what="the message")
        return result

    async def settle(self) -> None:
        await self.integration.idle()


def settings_for(slack: FakeSlack, **overrides: Any) -> SlackSettings:
    base = SlackSettings(
        bot_token=TOKEN,
        signing_secret=SIGNING_SECRET,
        api_url=slack.url,
        namespace="kargo-demo",
        update_interval=0.02,
        verify_poll=0.05,
        verify_window=5,
        retry_delay=0.02,
    )
    return replace(base, **overrides)


@pytest.fixture
async def live(request: pytest.FixtureRequest) -> AsyncIterator[Live]:
    overrides = getattr(request, "param", {})
    async with running_fake_slack() as slack:
        service = FakePromotions("kargo-demo")
        service.add_stage("test")
        service.add_stage("prod", {ann.SLACK_CHANNEL: CHANNEL})
        service.add_stage(
            "final",
            upstream=["prod"],
        )
        service.add_freight("7c9e6b1f3a4d", "frozen-tauntaun")
        settings = settings_for(slack, **overrides)
        integration = SlackIntegration(settings, service)
        await integration.start()
        service.listeners.append(integration.on_promotion)
        yield Live(slack, service, settings, integration)
        await integration.close()


def step(status: str, message: str = "") -> dict[str, Any]:
    # No "alias": the engine records each step's own, which the spec already names.
    return {"status": status, **({"message": message} if message else {})}


async def run_to_success(live: Live, name: str) -> None:
    live.service.set_status(name, phase="Running", stepExecutionMetadata=[step("Running")])
    live.service.set_status(
        name, stepExecutionMetadata=[step("Succeeded"), step("Running", "syncing argocd/app")]
    )
    live.service.set_status(
        name,
        phase="Succeeded",
        startedAt="2024-01-01T00:00:00Z",
        finishedAt="2024-01-01T00:01:05Z",
        stepExecutionMetadata=[step("Succeeded"), step("Succeeded", "synced argocd/app")],
    )


async def test_one_message_follows_a_promotion_to_success(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="slack:T/U1")
    first = await live.message_where(lambda m: True)
    assert "Pending" in first.text and ABORT in first.buttons
    assert "<@U1>" in json.dumps(first.blocks)
    await run_to_success(live, ref.name)
    done = await live.message_where(lambda m: "Succeeded" in m.text)
    await live.settle()
    assert "(2/2 steps)" in done.text and "took 1m05s" in json.dumps(done.blocks)
    assert ABORT not in done.buttons
    assert len(live.slack.calls_to("chat.postMessage")) == 2  # the message + the Argo CD reply
    [reply] = live.slack.replies(done.ts)
    assert "Argo CD sync done" in reply.text and "synced argocd/app" in reply.text
    record = json.loads(live.service.annotation(ref.name, ann.SLACK_MESSAGE) or "{}")
    assert record == {
        "channel": CHANNEL,
        "ts": done.ts,
        "events": ["argocd/sync/Succeeded"],
        "final": True,
        "shown": record["shown"],
    }
    assert len(record["shown"]) == 16  # a digest of what it shows, not the content
    # Later events for a finished message cost nothing.
    calls = len(live.slack.calls)
    live.service.set_status(ref.name, message="late")
    await live.settle()
    assert len(live.slack.calls) == calls


@pytest.mark.parametrize("live", [{"update_interval": 0.3}], indirect=True)
async def test_rapid_changes_are_coalesced(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    await live.message_where(lambda m: True)
    for i in range(30):
        live.service.set_status(
            ref.name,
            phase="Running",
            message=f"tick {i}",
            stepExecutionMetadata=[step("Running", f"tick {i}")],
        )
    await live.message_where(lambda m: "tick 29" in json.dumps(m.blocks))
    await live.settle()
    updates = live.slack.calls_to("chat.update")
    assert 1 <= len(updates) <= 2, [u.args["text"] for u in updates]
    gaps = [
        b.at - a.at
        for a, b in zip(live.slack.calls_to("chat.postMessage") + updates, updates, strict=False)
    ]
    assert all(g >= 0.25 for g in gaps), gaps


async def test_history_and_unsubscribed_stages_are_not_announced(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "test", "7c9e6b1f3a4d", actor="a")
    await run_to_success(live, ref.name)
    old = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    live.service.listeners.remove(live.integration.on_promotion)
    live.service.set_status(old.name, phase="Succeeded")
    live.service.listeners.append(live.integration.on_promotion)
    # A replay of a Promotion that finished before we saw it (old is None): not news.
    live.integration.on_promotion(live.service.promotion(old.name), None)
    await live.settle()
    # (The Pending one was announced when created; nothing else was.)
    assert len(live.messages()) == 1 and live.slack.calls_to("chat.update") == []


async def test_only_the_leader_posts(live: Live) -> None:
    live.service.leader = False
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    live.service.set_status(ref.name, phase="Running")
    await live.settle()
    assert live.slack.calls_to("chat.postMessage") == []
    # Became the leader: the controller replays every Promotion through the listeners.
    live.service.leader = True
    live.integration.on_promotion(live.service.promotion(ref.name), None)
    await live.message_where(lambda m: "Running" in m.text)


async def test_rate_limits_honour_retry_after_and_the_message_catches_up(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    await live.message_where(lambda m: True)
    await live.settle()
    live.slack.fail("chat.update", 429, retry_after=0.4)
    live.service.set_status(ref.name, phase="Running")  # never blocks, never raises
    await run_to_success(live, ref.name)
    assert live.service.promotion(ref.name)["status"]["phase"] == "Succeeded"
    await live.message_where(lambda m: "Succeeded" in m.text)
    limited, retried = live.slack.calls_to("chat.update")[:2]
    assert limited.status == 429 and retried.at - limited.at >= 0.4


async def test_slack_down_during_a_promotion_then_back(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    await live.message_where(lambda m: True)
    await live.settle()
    live.slack.fail("*", 503, times=3)
    await run_to_success(live, ref.name)
    done = await live.message_where(lambda m: "Succeeded" in m.text)
    await live.settle()
    assert [c.status for c in live.slack.calls_to("chat.update")][:3] == [503, 503, 503]
    assert len(live.slack.channel(CHANNEL)) == 1 and len(live.slack.replies(done.ts)) == 1


async def test_slack_down_when_first_posting_still_posts_once(live: Live) -> None:
    live.slack.fail("chat.postMessage", 500, times=2)
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    live.service.set_status(ref.name, phase="Running")
    await live.message_where(lambda m: "Running" in m.text)
    await live.settle()
    assert [c.status for c in live.slack.calls_to("chat.postMessage")] == [500, 500, 200]


async def test_the_record_survives_an_api_server_blip(live: Live) -> None:
    live.service.fail("annotate", TemporaryError("the cluster did not answer"), times=1)
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    live.service.set_status(ref.name, phase="Running")
    await live.message_where(lambda m: "Running" in m.text)
    await live.settle()
    assert len(live.slack.calls_to("chat.postMessage")) == 1
    assert live.service.annotation(ref.name, ann.SLACK_MESSAGE)


async def test_a_restart_mid_promotion_keeps_updating_the_same_message(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    live.service.set_status(
        ref.name,
        phase="Running",
        stepExecutionMetadata=[step("Succeeded"), step("Failed", "Application degraded")],
    )
    first = await live.message_where(lambda m: "Running" in m.text)
    await live.slack.wait_for(lambda: live.slack.replies(first.ts), what="the failure reply")
    await live.settle()
    await live.stop()
    async with live.replica() as restarted:
        await run_to_success(live, ref.name)
        done = await live.message_where(lambda m: "Succeeded" in m.text)
        await restarted.idle()
    assert done.ts == first.ts
    assert len(live.slack.calls_to("chat.postMessage")) == 3  # message, failure, Argo CD result
    assert [r.text.split(" ")[0] for r in live.slack.replies(done.ts)] == [
        ":x:",
        ":white_check_mark:",
    ]


async def test_a_restart_while_verification_runs_sends_nothing_unchanged(live: Live) -> None:
    """A finished Promotion waiting for its verification is followed again by a new leader;
    a message that would look the same is neither updated nor re-annotated."""
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    prod = live.service.stage("prod")
    prod["status"] = {
        "lastPromotion": {"name": ref.name, "finishedAt": "2024-01-01T00:01:05Z"},
        "conditions": [
            verified("Unknown", "Verifying", "AnalysisRun r1 is Running", "2024-01-01T00:01:06Z")
        ],
    }
    await run_to_success(live, ref.name)
    shown = await live.message_where(lambda m: "verification running" in m.text)
    await live.settle()
    await live.stop()

    def chat() -> list[str]:
        return [c.method for c in live.slack.calls if c.method.startswith("chat.")]

    before = chat()
    annotated = live.service.annotation(ref.name, ann.SLACK_MESSAGE)
    async with live.replica() as restarted:
        # What a new leader's informers replay at start: the Promotion as it is.
        looks = 0
        snapshot = live.service.snapshot

        async def counted(namespace: str) -> Any:
            nonlocal looks
            looks += 1
            return await snapshot(namespace)

        live.service.snapshot = counted  # type: ignore[method-assign]
        restarted.on_promotion(copy.deepcopy(live.service.promotion(ref.name)), None)
        # Several verify polls: each renders the message again, none writes.
        await live.slack.wait_for(lambda: looks >= 3, what="three looks at the Promotion")
        assert chat() == before
        assert live.service.annotation(ref.name, ann.SLACK_MESSAGE) == annotated
        # And it still follows: the result arrives and the message changes once.
        prod["status"]["conditions"] = [
            verified("True", "Verified", "3/3 passed", "2024-01-01T00:02:00Z")
        ]
        done = await live.message_where(lambda m: "verification passed" in m.text)
        await restarted.idle()
    assert done.ts == shown.ts
    assert chat() == [*before, "chat.update", "chat.postMessage"]  # the result, its reply


def verified(status: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {
        "type": "Verified",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


async def test_verification_result_buttons_and_promote_next(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    prod = live.service.stage("prod")
    prod["status"] = {
        "lastPromotion": {"name": ref.name, "finishedAt": "2024-01-01T00:01:05Z"},
        "conditions": [
            verified("Unknown", "Verifying", "AnalysisRun r1 is Running", "2024-01-01T00:01:06Z")
        ],
    }
    await run_to_success(live, ref.name)
    await live.message_where(lambda m: "verification running" in m.text)
    assert REVERIFY not in live.messages()[0].buttons
    prod["status"]["conditions"] = [
        verified("True", "Verified", "3/3 passed", "2024-01-01T00:02:00Z")
    ]
    done = await live.message_where(lambda m: "verification passed" in m.text)
    await live.settle()
    assert REVERIFY in done.buttons and f"{PROMOTE_NEXT}.0" in done.buttons
    assert done.buttons[f"{PROMOTE_NEXT}.0"]["text"]["text"] == "Promote to final"
    replies = [r.text for r in live.slack.replies(done.ts)]
    assert any("Verification passed: 3/3 passed" in r for r in replies)
    record = json.loads(live.service.annotation(ref.name, ann.SLACK_MESSAGE) or "{}")
    assert record["final"] is True


async def test_huge_promotions_stay_within_block_kit_limits(live: Live) -> None:
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")

    def huge(obj: dict[str, Any]) -> None:
        obj["spec"]["steps"] = [
            {"uses": "x" * 200, "as": f"step-{i}-" + "y" * 60} for i in range(400)
        ]
        obj["status"] = {
            "phase": "Errored",
            "message": "<boom> " * 2000,
            "stepExecutionMetadata": [step("Errored", "z" * 5000)] * 400,
        }

    live.service.update(ref.name, huge)
    done = await live.message_where(lambda m: "Errored" in m.text)
    await live.settle()
    assert len(done.blocks) <= 50
    assert all(c.args.get("ok", True) for c in live.slack.calls)
    assert not [c for c in live.slack.calls if c.method.startswith("chat.") and c.status != 200]


# ---- posts whose answer was lost ---------------------------------------------------------------


@asynccontextmanager
async def short_timeout(live: Live, seconds: float) -> AsyncIterator[LiveMessages]:
    """The live messages alone, on a client that gives up after ``seconds`` (the
    integration's waits 10 s), in place of the integration's."""
    await live.stop()
    api = SlackApi.create(TOKEN, live.slack.url, timeout=seconds)
    messages = LiveMessages(live.service, update_interval=0.02, retry_delay=0.02)
    messages.start(api)
    live.service.listeners.append(messages.on_promotion)
    try:
        yield messages
    finally:
        live.service.listeners.remove(messages.on_promotion)
        await messages.close()
        await api.close()


@pytest.mark.parametrize("how", ["drop", "stall"])
async def test_a_post_whose_answer_was_lost_is_found_not_posted_again(live: Live, how: str) -> None:
    # Slack posts the message, then the connection drops (or the answer comes after the
    # client's timeout): the bot cannot know it posted.
    live.slack.lose_answer("chat.postMessage", how, seconds=1.0)
    async with short_timeout(live, 0.5) as messages:
        ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
        live.service.set_status(ref.name, phase="Running")
        first = await live.message_where(lambda m: "Running" in m.text)
        await messages.idle()
        assert len(live.slack.calls_to("chat.postMessage")) == 1
        assert first.metadata is not None
        assert first.metadata["event_type"] == "longshoreman_promotion"
        payload = first.metadata["event_payload"]
        assert (payload["namespace"], payload["promotion"]) == ("kargo-demo", ref.name)
        # Every call on this client gives up after 0.5 s, so on a loaded machine a look at the
        # history may itself time out and be repeated; what matters is that it finds the post.
        looked = live.slack.calls_to("conversations.history")[0]
        assert looked.args["channel"] == CHANNEL
        assert looked.args["include_all_metadata"] in ("1", "true")
        assert int(looked.args["limit"]) <= 20
        assert float(looked.args["oldest"]) < float(first.ts) < float(looked.args["latest"])
        record = json.loads(live.service.annotation(ref.name, ann.SLACK_MESSAGE) or "{}")
        assert record["ts"] == first.ts
        # Later changes edit the one message.
        await run_to_success(live, ref.name)
        done = await live.message_where(lambda m: "Succeeded" in m.text)
        await messages.idle()
    assert done.ts == first.ts and len(live.messages()) == 1
    assert len(live.slack.calls_to("chat.postMessage")) == 2  # the message and one thread reply


async def test_a_lost_post_that_slack_did_not_make_is_posted_after_looking(live: Live) -> None:
    live.slack.fail("chat.postMessage", 502)  # answered before posting anything
    ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    first = await live.message_where(lambda m: True)
    await live.settle()
    assert [c.status for c in live.slack.calls_to("chat.postMessage")] == [502, 200]
    assert [c.status for c in live.slack.calls_to("conversations.history")] == [200]
    # The retry carried the same tag: a later lost answer would find either attempt.
    tags = [c.args["metadata"] for c in live.slack.calls_to("chat.postMessage")]
    assert tags[0] == tags[1] == first.metadata
    assert live.service.annotation(ref.name, ann.SLACK_MESSAGE)


async def test_a_clear_refusal_does_not_look_in_the_history(live: Live) -> None:
    live.slack.fail("chat.postMessage", 429, retry_after=0.05)  # a 429 posted nothing
    await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
    await live.message_where(lambda m: True)
    await live.settle()
    assert live.slack.calls_to("conversations.history") == []


async def test_without_history_scopes_a_lost_post_is_posted_again_and_the_log_says_why_once(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    live.slack.scopes -= {"channels:history", "groups:history"}
    for n in range(2):
        live.slack.lose_answer("chat.postMessage", "drop")
        ref = await live.service.promote("kargo-demo", "prod", "7c9e6b1f3a4d", actor="a")
        await live.slack.wait_for(
            lambda n=n: len(live.messages()) == 2 * (n + 1), what="the message, twice"
        )
        await live.settle()
        record = json.loads(live.service.annotation(ref.name, ann.SLACK_MESSAGE) or "{}")
        assert record["ts"] == live.messages()[-1].ts  # the one it knows of is kept up to date
    looked = live.slack.calls_to("conversations.history")
    assert len(looked) == 2
    warnings = [r.getMessage() for r in caplog.records if "channel history" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "missing_scope" in warnings[0] and "channels:history" in warnings[0]
