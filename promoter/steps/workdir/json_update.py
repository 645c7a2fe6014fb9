"""``json-update``: set values at key paths in a JSON file; an existing scalar is spliced into
the original text so the rest of the file (indentation, inline arrays, key spacing) is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promoter.errors import StepError
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
    KeyPart,
    apply_update,
    go_value,
    read_updates,
    updates_message,
)


def _json_message_value(value: Any) -> str:
    """Kargo's json-update prints strings with Go's ``%q`` and everything else with ``%v``."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else go_value(value)


# JSON: a tiny scanner that records where each value sits in the text, so an existing scalar can
# be replaced in place and the rest of the file (indentation, inline arrays, key spacing) kept.


@dataclass
class _JsonSpan:
    start: int
    end: int
    is_array: bool = False
    members: dict[str, _JsonSpan] = field(default_factory=dict)
    items: list[_JsonSpan] = field(default_factory=list)


_JSON_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON_DECODER = json.JSONDecoder()


def _skip_ws(text: str, pos: int) -> int:
    match = _JSON_WS.match(text, pos)
    return match.end() if match else pos


def _scan_json(text: str, pos: int) -> _JsonSpan:
    pos = _skip_ws(text, pos)
    char = text[pos]
    if char == '"':
        _, end = _JSON_DECODER.raw_decode(text, pos)
        return _JsonSpan(pos, end)
    if char in "{[":
        closing = "}" if char == "{" else "]"
        span = _JsonSpan(pos, pos, is_array=char == "[")
        cursor = _skip_ws(text, pos + 1)
        if text[cursor] == closing:
            span.end = cursor + 1
            return span
        while True:
            if char == "{":
                cursor = _skip_ws(text, cursor)
                key, cursor = _JSON_DECODER.raw_decode(text, cursor)
                cursor = _skip_ws(text, cursor)
                if text[cursor] != ":":
                    raise ValueError("expected ':'")
                child = _scan_json(text, cursor + 1)
                span.members[key] = child
            else:
                child = _scan_json(text, cursor)
                span.items.append(child)
            cursor = _skip_ws(text, child.end)
            if text[cursor] == ",":
                cursor += 1
                continue
            if text[cursor] == closing:
                span.end = cursor + 1
                return span
            raise ValueError(f"unexpected {text[cursor]!r}")
    match = _JSON_SCALAR.match(text, pos)
    if not match:
        raise ValueError(f"unexpected {char!r}")
    return _JsonSpan(pos, match.end())


def _locate_json(text: str, parts: Sequence[KeyPart]) -> _JsonSpan:
    span = _scan_json(text, 0)
    for part in parts:
        if span.is_array:
            span = span.items[int(part.name.strip("[]"))]
        else:
            span = span.members[part.name]
    return span


def _json_layout(text: str) -> dict[str, Any]:
    """Guess json.dumps arguments that reproduce a file's formatting when it must be rewritten."""
    indent_match = re.search(r"\n([ \t]+)[^\s]", text)
    if indent_match:
        return {"indent": indent_match.group(1), "separators": (",", ": ")}
    item_sep = ", " if re.search(r",[ ]", text) else ","
    key_sep = ": " if re.search(r'"[ ]*:[ ]', text) else ":"
    return {"indent": None, "separators": (item_sep, key_sep)}


def _json_update(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "json-update"
    cfg = Config(kind, config)
    raw_path = cfg.str("path")
    updates = read_updates(cfg)
    path = existing_file(ctx, kind, raw_path)
    for index, update in enumerate(updates):
        value = update.value
        if value is None or not isinstance(value, str | int | float | bool):
            # Kargo's json-update sets scalar values only (string, number, boolean); its schema
            # takes any value, so another one fails the edit (Errored), not the config.
            raise StepError(
                f"{kind}: config.updates[{index}].value for {update.key!r} must "
                f"be a string, number or boolean, got {type(value).__name__}",
                terminal=True,
            )
    original = read_text(path, kind, raw_path)
    try:
        # Kargo (sjson) takes an empty file for an empty object.
        data = json.loads(original) if original.strip() else {}
    except ValueError as err:
        raise StepError(f"{kind}: {raw_path!r} is not valid JSON: {err}", terminal=True) from None
    ascii_only = all(ord(char) < 128 for char in original)
    text = original
    rewrite = False
    for update in updates:
        outcome = apply_update(kind, data, update, dict, pad=True)
        data = outcome.root
        if not outcome.changed:
            continue
        if outcome.created or rewrite:
            rewrite = True
            continue
        try:
            span = _locate_json(text, update.parts)
        except (ValueError, IndexError, KeyError):
            rewrite = True
            continue
        text = (
            text[: span.start]
            + json.dumps(update.value, ensure_ascii=ascii_only)
            + text[span.end :]
        )
    if rewrite:
        text = json.dumps(data, ensure_ascii=ascii_only, **_json_layout(original))
        if original.endswith("\n"):
            text += "\n"
    changed = text != original
    if changed:
        write_text_atomic(path, text)
    lines = [f"{u.key}: {_json_message_value(u.value)}" for u in updates]
    return succeeded(
        {"commitMessage": updates_message(raw_path, lines)},
        message=f"updated {raw_path}" if changed else f"{raw_path} already up to date",
    )


json_update = in_thread(_json_update)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "json-update": FunctionStep(json_update, effect=Effect.LOCAL),
}
