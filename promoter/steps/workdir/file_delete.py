"""``delete``: remove a file or a directory tree inside the work directory."""

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
from promoter.steps.workdir.files import in_thread, leaf_path


def _remove(path: Path) -> None:
    import shutil  # see _create_beside

    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass  # already gone with a parent directory listed earlier


def _delete(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    import glob

    kind = "delete"
    cfg = Config(kind, config)
    has_path, listed = cfg.has("path"), cfg.list("paths")
    if has_path and listed:
        raise ConfigRefused(f"{kind}: config.path and config.paths are mutually exclusive")
    if not has_path and not listed:
        raise ConfigRefused(f"{kind}: one of config.path or config.paths is required")
    entries: list[tuple[str, str]] = []
    if has_path:
        entries.append(("path", cfg.str("path")))
    for index, raw in enumerate(listed):
        if not isinstance(raw, str) or not raw:
            raise ConfigRefused(f"{kind}: config.paths[{index}] must be a non-empty path")
        entries.append((f"paths[{index}]", raw))
    globs, strict = cfg.bool("pathsAreGlobs"), cfg.bool("strict")
    root = ctx.work_dir.resolve()
    targets: list[Path] = []
    for field_name, raw in entries:
        if globs:
            if os.path.isabs(raw) or ".." in raw.replace("\\", "/").split("/"):
                raise ConfigRefused(
                    f"{kind}: config.{field_name} {raw!r} must stay inside the work directory "
                    "(no absolute paths, no '..')"
                )
            pattern = raw[2:] if raw.startswith("./") else raw
            matches = sorted(glob.glob(pattern, root_dir=root, recursive=True, include_hidden=True))
            if not matches and strict:
                raise StepError(
                    f"{kind}: config.{field_name} {raw!r} matches nothing", terminal=True
                )
            found = [leaf_path(ctx, match.rstrip("/") or ".", field_name) for match in matches]
        else:
            leaf = leaf_path(ctx, raw, field_name)
            exists = os.path.lexists(leaf)
            if not exists and strict:
                raise StepError(
                    f"{kind}: config.{field_name} {raw!r} does not exist", terminal=True
                )
            found = [leaf] if exists else []
        for path in found:
            if path == root:
                raise ConfigRefused(
                    f"{kind}: config.{field_name} {raw!r} is the work directory itself; "
                    "refusing to delete it"
                )
            if path not in targets:
                targets.append(path)
    for path in targets:
        _remove(path)
    return succeeded(message=f"deleted {len(targets)} path(s)")


delete = in_thread(_delete)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "delete": FunctionStep(delete, effect=Effect.LOCAL),
}
