"""A Freight diff's facts from the fake GitHub: commits of a range, their pull requests, the cache.

The adapter (``handlers/diff_facts.py``) talks to the fake over HTTP with the App's token; the
fake holds both operations it uses (compare, commit -> pulls) to GitHub's OpenAPI description
and records any request or answer that leaves it in ``contract_problems``.
"""

from __future__ import annotations

from pathlib import Path

from handlers.client import RetryPolicy
from handlers.diff_facts import PULL_LOOKUPS, DiffFacts
from promoter.chat.diff import MAX_COMMITS, RangeKey, freight_diff, ranges_to_fetch
from tests.support.github_env import running_github_env

POLICY = RetryPolicy(backoff=0.01)


def _freight(name: str, repo_url: str, sha: str, created: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "commits": [{"repoURL": repo_url, "id": sha}],
    }


async def test_a_range_lists_its_commits_and_the_merged_pull_requests_they_came_from(
    tmp_path: Path,
) -> None:
    async with running_github_env(tmp_path, client=POLICY) as env:
        base = env.head()
        await env.open_pull("fix-login", {"login.txt": "fixed"}, title="Fix login", merge=True)
        await env.open_pull("add-cache", {"cache.txt": "on"}, title="Add a cache", merge=True)
        head = env.head()
        url = f"{env.fake.url}/{env.repo}"
        current = _freight("old", url, base, "2026-01-01T00:00:00Z")
        new = _freight("new", url, head, "2026-01-02T00:00:00Z")

        facts = await DiffFacts(env.client).facts(ranges_to_fetch(current, new))
        diff = freight_diff("prod", current, new, facts)

        assert not diff.backwards
        (change,) = diff.changes
        assert (change.kind, change.old, change.new) == ("git", base, head)
        assert change.facts is not None
        assert change.facts.total == len(change.facts.commits) == 4  # two commits, two merges
        assert change.facts.compare_url.endswith(f"/compare/{base}...{head}")
        assert [(p.title, p.merged) for p in diff.pulls] == [
            ("Fix login", True),
            ("Add a cache", True),
        ]
        assert env.fake.contract_problems == []
        assert {call.operation for call in env.fake.calls} >= {
            "repos/compare-commits-with-basehead",
            "repos/list-pull-requests-associated-with-commit",
        }


async def test_the_same_range_asked_again_costs_no_request(tmp_path: Path) -> None:
    async with running_github_env(tmp_path, client=POLICY) as env:
        base = env.head()
        await env.open_pull("one", {"a.txt": "1"}, merge=True)
        key = RangeKey(f"{env.fake.url}/{env.repo}", base, env.head())
        facts = DiffFacts(env.client)
        first = await facts.range(key)
        asked = len(env.fake.requests("GET", "/compare/"))
        again = await facts.range(key)
        assert again == first and first is not None
        assert len(env.fake.requests("GET", "/compare/")) == asked == 1


async def test_nothing_changed_asks_github_nothing(tmp_path: Path) -> None:
    async with running_github_env(tmp_path, client=POLICY) as env:
        url = f"{env.fake.url}/{env.repo}"
        same = _freight("f", url, env.head(), "2026-01-01T00:00:00Z")
        keys = ranges_to_fetch(same, {**same, "metadata": {"name": "g"}})
        assert keys == ()
        assert await DiffFacts(env.client).facts(keys) == {}
        assert env.fake.requests("GET", "/compare/") == []


async def test_a_range_longer_than_githubs_limit_lists_the_newest_and_counts_them_all(
    tmp_path: Path,
) -> None:
    async with running_github_env(tmp_path, client=POLICY) as env:
        base = env.head()
        for i in range(MAX_COMMITS + 60):
            env.git.commit_files("main", {"n.txt": str(i)}, f"change {i}")
        head = env.head()
        facts = await DiffFacts(env.client).range(
            RangeKey(f"{env.fake.url}/{env.repo}", base, head)
        )
        assert facts is not None
        assert facts.total == MAX_COMMITS + 60
        assert len(facts.commits) == MAX_COMMITS and facts.truncated == 60
        assert facts.commits[-1].sha == head
        assert facts.commits[-1].summary == f"change {MAX_COMMITS + 59}"
        assert facts.commits[0].summary == "change 60"
        # One page for the count, the last pages for the newest; pull look-ups bounded.
        assert len(env.fake.requests("GET", "/compare/")) <= 4
        assert len(env.fake.requests("GET", "/pulls")) == PULL_LOOKUPS
        assert env.fake.contract_problems == []


async def test_a_rollback_lists_what_it_removes(tmp_path: Path) -> None:
    async with running_github_env(tmp_path, client=POLICY) as env:
        old = env.head()
        await env.open_pull("feature", {"f.txt": "1"}, title="A feature", merge=True)
        url = f"{env.fake.url}/{env.repo}"
        running = _freight("newer", url, env.head(), "2026-01-02T00:00:00Z")
        target = _freight("older", url, old, "2026-01-01T00:00:00Z")
        facts = await DiffFacts(env.client).facts(ranges_to_fetch(running, target))
        diff = freight_diff("prod", running, target, facts)
        assert diff.backwards
        assert [p.title for p in diff.pulls] == ["A feature"]


async def test_a_repository_the_app_cannot_read_shows_no_commits_and_no_error(
    tmp_path: Path,
) -> None:
    async with running_github_env(tmp_path, client=POLICY) as env:
        key = RangeKey(f"{env.fake.url}/someone/else", "a" * 40, "b" * 40)
        facts = DiffFacts(env.client)
        assert await facts.range(key) is None
        asked = len(env.fake.log)
        assert await facts.range(key) is None  # the 404 is remembered
        assert len(env.fake.log) == asked
        # Not on this App's GitHub at all: not even asked.
        assert await facts.range(RangeKey("https://gitlab.example/a/b", "a", "b")) is None
        assert len(env.fake.log) == asked
