"""``git-commit``: commit everything in a worktree. Entered again after it committed it reports
that commit; in a replay it reuses the dates it recorded, so the same tree on the same parent is
the very same commit (see :mod:`promoter.steps.git`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.ports.gitcmd import (
    digest,
)
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Replaying,
    Step,
    StepContext,
    StepResult,
    StepStatus,
    skipped,
    succeeded,
)
from promoter.steps.git import (
    OBJECT_ID_RE,
    STATE_DIR,
    Git,
    commit_from_files,
    git_dirs,
    head_from_files,
    identity_of,
    note_made,
    open_worktree,
    recorded_date,
)

# What each git-commit step committed in this work directory, by step (see _commit_marker).
COMMITS_DIR = f"{STATE_DIR}/commits"
# What git-commit and git-tag record for a replay (StepResult.replay_data).
TREE_KEY = "tree"
AUTHOR_DATE_KEY = "authorDate"
COMMITTER_DATE_KEY = "committerDate"


def _commit_message(ctx: StepContext, cfg: Config) -> str:
    message = cfg.opt_str("message")
    from_steps = cfg.list("messageFromSteps")
    if message is not None and from_steps:
        raise ConfigRefused(
            "git-commit: config.message and config.messageFromSteps are mutually exclusive"
        )
    if message is None and from_steps:
        # Deprecated in Kargo; kept because it is one line: join the steps' commitMessage outputs.
        parts = []
        for alias in from_steps:
            output = ctx.state.get(str(alias))
            if isinstance(output, Mapping) and output.get("commitMessage"):
                parts.append(str(output["commitMessage"]))
        message = "\n\n".join(parts) if parts else None
    if message is None or not message.strip():
        raise ConfigRefused("git-commit: config.message is required")
    return message


async def git_commit(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-commit``: stage everything and commit; with nothing to commit, Skipped with HEAD.

    Output: ``{"commit": <sha>}``. Author: ``config.author`` > git-clone's ``author`` >
    GitSettings; the committer is always GitSettings' identity. Recorded for a replay: the
    commit's tree and its author and committer dates.
    """
    cfg = Config("git-commit", config)
    path = open_worktree(ctx, "git-commit", cfg)
    message = _commit_message(ctx, cfg)
    name, email = identity_of(
        "git-commit", Config("git-commit", cfg.map("author"), "config.author")
    )
    git = Git(ctx, "git-commit")
    if name:
        git.env["GIT_AUTHOR_NAME"] = name
    if email:
        git.env["GIT_AUTHOR_EMAIL"] = email
    # Replaying: the recorded dates make the same tree on the same parent the same commit ID.
    for variable, key in (
        ("GIT_AUTHOR_DATE", AUTHOR_DATE_KEY),
        ("GIT_COMMITTER_DATE", COMMITTER_DATE_KEY),
    ):
        date = recorded_date(ctx.replay, key)
        if date:
            git.env[variable] = date
    # HEAD before the commit, from git's files. Whether there is anything to commit is the
    # commit's own answer (exit code 1, "nothing to commit"), so no status runs before it.
    parent = await _head_commit(git, path) or "-"
    marker = _commit_marker(ctx)
    before = _read_marker(marker)
    if ctx.replay is None and before is None:
        # HEAD before the commit, noted first: a kill after the commit but before the step's
        # status is written leaves it behind, and the next attempt, finding nothing to commit,
        # knows the commit HEAD has moved on to is its own (see below).
        _write_marker(marker, parent)
    # `commit -a` stages what `add -A` would, but for files git does not track yet: one git
    # process instead of two when there are none (a step that only edits files).
    commit = ["commit", "-q", "--no-verify", "--cleanup=whitespace", "-F", "-"]
    if await git.ctx.services.io.call(_has_untracked, path):
        await git.run("add", "-A", cwd=path, what="could not stage the working tree")
    else:
        commit.insert(1, "-a")
    committed = await git.try_run(*commit, cwd=path, stdin=message)
    nothing = not committed.ok and "nothing to commit" in committed.stdout
    if not committed.ok and not nothing:
        raise git.error("git commit failed", committed)
    if nothing and ctx.replay is None and parent != "-" and before in (None, parent):
        # Kargo: nothing committed is Skipped (with HEAD as the output), so later steps can
        # say `if: ${{ status('commit') != 'Skipped' }}`.
        return skipped("nothing to commit", {"commit": parent})
    head = await _head_commit(git, path) or ""
    found = commit_from_files(path, head)
    if found is not None:
        tree, author_date, committer_date = found
    else:
        head, tree, author_date, committer_date = (
            await git.run("log", "-1", "--date=raw", "--format=%H%n%T%n%ad%n%cd", "HEAD", cwd=path)
        ).splitlines()
    data = {TREE_KEY: tree, AUTHOR_DATE_KEY: author_date, COMMITTER_DATE_KEY: committer_date}
    if ctx.replay is not None:
        replayed = await _replayed_commit(git, path, ctx.replay, head, tree)
        note_made(ctx, [str(replayed.output.get("commit") or "")])
        return replayed
    # Committed now, or by an attempt of this same step that was killed before its status was
    # written (HEAD moved on from what it noted): either way this step's commit.
    note_made(ctx, [head])
    return StepResult(StepStatus.SUCCEEDED, "", {"commit": head}, replay_data=data)


def _index_paths(index: bytes) -> set[bytes] | None:
    """The paths in a git index of version 2 or 3, or None for anything else (version 4's
    compressed paths, a split index, a file this reading does not recognise)."""
    if len(index) < 12 or index[:4] != b"DIRC":
        return None
    version = int.from_bytes(index[4:8], "big")
    count = int.from_bytes(index[8:12], "big")
    if version not in (2, 3):
        return None
    paths: set[bytes] = set()
    offset = 12
    for _ in range(count):
        flags_at = offset + 60
        if flags_at + 2 > len(index):
            return None
        flags = int.from_bytes(index[flags_at : flags_at + 2], "big")
        name_at = flags_at + 2 + (2 if version == 3 and flags & 0x4000 else 0)
        end = index.find(b"\0", name_at)
        if end < 0:
            return None
        paths.add(index[name_at:end])
        # Entries are NUL-padded to a multiple of eight bytes (at least one NUL).
        offset += (end - offset + 8) & ~7
    # Extensions follow, each a signature and a size, then the checksum.
    while offset + 8 <= len(index) - 20:
        if index[offset : offset + 4] == b"link":
            return None  # a split index: most entries live in another file
        offset += 8 + int.from_bytes(index[offset + 4 : offset + 8], "big")
    return paths


def _has_untracked(worktree: Path) -> bool:
    """Whether the worktree holds a file its index does not list (ignored ones included);
    True too when the index cannot be read plainly, so that the caller stages with
    ``add -A``, which decides for itself."""
    dirs = git_dirs(worktree)
    if dirs is None:
        return True
    try:
        tracked = _index_paths((dirs[0] / "index").read_bytes())
    except OSError:
        return True
    if tracked is None:
        return True
    # Directories that hold tracked paths (a submodule is a tracked path itself).
    parents: set[bytes] = set()
    for tracked_path in tracked:
        cut = tracked_path.rfind(b"/")
        while cut > 0 and tracked_path[:cut] not in parents:
            parents.add(tracked_path[:cut])
            cut = tracked_path.rfind(b"/", 0, cut)
    pending = [b""]
    while pending:
        prefix = pending.pop()
        try:
            with os.scandir(os.path.join(os.fsencode(worktree), prefix)) as entries:
                for entry in entries:
                    name = prefix + entry.name
                    if name == b".git":
                        continue
                    if name in tracked:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if name not in parents:
                            return True  # nothing tracked below: new files, or a repository
                        pending.append(name + b"/")
                    else:
                        return True
        except OSError:
            return True
    return False


def _commit_marker(ctx: StepContext) -> Path:
    """Where this git-commit step notes HEAD just before it commits, in the work directory.

    Nothing to commit on entering the step is either Kargo's Skipped or, when an earlier attempt
    of the same step committed and was killed before its status was written, that commit. The
    note tells them apart, and goes wherever the work directory goes (a rebuild clears it).
    """
    return ctx.work_dir / COMMITS_DIR / digest(f"{ctx.promotion}\n{ctx.alias}")


def _read_marker(marker: Path) -> str | None:
    try:
        return marker.read_text().strip() or None
    except OSError:
        return None


def _write_marker(marker: Path, head: str) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(head)


async def _replayed_commit(
    git: Git, path: Path, replaying: Replaying, head: str, tree: str
) -> StepResult:
    """Judge a replayed commit against the one recorded: the same, the same content, or refused.

    The same ID is the rule (same parent, tree, message, identity and dates). Otherwise the tree
    must be the recorded one (from the replay data, or from the recorded commit itself when the
    remote has it); then HEAD moves to the recorded commit when it exists (it was pushed, so
    its ID matters), and the new commit replaces it when it does not (it was never pushed, so
    no one has seen its ID).
    """
    recorded = str(replaying.output.get("commit") or "").lower()
    if head == recorded:
        return succeeded({"commit": head})
    known = (
        bool(OBJECT_ID_RE.match(recorded))
        and (await git.try_run("cat-file", "-e", f"{recorded}^{{commit}}", cwd=path)).ok
    )
    expected = replaying.data.get(TREE_KEY) or (
        await git.run("rev-parse", f"{recorded}^{{tree}}", cwd=path) if known else ""
    )
    if expected and expected != tree:
        raise StepError(
            f"git-commit: the rebuilt working tree (tree {tree[:12]}) is not the one it "
            f"committed before as {recorded[:12]} (tree {expected[:12]}); the files came out "
            "differently, and another commit is not what was recorded",
            terminal=True,
        )
    if known:
        await git.run("reset", "-q", "--soft", recorded, cwd=path)
        return succeeded({"commit": recorded}, message=f"{recorded[:12]} has the same tree")
    return StepResult(
        StepStatus.SUCCEEDED,
        message=f"committed again as {head[:12]}: {recorded[:12] or 'the recorded commit'} was "
        "never pushed",
        output={"commit": head},
        replaces_output=True,
    )


async def _head_commit(git: Git, path: Path) -> str | None:
    """The commit checked out at ``path``; None on a branch with no commit yet."""
    found = head_from_files(path)
    if found is not None:
        return found[0]
    result = await git.try_run("rev-parse", "--verify", "-q", "HEAD", cwd=path)
    head = result.stdout.strip()
    return head if result.ok and OBJECT_ID_RE.match(head) else None


STEPS: dict[str, Step] = {"git-commit": FunctionStep(git_commit, effect=Effect.LOCAL)}
