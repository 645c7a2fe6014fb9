"""yaml-update's quick path: write new scalar values into the file's text where the old ones are.

The usual update (an image tag, a chart version: an existing scalar set to a short plain
string or a number) needs no YAML editor: PyYAML's composer says where each scalar sits in the
text, and the new value goes in its place, byte for byte the rest of the file. The round-trip
editor (:class:`promoter.steps.workdir.yamledit.RoundTripYaml`, on ruamel.yaml) loads, detects the
layout and dumps the whole document, and its library takes longer to import than git takes to
commit.

:func:`splice` gives the edited text only where the result is, by construction, the text the
round-trip editor writes (``tests/unit/steps/test_yaml_splice.py`` compares the two on generated
documents); everything else returns None and takes the editor: a key or list item to create,
a target that is not a one-line plain or quoted scalar, anchors, aliases, tags, merge keys, more
than one document, non-ASCII text, or a value whose YAML form is not plain and unambiguous under
both YAML 1.1 and 1.2.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import yaml

_STR_TAG = "tag:yaml.org,2002:str"
# Text a plain scalar may be written as in any context (block or flow): letters, digits and
# . _ - /, starting with a letter or digit.
_PLAIN_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
# What YAML 1.2 (ruamel.yaml's resolver, with its YAML 1.1 leniencies) reads as something other
# than a string; PyYAML's YAML 1.1 resolver is asked as well.
_YAML12_NOT_STR = re.compile(
    r"[-+]?(?:0b[01_]+|0o?[0-7_]+|[0-9_]+|0x[0-9a-fA-F_]+)"
    r"|[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
    r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|~|null|Null|NULL|true|True|TRUE|false|False|FALSE"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}.*"
)
# An old plain scalar whose value both resolvers read the same way: a decimal integer or a
# boolean in its canonical spelling.
_CANONICAL_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_RESOLVER = yaml.resolver.Resolver()
# What may stand before a scalar on its line for the editor to write it in the same place:
# indentation, list dashes and a key, each followed by exactly one space (the editor's layout).
_PREFIX = re.compile(
    r" *(?:- )*(?:[^\s#\[\]{},]|[^\s#\[\]{},][^#\[\]{},]*[^\s#\[\]{},]): | *(?:- )+"
)


class _KeyPart(Protocol):
    """A step of an update key (promoter.steps.workdir.updates.KeyPart)."""

    @property
    def name(self) -> str: ...

    @property
    def map_key(self) -> bool: ...


def _plain_str(text: str) -> bool:
    """Whether ``text`` written plain is read back as this string by YAML 1.1 and 1.2 alike."""
    return (
        _PLAIN_SAFE.fullmatch(text) is not None
        and _YAML12_NOT_STR.fullmatch(text) is None
        and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG  # type: ignore[no-untyped-call]
    )


def _find(node: yaml.Node, parts: Sequence[_KeyPart]) -> yaml.ScalarNode | None:
    """The existing scalar ``parts`` names, or None when the editor must do it."""
    for part in parts:
        if isinstance(node, yaml.MappingNode):
            found = [
                value
                for key, value in node.value
                if isinstance(key, yaml.ScalarNode) and key.value == part.name
            ]
            # Keys of other types the editor matches by their text (``1:``, ``true:``): only
            # when every candidate is a plain string key is the match the editor's.
            if len(found) != 1 or any(
                key.tag != _STR_TAG for key, _ in node.value if isinstance(key, yaml.ScalarNode)
            ):
                return None
            node = found[0]
        elif isinstance(node, yaml.SequenceNode):
            if part.map_key or not part.name.isdigit() or int(part.name) >= len(node.value):
                return None
            node = node.value[int(part.name)]
        else:
            return None
    return node if isinstance(node, yaml.ScalarNode) else None


def _old_value(node: yaml.ScalarNode) -> Any:
    """The old scalar's value as both resolvers read it; raises LookupError when they might
    not agree (then the editor decides whether the value changed)."""
    if node.style in ("'", '"'):
        return node.value
    if node.style:  # a block scalar (plain is None, or "" from the C composer)
        raise LookupError(node.style)
    text = node.value
    if text in ("true", "false"):
        return text == "true"
    if _CANONICAL_INT.fullmatch(text):
        return int(text)
    if _plain_str(text):
        return text
    raise LookupError(text)


def same_value(old: Any, new: Any) -> bool:
    """Whether an update leaves a value as it was: the rule of both YAML editors, json-update
    and kustomize-set-image (a string is never the number it spells, nor a boolean a number)."""
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool) and old == new
    if isinstance(old, str) or isinstance(new, str):
        return isinstance(old, str) and isinstance(new, str) and str(old) == str(new)
    if isinstance(old, int | float) and isinstance(new, int | float):
        return isinstance(old, int) == isinstance(new, int) and old == new
    if old is None or new is None:
        return old is None and new is None
    return bool(old == new)


def _written(node: yaml.ScalarNode, value: Any) -> str | None:
    """``value`` as the editor writes it in place of ``node``, or None when this path cannot
    be sure."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        return None
    # A quoted old value keeps its quotes (the editor's _keep_style); a plain one stays plain.
    if not value.isascii() or not value.isprintable():
        return None
    if node.style == "'":
        return "'" + value.replace("'", "''") + "'"
    if node.style == '"':
        return None if '"' in value or "\\" in value else f'"{value}"'
    return value if _plain_str(value) else None


def _placed(text: str, start: int, end: int) -> tuple[int, int | None] | None:
    """Whether the scalar at ``start:end`` sits on its line as the editor writes it: after a
    key or dash and one space, followed by the line's end or a comment. Returns where the
    comment starts and its column (None without one)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if not _PREFIX.fullmatch(text, line_start, start):
        return None
    rest = text[end:line_end]
    if not rest:
        return end, None
    comment = rest.lstrip(" ")
    if not comment.startswith("#") or comment == rest:
        return None
    comment_at = line_end - len(comment)
    return comment_at, comment_at - line_start


def splice(text: str, updates: Sequence[tuple[Sequence[_KeyPart], Any]]) -> str | None:
    """``text`` with every update written in place, or None when the editor must do it."""
    if not text.isascii() or any(marker in text for marker in ("&", "*", "!", "<<", "\t", "\r")):
        return None
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None  # the editor says what is wrong with it
    if not isinstance(root, yaml.MappingNode | yaml.SequenceNode):
        return None
    # (start, end) of each scalar to rewrite -> its new text; a later update of the same
    # scalar replaces an earlier one, as the editor applies them in order.
    edits: dict[tuple[int, int], str] = {}
    current: dict[tuple[int, int], Any] = {}
    for parts, value in updates:
        node = _find(root, parts)
        if node is None:
            return None
        start, end = node.start_mark.index, node.end_mark.index
        source = text[start:end]
        if "\n" in source or "\r" in source:
            return None
        # The marks must point at the scalar itself, quotes included.
        quote = node.style or ""
        if (quote and not (source[:1] == quote == source[-1:] and len(source) >= 2)) or (
            not quote and source != node.value
        ):
            return None
        placed = _placed(text, start, end)
        if placed is None:
            return None
        try:
            old = current[(start, end)] if (start, end) in current else _old_value(node)
        except LookupError:
            return None
        if same_value(old, value):
            continue
        written = _written(node, value)
        if written is None:
            return None
        edits[(start, end)] = written
        current[(start, end)] = value
    out, position = [], 0
    for (start, end), written in sorted(edits.items()):
        comment_at, column = _placed(text, start, end) or (end, None)
        if column is not None:
            # The editor keeps a trailing comment in its column, or one space after the value.
            written += " " * max(
                1, column - (start - text.rfind("\n", 0, start) - 1) - len(written)
            )
        out += [text[position:start], written]
        position = comment_at
    out.append(text[position:])
    return "".join(out)
