"""Kargo's ``toml-parse`` and ``toml-update`` steps, on TOML files in the work directory.

``toml-parse`` is ``yaml-parse`` for TOML: ``path`` and ``outputs[]{name, fromExpression}``,
evaluated against the document. ``toml-update`` follows Kargo's (pkg/toml/toml.go): it only sets
values that already exist and are scalars (a string, number, boolean or date) - a key that is
missing, or names a table or an array, is an error - and leaves every other byte of the file as
it was. Keys use the same syntax as ``yaml-update`` (``a.b.0.c``, ``\\.`` for a literal dot);
array indexes reach into arrays and arrays of tables. Values are written as Kargo's TOML library
writes them: strings as literal strings (``'1.2.3'``) unless they hold a quote or a control
character. Output: ``commitMessage``.

tomlkit reads and writes the file: it keeps comments, order and formatting, so replacing one
value changes only that value's text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import tomlkit
from tomlkit import items as toml_items
from tomlkit.container import Container
from tomlkit.exceptions import TOMLKitError

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
    existing_file,
    one_line,
    read_text,
    write_text_atomic,
)
from promoter.steps.workdir.parse import make_parse_step
from promoter.steps.workdir.updates import parse_key

PARSE_KIND = "toml-parse"
UPDATE_KIND = "toml-update"


def _plain(value: Any) -> Any:
    """Dates and times as TOML writes them: outputs are recorded as JSON in the status."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return value


def _load_toml(text: str, raw_path: str) -> Any:
    try:
        return _plain(tomlkit.parse(text).unwrap())
    except TOMLKitError as err:
        raise StepError(
            f"{PARSE_KIND}: could not parse TOML file {raw_path!r}: {one_line(err)}",
            terminal=True,
        ) from None


toml_parse = make_parse_step(PARSE_KIND, _load_toml)


# --------------------------------------------------------------------------------------------
# toml-update
# --------------------------------------------------------------------------------------------

_SCALARS = (
    toml_items.String,
    toml_items.Integer,
    toml_items.Float,
    toml_items.Bool,
    toml_items.DateTime,
    toml_items.Date,
    toml_items.Time,
)
# The names Kargo's TOML parser gives what a key addresses when it is not a scalar.
_NODE_KINDS: tuple[tuple[type, str], ...] = (
    (toml_items.AoT, "ArrayTable"),
    (toml_items.InlineTable, "InlineTable"),
    (toml_items.Table, "Table"),
    (toml_items.Array, "Array"),
)


def format_value(value: Any) -> toml_items.Item:
    """A config value as Kargo's TOML library (go-toml v2) writes it.

    Raises ValueError for anything but a string, number or boolean.
    """
    if isinstance(value, str):
        # go-toml v2 writes a literal string when it can, a basic (escaped) one otherwise.
        literal = "'" not in value and not any(ord(c) < 0x20 or c == "\x7f" for c in value)
        return tomlkit.string(value, literal=literal)
    if isinstance(value, bool | int | float):
        return tomlkit.item(value)
    raise ValueError("value is not a TOML scalar type")


def format_value_string(value: Any) -> str:
    """Kargo's ``FormatValueString``: the TOML text of a value, for commit messages."""
    try:
        return format_value(value).as_string()
    except ValueError:
        return str(value)


def _child(node: Any, name: str, index_ok: bool) -> Any:
    """The item ``name`` addresses inside ``node``, or None."""
    if isinstance(node, Container | toml_items.Table | toml_items.InlineTable):
        container = node if isinstance(node, Container) else node.value
        return container.item(name) if name in container else None
    if isinstance(node, toml_items.Array | toml_items.AoT) and index_ok and name.isdigit():
        index = int(name)
        body = node.body if isinstance(node, toml_items.AoT) else list(node)
        return body[index] if index < len(body) else None
    return None


def _set_value(document: tomlkit.TOMLDocument, key: str, value: Any) -> None:
    """Replace the scalar ``key`` addresses; raises ValueError saying why it cannot."""
    try:
        parts = parse_key(key)
    except ValueError as err:
        raise ValueError(f"error splitting key {key}: the key {err}") from None
    parent: Any = document
    for part in parts[:-1]:
        parent = _child(parent, part.name, not part.map_key)
        if parent is None:
            raise ValueError(f"error finding key {key}: key path not found")
    last = parts[-1]
    old = _child(parent, last.name, not last.map_key)
    if old is None:
        raise ValueError(f"error finding key {key}: key path not found")
    if not isinstance(old, _SCALARS):
        kind = next((name for cls, name in _NODE_KINDS if isinstance(old, cls)), "a non-scalar")
        raise ValueError(
            f"error finding key {key}: key path addresses {kind} instead of a scalar node"
        )
    try:
        new = format_value(value)
    except ValueError as err:
        raise ValueError(f"error formatting value for key {key}: {err}") from None
    # The comment after the value, and the spacing around it, belong to the line, not the value.
    new.trivia.indent = old.trivia.indent
    new.trivia.comment_ws = old.trivia.comment_ws
    new.trivia.comment = old.trivia.comment
    new.trivia.trail = old.trivia.trail
    if isinstance(parent, toml_items.Array):
        parent[int(last.name)] = new
    else:
        parent[last.name] = new


def set_values(text: str, updates: list[tuple[str, Any]]) -> str:
    """``text`` with each ``(key, value)`` set; raises ValueError as Kargo's SetValuesInBytes
    does (a missing key, a non-scalar, a value that is not a scalar, text that is not TOML)."""
    try:
        document = tomlkit.parse(text)
    except TOMLKitError as err:
        raise ValueError(f"error parsing input: {one_line(err)}") from None
    for key, value in updates:
        _set_value(document, key, value)
    return document.as_string()


def _update_message(path: str, updates: list[tuple[str, Any]]) -> str:
    return f"Updated {path}\n" + "".join(
        f"\n- {key}: {format_value_string(value)}" for key, value in updates
    )


def _toml_update(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    cfg = Config(UPDATE_KIND, config)
    cfg.only(("path", "updates"))
    raw = cfg.str("path")
    if not raw:
        raise ConfigRefused(f"{UPDATE_KIND}: config.path must be a non-empty path")
    items = cfg.items("updates", required=True)
    if not items:
        raise ConfigRefused(f"{UPDATE_KIND}: config.updates must list at least one update")
    updates: list[tuple[str, Any]] = []
    for item in items:
        item.only(("key", "value"))
        key = item.str("key")
        if not key:
            raise ConfigRefused(f"{UPDATE_KIND}: {item.prefix}.key must not be empty")
        if "value" not in item.data:
            raise ConfigRefused(f"{UPDATE_KIND}: {item.prefix}.value is required")
        updates.append((key, item.data["value"]))
    path = existing_file(ctx, UPDATE_KIND, raw)
    text = read_text(path, UPDATE_KIND, raw)
    try:
        updated = set_values(text, updates)
    except ValueError as err:
        raise StepError(f"{UPDATE_KIND}: TOML file update failed: {err}", terminal=True) from None
    if updated != text:
        write_text_atomic(path, updated)
    return succeeded({"commitMessage": _update_message(raw, updates)}, message=f"updated {raw}")


async def toml_update(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """Run ``toml-update`` (through ctx.services.io: file I/O, a worker thread in the server)."""
    return await ctx.services.io.call(_toml_update, ctx, config)


# Both read (and toml-update writes) the work directory only: a replay runs them again.
STEPS: dict[str, Step] = {
    PARSE_KIND: FunctionStep(toml_parse, effect=Effect.LOCAL),
    UPDATE_KIND: FunctionStep(toml_update, effect=Effect.LOCAL),
}
