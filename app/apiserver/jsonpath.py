"""Kubernetes' JSONPath dialect (client-go util/jsonpath), as far as CRD printer columns use it.

kube-apiserver serves a custom resource's ``additionalPrinterColumns`` by wrapping each
``jsonPath`` in braces, parsing it with client-go's JSONPath template parser and evaluating it
with missing keys allowed; the table cell is the first value found. This module parses and
evaluates the same expressions, quirks included:

- fields ``.status.phase`` (a backslash escapes the next character:
  ``.metadata.labels.app\\.kubernetes\\.io/name``),
  ``['key']`` (single quotes only; the key is read as a dotted path again, as client-go does),
  ``*``/``[*]`` and recursive descent ``..``;
- array indexes and slices ``[0]``, ``[-1]``, ``[1:3]``, ``[::2]``, and unions ``[0,2]``;
- filters ``[?(@.type=="Ready")]`` with ``== != < > <= >=`` against a quoted string, a number,
  ``true``/``false`` or another path, and existence filters ``[?(@.reason)]``.

As in client-go, evaluation problems (an index out of range, filtering or indexing something
that is not a list, comparing values of different kinds, a filter path missing from an item)
are errors: the whole expression yields nothing, which a table shows as an empty cell.
Template features printer columns cannot use (``range``/``end``, text outside the braces) are
not supported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["JsonPath", "JsonPathError", "parse"]


class JsonPathError(ValueError):
    """The expression is not valid JSONPath (raised by ``parse``)."""


class _EvaluationError(Exception):
    """Evaluation failed; ``JsonPath.find`` turns it into "no result"."""


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Wildcard:
    pass


@dataclass(frozen=True)
class _Recursive:
    pass


@dataclass(frozen=True)
class _Slice:
    # (value, known) per parameter, as client-go's ParamsEntry; ``derived_end``: the end was
    # not written ("[3]" means [3:4]).
    start: int | None
    end: int | None
    step: int | None
    derived_end: bool


@dataclass(frozen=True)
class _Union:
    branches: tuple[tuple[_Node, ...], ...]


@dataclass(frozen=True)
class _Filter:
    left: tuple[_Node, ...]
    operator: str
    right: tuple[_Node, ...]


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Identifier:
    name: str


_Node = _Field | _Wildcard | _Recursive | _Slice | _Union | _Filter | _Literal | _Identifier

_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")
_DICT_KEY_RE = re.compile(r"^'([^']*)'$")
_SLICE_RE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_FILTER_RE = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$", re.DOTALL)
_NUMBER_RE = re.compile(r"[+-]?[0-9.]*")


class _Parser:
    """client-go's parser.go, restricted to what may appear inside one ``{...}`` action."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> tuple[_Node, ...]:
        nodes: list[_Node] = []
        text = self.text
        while self.pos < len(text):
            rest = text[self.pos :]
            if rest.startswith("}"):
                # The action ends here; the template's trailing text is never a column value.
                break
            if rest.startswith("[?("):
                nodes.append(self._filter())
                continue
            if rest.startswith(".."):
                if nodes and isinstance(nodes[-1], _Recursive):
                    raise JsonPathError("invalid multiple recursive descent")
                self.pos += 2
                nodes.append(_Recursive())
                if self.pos < len(text) and _is_alphanumeric(text[self.pos]):
                    nodes.append(self._field())
                continue
            char = text[self.pos]
            if char in "\r\n":
                raise JsonPathError("unclosed action")
            if char in " @$":
                self.pos += 1
            elif char == "[":
                nodes.extend(self._array())
            elif char in "\"'":
                nodes.append(self._quote(char))
            elif char == ".":
                self.pos += 1
                nodes.append(self._field())
            elif char in "+-" or char.isdigit():
                nodes.append(self._number())
            elif _is_alphanumeric(char):
                nodes.append(self._identifier())
            else:
                raise JsonPathError(f"unrecognized character in action: {char!r}")
        return tuple(nodes)

    def _field(self) -> _Node:
        text = self.text
        start = self.pos
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\":
                self.pos += 2
                continue
            if char in _TERMINATORS:
                break
            self.pos += 1
        value = text[start : self.pos]
        if value == "*":
            return _Wildcard()
        return _Field(value.replace("\\", ""))

    def _identifier(self) -> _Node:
        text = self.text
        start = self.pos
        while self.pos < len(text) and text[self.pos] not in _TERMINATORS:
            self.pos += 1
        value = text[start : self.pos]
        if value in ("true", "false"):
            return _Literal(value == "true")
        return _Identifier(value)

    def _number(self) -> _Node:
        match = _NUMBER_RE.match(self.text, self.pos)
        assert match is not None  # (the pattern matches the empty string)
        value = match.group()
        self.pos = match.end()
        try:
            return _Literal(int(value))
        except ValueError:
            pass
        try:
            return _Literal(float(value))
        except ValueError:
            raise JsonPathError(f"cannot parse number {value}") from None

    def _quote(self, quote: str) -> _Node:
        text = self.text
        start = self.pos
        self.pos += 1
        while True:
            if self.pos >= len(text) or text[self.pos] == "\n":
                raise JsonPathError("unterminated quoted string")
            if text[self.pos] == quote and text[self.pos - 1] != "\\":
                self.pos += 1
                break
            self.pos += 1
        return _Literal(_unquote(text[start : self.pos]))

    def _array(self) -> list[_Node]:
        text = self.text
        end = self.pos
        while True:
            end += 1
            if end >= len(text) or text[end] == "\n":
                raise JsonPathError("unterminated array")
            if text[end] == "]":
                break
        inside = text[self.pos + 1 : end]
        self.pos = end + 1
        if inside == "*":
            inside = ":"
        parts = inside.split(",")
        if len(parts) > 1:
            return [_Union(tuple(_Parser(f"[{part.strip(' ')}]").parse() for part in parts))]
        key = _DICT_KEY_RE.match(inside)
        if key:
            return list(_Parser("." + key.group(1)).parse())
        match = _SLICE_RE.match(inside)
        if match is None:
            raise JsonPathError(f"invalid array index {inside}")
        start_text, end_text, step_text = match.groups()
        start = int(start_text) if start_text not in ("", "-") else None
        if start_text == "-":
            raise JsonPathError(f"array index {start_text} is not a number")
        if end_text is None:
            # "[i]": one element, [i:i+1].
            return [_Slice(start, (start or 0) + 1, None, derived_end=True)]
        return [
            _Slice(start, _slice_number(end_text[1:]), _slice_number((step_text or ":")[1:]), False)
        ]

    def _filter(self) -> _Node:
        text = self.text
        self.pos += 3
        start = self.pos
        opened = closed = False
        pair = ""
        while True:
            if self.pos >= len(text) or text[self.pos] == "\n":
                raise JsonPathError("unterminated filter")
            char = text[self.pos]
            self.pos += 1
            if char in "\"'":
                if not opened:
                    opened, pair = True, char
                    continue
                if text[self.pos - 2] != "\\" and char == pair:
                    closed = True
            elif char == ")" and opened == closed:
                break
        if self.pos >= len(text) or text[self.pos] != "]":
            raise JsonPathError("unclosed array expect ]")
        self.pos += 1
        expression = text[start : self.pos - 2]
        match = _FILTER_RE.match(expression)
        if match is None:
            return _Filter(_Parser(expression).parse(), "exists", ())
        left, operator, right = match.groups()
        return _Filter(_Parser(left).parse(), operator, _Parser(right).parse())


def _slice_number(text: str) -> int | None:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise JsonPathError(f"array index {text} is not a number") from None


def _is_alphanumeric(char: str) -> bool:
    return char == "_" or char.isalpha() or char.isdigit()


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unquote(quoted: str) -> str:
    """Go's strconv.Unquote, extended to single quotes (client-go UnquoteExtend), simplified."""
    body = quoted[1:-1]
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        if index + 1 >= len(body):
            raise JsonPathError(f"unquote string {quoted} error invalid syntax")
        escaped = body[index + 1]
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


# ---------------------------------------------------------------------------- evaluation


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.values()
    elif isinstance(value, (list, str)):
        yield from value


def _walk(values: list[Any], nodes: Sequence[_Node]) -> list[Any]:
    for node in nodes:
        values = _step(values, node)
    return values


def _step(values: list[Any], node: _Node) -> list[Any]:
    if isinstance(node, _Field):
        # A missing key yields nothing (AllowMissingKeys); a null value is a value.
        return [v[node.name] for v in values if isinstance(v, dict) and node.name in v]
    if isinstance(node, _Wildcard):
        return [child for v in values if v is not None for child in _children(v)]
    if isinstance(node, _Recursive):
        found: list[Any] = []
        for value in values:
            _descend(value, found)
        return found
    if isinstance(node, _Slice):
        return [item for v in values if v is not None for item in _slice(v, node)]
    if isinstance(node, _Union):
        return [found for branch in node.branches for found in _walk(values, branch)]
    if isinstance(node, _Filter):
        return [item for v in values for item in _filter(v, node)]
    if isinstance(node, _Literal):
        # A quoted string is one value whatever the input; numbers and booleans one per input.
        return [node.value] if isinstance(node.value, str) else [node.value for _ in values]
    raise _EvaluationError(f"unrecognized identifier {node.name}")


def _descend(value: Any, found: list[Any]) -> None:
    if isinstance(value, str):
        # client-go steps into a string's bytes, which have nothing below them.
        if value:
            found.append(value)
        return
    children = list(_children(value))
    if children:
        found.append(value)
        for child in children:
            _descend(child, found)


def _slice(value: Any, node: _Slice) -> list[Any]:
    if not isinstance(value, list):
        raise _EvaluationError(f"{type(value).__name__} is not array or slice")
    length = len(value)
    start = 0 if node.start is None else node.start
    if start < 0:
        start += length
    end = length if node.end is None else node.end
    if end < 0 or (end == 0 and node.derived_end):
        end += length
    if end == start:
        return []
    if start >= length or start < 0:
        raise _EvaluationError(f"array index out of bounds: index {start}, length {length}")
    if end > length or end < 0:
        raise _EvaluationError(f"array index out of bounds: index {end - 1}, length {length}")
    if start > end:
        raise _EvaluationError(f"starting index {start} is greater than ending index {end}")
    step = 1 if node.step is None else node.step
    if step <= 0:
        raise _EvaluationError("step must be > 0")
    return value[start:end:step]


def _filter(value: Any, node: _Filter) -> list[Any]:
    if not isinstance(value, list):
        raise _EvaluationError(f"{value} is not array or slice and cannot be filtered")
    kept = []
    for item in value:
        if node.operator == "exists":
            try:
                if _walk([item], node.left):
                    kept.append(item)
            except _EvaluationError:
                pass
            continue
        lefts = _walk([item], node.left)
        rights = _walk([item], node.right)
        if len(lefts) != 1 or len(rights) != 1:
            raise _EvaluationError("can only compare one element at a time")
        if _compare(lefts[0], node.operator, rights[0]):
            kept.append(item)
    return kept


def _kind(value: Any) -> str:
    # text/template's basicKind: only scalars compare, and only with their own kind.
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise _EvaluationError("invalid type for comparison")


def _compare(left: Any, operator: str, right: Any) -> bool:
    kind = _kind(left)
    if kind != _kind(right):
        raise _EvaluationError("incompatible types for comparison")
    if operator == "==":
        return bool(left == right)
    if operator == "!=":
        return bool(left != right)
    if kind == "bool":
        raise _EvaluationError("invalid type for comparison")
    if operator == "<":
        return bool(left < right)
    if operator == ">":
        return bool(left > right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">=":
        return bool(left >= right)
    raise _EvaluationError(f"unrecognized filter operator {operator}")


@dataclass(frozen=True)
class JsonPath:
    """A parsed expression; ``find`` evaluates it against a decoded JSON object."""

    expression: str
    nodes: tuple[_Node, ...]

    def find(self, data: Any) -> list[Any]:
        """Every value the expression selects, in order; empty when evaluation fails."""
        try:
            return _walk([data], self.nodes)
        except _EvaluationError:
            return []


def parse(expression: str) -> JsonPath:
    """Parse a printer column's ``jsonPath`` (without the braces kube-apiserver adds)."""
    return JsonPath(expression, _Parser(expression).parse())
