"""Kargo's ``github-push`` step: push the local commits by replaying them through GitHub's API.

A GitHub App cannot sign a ``git push``, so branch protection that requires verified commits
refuses every push the App makes with git. ``github-push`` is a drop-in for ``git-push`` that gets
the same commits onto the branch through GitHub's REST "Git database" API instead, as the App:
a commit created there without an author or a committer is attributed to the App and signed by
GitHub's own key, so it is verified. This follows Kargo's ``github_pusher.go``
(https://docs.kargo.io/user-guide/reference-docs/promotion-steps/github-push); each attempt:

1. integrates what others pushed to the target branch meanwhile, by the operator's push
   integration policy (``GitSettings.push_integration_policy``, Kargo's
   ``GIT_PUSH_INTEGRATION_POLICY``): ``AlwaysRebase`` (the default, as in Kargo),
   ``RebaseOrMerge``, ``RebaseOrFail``, ``AlwaysMerge``; none when force-pushing;
2. force-pushes HEAD with git to ``refs/kargo/staging/<promotion>``, a ref no branch list shows,
   so that every object the commits need is on GitHub;
3. compares the target branch (or, when it does not exist yet, the checked-out branch) with HEAD
   through the API (``GET /repos/{owner}/{repo}/compare/{base}...{head}``): ``identical``
   is done, ``ahead`` (or ``behind``/``diverged`` with ``force``) is replayed, ``behind`` or
   ``diverged`` without ``force`` is tried again after integrating;
4. replays each commit of the range (at most ``GitSettings.github_push_max_revisions``, Kargo's
   ``GITHUB_PUSH_MAX_REVISIONS``, 10) with ``POST .../git/commits``: its tree and message on
   the replayed parents, merge commits keeping their other parents;
5. points the branch at the last one: ``POST .../git/refs`` for a new branch, ``PATCH
   .../git/refs/heads/<branch>`` (``force`` as configured) otherwise; GitHub's 422 (the branch
   moved) is tried again;

and after the last attempt the staging ref is deleted and the worktree reset to the branch as
GitHub has it (the replayed commits have new IDs).

Trust. Kargo vouches (sends no author or committer, so GitHub signs) only for commits signed by
its own key, and replays any other commit with its own author and committer (unverified).
Longshoreman signs nothing; what it vouches for is what its own steps made in this Promotion's
work directory (:func:`promoter.steps.git.made_commits`: git-commit's commits, and the rebase or
merge commits of this step's integration, as Kargo re-signs a rebase), which no manifest can
forge. When such a commit's author is not Longshoreman (git-commit's ``author``), a
``Co-authored-by`` trailer keeps them, as Kargo's does when the author is not the signer. The
operator's ``github_push_verify_untrusted`` (Kargo's ``GITHUB_PUSH_VERIFY_UNTRUSTED_COMMITS``)
vouches for every commit. The rebase safety of ``RebaseOrMerge``/``RebaseOrFail`` is Kargo's
matrix with signing configured: safe when every commit to rebase is one Longshoreman made.

The API is a :class:`GitDatabase` port at ``ctx.services.extra["github-git"]``
(``handlers/git_database.py`` over the App's installations); it says so, terminally, when the
App is not installed on the repository. git itself reaches GitHub with the App's installation
token as the other git steps do (``GitSettings.credentials``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    PUSH_INTEGRATION_POLICIES,
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
    commit_url,
    generated_branch,
    made_commits,
    normalize_repo_url,
    note_made,
    open_worktree,
    read_head,
    read_remote_url,
    ref_name_problem,
)
from promoter.urls import without_credentials

log = logging.getLogger(__name__)

KIND = "github-push"
PORT_KEY = "github-git"
# Kargo's: a ref namespace GitHub's branch and tag lists never show.
STAGING_REF_PREFIX = "refs/kargo/staging"
DEFAULT_ATTEMPTS = 10
MAX_ATTEMPTS = 2**31 - 1
FIELDS = ("path", "targetBranch", "generateTargetBranch", "force", "maxAttempts",
          "insecureSkipTLSVerify")  # fmt: skip

Policy = Literal["None", "AlwaysRebase", "RebaseOrMerge", "RebaseOrFail", "AlwaysMerge"]


# ---- the port ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Person:
    """An author or committer as GitHub's API shows and takes it."""

    name: str
    email: str
    date: str = ""


@dataclass(frozen=True, slots=True)
class RemoteCommit:
    """A commit of a comparison: what replaying it needs."""

    sha: str
    tree: str
    message: str
    author: Person | None
    committer: Person | None
    parents: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CommitRange:
    """``base...head`` as GitHub compares them: the commits head has and base lacks, oldest
    first, and where the two histories meet."""

    status: str  # identical, ahead, behind, diverged
    merge_base: str
    total: int
    commits: tuple[RemoteCommit, ...]


@dataclass(frozen=True, slots=True)
class NewCommit:
    """A commit to create. No author and no committer: GitHub makes it the App's and signs it."""

    tree: str
    message: str
    parents: tuple[str, ...]
    author: Person | None = None
    committer: Person | None = None


class NotFastForward(StepError):
    """GitHub refused to move a branch: it moved meanwhile (its 422 on a ref update)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, terminal=False)


class GitDatabase(Protocol):
    """GitHub's git database and comparisons for the repository a ``repoURL`` names.

    Adapters raise :class:`StepError`: ``terminal=True`` for what retrying cannot fix (the App
    is not installed there, a permission is missing), ``retry_after`` for temporary trouble.
    """

    async def check_installed(self, repo_url: str) -> None:
        """Return when the App may act on the repository; raise a terminal StepError saying why
        not otherwise (not on the App's GitHub, not installed)."""
        ...

    async def ref(self, repo_url: str, ref: str) -> str | None:
        """The object ``ref`` (``heads/main``) points at, None when there is no such ref."""
        ...

    async def compare(self, repo_url: str, base: str, head: str, *, limit: int) -> CommitRange:
        """The comparison, with at least ``min(total, limit + 1)`` of its commits."""
        ...

    async def create_commit(self, repo_url: str, commit: NewCommit) -> str: ...

    async def create_ref(self, repo_url: str, ref: str, sha: str) -> None:
        """Create ``ref`` (``refs/heads/x``) at ``sha``."""
        ...

    async def update_ref(self, repo_url: str, ref: str, sha: str, *, force: bool) -> None:
        """Move ``ref`` (``heads/x``); :class:`NotFastForward` when GitHub refuses the move."""
        ...

    async def delete_ref(self, repo_url: str, ref: str) -> None: ...


# ---- the config --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitHubPushPlan:
    """A validated ``github-push`` config (Kargo's ``github-push-config.json``)."""

    target_branch: str | None
    force: bool
    max_attempts: int
    generated: bool


def plan_github_push(promotion: str, config: Mapping[str, Any] | None) -> GitHubPushPlan:
    """Kargo's schema, with its rules in words: ``path`` is required and not empty;
    ``targetBranch`` and ``generateTargetBranch: true`` exclude each other; ``maxAttempts`` is
    1..2^31-1; nothing else is allowed."""
    cfg = Config(KIND, config)
    cfg.only(FIELDS)
    if not cfg.str("path").strip():
        raise ConfigRefused(f"{KIND}: config.path must not be empty")
    for key in ("targetBranch",):
        value = cfg.data.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigRefused(f"{KIND}: config.{key} must be a string")
    for key in ("generateTargetBranch", "force", "insecureSkipTLSVerify"):
        value = cfg.data.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigRefused(f"{KIND}: config.{key} must be true or false, got {value!r}")
    generate = cfg.bool("generateTargetBranch")
    target = (cfg.opt_str("targetBranch") or "").strip().removeprefix("refs/heads/") or None
    if generate and target:
        raise ConfigRefused(
            f"{KIND}: config.targetBranch and config.generateTargetBranch: true are mutually "
            "exclusive"
        )
    force = cfg.bool("force")
    if generate:
        # As Kargo (and git-push): the generated name is this Promotion's alone, so it can only
        # exist already from an earlier attempt of this very Promotion.
        target, force = generated_branch(promotion), True
    if target is not None:
        problem = ref_name_problem(target)
        if problem:
            what = "the generated branch name" if generate else "config.targetBranch"
            raise ConfigRefused(f"{KIND}: {what} {problem}")
    attempts = cfg.data.get("maxAttempts")
    if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int)):
        raise ConfigRefused(f"{KIND}: config.maxAttempts must be a whole number, got {attempts!r}")
    max_attempts = DEFAULT_ATTEMPTS if attempts is None else attempts
    if not 1 <= max_attempts <= MAX_ATTEMPTS:
        raise ConfigRefused(f"{KIND}: config.maxAttempts must be between 1 and {MAX_ATTEMPTS}")
    return GitHubPushPlan(target, force, max_attempts, generate)


# ---- pure decisions ----------------------------------------------------------------------------


def integration_policy(configured: str, force: bool) -> Policy:
    """The policy an attempt integrates by: none when force-pushing (the remote's history is
    overwritten anyway), else the operator's."""
    if force:
        return "None"
    if configured not in PUSH_INTEGRATION_POLICIES:
        raise StepError(
            f"{KIND}: the push integration policy {configured!r} is not one of "
            f"{', '.join(PUSH_INTEGRATION_POLICIES)}",
            terminal=True,
        )
    return configured  # type: ignore[return-value]


def rebase_is_safe(to_rebase: Sequence[str], made: frozenset[str]) -> bool:
    """Kargo's rebase safety with signing configured: a rebase re-creates the commits as
    Longshoreman's, which is honest only for commits Longshoreman made."""
    return all(sha in made for sha in to_rebase)


Verdict = Literal["done", "replay", "retry"]


def comparison_verdict(status: str, force: bool) -> tuple[Verdict, str]:
    """What a comparison of the target with HEAD means for this attempt (Kargo's table)."""
    if status == "identical":
        return "done", ""
    if status == "ahead" or (status in ("behind", "diverged") and force):
        return "replay", ""
    if status == "behind":
        return "retry", "the local branch is behind the target branch and force is not enabled"
    if status == "diverged":
        return "retry", "the local and target branches have diverged and force is not enabled"
    raise StepError(f"{KIND}: GitHub compared the branches as {status!r}", terminal=True)


def replay_commit(
    original: RemoteCommit, *, trusted: bool, verify_untrusted: bool, signer: Person | None
) -> NewCommit:
    """The commit to create for ``original`` (parents left empty; see :func:`replay_parents`).

    Vouched for (trusted, or the operator's verify-all): no author or committer, so GitHub
    signs it as the App's; an author who is not ``signer`` (Longshoreman, for commits it made;
    nobody, for the rest) gets a ``Co-authored-by`` trailer. Otherwise the original author and
    committer go along unchanged, and GitHub leaves the commit unverified.
    """
    message = original.message
    if trusted or verify_untrusted:
        author = original.author
        if (
            author is not None
            and author.name
            and author.email
            and (signer is None or (author.name, author.email) != (signer.name, signer.email))
        ):
            message = f"{message}\n\nCo-authored-by: {author.name} <{author.email}>"
        return NewCommit(tree=original.tree, message=message, parents=())
    return NewCommit(
        tree=original.tree,
        message=message,
        parents=(),
        author=original.author,
        committer=original.committer,
    )


def replay_parents(
    original: RemoteCommit, replayed: Mapping[str, str], previous: str
) -> tuple[str, ...]:
    """A commit's parents after replay: a plain commit goes on the one replayed before it (or
    the merge base); a merge commit keeps each parent, mapped to its replay where it has one."""
    if len(original.parents) <= 1:
        return (previous,)
    return tuple(replayed.get(p, p) for p in original.parents)


# ---- the step ----------------------------------------------------------------------------------


class _Retry(Exception):
    """This attempt could not land the commits; integrating again may help."""


class _Refused(Exception):
    """The attempt must not go on: a conflict, or a policy forbids the only way forward."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class _Target:
    repo_url: str
    branch: str
    current_branch: str | None
    staging_ref: str
    force: bool
    policy: Policy


def _port(ctx: StepContext) -> GitDatabase:
    port = ctx.services.extra.get(PORT_KEY)
    if port is None:
        raise StepError(
            f"{KIND} acts as the GitHub App (LONGSHOREMAN_GITHUB_APP_ID and friends); it runs "
            "under `python -m app serve` with GitHub configured, not in the local runner "
            "(use git-push there)",
            terminal=True,
        )
    return port  # type: ignore[no-any-return]


async def _integrate(ctx: StepContext, git: Git, path: Path, target: _Target) -> None:
    """Bring the remote target branch's new commits into HEAD by the policy (Kargo's
    ``IntegrateRemoteChanges``): nothing to do for a branch that does not exist yet."""
    if target.policy == "None":
        return
    branch = target.branch
    remote = f"refs/remotes/origin/{branch}"
    fetched = await git.try_run("fetch", "-q", "origin", f"+refs/heads/{branch}:{remote}", cwd=path)
    if not fetched.ok:
        if "couldn't find remote ref" in fetched.stderr.lower():
            return
        raise git.error(f"could not fetch branch {branch!r}", fetched)
    listed = await git.run("rev-list", f"{remote}..HEAD", cwd=path)
    to_rebase = listed.split()
    policy = target.policy
    if policy in ("RebaseOrMerge", "RebaseOrFail"):
        if rebase_is_safe(to_rebase, made_commits(ctx)):
            policy = "AlwaysRebase"
        elif policy == "RebaseOrFail":
            foreign = [sha[:12] for sha in to_rebase if sha not in made_commits(ctx)]
            raise _Refused(
                f"{KIND}: branch {branch!r} moved on the remote, and rebasing onto it would "
                f"re-create commits Longshoreman did not make ({', '.join(foreign[:5])}) as its "
                "own; the push integration policy RebaseOrFail forbids merging instead"
            )
        else:
            policy = "AlwaysMerge"
    if policy == "AlwaysRebase":
        done = await git.try_run("rebase", "-q", remote, cwd=path)
        if not done.ok:
            await _conflict(git, path, branch, "rebase", done)
        # Kargo re-signs what it rebases: the rebased commits are Longshoreman's now.
        note_made(ctx, (await git.run("rev-list", f"{remote}..HEAD", cwd=path)).split())
        return
    before = await git.run("rev-parse", "HEAD", cwd=path)
    merged = await git.try_run("merge", "-q", "--no-edit", remote, cwd=path)
    if not merged.ok:
        await _conflict(git, path, branch, "merge", merged)
    after = await git.run("rev-parse", "HEAD", cwd=path)
    parents = (await git.run("show", "-s", "--format=%P", after, cwd=path)).split()
    if after != before and len(parents) > 1:
        note_made(ctx, [after])


async def _conflict(git: Git, path: Path, branch: str, how: str, run: Any) -> None:
    conflicts = await git.try_run("diff", "--name-only", "--diff-filter=U", cwd=path)
    await git.try_run(how, "--abort", cwd=path)
    files = [f for f in conflicts.stdout.splitlines() if f]
    if files or "conflict" in (run.stdout + run.stderr).lower():
        shown = ", ".join(files[:10]) + (" ..." if len(files) > 10 else "")
        raise _Refused(
            f"{KIND}: branch {branch!r} changed on the remote and the changes conflict with "
            f"this Promotion's commits{(' in ' + shown) if shown else ''} ({how}); resolve by "
            "hand"
        )
    raise git.error(f"could not {how} onto branch {branch!r}", run)


async def _attempt(
    ctx: StepContext, git: Git, path: Path, port: GitDatabase, target: _Target
) -> None:
    """One attempt (Kargo's ``push``): integrate, stage, compare, replay, move the branch."""
    await _integrate(ctx, git, path, target)
    pushed = await git.try_run(
        "push", "--porcelain", "origin", f"+HEAD:{target.staging_ref}", cwd=path
    )
    if not pushed.ok:
        raise git.error(f"could not push to the staging ref {target.staging_ref}", pushed)
    source = await git.run("rev-parse", "HEAD", cwd=path)
    repo_url = target.repo_url
    base = await port.ref(repo_url, f"heads/{target.branch}")
    exists = base is not None
    if base is None and target.current_branch:
        base = await port.ref(repo_url, f"heads/{target.current_branch}")
    if base is None:
        raise StepError(
            f"{KIND}: neither branch {target.branch!r} nor the checked-out branch "
            f"{target.current_branch or '(none: HEAD is detached)'!r} exists in "
            f"{without_credentials(repo_url)} to compare with; create the branch first",
            terminal=True,
        )
    settings = ctx.services.git
    limit = settings.github_push_max_revisions
    compared = await port.compare(repo_url, base, source, limit=limit)
    verdict, reason = comparison_verdict(compared.status, target.force)
    if verdict == "retry":
        raise _Retry(reason)
    if verdict == "done":
        if not exists:
            # Nothing to replay onto a branch that is not there yet: it starts at HEAD, which
            # GitHub has (the checked-out branch's tip).
            await _create_branch(port, target, source)
        return
    if compared.total > limit:
        raise StepError(
            f"{KIND}: the commits {compared.merge_base[:12]}..{source[:12]} are "
            f"{compared.total}, more than the {limit} one push may replay "
            "(LONGSHOREMAN_GITHUB_PUSH_MAX_REVISIONS)",
            terminal=True,
        )
    made = made_commits(ctx)
    signer = Person(settings.author_name, settings.author_email)
    replayed: dict[str, str] = {compared.merge_base: compared.merge_base}
    last = compared.merge_base
    for index, original in enumerate(compared.commits, 1):
        trusted = original.sha in made
        commit = replay_commit(
            original,
            trusted=trusted,
            verify_untrusted=settings.github_push_verify_untrusted,
            signer=signer if trusted else None,
        )
        commit = replace(commit, parents=replay_parents(original, replayed, last))
        try:
            last = await port.create_commit(repo_url, commit)
        except StepError as e:
            raise e.with_message(
                f"{KIND}: replaying commit {index}/{len(compared.commits)} "
                f"({original.sha[:12]}): {e.message}"
            ) from None
        replayed[original.sha] = last
    if not exists:
        await _create_branch(port, target, last)
        return
    try:
        await port.update_ref(repo_url, f"heads/{target.branch}", last, force=target.force)
    except NotFastForward as e:
        raise _Retry(e.message) from None


async def _create_branch(port: GitDatabase, target: _Target, sha: str) -> None:
    try:
        await port.create_ref(target.repo_url, f"refs/heads/{target.branch}", sha)
    except NotFastForward as e:
        # Someone created the branch meanwhile: the next attempt integrates what is on it.
        raise _Retry(e.message) from None


async def github_push(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``github-push``. Output, as Kargo's: ``{"branch", "commit", "commitURL"}``."""
    plan = plan_github_push(ctx.promotion, config)
    path = open_worktree(ctx, KIND, Config(KIND, config))
    port = _port(ctx)
    git = Git(ctx, KIND)
    _, current_branch = await read_head(git, path)
    repo_url = await read_remote_url(git, path)
    await port.check_installed(repo_url)
    await git.authenticate(repo_url)
    branch = plan.target_branch or current_branch
    if branch is None:
        raise ConfigRefused(
            f"{KIND}: the working tree is not on a branch (a commit or tag checkout); set "
            "config.targetBranch or config.generateTargetBranch"
        )
    target = _Target(
        repo_url=repo_url,
        branch=branch,
        current_branch=current_branch,
        staging_ref=f"{STAGING_REF_PREFIX}/{ctx.promotion}",
        force=plan.force,
        policy=integration_policy(ctx.services.git.push_integration_policy, plan.force),
    )
    # The same lock as git-push's: pushes to one branch from this process take turns.
    async with ctx.services.io.lock(f"{normalize_repo_url(repo_url)}#{branch}"):
        try:
            refused = await _attempts(ctx, git, path, port, target, plan.max_attempts)
        finally:
            await _delete_staging_ref(port, target)
        if refused is not None:
            return refused
        # The replayed commits have new IDs: the worktree follows the branch as GitHub has it.
        remote = f"refs/remotes/origin/{branch}"
        await git.run(
            "fetch", "-q", "origin", f"+refs/heads/{branch}:{remote}",
            cwd=path, what=f"could not fetch branch {branch!r} after the push",
        )  # fmt: skip
        await git.run("reset", "-q", "--hard", remote, cwd=path)
    head = await git.run("rev-parse", "HEAD", cwd=path)
    output: dict[str, Any] = {"branch": branch, "commit": head}
    url = web_commit_url(repo_url, head)
    if url:
        output["commitURL"] = url
    return succeeded(output)


def web_commit_url(repo_url: str, sha: str) -> str | None:
    """The commit's page on the repository's GitHub: its scheme, host and port kept (a GitHub
    Enterprise may serve on any), ``.git`` dropped."""
    parts = urlsplit(without_credentials(repo_url.strip()))
    path = parts.path.strip("/").removesuffix(".git").strip("/")
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or not path:
        return commit_url(repo_url, sha, "github")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}/{path}/commit/{sha}"


async def _attempts(
    ctx: StepContext, git: Git, path: Path, port: GitDatabase, target: _Target, attempts: int
) -> StepResult | None:
    """Kargo's retry loop: attempts until one lands; a Failed result for what no attempt fixes."""
    for attempt in range(1, attempts + 1):
        try:
            await _attempt(ctx, git, path, port, target)
            return None
        except _Refused as refused:
            return failed(refused.message)
        except _Retry as retry:
            if attempt == attempts:
                raise StepError(
                    f"{KIND}: branch {target.branch!r} kept moving; gave up after {attempt} "
                    f"attempt{'s' if attempt > 1 else ''}: {retry}"
                ) from None
            if attempt > 1:
                # As git-push: the first retry goes at once (integrating takes a moment), later
                # ones spread competing pushers apart.
                delay = min(MAX_PUSH_BACKOFF_SECONDS, 0.05 * 2 ** (attempt - 2))
                await ctx.services.io.sleep(delay * random.uniform(0.5, 1.0))
    return None


async def _delete_staging_ref(port: GitDatabase, target: _Target) -> None:
    """Kargo cleans the staging ref up whatever happened; failing to is only logged."""
    try:
        await port.delete_ref(target.repo_url, target.staging_ref.removeprefix("refs/"))
    except StepError as e:
        log.warning("%s: could not delete %s: %s", KIND, target.staging_ref, e.message)


async def verify_github_push(ctx: StepContext, config: Mapping[str, Any]) -> None:
    """In a replay: the recorded commit must still be on the branch, and the rebuilt worktree's
    files must be that commit's (the replay kept every tree); the worktree then moves to it, as
    the push left it. Never pushes."""
    assert ctx.replay is not None
    plan = plan_github_push(ctx.promotion, config)
    path = open_worktree(ctx, KIND, Config(KIND, config))
    recorded = ctx.replay.output
    commit = str(recorded.get("commit") or "").lower()
    branch = str(recorded.get("branch") or plan.target_branch or "")
    if not OBJECT_ID_RE.match(commit) or ref_name_problem(branch) is not None:
        raise StepError(f"{KIND}: the recorded output names no pushed commit", terminal=True)
    git = Git(ctx, KIND)
    repo_url = await read_remote_url(git, path)
    await git.authenticate(repo_url)
    remote = f"refs/remotes/origin/{branch}"
    fetched = await git.try_run("fetch", "-q", "origin", f"+refs/heads/{branch}:{remote}", cwd=path)
    if not fetched.ok:
        raise git.error(f"could not fetch branch {branch!r}", fetched)
    contained = await git.try_run("merge-base", "--is-ancestor", commit, remote, cwd=path)
    if not contained.ok:
        raise StepError(
            f"{KIND}: branch {branch!r} of {without_credentials(repo_url)} no longer contains "
            f"{commit[:12]}, which this step pushed; not pushing again",
            terminal=True,
        )
    trees = await git.run("rev-parse", "HEAD^{tree}", f"{commit}^{{tree}}", cwd=path)
    rebuilt, pushed = trees.split()
    if rebuilt != pushed and not await _change_was_pushed(git, path, commit):
        raise StepError(
            f"{KIND}: the rebuilt commit is not a change this step pushed up to {commit[:12]}; "
            "the work directory cannot be rebuilt as the push left it",
            terminal=True,
        )
    await git.run("reset", "-q", "--hard", commit, cwd=path)


async def _change_was_pushed(git: Git, path: Path, commit: str) -> bool:
    """Whether the rebuilt HEAD's change is among the commits replayed up to ``commit`` (on top
    of others' work, so with another tree): git's stable patch IDs, which a replay keeps."""
    base = await git.try_run("merge-base", "HEAD", commit, cwd=path)
    if not base.ok:
        return False
    ids: list[set[str]] = []
    for revisions in (["-1", "HEAD"], [f"{base.stdout.strip()}..{commit}"]):
        patches = await git.run(
            "log", "-p", "--no-merges", "--format=commit %H", *revisions, cwd=path
        )
        listed = await git.run("patch-id", "--stable", cwd=path, stdin=patches + "\n")
        ids.append({line.split(" ", 1)[0] for line in listed.splitlines() if line})
    return bool(ids[0]) and ids[0] <= ids[1]


STEPS: dict[str, Step] = {
    KIND: FunctionStep(github_push, effect=Effect.EXTERNAL, verify=verify_github_push),
}

__all__: Sequence[str] = [
    "PORT_KEY",
    "STAGING_REF_PREFIX",
    "STEPS",
    "CommitRange",
    "GitDatabase",
    "GitHubPushPlan",
    "NewCommit",
    "NotFastForward",
    "Person",
    "RemoteCommit",
    "comparison_verdict",
    "integration_policy",
    "plan_github_push",
    "rebase_is_safe",
    "replay_commit",
    "replay_parents",
]
