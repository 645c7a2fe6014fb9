"""``git-push``: push a worktree's HEAD (or a tag), integrating what the remote gained meanwhile.
It reaches the remote, so a replay never runs it again: it only verifies that the pushed commit
is still there (:func:`verify_push`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    failed,
    succeeded,
)
from promoter.steps.git import (
    MAX_PUSH_BACKOFF_SECONDS,
    OBJECT_ID_RE,
    Git,
    GitRun,
    commit_url,
    generated_branch,
    normalize_repo_url,
    open_worktree,
    read_head,
    read_remote_url,
    ref_name_problem,
)
from promoter.urls import without_credentials

# Kargo's documented default for git-push maxAttempts.
DEFAULT_PUSH_ATTEMPTS = 50


@dataclass(frozen=True, slots=True)
class PushPlan:
    """A validated ``git-push`` config."""

    target_branch: str | None
    tag: str | None
    force: bool
    max_attempts: int
    provider: str | None


def plan_push(ctx: StepContext, cfg: Config) -> PushPlan:
    kind = "git-push"
    target = cfg.opt_str("targetBranch")
    generate = cfg.bool("generateTargetBranch")
    tag = cfg.opt_str("tag")
    chosen = [
        n
        for n, v in (("targetBranch", target), ("generateTargetBranch", generate), ("tag", tag))
        if v
    ]
    if len(chosen) > 1:
        raise ConfigRefused(f"{kind}: config.{' and config.'.join(chosen)} are mutually exclusive")
    force = cfg.bool("force")
    if generate:
        # Kargo force-pushes generated branches: the name is unique to the Promotion, so the only
        # way it already exists is an earlier attempt of this very Promotion.
        target, force = generated_branch(ctx.promotion), True
    for label, value in (("targetBranch", target), ("tag", tag)):
        if value is not None:
            problem = ref_name_problem(value)
            if problem:
                what = (
                    "the generated branch name"
                    if generate and label == "targetBranch"
                    else f"config.{label}"
                )
                raise ConfigRefused(f"{kind}: {what} {problem}")
    attempts = cfg.int("maxAttempts", DEFAULT_PUSH_ATTEMPTS)
    if attempts < 1:
        raise ConfigRefused(f"{kind}: config.maxAttempts must be at least 1")
    provider = cfg.opt_str("provider")
    if provider is not None and provider not in ("azure", "bitbucket", "gitea", "github", "gitlab"):
        raise ConfigRefused(f"{kind}: config.provider {provider!r} is not one Kargo knows")
    return PushPlan(target, tag, force, attempts, provider)


@dataclass(frozen=True, slots=True)
class _PushOutcome:
    ok: bool
    non_fast_forward: bool
    run: GitRun


async def _push_ref(git: Git, path: Path, refspec: str) -> _PushOutcome:
    result = await git.try_run("push", "--porcelain", "origin", refspec, cwd=path)
    rejected = [line for line in result.stdout.splitlines() if line.startswith("!")]
    non_ff = any(
        "[rejected]" in line
        and ("fetch first" in line or "non-fast-forward" in line or "stale info" in line)
        for line in rejected
    )
    return _PushOutcome(result.ok, non_ff, result)


async def _integrate(git: Git, path: Path, branch: str) -> StepResult | bool:
    """Fetch ``branch`` and bring HEAD up to date with it.

    Returns True if the remote already contains HEAD (an earlier attempt pushed it), False after a
    successful rebase (push again), or a Failed result when the changes conflict.
    """
    await git.run(
        "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
        cwd=path, what=f"could not fetch branch {branch!r}",
    )  # fmt: skip
    contained = await git.try_run(
        "merge-base", "--is-ancestor", "HEAD", f"refs/remotes/origin/{branch}", cwd=path
    )
    if contained.ok:
        return True
    # A commit whose change the remote already has (same patch, other SHA) is dropped by the
    # rebase, so a re-run never pushes a duplicate.
    rebase = await git.try_run("rebase", "-q", f"refs/remotes/origin/{branch}", cwd=path)
    if rebase.ok:
        return False
    conflicts = await git.try_run("diff", "--name-only", "--diff-filter=U", cwd=path)
    await git.try_run("rebase", "--abort", cwd=path)
    files = [f for f in conflicts.stdout.splitlines() if f]
    if files or "conflict" in (rebase.stdout + rebase.stderr).lower():
        shown = ", ".join(files[:10]) + (" ..." if len(files) > 10 else "")
        return failed(
            f"git-push: branch {branch!r} changed on the remote and the changes conflict with "
            f"this Promotion's commit{(' in ' + shown) if shown else ''}; resolve by hand"
        )
    raise git.error(f"could not rebase onto branch {branch!r}", rebase)


async def git_push(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-push``: push HEAD to a branch, rebasing onto remote changes and retrying.

    Output: ``{"branch", "commit", "commitURL"?}`` (``commitURL`` when the host is a provider
    Kargo knows); a tag push adds ``"tag"``.
    """
    cfg = Config("git-push", config)
    path = open_worktree(ctx, "git-push", cfg)
    plan = plan_push(ctx, cfg)
    git = Git(ctx, "git-push")
    head, current_branch = await read_head(git, path)
    repo_url = await read_remote_url(git, path)
    await git.authenticate(repo_url)

    if plan.tag is not None:
        return await _push_tag(git, path, plan, current_branch, repo_url)

    branch = plan.target_branch or current_branch
    if branch is None:
        raise ConfigRefused(
            "git-push: the working tree is not on a branch (a commit or tag checkout); "
            "set config.targetBranch or config.generateTargetBranch"
        )
    refspec = f"{'+' if plan.force else ''}HEAD:refs/heads/{branch}"
    # One lock per (repository, branch) in this process, as Kargo has: concurrent Promotions
    # here take turns instead of rebasing against each other; other processes are handled by
    # the fetch-rebase-retry loop.
    async with ctx.services.io.lock(f"{normalize_repo_url(repo_url)}#{branch}"):
        for attempt in range(1, plan.max_attempts + 1):
            outcome = await _push_ref(git, path, refspec)
            if outcome.ok:
                break
            if not outcome.non_fast_forward or plan.force:
                raise git.error(f"could not push to branch {branch!r}", outcome.run)
            if attempt == plan.max_attempts:
                raise git.error(
                    f"branch {branch!r} kept moving; gave up after {attempt} attempts",
                    outcome.run,
                    terminal=False,
                )
            integrated = await _integrate(git, path, branch)
            if isinstance(integrated, StepResult):
                return integrated
            if integrated:
                break
            head = await git.run("rev-parse", "HEAD", cwd=path)
            if attempt > 1:
                # Spread competing pushers apart; the first retry goes at once (fetch and
                # rebase already took a moment).
                delay = min(MAX_PUSH_BACKOFF_SECONDS, 0.05 * 2 ** (attempt - 2))
                import random

                await ctx.services.io.sleep(delay * random.uniform(0.5, 1.0))
    output: dict[str, Any] = {"branch": branch, "commit": head}
    url = commit_url(repo_url, head, plan.provider)
    if url:
        output["commitURL"] = url
    return succeeded(output)


async def _push_tag(
    git: Git, path: Path, plan: PushPlan, current_branch: str | None, repo_url: str
) -> StepResult:
    """Push one tag. Kargo has no retry loop for tags; a tag already on the remote fails, unless
    it is this very tag (an earlier attempt pushed it)."""
    assert plan.tag is not None
    tag = plan.tag
    local = await git.try_run("rev-parse", "--verify", "-q", f"refs/tags/{tag}", cwd=path)
    if not local.ok:
        raise StepError(
            f"git-push: tag {tag!r} does not exist; create it with git-tag", terminal=True
        )
    outcome = await _push_ref(git, path, f"refs/tags/{tag}:refs/tags/{tag}")
    if not outcome.ok:
        remote = await git.try_run("ls-remote", "origin", f"refs/tags/{tag}", cwd=path)
        remote_obj = remote.stdout.split("\t", 1)[0].strip() if remote.ok else ""
        if remote_obj != local.stdout.strip():
            if remote_obj:
                raise StepError(
                    f"git-push: tag {tag!r} already exists in the remote repository", terminal=True
                )
            raise git.error(f"could not push tag {tag!r}", outcome.run)
    commit = await git.run("rev-parse", f"refs/tags/{tag}^{{commit}}", cwd=path)
    output: dict[str, Any] = {"tag": tag, "commit": commit}
    if current_branch:
        output["branch"] = current_branch
    url = commit_url(repo_url, commit, plan.provider)
    if url:
        output["commitURL"] = url
    return succeeded(output)


async def verify_push(ctx: StepContext, config: Mapping[str, Any]) -> None:
    """In a replay: check the recorded push is on the remote, and put the worktree where the push
    left it (at the pushed commit, which a rebase onto others' work may have made). Never pushes.
    """
    assert ctx.replay is not None
    cfg = Config("git-push", config)
    path = open_worktree(ctx, "git-push", cfg)
    plan = plan_push(ctx, cfg)
    recorded = ctx.replay.output
    commit = str(recorded.get("commit") or "").lower()
    if not OBJECT_ID_RE.match(commit):
        raise StepError(
            "git-push: the recorded output names no pushed commit to look for", terminal=True
        )
    git = Git(ctx, "git-push")
    repo_url = await read_remote_url(git, path)
    where = without_credentials(repo_url)
    await git.authenticate(repo_url)
    if plan.tag is not None:
        tag = plan.tag
        listed = await git.try_run(
            "ls-remote", "origin", f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}", cwd=path
        )
        if not listed.ok:
            raise git.error(f"could not read tag {tag!r} from {where}", listed)
        found: dict[str, str] = {}
        for line in listed.stdout.splitlines():
            sha, _, ref = line.partition("\t")
            found[ref.strip()] = sha.strip()
        peeled = found.get(f"refs/tags/{tag}^{{}}") or found.get(f"refs/tags/{tag}")
        if peeled != commit:
            raise StepError(
                f"git-push: tag {tag!r} in {where} "
                + (f"is on {peeled[:12]}" if peeled else "is gone")
                + f", not on {commit[:12]} where this step pushed it; not pushing again",
                terminal=True,
            )
        return
    branch = str(recorded.get("branch") or plan.target_branch or "")
    if ref_name_problem(branch) is not None:
        raise StepError("git-push: the recorded output names no branch to look at", terminal=True)
    fetched = await git.try_run(
        "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}", cwd=path
    )
    if not fetched.ok:
        if "couldn't find remote ref" in fetched.stderr.lower():
            raise StepError(
                f"git-push: branch {branch!r}, where this step pushed {commit[:12]}, is gone from "
                f"{where}; not pushing again",
                terminal=True,
            )
        raise git.error(f"could not fetch branch {branch!r}", fetched)
    contained = await git.try_run(
        "merge-base", "--is-ancestor", commit, f"refs/remotes/origin/{branch}", cwd=path
    )
    if not contained.ok:
        raise StepError(
            f"git-push: branch {branch!r} of {where} no longer contains {commit[:12]}, which this "
            "step pushed (it was rewritten since); not pushing again",
            terminal=True,
        )
    head = await git.run("rev-parse", "HEAD", cwd=path)
    if head == commit:
        return
    # The push rebased the commit onto what others had pushed meanwhile: the pushed commit must
    # then be this one's rebase (the same change), or already contain it.
    ancestor = await git.try_run("merge-base", "--is-ancestor", head, commit, cwd=path)
    if not ancestor.ok and not await _same_change(git, path, head, commit):
        raise StepError(
            f"git-push: the rebuilt commit {head[:12]} is not the change this step pushed as "
            f"{commit[:12]}; the work directory cannot be rebuilt as the push left it",
            terminal=True,
        )
    await git.run("reset", "-q", "--hard", commit, cwd=path)


async def _same_change(git: Git, path: Path, a: str, b: str) -> bool:
    """Whether two commits make the same change: git's stable patch IDs, which a rebase keeps."""
    ids = []
    for commit in (a, b):
        diff = await git.run("diff-tree", "-p", "--no-commit-id", "--root", commit, cwd=path)
        listed = await git.run("patch-id", "--stable", cwd=path, stdin=diff + "\n")
        ids.append(listed.split(" ", 1)[0])
    return bool(ids[0]) and ids[0] == ids[1]


STEPS: dict[str, Step] = {
    "git-push": FunctionStep(git_push, effect=Effect.EXTERNAL, verify=verify_push),
}
