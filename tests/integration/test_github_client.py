"""The GitHub client against the fake GitHub over HTTP: tokens, ETags, rate limits, retries."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import gidgethub
import pytest

from handlers.client import (
    GitHubClient,
    RateLimited,
    RetryPolicy,
    is_temporary,
    retry_delay,
    step_error,
)
from tests.support.github_env import GitHubEnv, running_github_env

FAST = RetryPolicy(attempts=4, backoff=0.01, max_backoff=0.05, max_wait=2.0)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    async with running_github_env(tmp_path, client=FAST) as env:
        yield env


async def get_branch(client: GitHubClient) -> object:
    api = await client.repo_api("example/app")
    return await api.getitem("/repos/example/app/branches/main")


async def test_one_installation_token_serves_many_requests_and_is_refreshed_early(
    env: GitHubEnv,
) -> None:
    for _ in range(3):
        await get_branch(env.client)
    assert env.fake.tokens_issued == 1
    # The App JWT is back-dated against clock skew.
    assert all(iat <= time.time() - 55 for iat in env.fake.jwt_iat)
    # Five minutes before expiry the token is replaced, not used until GitHub refuses it.
    env.skew += 3600 - 299
    await get_branch(env.client)
    assert env.fake.tokens_issued == 2


async def test_etag_cache_turns_repeat_reads_into_unbilled_304s(env: GitHubEnv) -> None:
    for _ in range(3):
        await get_branch(env.client)
    assert env.telemetry.answered("github", "304") == 2
    assert [r.status for r in env.fake.requests("GET", "/branches/")] == [200, 304, 304]


async def test_5xx_is_retried_with_backoff(env: GitHubEnv) -> None:
    env.fake.faults.add(502, path="/branches/", times=2)
    data = await get_branch(env.client)
    assert data["name"] == "main"  # type: ignore[index]
    assert [r.status for r in env.fake.requests("GET", "/branches/")] == [502, 502, 200]


async def test_persistent_5xx_becomes_a_temporary_step_error(env: GitHubEnv) -> None:
    env.fake.faults.add(503, path="/branches/", times=10)
    with pytest.raises(gidgethub.GitHubBroken) as err:
        await get_branch(env.client)
    assert len(env.fake.requests("GET", "/branches/")) == FAST.attempts
    error = step_error(err.value, "reading branch")
    assert is_temporary(error) and not error.terminal


async def test_secondary_limit_honours_retry_after(env: GitHubEnv) -> None:
    env.fake.faults.add(403, path="/branches/", secondary=True, retry_after=0)
    env.fake.faults.add(429, path="/branches/", retry_after=0)
    await get_branch(env.client)
    assert [r.status for r in env.fake.requests("GET", "/branches/")] == [403, 429, 200]


async def test_primary_limit_waits_for_a_near_reset(env: GitHubEnv) -> None:
    await get_branch(env.client)
    env.fake.exhaust_rate_limit(reset_in=0.3)
    started = time.monotonic()
    api = await env.client.repo_api("example/app")
    await api.getitem("/repos/example/app/commits/main")
    assert 0.25 <= time.monotonic() - started < FAST.max_wait + 0.5


async def test_primary_limit_with_a_far_reset_is_handed_back_as_retry_after(env: GitHubEnv) -> None:
    await get_branch(env.client)
    env.fake.exhaust_rate_limit(reset_in=600)
    with pytest.raises(RateLimited) as err:
        api = await env.client.repo_api("example/app")
        await api.getitem("/repos/example/app/commits/main")
    assert 500 < err.value.retry_after <= 602
    error = step_error(err.value, "reading commit")
    assert is_temporary(error) and error.retry_after == err.value.retry_after
    # Known to be exhausted: the next call does not even spend a request.
    before = len(env.fake.log)
    with pytest.raises(RateLimited):
        await api.getitem("/repos/example/app/commits/main")
    assert len(env.fake.log) == before


async def test_not_installed_is_terminal(env: GitHubEnv) -> None:
    api = await env.client.repo_api("example/app")
    with pytest.raises(gidgethub.BadRequest) as err:
        await api.getitem("/repos/example/other/branches/main")
    error = step_error(err.value, "reading branch")
    assert error.terminal and "404" in error.message


@pytest.mark.parametrize(
    ("status", "headers", "message", "attempt", "expected"),
    [
        (403, {"retry-after": "7"}, "", 1, 7.0),
        (429, {}, "", 1, 60.0),
        (403, {}, "You have exceeded a secondary rate limit", 2, 120.0),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1030"}, "", 1, 30.5),
        (403, {}, "Resource not accessible by integration", 1, None),
        (500, {}, "", 1, 0.5),
        (502, {}, "", 3, 2.0),
        (502, {}, "", 4, None),
        (404, {}, "", 1, None),
    ],
)
def test_retry_delay_follows_githubs_advice(
    status: int, headers: dict[str, str], message: str, attempt: int, expected: float | None
) -> None:
    assert retry_delay(status, headers, message, attempt, RetryPolicy(), 1000.0) == expected
