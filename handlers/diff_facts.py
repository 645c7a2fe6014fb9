"""The facts of a Freight diff, from GitHub: the commits of a range and their pull requests.

:func:`promoter.chat.diff.ranges_to_fetch` names the ranges; this adapter asks GitHub about each
with the App's installation token and hands :func:`promoter.chat.diff.freight_diff` what it
learned. Two REST operations, both held to GitHub's OpenAPI description by the fake:

- "Compare two commits" (``GET /repos/{owner}/{repo}/compare/{base}...{head}``,
  https://docs.github.com/en/rest/commits/commits#compare-two-commits): commits oldest first,
  ``total_commits`` counting them all, pages of ``per_page`` (at most 100 here). Unpaged, GitHub
  lists no more than 250; we read the first page for the count and, for a longer range, the last
  pages, so the diff lists the newest :data:`~promoter.chat.diff.MAX_COMMITS` and says how many
  there are in all (at most four requests however long the range).
- "List pull requests associated with a commit" (``GET .../commits/{sha}/pulls``): for the newest
  :data:`PULL_LOOKUPS` commits of a range, so a long range costs a bounded number of requests.

A range's answer is cached per (repository, base, head): commit ids do not move, so the same
promotion shown in Slack, the check run, the PR reply and the announcement costs one compare.
What GitHub cannot answer (not installed there: 404; unknown commit: 404/422) is cached as
unknown; trouble that passes (rate limits, 5xx, no connection) is not cached, and the diff shows
the old and new revision without commits rather than fail the message it is part of.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import gidgethub
from cachetools import LRUCache

from handlers.client import GitHubAPI, GitHubClient, GitHubUnreachable, RateLimited
from handlers.git_credentials import github_repo
from promoter.chat.diff import MAX_COMMITS, Commit, PullRequest, RangeFacts, RangeKey

log = logging.getLogger(__name__)

PER_PAGE = 100
# Pull-request look-ups per range (one request each): the newest commits of a long range.
PULL_LOOKUPS = 50
# Look-ups in flight at once for one range: GitHub asks integrations not to burst.
CONCURRENCY = 4
CACHE_ENTRIES = 1024

_COMPARE = "/repos/{owner}/{repo}/compare/{basehead}{?page,per_page}"
_PULLS = "/repos/{owner}/{repo}/commits/{commit_sha}/pulls"


def _commit(data: Mapping[str, Any]) -> Commit:
    inner = data.get("commit") or {}
    message = str(inner.get("message") or "")
    login = (data.get("author") or {}).get("login")
    name = (inner.get("author") or {}).get("name")
    return Commit(
        sha=str(data.get("sha") or ""),
        summary=message.split("\n", 1)[0],
        author=str(login or name or ""),
        url=str(data.get("html_url") or ""),
    )


def _pull(data: Mapping[str, Any]) -> PullRequest:
    return PullRequest(
        number=int(data.get("number") or 0),
        title=str(data.get("title") or ""),
        url=str(data.get("html_url") or ""),
        author=str((data.get("user") or {}).get("login") or ""),
        merged=bool(data.get("merged_at")),
    )


class DiffFacts:
    """The GitHub side of Freight diffs, one per process (its cache is shared by every
    message that shows a diff)."""

    def __init__(self, client: GitHubClient, *, entries: int = CACHE_ENTRIES) -> None:
        self.client = client
        self._cache: LRUCache[RangeKey, RangeFacts | None] = LRUCache(maxsize=entries)

    async def facts(self, keys: Iterable[RangeKey]) -> dict[RangeKey, RangeFacts]:
        """What GitHub says about each range it can answer for."""
        found: dict[RangeKey, RangeFacts] = {}
        for key in dict.fromkeys(keys):
            facts = await self.range(key)
            if facts is not None:
                found[key] = facts
        return found

    async def range(self, key: RangeKey) -> RangeFacts | None:
        """One range's commits and pull requests; None when GitHub cannot say."""
        if key in self._cache:
            return self._cache[key]
        repo = github_repo(key.repo_url, self.client.settings.git_base_url)
        if repo is None:
            return None  # not a repository of the GitHub this App serves
        try:
            gh = await self.client.repo_api(repo)
            facts = await self._fetch(gh, repo, key)
        except gidgethub.BadRequest as e:
            if int(e.status_code) not in (404, 422):
                log.warning(
                    "comparing %s %s...%s: GitHub answered %s",
                    repo,
                    key.base,
                    key.head,
                    e.status_code,
                )
                return None
            facts = None
        except (gidgethub.GitHubException, RateLimited, GitHubUnreachable) as e:
            log.warning("comparing %s %s...%s: %s", repo, key.base, key.head, type(e).__name__)
            return None
        self._cache[key] = facts
        return facts

    async def _fetch(self, gh: GitHubAPI, repo: str, key: RangeKey) -> RangeFacts:
        owner, name = repo.split("/", 1)
        where = {"owner": owner, "repo": name, "basehead": f"{key.base}...{key.head}"}
        first = await gh.getitem(_COMPARE, {**where, "page": 1, "per_page": PER_PAGE})
        total = int(first.get("total_commits") or 0)
        commits = list(first.get("commits") or ())
        if total > len(commits):
            # The newest MAX_COMMITS live on the last pages (GitHub lists oldest first).
            last = -(-total // PER_PAGE)
            start = max(2, (total - MAX_COMMITS) // PER_PAGE + 1)
            if start > 2:
                commits = []
            for page in range(start, last + 1):
                data = await gh.getitem(_COMPARE, {**where, "page": page, "per_page": PER_PAGE})
                commits += list(data.get("commits") or ())
        listed = [_commit(c) for c in commits[-MAX_COMMITS:]]
        pulls = await self._pulls(gh, owner, name, [c.sha for c in listed[-PULL_LOOKUPS:]])
        listed = [Commit(c.sha, c.summary, c.author, c.url, pulls.get(c.sha, ())) for c in listed]
        return RangeFacts(tuple(listed), max(total, len(listed)), str(first.get("html_url") or ""))

    async def _pulls(
        self, gh: GitHubAPI, owner: str, name: str, shas: list[str]
    ) -> dict[str, tuple[PullRequest, ...]]:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(sha: str) -> tuple[str, tuple[PullRequest, ...]]:
            async with gate:
                try:
                    data = await gh.getitem(
                        _PULLS, {"owner": owner, "repo": name, "commit_sha": sha}
                    )
                except gidgethub.BadRequest as e:
                    if int(e.status_code) not in (404, 409, 422):
                        raise
                    return sha, ()
            return sha, tuple(_pull(p) for p in data if isinstance(p, Mapping))

        return dict(await asyncio.gather(*(one(sha) for sha in shas)))
