"""The key syntax and the ``updates`` list that ``yaml-update`` and ``json-update`` share (and
``toml-update`` uses the key syntax of): split a key, set a value at its path, describe the change
in a commit-message line as Kargo does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import (
    Config,
)
from promoter.steps.workdir.files import scalar_text
from promoter.steps.workdir.yamlsplice import same_value

# --------------------------------------------------------------------------------------------
# Key syntax shared by yaml-update and json-update
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyPart:
    """One step of an update key. ``map_key`` marks ``:0``: a numeric-looking map key."""

    name: str
    map_key: bool = False


def parse_key(key: str) -> list[KeyPart]:
    """Split an update key the way Kargo does (tidwall/sjson path syntax, setters subset).

    Dots separate parts; ``\\.`` is a literal dot, ``\\:`` a literal colon and ``\\\\`` a literal
    backslash; a part starting with ``:`` is always a map key even if it looks like a list index.
    Raises ValueError with a message that completes "the key ...".
    """
    key = key.strip()
    if not key:
        raise ValueError("is empty")
    parts: list[KeyPart] = []
    current: list[str] = []
    map_key = False
    escaped = False
    for char in key:
        if escaped:
            if char not in ".:\\":
                raise ValueError(
                    f"has an invalid escape '\\{char}' (only '\\.', '\\:' and '\\\\' are allowed)"
                )
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ".":
            if not current:
                raise ValueError("has an empty part")
            parts.append(KeyPart("".join(current), map_key))
            current, map_key = [], False
        elif char == ":":
            if current or map_key:
                raise ValueError("has a ':' inside a part (escape a literal colon as '\\:')")
            map_key = True
        else:
            current.append(char)
    if escaped:
        raise ValueError("ends with a lone backslash")
    if not current:
        raise ValueError("has an empty part")
    parts.append(KeyPart("".join(current), map_key))
    return parts


_INDEX = re.compile(r"-?\d+|\[-?\d+\]")


def _list_index(part: KeyPart, length: int, where: str, *, pad: bool = False) -> int:
    """Index into a list; ``-1`` (or ``len``) appends, as in Kargo and sjson.

    With ``pad`` (json-update), an index past the end is allowed: the list is padded with nulls
    up to it, as sjson does (``friends.4`` on ``["Andy","Carol"]`` gives
    ``["Andy","Carol",null,null,"Sara"]``).
    """
    if part.map_key or not _INDEX.fullmatch(part.name):
        raise ValueError(f"{where} is a list, but {part.name!r} is not a list index")
    index = int(part.name.strip("[]"))
    if index < -1:
        raise ValueError(f"{where}: negative index {index} (only -1, append, is allowed)")
    if index > length and not pad:
        raise ValueError(f"{where}: index {index} is past the end of a list of {length} items")
    return length if index == -1 else index


def _find_map_key(node: Mapping[Any, Any], name: str) -> tuple[bool, Any]:
    if name in node:
        return True, name
    # YAML keys need not be strings (``1: x``, ``true: y``); Kargo matches on the key's text.
    for key in node:
        if not isinstance(key, str) and scalar_text(key) == name:
            return True, key
    return False, None


def as_given(old: Any, new: Any) -> Any:
    """The default of ``keep_style``: the new value as it is (JSON has no styles to keep)."""
    return new


@dataclass
class SetOutcome:
    root: Any
    changed: bool
    # True when a map key or list item was added: JSON then cannot be edited by splicing.
    created: bool


def _set_path(
    root: Any,
    parts: Sequence[KeyPart],
    value: Any,
    new_map: Callable[[], Any],
    *,
    pad: bool = False,
    keep_style: Callable[[Any, Any], Any] = as_given,
) -> SetOutcome:
    """Set ``value`` at ``parts`` inside nested maps and lists, creating missing maps.

    Like Kargo, a scalar (or null) met on the way is replaced by a map.
    """
    if not isinstance(root, dict | list):
        root = new_map()
    node: Any = root
    created = False
    walked: list[str] = []
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        where = ".".join(walked) or "the document root"
        walked.append(part.name)
        if isinstance(node, dict):
            found, key = _find_map_key(node, part.name)
            if not found:
                node[part.name] = value if last else new_map()
                created = True
                if last:
                    return SetOutcome(root, True, True)
                node = node[part.name]
                continue
            if last:
                old = node[key]
                if same_value(old, value):
                    return SetOutcome(root, False, created)
                node[key] = keep_style(old, value)
                return SetOutcome(root, True, created)
            if not isinstance(node[key], dict | list):
                node[key] = new_map()
                created = True
            node = node[key]
        else:
            index = _list_index(part, len(node), where, pad=pad)
            if index >= len(node):
                node.extend([None] * (index - len(node)))
                node.append(value if last else new_map())
                created = True
                if last:
                    return SetOutcome(root, True, True)
                node = node[index]
                continue
            if last:
                old = node[index]
                if same_value(old, value):
                    return SetOutcome(root, False, created)
                node[index] = keep_style(old, value)
                return SetOutcome(root, True, created)
            if not isinstance(node[index], dict | list):
                node[index] = new_map()
                created = True
            node = node[index]
    raise AssertionError("parse_key never returns an empty key")


def go_value(value: Any) -> str:
    """Go's ``%v`` for the JSON-like values a rendered config holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def updates_message(path: str, lines: Sequence[str]) -> str:
    return f"Updated {path}\n" + "".join(f"\n- {line}" for line in lines)


# --------------------------------------------------------------------------------------------
# The updates list
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Update:
    key: str
    parts: list[KeyPart]
    value: Any
    where: str


def read_updates(cfg: Config) -> list[Update]:
    """The updates of yaml-update and json-update, their keys split.

    What Kargo's JSON schema checks (a key and a value in every update, a non-empty key) is a
    refused config, ``Failed``, and is checked for every update first, as the schema is. A key
    that then cannot be split (a bad escape, a stray colon, an empty part such as a trailing
    dot) ends the step ``Errored``, as Kargo's ``SplitKey`` failing inside the edit does.
    """
    items = cfg.items("updates", required=True)
    if not items:
        raise ConfigRefused(f"{cfg.kind}: config.updates must list at least one update")
    raw: list[tuple[str, Any, str]] = []
    for index, item in enumerate(items):
        key = item.str("key")
        if not key:
            raise ConfigRefused(f"{cfg.kind}: config.updates[{index}].key must not be empty")
        if "value" not in item.data:
            raise ConfigRefused(f"{cfg.kind}: config.updates[{index}].value is required")
        raw.append((key, item.data["value"], f"config.updates[{index}].key"))
    updates = []
    for key, value, where in raw:
        try:
            parts = parse_key(key)
        except ValueError as err:
            raise StepError(f"{cfg.kind}: {where} {key!r} {err}", terminal=True) from None
        updates.append(Update(key, parts, value, where))
    return updates


def apply_update(
    kind: str,
    root: Any,
    update: Update,
    new_map: Callable[[], Any],
    *,
    pad: bool = False,
    keep_style: Callable[[Any, Any], Any] = as_given,
) -> SetOutcome:
    try:
        return _set_path(root, update.parts, update.value, new_map, pad=pad, keep_style=keep_style)
    except ValueError as err:
        raise StepError(f"{kind}: {update.where} {update.key!r}: {err}", terminal=True) from None
