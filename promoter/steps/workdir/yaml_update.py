"""``yaml-update``: set values at key paths in a YAML file, keeping its formatting. A scalar set
to a plain value is written in place of the old one (:mod:`promoter.steps.workdir.yamlsplice`);
other edits go through the round-trip editor (:mod:`promoter.steps.workdir.yamledit`, ruamel.yaml,
imported when first needed) in the file's own indentation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
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
from promoter.steps.workdir.files import existing_file, in_thread, read_text, write_text_atomic
from promoter.steps.workdir.updates import (
    Update,
    apply_update,
    go_value,
    read_updates,
    updates_message,
)
from promoter.steps.workdir.yamlsplice import splice

_GO_FLOAT = re.compile(
    r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE
)
_GO_BOOLS = frozenset(
    {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
)


def _looks_like_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _yaml_message_value(value: Any) -> str:
    """Kargo's ``QuoteIfNecessary``: quote strings a YAML reader would take for another type."""
    if isinstance(value, str):
        if _GO_FLOAT.fullmatch(value) or value in _GO_BOOLS or _looks_like_json(value):
            return json.dumps(value, ensure_ascii=False)
        return value
    return go_value(value)


def _yaml_update_round_trip(
    kind: str, path: Path, raw_path: str, text: str, updates: Sequence[Update]
) -> bool:
    """yaml-update through the round-trip editor; whether the file changed."""
    from promoter.steps.workdir import yamledit

    document = yamledit.RoundTripYaml(text, kind=kind, source=repr(raw_path))
    changed = False
    for update in updates:
        outcome = apply_update(
            kind, document.data, update, yamledit.new_map, keep_style=yamledit.keep_style
        )
        document.data = outcome.root
        changed = changed or outcome.changed
    if changed:
        new_text = document.text()
        changed = new_text != document.original
        if changed:
            write_text_atomic(path, new_text)
    return changed


def _yaml_update(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "yaml-update"
    cfg = Config(kind, config)
    raw_path = cfg.str("path")
    updates = read_updates(cfg)
    path = existing_file(ctx, kind, raw_path)
    text = read_text(path, kind, raw_path)
    spliced = splice(text, [(u.parts, u.value) for u in updates])
    if spliced is not None:
        changed = spliced != text
        if changed:
            write_text_atomic(path, spliced)
    else:
        changed = _yaml_update_round_trip(kind, path, raw_path, text, updates)
    # Kargo always reports commitMessage when there are updates; later steps reference it.
    message = updates_message(
        raw_path, [f"{u.key}: {_yaml_message_value(u.value)}" for u in updates]
    )
    return succeeded(
        {"commitMessage": message},
        message=f"updated {raw_path}" if changed else f"{raw_path} already up to date",
    )


yaml_update = in_thread(_yaml_update)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "yaml-update": FunctionStep(yaml_update, effect=Effect.LOCAL),
}
