"""``git-clear``: empty a worktree except for its ``.git``, so the next steps write it afresh."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.git import open_worktree, rmtree


def _remove_all_but_git(path: Path) -> None:
    for entry in path.iterdir():
        if entry.name == ".git":
            continue
        # Symlinks are unlinked, never followed: a link may point outside the work directory.
        if entry.is_dir() and not entry.is_symlink():
            rmtree(entry)
        else:
            entry.unlink()


async def git_clear(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """``git-clear``: delete everything in a worktree except ``.git`` (staged by git-commit)."""
    path = open_worktree(ctx, "git-clear", Config("git-clear", config))
    await ctx.services.io.call(_remove_all_but_git, path)
    return succeeded()


STEPS: dict[str, Step] = {"git-clear": FunctionStep(git_clear, effect=Effect.LOCAL)}
