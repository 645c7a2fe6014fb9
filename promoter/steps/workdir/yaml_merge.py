"""``yaml-merge``: merge YAML files in order into one."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
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
from promoter.steps.workdir.files import (
    file_target,
    in_thread,
    one_line,
    read_text,
    write_text_atomic,
)


def _merge_message(in_paths: Sequence[str], out_path: str) -> str:
    """Kargo's yaml-merge commit message fragment (empty when no file was merged)."""
    if not in_paths:
        return ""
    if len(in_paths) == 1:
        return f"Wrote {in_paths[0]} to {out_path}"
    return f"Merged {len(in_paths)} YAML files to {out_path}" + "".join(
        f"\n- {path}" for path in in_paths
    )


def _yaml_merge(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "yaml-merge"
    cfg = Config(kind, config)
    cfg.only(("inFiles", "outFile", "ignoreMissingFiles"))
    in_files = cfg.list("inFiles", required=True)
    if not in_files:
        raise ConfigRefused(f"{kind}: config.inFiles must list at least one file")
    for index, item in enumerate(in_files):
        if not isinstance(item, str):
            raise ConfigRefused(
                f"{kind}: config.inFiles[{index}] must be a string, got {type(item).__name__}"
            )
    out_raw = cfg.str("outFile")
    if not out_raw:
        raise ConfigRefused(f"{kind}: config.outFile must be a non-empty path")
    ignore_missing = cfg.bool("ignoreMissingFiles")
    from promoter.steps.workdir import yamledit

    merged: list[str] = []
    result: Any = None
    for index, raw in enumerate(in_files):
        path = ctx.path(raw, field_name=f"inFiles[{index}]")
        if not path.exists():
            if ignore_missing:
                continue
            raise StepError(f"{kind}: input file {raw!r} not found", terminal=True)
        if not path.is_file():
            raise StepError(f"{kind}: input file {raw!r} is not a regular file", terminal=True)
        text = read_text(path, kind, raw, f"inFiles[{index}]")
        try:
            document = yamledit.rt_yaml().load(text)
        except yamledit.YAMLError as err:
            raise StepError(
                f"{kind}: error merging YAML files: error reading input file {raw}: "
                f"{one_line(err)}",
                terminal=True,
            ) from None
        if isinstance(document, dict) and None in document:
            # ruamel reads ``:`` as {null: null}; kyaml, and so Kargo, refuses it.
            raise StepError(
                f"{kind}: error merging YAML files: error reading input file {raw}: "
                "a map key is empty",
                terminal=True,
            )
        merged.append(raw)
        if document is None:
            continue  # an empty file (or only comments) adds nothing, as in Kargo
        result = document if result is None else yamledit.merge(result, document)
    target = file_target(ctx, kind, out_raw, "outFile")
    target.parent.mkdir(parents=True, exist_ok=True)
    text = ""
    if result is not None:
        # Two-space maps and unindented list dashes: kyaml's layout, which Kargo writes.
        buffer = io.StringIO()
        yamledit.rt_yaml().dump(result, buffer)
        text = buffer.getvalue()
    write_text_atomic(target, text)
    message = _merge_message(merged, out_raw)
    return succeeded({"commitMessage": message} if message else {}, message=f"wrote {out_raw}")


yaml_merge = in_thread(_yaml_merge)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "yaml-merge": FunctionStep(yaml_merge, effect=Effect.LOCAL),
}
