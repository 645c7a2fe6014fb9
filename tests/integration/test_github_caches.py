"""What the GitHub front end remembers expires on its clock, not the wall clock's.

Who may act (repository permission) is cached for PERMISSION_TTL; a test moves the injected
clock past it instead of waiting a minute, against the fake GitHub over HTTP.
"""

from __future__ import annotations

from pathlib import Path

from handlers.client import RetryPolicy
from handlers.context import PERMISSION_TTL, Permissions
from tests.support.clock import FakeClock
from tests.support.github_env import running_github_env


async def test_a_changed_permission_is_seen_once_the_cached_answer_expires(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with running_github_env(tmp_path, client=RetryPolicy(backoff=0.01)) as env:
        env.fake.set_permission(env.repo, "octocat", "write")
        permissions = Permissions(clock=clock)
        gh = await env.client.repo_api(env.repo)
        assert await permissions.permission(gh, env.repo, "octocat") == "write"
        env.fake.set_permission(env.repo, "octocat", "read")
        clock.advance(PERMISSION_TTL - 1)
        assert await permissions.permission(gh, env.repo, "octocat") == "write"  # cached
        clock.advance(2)
        assert await permissions.permission(gh, env.repo, "octocat") == "read"
