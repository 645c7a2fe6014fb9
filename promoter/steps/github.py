"""Kargo's pull-request steps: ``git-open-pr``, ``git-wait-for-pr`` and ``git-merge-pr``.

The steps decide; a :class:`PullRequests` port does the talking. The server puts a GitHub adapter
(``handlers/pull_requests.py``) at ``ctx.services.extra["github"]``; tests may put any object with
the same shape. Configs follow Kargo's schemas (``git-open-pr-config.json`` and friends):

- ``git-open-pr{repoURL, sourceBranch, targetBranch, title?, description?, labels?,
  createTargetBranch?}`` -> ``{"pr": {"id", "url"}, "prNumber"}``. Idempotent: it adopts the PR
  in its own earlier output, or an open PR (or a merged one of the same head commit) for the same
  head and base, before opening one. With nothing between the branches it is Skipped (Kargo's
  docs pair it with ``if: ${{ status('open-pr') != 'Skipped' }}``).
- ``git-wait-for-pr{repoURL, prNumber, pollInterval?}``: Running while the PR is open, with
  ``output.pr.url`` so the reconciler's index wakes it on the PR's ``closed`` webhook; polling every
  ``pollInterval`` (30 s) is only the fallback. Merged: Succeeded with ``commit`` = the merge
  commit. Closed without merging: Failed, with no retry.
- ``git-merge-pr{repoURL, prNumber, mergeMethod?, wait?}``: merges; an already merged PR is
  success; with ``wait`` a PR GitHub will not merge yet (checks pending) keeps the step Running.

All three act on GitHub (``Effect.EXTERNAL``): a replica rebuilding the work directory never runs
them again. Their ``verify`` hooks check what they recorded instead: the pull request
``git-open-pr`` opened still exists; the one ``git-wait-for-pr``/``git-merge-pr`` saw merged is
merged, by the recorded merge commit.

GitHub being briefly unavailable (rate limits, 5xx, network) is not a reason to fail a Promotion:
the port raises ``StepError`` with ``retry_after`` for those, and the steps report Running and
come back after that delay. Only after :data:`MAX_TEMPORARY_FAILURES` such attempts in a row does
the outage count as an error.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from promoter.errors import ConfigRefused, InvalidInput, StepError
from promoter.resources.model import parse_duration
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    failed,
    running,
    skipped,
    succeeded,
)
from promoter.steps.git import ref_name_problem
from promoter.urls import repo_url_problem

PORT_KEY = "github"
DEFAULT_POLL_SECONDS = 30.0
MAX_TEMPORARY_FAILURES = 20
MERGE_METHODS = ("merge", "squash", "rebase")
# Key in a step's own output that counts consecutive temporary failures across attempts.
_TEMPORARY = "temporaryFailures"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PullRequest:
    """The parts of a pull request the steps decide on."""

    number: int
    url: str  # the web URL; the reconciler's wake index and the merge webhook both use it
    open: bool
    merged: bool
    head_branch: str = ""
    base_branch: str = ""
    head_sha: str = ""
    merge_commit: str | None = None
    created_at: str = ""

    def output(self, *, state: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.number, "url": self.url}
        if state:
            out["open"] = self.open
            out["merged"] = self.merged
        return out


@dataclass(frozen=True, slots=True)
class Comparison:
    """``base...head``: commits on head that base lacks, and files that differ."""

    ahead_by: int
    files_changed: int


class NotMergeable(StepError):
    """GitHub refused to merge now (checks pending, conflicts, the head moved)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, terminal=False)


class PullRequests(Protocol):
    """Pull requests and branches of the repository a ``repoURL`` names.

    Adapters raise :class:`StepError`: with ``retry_after`` for temporary trouble (rate limits,
    5xx, network), ``terminal=True`` for what retrying cannot fix (not installed, no permission).
    """

    async def find(self, repo_url: str, *, head: str, base: str) -> list[PullRequest]:
        """Pull requests from branch ``head`` into ``base``, in any state."""
        ...

    async def get(self, repo_url: str, number: int) -> PullRequest: ...

    async def create(
        self,
        repo_url: str,
        *,
        head: str,
        base: str,
        title: str,
        body: str,
        labels: Sequence[str],
    ) -> PullRequest: ...

    async def merge(
        self, repo_url: str, number: int, *, method: str | None, title: str, message: str
    ) -> PullRequest:
        """Merge and return the merged PR; raises :class:`NotMergeable` when GitHub refuses."""
        ...

    async def branch_head(self, repo_url: str, branch: str) -> str | None:
        """The commit at the tip of ``branch``, None when there is no such branch."""
        ...

    async def compare(self, repo_url: str, base: str, head: str) -> Comparison: ...

    async def commit_message(self, repo_url: str, ref: str) -> str: ...

    async def create_branch(self, repo_url: str, branch: str, message: str) -> None:
        """Create ``branch`` as an orphan holding one empty commit (Kargo's createTargetBranch)."""
        ...


class _Temporary(Exception):
    def __init__(self, error: StepError) -> None:
        super().__init__(error.message)
        self.error = error


def _port(ctx: StepContext, kind: str) -> PullRequests:
    port = ctx.services.extra.get(PORT_KEY)
    if port is None:
        raise StepError(
            f"{kind} needs the GitHub App (LONGSHOREMAN_GITHUB_APP_ID and friends); it runs under "
            "`python -m app serve` with GitHub configured, not in the local runner",
            terminal=True,
        )
    return port  # type: ignore[no-any-return]


async def _call(awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except StepError as e:
        if not e.terminal and e.retry_after is not None and not isinstance(e, NotMergeable):
            raise _Temporary(e) from None
        raise


def _temporary_result(
    ctx: StepContext, kind: str, problem: _Temporary, keep: Mapping[str, Any]
) -> StepResult:
    """Running after a temporary failure, or an error once the outage is persistent."""
    count = int(ctx.previous_output.get(_TEMPORARY) or 0) + 1
    message = f"{kind}: {problem.error.message}"
    if count >= MAX_TEMPORARY_FAILURES:
        raise StepError(f"{message} ({count} attempts in a row)")
    retry = problem.error.retry_after or DEFAULT_POLL_SECONDS
    return running(
        f"{message}; trying again in {retry:.0f}s", retry, output={**keep, _TEMPORARY: count}
    )


def _repo_url(cfg: Config, kind: str) -> str:
    url = cfg.str("repoURL").strip()
    problem = repo_url_problem(url)
    if problem:
        raise ConfigRefused(f"{kind}: config.repoURL {problem}")
    provider = cfg.opt_str("provider")
    if provider is not None and provider != "github":
        raise ConfigRefused(
            f"{kind}: config.provider {provider!r} is not supported; Longshoreman opens pull "
            "requests on GitHub only"
        )
    return url


def _branch(cfg: Config, key: str, kind: str) -> str:
    value = cfg.str(key).strip()
    value = value.removeprefix("refs/heads/")
    problem = ref_name_problem(value)
    if problem:
        raise ConfigRefused(f"{kind}: config.{key} {problem}")
    return value


def _pr_number(cfg: Config, kind: str) -> int:
    number = cfg.int("prNumber")
    if number < 1:
        raise ConfigRefused(f"{kind}: config.prNumber must be at least 1")
    return number


def _poll(cfg: Config, kind: str) -> float:
    raw = cfg.data.get("pollInterval")
    if raw is None:
        return DEFAULT_POLL_SECONDS
    try:
        seconds = parse_duration(raw, field_name="pollInterval")
    except InvalidInput as e:
        raise ConfigRefused(f"{kind}: config.pollInterval {e.bare_message}") from None
    if seconds <= 0:
        raise ConfigRefused(f"{kind}: config.pollInterval must be positive")
    return seconds


def _best(candidates: Sequence[PullRequest]) -> PullRequest | None:
    """Kargo's order for adopting an existing PR: open first, then merged; the newest of those."""
    if not candidates:
        return None

    def rank(pr: PullRequest) -> int:
        return 0 if pr.open else 1 if pr.merged else 2

    top = min(rank(pr) for pr in candidates)
    return max(
        (pr for pr in candidates if rank(pr) == top), key=lambda pr: (pr.created_at, pr.number)
    )


def split_commit_message(message: str) -> tuple[str, str]:
    """Kargo's default title and description: the first line, and the rest."""
    title, _, rest = message.strip().partition("\n")
    return title.strip(), rest.strip()


# ---- git-open-pr -------------------------------------------------------------------------------


def _open_output(pr: PullRequest) -> dict[str, Any]:
    # prNumber is Kargo's deprecated key, kept for templates that still read it.
    return {"pr": pr.output(state=False), "prNumber": pr.number}


async def git_open_pr(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "git-open-pr"
    cfg = Config(kind, config)
    repo_url = _repo_url(cfg, kind)
    source = _branch(cfg, "sourceBranch", kind)
    target = _branch(cfg, "targetBranch", kind)
    if source == target:
        raise ConfigRefused(f"{kind}: sourceBranch and targetBranch are both {source!r}")
    title = cfg.opt_str("title")
    description = cfg.opt_str("description")
    labels = [str(label) for label in cfg.list("labels")]
    if any(not label.strip() for label in labels):
        raise ConfigRefused(f"{kind}: config.labels must not contain empty names")
    create_target = cfg.bool("createTargetBranch")
    port = _port(ctx, kind)
    try:
        return await _open_pr(
            ctx, port, repo_url, source, target, title, description, labels, create_target
        )
    except _Temporary as problem:
        return _temporary_result(ctx, kind, problem, {})


async def _open_pr(
    ctx: StepContext,
    port: PullRequests,
    repo_url: str,
    source: str,
    target: str,
    title: str | None,
    description: str | None,
    labels: list[str],
    create_target: bool,
) -> StepResult:
    kind = "git-open-pr"
    earlier = ctx.previous_output.get("pr")
    if isinstance(earlier, Mapping) and earlier.get("id"):
        pr = await _call(port.get(repo_url, int(earlier["id"])))
        if pr.open or pr.merged:
            return succeeded(_open_output(pr), message=f"pull request #{pr.number} already open")
    source_sha = await _call(port.branch_head(repo_url, source))
    if source_sha is None:
        raise StepError(
            f"{kind}: source branch {source!r} does not exist in {repo_url}; push it first "
            "(git-push)",
            terminal=True,
        )
    existing = [
        pr
        for pr in await _call(port.find(repo_url, head=source, base=target))
        if pr.open or (pr.merged and pr.head_sha == source_sha)
    ]
    best = _best(existing)
    if best is not None:
        return succeeded(
            _open_output(best), message=f"adopted existing pull request #{best.number}"
        )
    if await _call(port.branch_head(repo_url, target)) is None:
        if not create_target:
            raise StepError(
                f"{kind}: target branch {target!r} does not exist in {repo_url}; set "
                "createTargetBranch: true to create it",
                terminal=True,
            )
        await _call(port.create_branch(repo_url, target, "Initial commit"))
    diff = await _call(port.compare(repo_url, target, source))
    if diff.ahead_by == 0 or diff.files_changed == 0:
        return skipped(f"no changes between {target!r} and {source!r}: no pull request opened")
    if title is None or description is None:
        message = await _call(port.commit_message(repo_url, source_sha))
        if title is None:
            default_title, default_body = split_commit_message(message)
            title = default_title or f"Promote to {ctx.stage}"
            description = description if description is not None else default_body
        else:
            description = message.strip()
    pr = await _call(
        port.create(
            repo_url,
            head=source,
            base=target,
            title=title,
            body=description or "",
            labels=labels,
        )
    )
    return succeeded(_open_output(pr), message=f"opened pull request #{pr.number}")


# ---- git-wait-for-pr ---------------------------------------------------------------------------


def pr_outcome(pr: PullRequest, poll: float, kind: str) -> StepResult:
    """What a PR's state means for a waiting step (pure)."""
    output: dict[str, Any] = {"pr": pr.output()}
    if pr.merged:
        if not pr.merge_commit:
            # GitHub fills merge_commit_sha a moment after the merge; ask again shortly.
            return running(f"pull request #{pr.number} merged; waiting for its commit", 2.0, output)
        return succeeded(
            {"commit": pr.merge_commit, **output}, message=f"pull request #{pr.number} merged"
        )
    if not pr.open:
        return failed(f"{kind}: pull request #{pr.number} was closed without being merged", output)
    return running(f"waiting for pull request #{pr.number} to be merged", poll, output)


async def git_wait_for_pr(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "git-wait-for-pr"
    cfg = Config(kind, config)
    repo_url = _repo_url(cfg, kind)
    number = _pr_number(cfg, kind)
    poll = _poll(cfg, kind)
    port = _port(ctx, kind)
    try:
        pr = await _call(port.get(repo_url, number))
    except _Temporary as problem:
        # Keep pr.url in the output so the merge webhook still wakes this step.
        return _temporary_result(ctx, kind, problem, _keep_pr(ctx))
    return pr_outcome(pr, poll, kind)


def _keep_pr(ctx: StepContext) -> dict[str, Any]:
    pr = ctx.previous_output.get("pr")
    return {"pr": dict(pr)} if isinstance(pr, Mapping) else {}


# ---- git-merge-pr ------------------------------------------------------------------------------


async def git_merge_pr(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "git-merge-pr"
    cfg = Config(kind, config)
    repo_url = _repo_url(cfg, kind)
    number = _pr_number(cfg, kind)
    method = cfg.opt_str("mergeMethod")
    if method is not None and method not in MERGE_METHODS:
        raise ConfigRefused(
            f"{kind}: config.mergeMethod must be one of {', '.join(MERGE_METHODS)}, got {method!r}"
        )
    wait = cfg.bool("wait")
    poll = _poll(cfg, kind)
    port = _port(ctx, kind)
    try:
        pr = await _call(port.get(repo_url, number))
        if pr.merged or not pr.open:
            return pr_outcome(pr, poll, kind)
        try:
            merged = await _call(
                port.merge(
                    repo_url,
                    number,
                    method=method,
                    title=f"Merge PR #{number}",
                    message=f"Merged by Longshoreman (Promotion {ctx.promotion})",
                )
            )
        except NotMergeable as e:
            output = {"pr": pr.output()}
            if wait:
                return running(f"{kind}: {e.message}; waiting", poll, output)
            return failed(f"{kind}: {e.message}", output)
    except _Temporary as problem:
        return _temporary_result(ctx, kind, problem, _keep_pr(ctx))
    return pr_outcome(merged, poll, kind)


# ---- checks in a replay ------------------------------------------------------------------------


async def _recorded_pr(ctx: StepContext, config: Mapping[str, Any], kind: str) -> PullRequest:
    """The pull request a step recorded, as GitHub has it now."""
    assert ctx.replay is not None
    cfg = Config(kind, config)
    repo_url = _repo_url(cfg, kind)
    recorded = ctx.replay.output.get("pr")
    number = recorded.get("id") if isinstance(recorded, Mapping) else None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise StepError(f"{kind}: the recorded output names no pull request", terminal=True)
    port = _port(ctx, kind)
    try:
        return await _call(port.get(repo_url, number))
    except _Temporary as problem:
        raise StepError(
            f"{kind}: {problem.error.message}", retry_after=problem.error.retry_after
        ) from None


async def verify_open_pr(ctx: StepContext, config: Mapping[str, Any]) -> None:
    """The pull request opened (or adopted) is still there; it is not opened again."""
    await _recorded_pr(ctx, config, "git-open-pr")


async def _verify_merged(ctx: StepContext, config: Mapping[str, Any], kind: str) -> None:
    """The pull request seen merged is merged, by the merge commit recorded."""
    assert ctx.replay is not None
    pr = await _recorded_pr(ctx, config, kind)
    commit = str(ctx.replay.output.get("commit") or "")
    if not pr.merged or (commit and pr.merge_commit and pr.merge_commit != commit):
        raise StepError(
            f"{kind}: pull request #{pr.number} is "
            + ("not merged" if not pr.merged else f"merged as {pr.merge_commit}")
            + f" now, but this step recorded it merged as {commit or 'a commit'}",
            terminal=True,
        )


async def verify_waited_pr(ctx: StepContext, config: Mapping[str, Any]) -> None:
    await _verify_merged(ctx, config, "git-wait-for-pr")


async def verify_merged_pr(ctx: StepContext, config: Mapping[str, Any]) -> None:
    await _verify_merged(ctx, config, "git-merge-pr")


# ---- helpers for adapters ----------------------------------------------------------------------

_REPO_PATH = re.compile(r"^/*(?P<owner>[^/]+)/(?P<repo>[^/]+?)(?:\.git)?/*$")


def repo_full_name(repo_url: str) -> str:
    """``owner/repo`` of a GitHub (or GitHub Enterprise) repository URL.

    Accepts ``https://host/owner/repo(.git)``, ``ssh://git@host/owner/repo.git`` and
    ``git@host:owner/repo.git``; raises a terminal StepError otherwise.
    """
    url = repo_url.strip()
    if "://" in url:
        path = url.split("://", 1)[1].partition("/")[2]
    elif ":" in url:
        path = url.split(":", 1)[1]
    else:
        path = ""
    match = _REPO_PATH.match("/" + path.split("?", 1)[0])
    if not match:
        raise StepError(
            f"{repo_url!r} does not name a GitHub repository (owner/repo)", terminal=True
        )
    return f"{match.group('owner')}/{match.group('repo')}"


STEPS: dict[str, Step] = {
    kind: FunctionStep(fn, effect=Effect.EXTERNAL, verify=verify, uses_work_dir=False)
    for kind, fn, verify in (
        ("git-open-pr", git_open_pr, verify_open_pr),
        ("git-wait-for-pr", git_wait_for_pr, verify_waited_pr),
        ("git-merge-pr", git_merge_pr, verify_merged_pr),
    )
}

__all__: Sequence[str] = [
    "DEFAULT_POLL_SECONDS",
    "PORT_KEY",
    "STEPS",
    "Comparison",
    "NotMergeable",
    "PullRequest",
    "PullRequests",
    "pr_outcome",
    "repo_full_name",
    "split_commit_message",
]
