"""``git-clone``: clone a repository into the Promotion's work directory and check out one worktree
per ``checkout`` entry (a branch, a commit, a tag or the Freight's commit), creating the branch
when asked. The layout, the safety rules and the replay story are in :mod:`promoter.steps.git`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from promoter.errors import ConfigRefused, StepError
from promoter.ports.gitcmd import (
    branch_clone_args,
    clone_options,
)
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.git import (
    CHECKOUT_REPO_RE,
    STATE_DIR,
    Git,
    checkout_repo_dir,
    head_from_files,
    identity_of,
    normalize_repo_url,
    owning_repo,
    ref_name_problem,
    repo_dir,
    resolve_path,
    rmtree,
)
from promoter.urls import repo_url_problem, without_credentials

log = logging.getLogger(__name__)
INITIAL_COMMIT_MESSAGE = "Initial commit"

_HEX_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")


def sparse_dir_problem(path: str) -> str | None:
    """Why ``path`` is not a repository-relative directory for a sparse checkout, or None."""
    if not path or path.strip() != path:
        return "must be a non-empty path without surrounding spaces"
    if "\n" in path or "\r" in path or "\0" in path:
        return "must not contain line breaks"
    if path.startswith("/") or path.startswith("-"):
        return "must be relative to the repository root"
    if any(part == ".." for part in path.split("/")):
        return "must not contain '..'"
    if any(c in path for c in "*?[!"):
        return "must be a directory, not a pattern"
    return None


CheckoutKind = Literal["branch", "tag", "commit", "default"]


@dataclass(frozen=True, slots=True)
class CheckoutPlan:
    """One validated ``checkout[]`` entry."""

    key: str
    rel_path: str
    path: Path
    kind: CheckoutKind
    ref: str
    create: bool = False
    sparse: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClonePlan:
    """A validated ``git-clone`` config: deciding what to do touches no git."""

    repo_url: str
    insecure_skip_tls_verify: bool
    blobless: bool
    recurse_submodules: bool
    author_name: str | None
    author_email: str | None
    checkouts: tuple[CheckoutPlan, ...]


def _freight_commit(
    ctx: StepContext, kind: str, repo_url: str, origin: Mapping[str, Any]
) -> tuple[CheckoutKind, str]:
    if origin:
        actual = ctx.freight.get("origin") or {}
        if actual and (
            actual.get("kind", "Warehouse") != origin.get("kind", "Warehouse")
            or actual.get("name") != origin.get("name")
        ):
            raise StepError(
                f"{kind}: the target Freight comes from {actual.get('kind', 'Warehouse')} "
                f"{actual.get('name')!r}, not from fromOrigin {origin.get('name')!r}",
                terminal=True,
            )
    wanted = normalize_repo_url(repo_url)
    for commit in ctx.freight.get("commits") or []:
        if not isinstance(commit, Mapping):
            continue
        if normalize_repo_url(str(commit.get("repoURL", ""))) != wanted:
            continue
        sha = str(commit.get("id") or "")
        if sha:
            if not _HEX_RE.match(sha):
                raise StepError(
                    f"{kind}: the Freight's commit id {sha!r} is not a commit ID", terminal=True
                )
            return "commit", sha.lower()
        tag = str(commit.get("tag") or "")
        if tag and ref_name_problem(tag) is None:
            return "tag", tag
    raise StepError(
        f"{kind}: the target Freight has no commit from {without_credentials(repo_url)}",
        terminal=True,
    )


def plan_clone(ctx: StepContext, config: Mapping[str, Any] | None) -> ClonePlan:
    """Validate a git-clone config completely, before any git runs."""
    kind = "git-clone"
    cfg = Config(kind, config)
    repo_url = cfg.str("repoURL").strip()
    problem = repo_url_problem(repo_url)
    if problem:
        raise ConfigRefused(f"{kind}: config.repoURL {problem}")
    author = cfg.map("author")
    author_name = author_email = None
    if author:
        a = Config(kind, author, "config.author")
        if a.has("signingKey"):
            raise ConfigRefused(
                f"{kind}: config.author.signingKey: signed commits are not supported"
            )
        author_name, author_email = identity_of(kind, a)

    checkouts: list[CheckoutPlan] = []
    seen_keys: set[str] = set()
    seen_branches: set[str] = set()
    items = cfg.items("checkout", required=True)
    if not items:
        raise ConfigRefused(f"{kind}: config.checkout must name at least one checkout")
    # Our clones and HOME live here; a checkout inside would let git-clear delete them.
    state = (ctx.work_dir / STATE_DIR).resolve()
    item: Config
    for i, item in enumerate(items):
        field_prefix = f"checkout[{i}]"
        rel_path: str = item.str("path")
        path = resolve_path(ctx, kind, rel_path, f"{field_prefix}.path")
        if path == ctx.work_dir.resolve() or path == state or state in path.parents:
            raise ConfigRefused(
                f"{kind}: config.{field_prefix}.path {rel_path!r} must be a directory of its own "
                f"inside the work directory, outside {STATE_DIR}/"
            )
        chosen = [
            name for name in ("branch", "tag", "commit") if item.has(name) and item.str(name) != ""
        ]
        from_freight: bool = item.bool("fromFreight") or item.has("fromOrigin")
        if from_freight:
            chosen.append("fromFreight")
        if len(chosen) > 1:
            raise ConfigRefused(
                f"{kind}: config.{field_prefix}: {' and '.join(chosen)} are mutually exclusive"
            )
        ck_kind: CheckoutKind = "default"
        ref = ""
        if "branch" in chosen:
            ck_kind, ref = "branch", item.str("branch")
        elif "tag" in chosen:
            ck_kind, ref = "tag", item.str("tag")
        elif "commit" in chosen:
            ck_kind, ref = "commit", item.str("commit")
        elif from_freight:
            ck_kind, ref = _freight_commit(ctx, kind, repo_url, item.map("fromOrigin"))
        if ck_kind in ("branch", "tag"):
            problem = ref_name_problem(ref)
            if problem:
                raise ConfigRefused(f"{kind}: config.{field_prefix}.{ck_kind} {problem}")
        if ck_kind == "commit" and not _HEX_RE.match(ref):
            raise ConfigRefused(
                f"{kind}: config.{field_prefix}.commit must be a commit ID (hex), got {ref!r}"
            )
        create: bool = item.bool("create")
        if create and ck_kind != "branch":
            raise ConfigRefused(f"{kind}: config.{field_prefix}.create needs a branch")
        if ck_kind == "branch":
            # git cannot check one branch out in two worktrees.
            if ref in seen_branches:
                raise ConfigRefused(
                    f"{kind}: config.{field_prefix}.branch {ref!r} is checked out twice; git "
                    "cannot check out one branch in two working trees"
                )
            seen_branches.add(ref)
        sparse: list[str] = []
        raw_entry: Any
        for j, raw_entry in enumerate(item.list("sparse")):
            if not isinstance(raw_entry, str):
                raise ConfigRefused(f"{kind}: config.{field_prefix}.sparse[{j}] must be a string")
            entry = raw_entry.rstrip("/")
            problem = sparse_dir_problem(entry)
            if problem:
                raise ConfigRefused(f"{kind}: config.{field_prefix}.sparse[{j}] {problem}")
            sparse.append(entry)
        key: str = item.str("as", "") or rel_path
        if key in seen_keys:
            raise ConfigRefused(f"{kind}: config.{field_prefix}: duplicate checkout key {key!r}")
        seen_keys.add(key)
        for other in checkouts:
            if other.path == path or other.path in path.parents or path in other.path.parents:
                raise ConfigRefused(
                    f"{kind}: config.{field_prefix}.path {rel_path!r} overlaps {other.rel_path!r}"
                )
        checkouts.append(CheckoutPlan(key, rel_path, path, ck_kind, ref, create, tuple(sparse)))
    return ClonePlan(
        repo_url=repo_url,
        insecure_skip_tls_verify=cfg.bool("insecureSkipTLSVerify"),
        blobless=cfg.bool("blobless") or all(c.sparse for c in checkouts),
        recurse_submodules=cfg.bool("recurseSubmodules"),
        author_name=author_name,
        author_email=author_email,
        checkouts=tuple(checkouts),
    )


def _clone_options(plan: ClonePlan, ctx: StepContext) -> list[str]:
    """:func:`promoter.ports.gitcmd.clone_options` for ``plan``."""
    return clone_options(
        plan.author_name or ctx.services.git.author_name,
        plan.author_email or ctx.services.git.author_email,
        insecure=plan.insecure_skip_tls_verify,
        blobless=plan.blobless,
    )


async def _ensure_clone(git: Git, plan: ClonePlan) -> tuple[Path, bool]:
    """The bare clone for ``plan.repo_url``: cloned now, or fetched if an earlier run made it."""
    ctx = git.ctx
    repo = repo_dir(ctx, plan.repo_url)
    repo.parent.mkdir(parents=True, exist_ok=True)
    if repo.is_dir():
        if plan.insecure_skip_tls_verify:
            await git.run("config", "http.sslVerify", "false", cwd=repo)
        # Tags come along by git's auto-following; an explicit tag refspec would make --prune
        # delete tags a git-tag step created but has not pushed yet.
        fetch = ("fetch", "-q", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*")
        await git.try_run("worktree", "prune", cwd=repo)
        fetched = await git.try_run(*fetch, cwd=repo)
        if not fetched.ok:
            # A process killed mid-checkout can leave a worktree whose HEAD names an object
            # that never arrived, and git then refuses to fetch ("bad object worktrees/..").
            # This step re-creates its checkouts anyway: drop the worktree bookkeeping and
            # try again; failing that, start over from a fresh clone below.
            await git.ctx.services.io.call(rmtree, repo / "worktrees", True)
            fetched = await git.try_run(*fetch, cwd=repo)
        if fetched.ok:
            return repo, False
        log.warning(
            "git-clone: the clone cache for %s is unusable (%s); cloning again",
            without_credentials(plan.repo_url),
            git.clean(fetched.stderr)[:200],
        )
        await git.ctx.services.io.call(rmtree, repo, True)
    args = [
        "clone", "--bare", "-q",
        # Remote-tracking refs (not the mirror-like refs/heads/* a bare clone has) so that a
        # later fetch never fights with a branch some worktree has checked out.
        "-c", "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*",
    ]  # fmt: skip
    args += _clone_options(plan, ctx)
    # Clone next to the final place and rename: a crash mid-clone never leaves a half repository
    # that a re-run would mistake for a finished one.
    tmp = repo.with_name(f"{repo.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        await git.run(
            *args, "--", plan.repo_url, str(tmp),
            cwd=repo.parent, what=f"could not clone {without_credentials(plan.repo_url)}",
        )  # fmt: skip
        tmp.rename(repo)
    finally:
        if tmp.exists():
            rmtree(tmp, ignore_errors=True)
    return repo, True


def _forget_worktree(repo: Path, path: Path) -> None:
    """Drop the cache's bookkeeping of any worktree registered at ``path``."""
    admin = repo / "worktrees"
    if not admin.is_dir():
        return
    target = (path / ".git").resolve()
    for entry in admin.iterdir():
        gitdir = entry / "gitdir"
        try:
            registered = Path(gitdir.read_text().strip()).resolve()
        except OSError:
            continue
        if registered == target:
            rmtree(entry, ignore_errors=True)


async def _remote_refs(git: Git, repo: Path) -> dict[str, str]:
    """refname -> commit (tags peeled) for origin's branches and all tags."""
    out = await git.run(
        "for-each-ref", "--format=%(objectname) %(*objectname) %(refname)",
        "refs/remotes/origin/", "refs/tags/", cwd=repo,
    )  # fmt: skip
    refs: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts) == 3:
            obj, peeled, name = parts
            refs[name] = peeled or obj
    return refs


async def _create_branch(git: Git, repo: Path, branch: str, repo_url: str) -> str:
    """Kargo's ``create: true``: push an empty orphan "Initial commit" so the branch exists.

    Pushed at clone time, as Kargo does, so that every later step (and a concurrent Promotion)
    sees one shared root instead of competing root commits.
    """
    empty_tree = await git.run("mktree", cwd=repo, stdin="")
    sha = await git.run("commit-tree", empty_tree, cwd=repo, stdin=INITIAL_COMMIT_MESSAGE + "\n")
    push = await git.try_run(
        "push", "--porcelain", "origin", f"{sha}:refs/heads/{branch}", cwd=repo
    )
    if push.ok:
        await git.run("update-ref", f"refs/remotes/origin/{branch}", sha, cwd=repo)
        return sha
    # Somebody created the branch since our fetch: use theirs.
    fetched = await git.try_run(
        "fetch", "-q", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}", cwd=repo
    )
    if not fetched.ok:
        raise git.error(
            f"could not create branch {branch!r} in {without_credentials(repo_url)}", push
        )
    return await git.run(
        "rev-parse", "--verify", "-q", f"refs/remotes/origin/{branch}^{{commit}}", cwd=repo
    )


async def _resolve_commit(
    git: Git, repo: Path, sha: str, repo_url: str, *, recorded_for: str | None = None
) -> str:
    found = await git.try_run("rev-parse", "--verify", "-q", f"{sha}^{{commit}}", cwd=repo)
    if found.ok:
        return found.stdout.strip()
    if len(sha) in (40, 64):
        # Not reachable from any branch or tag (e.g. a pull request head): ask for it directly.
        await git.try_run("fetch", "-q", "origin", sha, cwd=repo)
        found = await git.try_run("rev-parse", "--verify", "-q", f"{sha}^{{commit}}", cwd=repo)
        if found.ok:
            return found.stdout.strip()
    if recorded_for is not None:
        raise StepError(
            f"git-clone: commit {sha}, which checkout {recorded_for!r} had when this step first "
            f"ran, is no longer in {without_credentials(repo_url)} (its history was rewritten?), "
            "so "
            "the checkout cannot be made as it was",
            terminal=True,
        )
    raise StepError(
        f"git-clone: commit {sha} was not found in {without_credentials(repo_url)}", terminal=True
    )


async def _clear_checkout_path(git: Git, checkout: CheckoutPlan) -> None:
    """Make ``checkout.path`` fit for ``git worktree add``, resetting our own earlier checkout."""
    path = checkout.path
    if path.is_symlink():
        raise StepError(
            f"git-clone: checkout path {checkout.rel_path!r} is a symbolic link", terminal=True
        )
    if not path.exists():
        return
    if not path.is_dir():
        raise StepError(
            f"git-clone: checkout path {checkout.rel_path!r} exists and is not a directory",
            terminal=True,
        )
    owner = owning_repo(git.ctx, path)
    if owner is not None:
        # Re-entry: an earlier attempt (maybe in another process) checked out here.
        await git.ctx.services.io.call(rmtree, path)
        if CHECKOUT_REPO_RE.match(owner.name):
            # The checkout's own clone: nothing else uses it.
            await git.ctx.services.io.call(rmtree, owner, True)
        elif owner.is_dir():
            await git.run("worktree", "prune", cwd=owner)
        return
    if any(path.iterdir()):
        raise StepError(
            f"git-clone: checkout path {checkout.rel_path!r} already exists and is not empty",
            terminal=True,
        )


async def _default_branch(git: Git, repo: Path) -> str:
    head = await git.try_run("symbolic-ref", "-q", "HEAD", cwd=repo)
    name = head.stdout.strip().removeprefix("refs/heads/")
    if not head.ok or not name:
        raise StepError("git-clone: the repository has no default branch", terminal=True)
    return name


async def _checkout(
    git: Git,
    repo: Path,
    plan: ClonePlan,
    ck: CheckoutPlan,
    refs: dict[str, str],
    pinned: str | None = None,
    *,
    fresh: bool = False,
) -> str:
    """Add the worktree for one checkout and return the commit it has checked out.

    ``pinned`` (a replay): check out that commit, on the branch if the checkout names one,
    instead of resolving the ref; nothing is created on the remote.
    """
    branch: str | None = None
    if ck.kind in ("branch", "default"):
        branch = ck.ref if ck.kind == "branch" else await _default_branch(git, repo)
    if pinned is not None:
        sha = await _resolve_commit(git, repo, pinned, plan.repo_url, recorded_for=ck.key)
    elif branch is not None:
        tip = refs.get(f"refs/remotes/origin/{branch}")
        if tip is None:
            if not ck.create:
                raise StepError(
                    f"git-clone: branch {branch!r} does not exist in "
                    f"{without_credentials(plan.repo_url)}; set create: true to create it",
                    terminal=True,
                )
            tip = await _create_branch(git, repo, branch, plan.repo_url)
        sha = tip
    elif ck.kind == "tag":
        tagged = refs.get(f"refs/tags/{ck.ref}")
        if tagged is not None:
            sha = tagged
        else:
            await git.try_run(
                "fetch", "-q", "origin", f"+refs/tags/{ck.ref}:refs/tags/{ck.ref}", cwd=repo
            )
            found = await git.try_run(
                "rev-parse", "--verify", "-q", f"refs/tags/{ck.ref}^{{commit}}", cwd=repo
            )
            if not found.ok:
                raise StepError(
                    f"git-clone: tag {ck.ref!r} does not exist in "
                    f"{without_credentials(plan.repo_url)}",
                    terminal=True,
                )
            sha = found.stdout.strip()
    else:
        sha = await _resolve_commit(git, repo, ck.ref, plan.repo_url)

    await _clear_checkout_path(git, ck)
    ck.path.parent.mkdir(parents=True, exist_ok=True)
    if not fresh:
        # A checkout registered by an attempt that was killed before it finished still "has"
        # its branch checked out (and may be locked "initializing"); forget it so the branch
        # can be checked out here again. A clone made just now has no worktrees to forget.
        await git.ctx.services.io.call(_forget_worktree, repo, ck.path)
        await git.try_run("worktree", "prune", cwd=repo)
    args = ["worktree", "add", "-q"]
    if ck.sparse:
        args.append("--no-checkout")
    if branch is not None:
        # -B resets a local branch left by an earlier attempt to what the remote has now.
        args += ["--no-track", "-B", branch]
    else:
        args.append("--detach")
    await git.run(*args, str(ck.path), sha, cwd=repo, what=f"could not check out {ck.rel_path!r}")
    if ck.sparse:
        await git.run(
            "sparse-checkout", "set", "--cone", "--stdin",
            cwd=ck.path, stdin="\n".join(ck.sparse) + "\n",
        )  # fmt: skip
        await git.run("reset", "-q", "--hard", sha, cwd=ck.path)
    if plan.recurse_submodules:
        await git.run(
            "submodule", "update", "--init", "--recursive", "-q",
            cwd=ck.path, what=f"could not update submodules in {ck.rel_path!r}",
        )  # fmt: skip
    return sha


def _pinned_commits(ctx: StepContext, plan: ClonePlan) -> dict[str, str] | None:
    """In a replay, the commit each checkout had, from the recorded output; else None."""
    if ctx.replay is None:
        return None
    recorded = ctx.replay.output.get("commits")
    pinned: dict[str, str] = {}
    for ck in plan.checkouts:
        sha = recorded.get(ck.key) if isinstance(recorded, Mapping) else None
        if not isinstance(sha, str) or not _HEX_RE.match(sha):
            raise StepError(
                f"git-clone: the recorded output names no commit for checkout {ck.key!r}, so "
                "the checkout cannot be made as it was",
                terminal=True,
            )
        pinned[ck.key] = sha.lower()
    return pinned


def _clone_on_its_own(ctx: StepContext, plan: ClonePlan, pinned: dict[str, str] | None) -> bool:
    """Whether ``plan`` is one branch checked out and nothing more: then one ``git clone`` of
    that branch does the work of a bare clone, ``for-each-ref``, ``worktree prune`` and
    ``worktree add`` (a third of the time of a Promotion of clone, edit, commit and push).

    The bare clone shared by worktrees pays off only when it is reused: several checkouts,
    or another git-clone of the same repository in this work directory (which finds it). A
    replay checks out recorded commits and a sparse checkout or submodules need more than
    ``git clone`` does, so those take the shared clone too.
    """
    if pinned is not None or len(plan.checkouts) != 1 or plan.recurse_submodules:
        return False
    ck = plan.checkouts[0]
    if ck.kind != "branch" or ck.sparse:
        return False
    return not repo_dir(ctx, plan.repo_url).exists()


async def _clone_checkout(git: Git, plan: ClonePlan, ck: CheckoutPlan) -> str | None:
    """Clone ``ck``'s branch straight into its path, the git directory kept in our cache
    (``--separate-git-dir``), and return the commit checked out; None if the branch does not
    exist, for the shared clone to create it (``create: true``) or say so.

    Every run starts over: an earlier attempt's checkout and git directory are removed first,
    so a clone killed half-way is never taken for a finished one.
    """
    ctx = git.ctx
    gitdir = checkout_repo_dir(ctx, plan.repo_url, ck.path)
    await _clear_checkout_path(git, ck)
    if gitdir.exists():
        await git.ctx.services.io.call(rmtree, gitdir, True)
    gitdir.parent.mkdir(parents=True, exist_ok=True)
    options = _clone_options(plan, ctx)
    args = branch_clone_args(ck.ref, options, str(gitdir))
    cloned = await git.try_run(*args, "--", plan.repo_url, str(ck.path), cwd=gitdir.parent)
    if not cloned.ok:
        # git removes what it made when a clone fails; be sure, so the next try starts clean.
        await git.ctx.services.io.call(rmtree, gitdir, True)
        if "not found in upstream" not in cloned.stderr.lower():
            raise git.error(f"could not clone {without_credentials(plan.repo_url)}", cloned)
        # No such branch: the shared clone creates it (create: true) or says it is missing.
        return None
    found = head_from_files(ck.path)
    if found is not None:
        return found[0]
    return await git.run("rev-parse", "HEAD", cwd=ck.path)


async def git_clone(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-clone``: one bare clone of ``repoURL``, one worktree per ``checkout[]`` entry.

    Output: ``{"commits": {<as or path>: <sha checked out>}}`` (Kargo's output).
    """
    plan = plan_clone(ctx, config)
    pinned = _pinned_commits(ctx, plan)
    git = Git(ctx, "git-clone")
    await git.authenticate(plan.repo_url)
    if _clone_on_its_own(ctx, plan, pinned):
        ck = plan.checkouts[0]
        sha = await _clone_checkout(git, plan, ck)
        if sha is not None:
            return succeeded({"commits": {ck.key: sha}})
    repo, fresh = await _ensure_clone(git, plan)
    if not fresh and (plan.author_name or plan.author_email):
        if plan.author_name:
            await git.run("config", "user.name", plan.author_name, cwd=repo)
        if plan.author_email:
            await git.run("config", "user.email", plan.author_email, cwd=repo)
    refs = await _remote_refs(git, repo)
    commits: dict[str, str] = {}
    for ck in plan.checkouts:
        commits[ck.key] = await _checkout(
            git, repo, plan, ck, refs, pinned[ck.key] if pinned is not None else None, fresh=fresh
        )
    return succeeded({"commits": commits})


STEPS: dict[str, Step] = {
    # Local: it changes the Promotion's clone and worktrees only. `create: true` pushes an empty
    # branch the first time, never in a replay (the branch exists by then).
    "git-clone": FunctionStep(git_clone, effect=Effect.LOCAL),
}
