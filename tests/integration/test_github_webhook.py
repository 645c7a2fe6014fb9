"""POST /github/webhook over HTTP: signatures, bad bodies, ping, replays, routing, ordering."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from gidgethub import routing, sansio

from handlers.queue import KeyedQueue
from handlers.routing import dispatch, ordering_key
from handlers.webhook import DELIVERY_TTL, WEBHOOK_PATH, GitHubIntegration
from tests.support.clock import FakeClock
from tests.support.github import (
    fixture,
    webhook_request,
)
from tests.support.github_env import SECRET, GitHubEnv, running_github_env
from tests.support.promotions import FakePromotions


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    async with running_github_env(
        tmp_path, repo="Codertocat/Hello-World", service=FakePromotions(), clock=FakeClock()
    ) as env:
        yield env


def closed_pr() -> dict[str, Any]:
    payload = fixture("pull_request.closed.with-organization")
    payload["pull_request"]["merged"] = True
    return payload


async def test_a_signed_pull_request_closed_wakes_its_waiting_promotions(bot: GitHubEnv) -> None:
    bot.service.waiting["https://github.com/Codertocat/Hello-World/pull/2"] = 1
    status, body = await bot.send("pull_request", closed_pr())
    assert status == 202, body
    await bot.settle()
    assert bot.service.asked("wake-pr") == [
        ("https://github.com/Codertocat/Hello-World/pull/2",),
        ("https://api.github.com/repos/Codertocat/Hello-World/pulls/2",),
    ]


@pytest.mark.parametrize(
    ("secret", "signature"),
    [
        (None, None),  # unsigned
        ("not-the-secret", None),  # signed with another secret
        (SECRET, "sha256=" + "0" * 64),  # tampered
        (SECRET, "md5=abc"),  # unknown scheme
    ],
)
async def test_missing_or_wrong_signatures_get_401_and_nothing_happens(
    bot: GitHubEnv, secret: str | None, signature: str | None
) -> None:
    status, _ = await bot.send("pull_request", closed_pr(), secret=secret, signature=signature)
    assert status == 401
    await bot.settle()
    assert bot.service.asked("wake-pr") == [] and not bot.telemetry.handled()
    assert bot.fake.log == []


async def test_malformed_json_and_other_content_types_are_refused(bot: GitHubEnv) -> None:
    status, _ = await bot.send("pull_request", b"{not json")
    assert status in (400, 415)
    status, _ = await bot.send("pull_request", b"payload=1", content_type="text/plain")
    assert status in (400, 415)
    status, _ = await bot.send("pull_request", b"[1, 2]")
    assert status == 400
    await bot.settle()
    assert not bot.telemetry.handled()


async def test_missing_event_header_is_a_bad_request(bot: GitHubEnv) -> None:
    headers, body = webhook_request("pull_request", closed_pr(), SECRET)
    del headers["x-github-event"]
    response = await bot.http.post(WEBHOOK_PATH, data=body, headers=headers)
    assert response.status == 400


async def test_ping_is_answered_200(bot: GitHubEnv) -> None:
    status, body = await bot.send("ping", fixture("ping.with-app_id"))
    assert status == 200 and body["message"] == "pong"


async def test_a_replayed_delivery_is_processed_once(bot: GitHubEnv) -> None:
    first = await bot.send("pull_request", closed_pr(), delivery="d-1")
    second = await bot.send("pull_request", closed_pr(), delivery="d-1")
    assert first[0] == 202
    assert second[0] == 200 and "duplicate" in second[1]["message"]
    await bot.settle()
    assert bot.telemetry.handled() == ["d-1"]
    assert len(bot.service.asked("wake-pr")) == 2  # html_url and url, once


async def test_a_delivery_is_remembered_for_an_hour_on_the_integrations_clock(
    bot: GitHubEnv,
) -> None:
    clock = bot.clock
    assert isinstance(clock, FakeClock)
    assert (await bot.send("pull_request", closed_pr(), delivery="d-1"))[0] == 202
    clock.advance(DELIVERY_TTL - 1)
    assert (await bot.send("pull_request", closed_pr(), delivery="d-1"))[0] == 200
    clock.advance(2)
    assert (await bot.send("pull_request", closed_pr(), delivery="d-1"))[0] == 202
    await bot.settle()
    assert bot.telemetry.handled() == ["d-1", "d-1"]


async def test_unknown_events_and_actions_are_accepted_and_ignored(bot: GitHubEnv) -> None:
    for event, name in [
        ("installation", "installation.created"),
        ("check_suite", "check_suite.requested"),
        ("pull_request", "pull_request.opened"),
        ("issue_comment", "issue_comment.edited"),
        ("push", "push.with-new-branch"),
    ]:
        status, _ = await bot.send(event, fixture(name))
        assert status == 202
    await bot.settle()
    assert len(bot.telemetry.handled()) == 5
    assert bot.telemetry.failed() == 0
    assert bot.service.asked("wake-pr") == [] and bot.service.asked("promote") == []
    assert bot.fake.log == []  # nothing needed GitHub


async def test_a_failing_handler_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = routing.Router()
    ran: list[str] = []

    @router.register("pull_request")
    async def a_broken(event: sansio.Event, deps: Any) -> None:
        raise RuntimeError("boom")

    @router.register("pull_request", action="closed")
    async def b_fine(event: sansio.Event, deps: Any) -> None:
        ran.append(event.delivery_id)

    event = sansio.Event(closed_pr(), event="pull_request", delivery_id="d-42")
    with caplog.at_level(logging.ERROR):
        failures = await dispatch(event, None, router)  # type: ignore[arg-type]
    assert failures == 1 and ran == ["d-42"]
    record = next(r for r in caplog.records if "failed" in r.getMessage())
    assert record.delivery_id == "d-42"  # type: ignore[attr-defined]


def test_ordering_keys_tie_a_pull_request_to_its_comments() -> None:
    pr = sansio.Event(closed_pr(), event="pull_request", delivery_id="1")
    comment = fixture("issue_comment.created.with-installation")
    comment["issue"]["number"] = 2
    assert ordering_key(pr) == ordering_key(
        sansio.Event(comment, event="issue_comment", delivery_id="2")
    )
    assert ordering_key(sansio.Event({}, event="installation", delivery_id="3")) == "delivery:3"


async def test_the_queue_keeps_order_per_key_and_bounds_concurrency() -> None:
    queue = KeyedQueue(workers=2, max_pending=100)
    log: list[str] = []
    running = 0
    peak = 0

    def job(name: str, delay: float) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(delay)
            log.append(name)
            running -= 1

        return run

    for i in range(3):
        assert queue.submit("a", job(f"a{i}", 0.03 - i * 0.01))
    for key in "bcd":
        assert queue.submit(key, job(key, 0.001))
    await asyncio.wait_for(queue.join(), 5)
    assert [x for x in log if x.startswith("a")] == ["a0", "a1", "a2"]
    assert peak <= 2
    small = KeyedQueue(workers=1, max_pending=1)
    assert small.submit("x", job("x", 0.01))
    assert not small.submit("y", job("y", 0.01))  # backlog full: the webhook answers 503
    await small.close()


async def test_a_full_backlog_answers_503(bot: GitHubEnv) -> None:
    bot.integration.queue.max_pending = 0
    status, _ = await bot.send("pull_request", closed_pr(), delivery="full-1")
    assert status == 503
    bot.integration.queue.max_pending = 10
    status, _ = await bot.send("pull_request", closed_pr(), delivery="full-1")
    assert status == 202  # not remembered as seen: the redelivery is accepted


def test_setup_refuses_to_start_without_a_webhook_secret() -> None:
    from handlers.settings import GitHubSettings

    with pytest.raises(ValueError, match="LONGSHOREMAN_GITHUB_WEBHOOK_SECRET"):
        GitHubIntegration(GitHubSettings(app_id="1", private_key="x"), FakePromotions())


def test_payload_fixture_sanity() -> None:
    # As in GitHub's own samples: closed PRs there are not merged, comments are on issues.
    assert fixture("pull_request.closed")["pull_request"]["merged"] is False
    assert "pull_request" not in fixture("issue_comment.created")["issue"]
    assert json.dumps(closed_pr())
