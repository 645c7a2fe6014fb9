"""``copy``: copy a file or a directory tree inside the work directory, minus what ``ignore``
says."""

from __future__ import annotations

import os
from collections.abc import Mapping
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
    succeeded,
)
from promoter.steps.workdir.files import ensure_inside, in_thread
from promoter.steps.workdir.ignore import IgnoreRules


def _copy(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    import shutil  # here, not at the top: see _create_beside

    kind = "copy"
    cfg = Config(kind, config)
    in_raw, out_raw = cfg.str("inPath"), cfg.str("outPath")
    rules = IgnoreRules(cfg.str("ignore", ""))
    source = ctx.path(in_raw, field_name="inPath")
    target = ctx.path(out_raw, field_name="outPath")
    if not source.exists():
        raise StepError(f"{kind}: config.inPath {in_raw!r} does not exist", terminal=True)
    if source.is_file():
        if rules.ignored(source.name, is_dir=False):
            return succeeded(message=f"{in_raw} is ignored; nothing copied")
        if target.is_dir():
            raise StepError(
                f"{kind}: config.outPath {out_raw!r} is a directory; name the destination file",
                terminal=True,
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return succeeded(message=f"copied {in_raw} to {out_raw}")
    if target == source or source in target.parents:
        raise ConfigRefused(
            f"{kind}: config.outPath {out_raw!r} is inside config.inPath {in_raw!r}"
        )
    if target.exists() and not target.is_dir():
        raise StepError(
            f"{kind}: config.outPath {out_raw!r} is a file, but inPath is a directory",
            terminal=True,
        )
    copied = 0
    for current, dirnames, filenames in os.walk(source):
        base = Path(current)
        relative_dir = base.relative_to(source)
        destination_dir = target / relative_dir
        destination_dir.mkdir(parents=True, exist_ok=True)
        # A symlink already in the destination tree must not carry the copy out of the work dir.
        ensure_inside(ctx, destination_dir, kind, "outPath")
        kept = []
        for name in sorted(dirnames):
            relative = (relative_dir / name).as_posix()
            # Symlinks in the source are skipped, as in Kargo.
            if (base / name).is_symlink() or rules.ignored(relative, is_dir=True):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            relative = (relative_dir / name).as_posix()
            if (base / name).is_symlink() or rules.ignored(relative, is_dir=False):
                continue
            destination = destination_dir / name
            if destination.is_symlink():
                ensure_inside(ctx, destination, kind, "outPath")
            shutil.copy(base / name, destination)
            copied += 1
    return succeeded(message=f"copied {copied} file(s) from {in_raw} to {out_raw}")


copy = in_thread(_copy)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "copy": FunctionStep(copy, effect=Effect.LOCAL),
}
