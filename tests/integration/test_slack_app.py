"""``/promote`` and its buttons over HTTP: requests signed as Slack signs them, a fake Slack Web
API for everything the bot says, and an in-memory Promotion port."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from promoter.errors import NotFound, TemporaryError
from promoter.resources import annotations as ann
from promoter.resources.model import name_of
from slack import messages as m
from slack.app import SlackIntegration, setup_slack
from slack.messages import ABORT, CANCEL, CONFIRM, PROMOTE_NEXT, REVERIFY
from slack.settings import SlackSettings
from tests.support.clock import FakeClock
from tests.support.promotions import FakePromotions
from tests.support.slack import (
    SIGNING_SECRET,
    TEAM,
    TOKEN,
    FakeSlack,
    button_click,
    running_fake_slack,
    signed_headers,
    slash_command,
)


@dataclass
class Rig:
    slack: FakeSlack
    service: FakePromotions
    client: TestClient[Any, Any]
    integration: SlackIntegration
    clock: FakeClock

    async def post(self, body: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        response = await self.client.post(
            "/slack/events", data=body, headers=headers or signed_headers(body)
        )
        return response.status, await response.text()

    async def command(self, text: str, user: str = "U1", url: str = "r1") -> tuple[int, str]:
        body = slash_command(text, user=user, response_url=self.slack.response_url(url))
        return await self.post(body)

    async def click(self, button: dict[str, Any], user: str = "U1", url: str = "c1") -> int:
        body = button_click(button, user=user, response_url=self.slack.response_url(url))
        status, _ = await self.post(body)
        return status

    async def answers(self, url: str = "r1", count: int = 1) -> list[dict[str, Any]]:
        await self.slack.wait_for(lambda: len(self.slack.responses[url]) >= count, what=url)
        await self.integration.idle()
        return self.slack.responses[url]


@pytest.fixture
async def rig(aiohttp_client: Any) -> AsyncIterator[Rig]:
    async with running_fake_slack() as slack:
        # One clock for the Slack app and the cluster it talks to (availability, soak times).
        clock = FakeClock()
        service = FakePromotions("kargo-demo", clock=clock)
        service.add_stage("test", verification={"analysisTemplates": [{"name": "smoke"}]})
        service.add_stage(
            "prod",
            {
                ann.SLACK_PROMOTERS: "U1,S0OPS",
                ann.SLACK_CONFIRM: "true",
                ann.SLACK_CHANNEL: "C0PROD",
            },
            upstream=["test"],
        )
        service.add_freight(
            "7c9e6b1f3a4d",
            "frozen-tauntaun",
            commits=[{"id": "7c9e6b1f3a4d5e"}],
            status={"verifiedIn": {"test": {}}},
        )
        slack.usergroups["S0OPS"] = ["U7"]
        settings = SlackSettings(
            bot_token=TOKEN,
            signing_secret=SIGNING_SECRET,
            api_url=slack.url,
            namespace="kargo-demo",
            confirm_ttl=60,
            update_interval=0.02,
            verify_poll=0.05,
            verify_window=3,
        )
        app = web.Application()
        integration = setup_slack(app, settings, service, clock=clock)
        service.listeners.append(integration.on_promotion)
        client = await aiohttp_client(app)
        yield Rig(slack, service, client, integration, clock)
        await integration.idle()


# ---- request verification ---------------------------------------------------------------------


async def test_bad_signature_is_refused_and_nothing_happens(rig: Rig) -> None:
    body = slash_command("frozen-tauntaun to test", response_url=rig.slack.response_url())
    status, _ = await rig.post(body, signed_headers(body, secret="not-the-secret"))
    assert status == 401
    tampered = body.replace("U1", "U2")
    status, _ = await rig.post(tampered, signed_headers(body))
    assert status == 401
    status, _ = await rig.post(body, {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 401
    await rig.integration.idle()
    assert rig.service.actions == [] and rig.slack.responses["r1"] == []


async def test_stale_timestamp_is_refused(rig: Rig) -> None:
    body = slash_command("frozen-tauntaun to test", response_url=rig.slack.response_url())
    status, _ = await rig.post(body, signed_headers(body, timestamp=int(time.time()) - 6 * 60))
    assert status == 401
    # Still inside Slack's five minutes: accepted.
    status, _ = await rig.post(body, signed_headers(body, timestamp=int(time.time()) - 4 * 60))
    assert status == 200
    await rig.answers()
    assert len(rig.service.actions) == 1


# ---- commands ---------------------------------------------------------------------------------


async def test_promote_is_acked_at_once_and_created_with_a_slack_actor(rig: Rig) -> None:
    status, body = await rig.command("frozen-tauntaun to test", user="U5")
    assert (status, body) == (200, "")
    [answer] = await rig.answers()
    assert answer["response_type"] == "ephemeral"
    assert "created" in answer["text"] and "frozen-tauntaun" in answer["text"]
    assert rig.service.actions == [
        ("promote", "kargo-demo", "test", "7c9e6b1f3a4d", f"slack:{TEAM}/U5")
    ]


async def test_promote_takes_the_image_reference_people_paste(rig: Rig) -> None:
    rig.service.add_freight(
        "a1b2c3d4e5f6",
        "brave-bird",
        images=[{"repoURL": "ghcr.io/acme/app", "tag": "1.4.2", "digest": "sha256:" + "a" * 64}],
    )
    await rig.command("ghcr.io/acme/app:1.4.2 to test")
    [answer] = await rig.answers()
    assert "brave-bird" in answer["text"]
    assert rig.service.actions == [
        ("promote", "kargo-demo", "test", "a1b2c3d4e5f6", f"slack:{TEAM}/U1")
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("deploy", "missing `to STAGE`"),
        ("frobnicate everything now", "missing `to STAGE`"),
        ("${{ secrets.x }} to prod", "not expressions"),
        ("abort", "which Promotion or Stage"),
        ("", "tell me what to do"),
    ],
)
async def test_unknown_or_malformed_commands_get_usage_in_the_ack(
    rig: Rig, text: str, reason: str
) -> None:
    status, body = await rig.command(text)
    assert status == 200
    answer = json.loads(body)
    assert answer["response_type"] == "ephemeral"
    assert reason in answer["text"] and "/promote status [STAGE]" in answer["text"]
    await rig.integration.idle()
    assert rig.service.actions == []


async def test_help_and_status(rig: Rig) -> None:
    await rig.command("help", user="U2")
    [helped] = await rig.answers()
    assert "/promote abort PROMOTION | STAGE [all]" in helped["text"]
    # Help says where this user may promote, as it does on GitHub (prod lists its promoters).
    assert "You may promote to: `test`" in helped["text"]
    assert "Not to: `prod`" in helped["text"]
    await rig.command("status")
    answer = (await rig.answers(count=2))[1]
    assert "*prod*" in answer["text"] and "*test*" in answer["text"]


async def test_unauthorized_user_is_refused_with_reason(rig: Rig) -> None:
    rig.service.stage("prod")["metadata"]["annotations"].pop(ann.SLACK_CONFIRM)
    await rig.command("frozen-tauntaun to prod", user="U2")
    [answer] = await rig.answers()
    assert "<@U2> may not act on Stage prod" in answer["text"]
    assert "Nothing was changed" in answer["text"]
    assert rig.service.actions == []


async def test_user_group_membership_is_looked_up_and_cached(rig: Rig) -> None:
    rig.service.stage("prod")["metadata"]["annotations"].pop(ann.SLACK_CONFIRM)
    await rig.command("frozen-tauntaun to prod", user="U7")
    await rig.command("abort prod", user="U7")
    answers = await rig.answers(count=2)
    assert "created" in answers[0]["text"] and "Abort" in answers[1]["text"]
    assert [c.args["usergroup"] for c in rig.slack.calls_to("usergroups.users.list")] == ["S0OPS"]
    assert [a[0] for a in rig.service.actions] == ["promote", "abort"]


async def test_slack_failing_on_the_group_lookup_refuses_safely(rig: Rig) -> None:
    rig.service.stage("prod")["metadata"]["annotations"].pop(ann.SLACK_CONFIRM)
    rig.slack.fail("usergroups.users.list", 503)
    await rig.command("frozen-tauntaun to prod", user="U7")
    [answer] = await rig.answers()
    assert "Could not check your user groups" in answer["text"]
    assert rig.service.actions == []


async def test_failure_after_ack_is_told_to_the_user(rig: Rig) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the cluster is on fire")

    rig.service.promote = broken  # type: ignore[method-assign]
    await rig.command("frozen-tauntaun to test")
    [answer] = await rig.answers()
    assert "That failed (RuntimeError)" in answer["text"]


async def test_response_url_down_falls_back_to_post_ephemeral(rig: Rig) -> None:
    rig.slack.fail("response_url", 500)
    await rig.command("frozen-tauntaun to test", user="U5")
    await rig.slack.wait_for(lambda: rig.slack.ephemeral, what="chat.postEphemeral")
    [ephemeral] = rig.slack.ephemeral
    assert ephemeral["user"] == "U5" and "created" in ephemeral["text"]


# ---- confirmation -----------------------------------------------------------------------------


async def confirm_prompt(rig: Rig, user: str = "U1") -> dict[str, dict[str, Any]]:
    await rig.command("frozen-tauntaun to prod", user=user)
    [prompt] = await rig.answers()
    buttons = {e["action_id"]: e for b in prompt["blocks"] for e in b.get("elements") or ()}
    assert buttons[CONFIRM]["confirm"]["style"] == "danger"
    return buttons


async def test_confirmation_creates_nothing_until_confirmed(rig: Rig) -> None:
    buttons = await confirm_prompt(rig)
    assert rig.service.actions == []
    assert await rig.click(buttons[CONFIRM]) == 200
    [done] = await rig.answers("c1")
    assert done["replace_original"] is True and "Confirmed" in done["text"]
    assert rig.service.actions == [
        ("promote", "kargo-demo", "prod", "7c9e6b1f3a4d", f"slack:{TEAM}/U1")
    ]
    # A second click on the same prompt creates nothing more.
    await rig.click(buttons[CONFIRM], url="c2")
    [again] = await rig.answers("c2")
    assert "Already confirmed" in again["text"] and len(rig.service.actions) == 1


async def test_expired_confirmation_says_so(rig: Rig) -> None:
    buttons = await confirm_prompt(rig)
    rig.clock.advance(61)
    await rig.click(buttons[CONFIRM])
    [answer] = await rig.answers("c1")
    assert "expired" in answer["text"] and answer["replace_original"] is True
    assert rig.service.actions == []


async def test_cancel_and_someone_elses_confirm(rig: Rig) -> None:
    buttons = await confirm_prompt(rig)
    await rig.click(buttons[CONFIRM], user="U7")
    [other] = await rig.answers("c1")
    assert "only <@U1> can confirm" in other["text"]
    await rig.click(buttons[CANCEL], url="c2")
    [cancelled] = await rig.answers("c2")
    assert "Cancelled" in cancelled["text"] and rig.service.actions == []


async def test_confirm_rechecks_authorization(rig: Rig) -> None:
    buttons = await confirm_prompt(rig)
    rig.service.stage("prod")["metadata"]["annotations"][ann.SLACK_PROMOTERS] = "U9"
    await rig.click(buttons[CONFIRM])
    [answer] = await rig.answers("c1")
    assert "may not act" in answer["text"] and rig.service.actions == []


# ---- buttons on channel messages --------------------------------------------------------------


async def test_abort_button_checks_authorization(rig: Rig) -> None:
    rig.service.stage("prod")["metadata"]["annotations"].pop(ann.SLACK_CONFIRM)
    await rig.command("frozen-tauntaun to prod")
    await rig.answers()
    [message] = await rig.slack.wait_for(lambda: rig.slack.channel("C0PROD"), what="message")
    abort = message.buttons[ABORT]
    await rig.click(abort, user="U2")
    [refused] = await rig.answers("c1")
    assert "<@U2> may not act on Stage prod" in refused["text"]
    assert refused["replace_original"] is False  # the channel message stays
    assert [a[0] for a in rig.service.actions] == ["promote"]
    await rig.click(abort, user="U1", url="c2")
    [done] = await rig.answers("c2")
    assert "Abort of" in done["text"]
    assert [a[0] for a in rig.service.actions] == ["promote", "abort"]


async def test_buttons_for_another_project_are_ignored(rig: Rig) -> None:
    forged = {
        "action_id": ABORT,
        "text": {"type": "plain_text", "text": "Abort"},
        "value": json.dumps({"ns": "someone-else", "promotion": "x"}),
    }
    assert await rig.click(forged) == 200
    await rig.integration.idle()
    assert rig.service.actions == []


def test_settings_replace_keeps_secrets_hidden() -> None:
    s = SlackSettings(bot_token=TOKEN, signing_secret=SIGNING_SECRET)
    assert TOKEN not in repr(replace(s, namespace="x"))


async def test_a_forged_button_click_is_refused(rig: Rig) -> None:
    forged = {
        "action_id": CONFIRM,
        "text": {"type": "plain_text", "text": "Confirm"},
        "value": "{}",
    }
    body = button_click(forged, response_url=rig.slack.response_url("c1"))
    status, _ = await rig.post(body, signed_headers(body, secret="guessed"))
    assert status == 401
    await rig.integration.idle()
    assert rig.slack.responses["c1"] == [] and rig.service.actions == []


async def test_reverify_and_promote_next_buttons(rig: Rig) -> None:
    test = rig.service.stage("test")
    test["metadata"]["annotations"][ann.SLACK_CHANNEL] = "C0TEST"
    await rig.command("frozen-tauntaun to test", user="U1")
    await rig.answers()
    [message] = await rig.slack.wait_for(lambda: rig.slack.channel("C0TEST"), what="message")
    name = name_of(rig.service.promotions[0])
    test["status"] = {
        "freightHistory": [
            {
                "verificationHistory": [
                    {
                        "id": "v1",
                        "promotion": name,
                        "phase": "Running",
                        "analysisRun": {"name": "r"},
                    }
                ]
            }
        ]
    }
    rig.service.set_status(name, phase="Succeeded", finishedAt="2024-01-01T00:00:00Z")
    await rig.slack.wait_for(lambda: "verification running" in message.text, what="running")
    test["status"]["freightHistory"][0]["verificationHistory"][0]["phase"] = "Successful"
    await rig.slack.wait_for(lambda: "verification passed" in message.text, what="passed")
    await rig.integration.idle()
    buttons = message.buttons
    assert set(buttons) == {REVERIFY, f"{PROMOTE_NEXT}.0"}

    # Re-verify: allowed for U1, asks the cluster, and the message follows the new result.
    await rig.click(buttons[REVERIFY], user="U1", url="c1")
    # (Not rig.answers(): it waits for idle, and the message is now watching for a result.)
    [answer] = await rig.slack.wait_for(lambda: rig.slack.responses["c1"], what="answer")
    assert "Re-verification of *test* requested" in answer["text"]
    assert rig.service.actions[-1] == ("reverify", "kargo-demo", "test", f"slack:{TEAM}/U1")
    test["status"]["freightHistory"][0]["verificationHistory"].insert(
        0, {"id": "v2", "promotion": name, "phase": "Failed", "message": "error rate 9%",
            "analysisRun": {"name": "r2"}},
    )  # fmt: skip
    await rig.slack.wait_for(lambda: "verification failed" in message.text, what="failed")
    await rig.integration.idle()
    assert "error rate 9%" in rig.slack.replies(message.ts)[-1].text

    # Promote to prod: prod asks for confirmation, and only listed promoters get that far.
    await rig.click(buttons[f"{PROMOTE_NEXT}.0"], user="U2", url="c2")
    [refused] = await rig.answers("c2")
    assert "may not act on Stage prod" in refused["text"]
    await rig.click(buttons[f"{PROMOTE_NEXT}.0"], user="U7", url="c3")
    [prompt] = await rig.answers("c3")
    assert "Promote *frozen-tauntaun* to *prod*?" in prompt["text"]
    assert [a[0] for a in rig.service.actions] == ["promote", "reverify"]


async def test_trouble_that_passes_says_try_again_and_a_refusal_says_why(rig: Rig) -> None:
    rig.service.fail(
        "snapshot", TemporaryError("Longshoreman is still starting; try again in a moment")
    )
    await rig.command("frozen-tauntaun to test")
    [answer] = await rig.answers()
    assert answer["text"].startswith(":warning: Longshoreman is still starting; try again")
    assert "Nothing was changed" in answer["text"] and rig.service.actions == []
    rig.service.fail("snapshot", NotFound("Stage 'test' not found in namespace 'kargo-demo'"))
    await rig.command("frozen-tauntaun to test", url="r2")
    [answer] = await rig.answers("r2")
    assert answer["text"].startswith(":no_entry: Stage 'test' not found")


@pytest.mark.looptime  # the quiet 0.3 s below costs no wall time
async def test_reverify_right_after_the_final_update_sends_no_identical_update(rig: Rig) -> None:
    test = rig.service.stage("test")
    test["metadata"]["annotations"][ann.SLACK_CHANNEL] = "C0TEST"
    rig.integration.live.update_interval = 2.0  # LONGSHOREMAN_SLACK_UPDATE_INTERVAL
    await rig.command("frozen-tauntaun to test")
    await rig.answers()
    [message] = await rig.slack.wait_for(lambda: rig.slack.channel("C0TEST"), what="message")
    name = name_of(rig.service.promotions[0])
    entry = {"id": "v1", "promotion": name, "phase": "Successful", "analysisRun": {"name": "r"}}
    test["status"] = {"freightHistory": [{"verificationHistory": [entry]}]}
    rig.service.set_status(name, phase="Succeeded", finishedAt="2024-01-01T00:00:00Z")
    await rig.slack.wait_for(lambda: "verification passed" in message.text, what="final")
    await rig.integration.idle()
    updates = len(rig.slack.calls_to("chat.update"))
    await rig.click(message.buttons[REVERIFY], url="c1")
    await rig.slack.wait_for(lambda: rig.slack.responses["c1"], what="answer")
    await asyncio.sleep(0.3)  # a follower that would update does so at once
    assert len(rig.slack.calls_to("chat.update")) == updates
    entry2 = {"id": "v2", "promotion": name, "phase": "Failed", "analysisRun": {"name": "r2"}}
    test["status"]["freightHistory"][0]["verificationHistory"].insert(0, entry2)
    await rig.slack.wait_for(lambda: "verification failed" in message.text, within=10, what="new")
    await rig.integration.idle()


async def test_freight_not_available_is_refused_before_any_confirm(rig: Rig) -> None:
    rig.service.add_freight("0a1b2c3d4e5f", "wily-yak")  # not verified in test
    await rig.command("wily-yak to prod")
    [answer] = await rig.answers()
    assert "not available to Stage `prod`" in answer["text"]
    assert not answer.get("blocks") or all(b.get("type") != "actions" for b in answer["blocks"])
    assert rig.service.actions == []


async def test_the_expiry_hint_is_a_command_that_works_when_pasted(rig: Rig) -> None:
    buttons = await confirm_prompt(rig)
    rig.clock.advance(61)
    await rig.click(buttons[CONFIRM])
    [answer] = await rig.answers("c1")
    assert "`/promote frozen-tauntaun to prod`" in answer["text"]
    await rig.command("frozen-tauntaun to prod", url="r2")  # pasted: asks again
    [again] = await rig.answers("r2")
    assert "asks for confirmation" in again["text"]


async def test_the_confirm_prompt_shows_the_real_time_to_expiry(rig: Rig) -> None:
    rig.integration.settings = replace(rig.integration.settings, confirm_ttl=30)
    await rig.command("frozen-tauntaun to prod")
    [prompt] = await rig.answers()
    assert "expires in 30 seconds" in prompt["text"]


async def test_abort_of_a_finished_promotion_is_refused_on_slack(rig: Rig) -> None:
    rig.service.stage("prod")["metadata"]["annotations"].pop(ann.SLACK_CONFIRM)
    await rig.command("frozen-tauntaun to prod")
    await rig.answers()
    name = name_of(rig.service.promotions[0])
    rig.service.set_status(name, phase="Succeeded")
    await rig.command(f"abort {name}", url="r2")
    [answer] = await rig.answers("r2")
    assert f"Promotion `{name}` already finished (Succeeded)" in answer["text"]
    assert [a[0] for a in rig.service.actions] == ["promote"]


def test_starting_with_a_token_in_the_environment_logs_no_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LONGSHOREMAN_SLACK_BOT_TOKEN", TOKEN)
    settings = SlackSettings(bot_token=TOKEN, signing_secret=SIGNING_SECRET, namespace="p")
    with caplog.at_level(logging.INFO):
        setup_slack(web.Application(), settings, FakePromotions("p"))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# ---- new Freight ------------------------------------------------------------------------------


async def test_new_freight_is_announced_once_to_a_non_auto_stage_with_a_working_button(
    rig: Rig,
) -> None:
    svc = rig.service
    svc.add_stage("qa", {ann.SLACK_CHANNEL: "C0QA"})
    svc.add_stage("dev", {ann.SLACK_CHANNEL: "C0DEV", ann.AUTO_PROMOTE: "true"})
    svc.add_stage("quiet")  # no channel: nobody to tell
    freight = svc.add_freight(
        "a1b2c3d4e5f6a7b8",
        "brave-bird",
        images=[{"repoURL": "ghcr.io/acme/app", "tag": "1.4.2", "digest": "sha256:" + "a" * 64}],
    )
    freight["metadata"]["creationTimestamp"] = "2024-02-01T00:00:00Z"
    rig.integration.on_freight(freight, None)
    rig.integration.on_freight(freight, freight)  # the alias write's event, at once
    await rig.integration.idle()
    [message] = rig.slack.channel("C0QA")
    assert message.text == "New Freight brave-bird is available to qa"
    assert "ghcr.io/acme/app:1.4.2" in json.dumps(message.blocks)
    # The auto-promoting Stage takes it by itself; the other test Stage holds nothing newer but
    # has no channel.
    assert rig.slack.channel("C0DEV") == []
    assert ann.announced_to(freight) == {"qa"}
    # A restart (or a new leader) sees the annotation and tells nobody again.
    rig.integration._announced.clear()
    rig.integration.on_freight(freight, None)
    await rig.integration.idle()
    assert len(rig.slack.channel("C0QA")) == 1

    await rig.click(message.buttons[m.PROMOTE], user="U5", url="c1")
    [answer] = await rig.answers("c1")
    assert "brave-bird" in answer["text"] and "created" in answer["text"]
    assert ("promote", "kargo-demo", "qa", "a1b2c3d4e5f6a7b8", f"slack:{TEAM}/U5") in svc.actions


async def test_the_promote_button_asks_for_confirmation_and_authorization(rig: Rig) -> None:
    svc = rig.service
    prod = svc.stage("prod")  # confirm required, U1 and S0OPS may promote, C0PROD
    freight = svc.freight[0]  # verified in test: available to prod
    rig.integration.on_freight(freight, None)
    await rig.integration.idle()
    [message] = rig.slack.channel("C0PROD")
    assert message.text == f"New Freight frozen-tauntaun is available to {name_of(prod)}"
    await rig.click(message.buttons[m.PROMOTE], user="U9", url="c1")
    [refusal] = await rig.answers("c1")
    assert "may not" in refusal["text"] or "not allowed" in refusal["text"]
    await rig.click(message.buttons[m.PROMOTE], user="U1", url="c2")
    [prompt] = await rig.answers("c2")
    assert "asks for confirmation" in prompt["text"]
    assert not any(a[0] == "promote" for a in svc.actions)


async def test_freight_not_yet_available_or_older_is_no_news(rig: Rig) -> None:
    svc = rig.service
    svc.add_stage(
        "uat",
        {ann.SLACK_CHANNEL: "C0UAT"},
        upstream=["qa"],
    )
    unverified = svc.add_freight("b" * 16, "shy-fox")
    rig.integration.on_freight(unverified, None)
    svc.add_stage("qa", {ann.SLACK_CHANNEL: "C0QA"})
    newer = svc.add_freight("c" * 16, "new-owl")
    newer["metadata"]["creationTimestamp"] = "2024-03-01T00:00:00Z"
    older = svc.add_freight("d" * 16, "old-elk")
    rig.integration.on_freight(older, None)  # a restart lists old Freight too
    await rig.integration.idle()
    assert rig.slack.channel("C0UAT") == []
    assert [msg.text for msg in rig.slack.channel("C0QA")] == []
    svc.leader = False
    rig.integration.on_freight(newer, None)
    await rig.integration.idle()
    assert rig.slack.channel("C0QA") == []  # only the leader tells
