"""``file-write``: write a file's contents, with Kargo's default permissions."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from promoter.errors import ConfigRefused
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.files import file_target, in_thread, write_text_atomic

_PERMISSIONS = re.compile(r"0[0-7]{3}")
_DEFAULT_PERMISSIONS = 0o600  # Kargo's default


def _file_permissions(cfg: Config) -> int:
    raw = cfg.opt_str("permissions")
    if raw is None:
        return _DEFAULT_PERMISSIONS
    if not _PERMISSIONS.fullmatch(raw):
        raise ConfigRefused(
            f"{cfg.kind}: config.permissions {raw!r} must be an octal mode like 0644"
        )
    mode = int(raw, 8)
    # Kargo's rules: another explicit step must make a file executable, and generated files
    # need not be world-writable.
    if mode & 0o111:
        raise ConfigRefused(
            f"{cfg.kind}: config.permissions {raw!r} must not include executable bits"
        )
    if mode & 0o002:
        raise ConfigRefused(f"{cfg.kind}: config.permissions {raw!r} must not be world-writable")
    return mode


def _file_write(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "file-write"
    cfg = Config(kind, config)
    raw = cfg.str("path")
    if "contents" not in cfg.data or not isinstance(cfg.data["contents"], str):
        got = type(cfg.data.get("contents")).__name__
        raise ConfigRefused(
            f"{kind}: config.contents is required and must be a string, got {got} "
            "(render structured data with asYAML() or asJSON())"
        )
    contents: str = cfg.data["contents"]
    overwrite = cfg.bool("overwrite")
    mode = _file_permissions(cfg)
    target = file_target(ctx, kind, raw, "path")
    if target.exists():
        # Same content counts as done: a retried step finds its own earlier write.
        if target.read_bytes() == contents.encode("utf-8"):
            return succeeded(message=f"{raw} already has these contents")
        if not overwrite:
            raise ConfigRefused(
                f"{kind}: config.path {raw!r} already exists; set overwrite: true to replace it"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, contents)
    os.chmod(target, mode)
    return succeeded(message=f"wrote {len(contents.encode('utf-8'))} bytes to {raw}")


file_write = in_thread(_file_write)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "file-write": FunctionStep(file_write, effect=Effect.LOCAL),
}
