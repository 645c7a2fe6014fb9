"""Label and field selectors with the grammar and semantics of k8s.io/apimachinery.

``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``, ``a``, ``!a``, ``a>1``, ``a<1``
for labels; ``path=value``, ``path==value``, ``path!=value`` for fields. Parsing is pure and
raises ``SelectorError`` with the message the API server would put in its 400 response.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
_KEY = rf"(?:{_PREFIX}/)?{_NAME}"
_VALUE = r"(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?"
_KEY_RE = re.compile(rf"^{_KEY}$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")

_SET_RE = re.compile(r"^\s*(?P<key>\S+?)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*(?P<key>[^=!<>\s]+)\s*(?P<op>==|=|!=|>|<)\s*(?P<value>[^=!<>\s]*)\s*$")
_NOT_EXISTS_RE = re.compile(r"^\s*!\s*(?P<key>[^=!<>\s]+)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<key>[^=!<>\s]+)\s*$")


class SelectorError(ValueError):
    """A selector string that the API server would refuse with 400 BadRequest."""


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "in":
            return present and value in self.values
        if self.operator == "notin":
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if not present:
            return False
        try:
            number = int(str(value))
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "gt" else number < bound


def _split_terms(selector: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def _check_key(key: str, term: str) -> None:
    if not _KEY_RE.match(key) or len(key.split("/")[-1]) > 63:
        raise SelectorError(
            f"unable to parse requirement: <nil>: Invalid value: {key!r}: name part must "
            f"consist of alphanumeric characters, '-', '_' or '.' (in {term!r})"
        )


def _check_value(value: str, term: str) -> None:
    if not _VALUE_RE.match(value) or len(value) > 63:
        raise SelectorError(
            f"unable to parse requirement: values[0]: Invalid value: {value!r}: a valid label "
            f"must be an empty string or consist of alphanumeric characters, '-', '_' or '.' "
            f"(in {term!r})"
        )


def parse_label_selector(selector: str) -> tuple[LabelRequirement, ...]:
    """Parse ``labelSelector`` into requirements that must all match."""
    requirements: list[LabelRequirement] = []
    for term in _split_terms(selector):
        if match := _SET_RE.match(term):
            key = match["key"]
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            _check_key(key, term)
            for value in values:
                _check_value(value, term)
            if match["op"] == "in" and not values:
                raise SelectorError(
                    f"for 'in', 'notin' operators, values set can't be empty (in {term!r})"
                )
            requirements.append(LabelRequirement(key, match["op"], values))
        elif match := _NOT_EXISTS_RE.match(term):
            _check_key(match["key"], term)
            requirements.append(LabelRequirement(match["key"], "!"))
        elif match := _EQ_RE.match(term):
            key, op, value = match["key"], match["op"], match["value"]
            _check_key(key, term)
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", value):
                    raise SelectorError(
                        f"unable to parse requirement: for 'Gt', 'Lt' operators,"
                        f" the value must be an integer (in {term!r})"
                    )
                requirements.append(LabelRequirement(key, "gt" if op == ">" else "lt", (value,)))
                continue
            _check_value(value, term)
            requirements.append(LabelRequirement(key, "notin" if op == "!=" else "in", (value,)))
        elif match := _EXISTS_RE.match(term):
            _check_key(match["key"], term)
            requirements.append(LabelRequirement(match["key"], "exists"))
        else:
            raise SelectorError(
                f"unable to parse requirement: found {term!r}, expected: identifier"
            )
    return tuple(requirements)


def labels_match(requirements: tuple[LabelRequirement, ...], obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    negated: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negated


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares against; missing fields read as ''."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, Mapping):
        # Event's "source" selector matches source.component.
        return str(current.get("component", ""))
    return str(current)


def parse_field_selector(selector: str, supported: frozenset[str]) -> tuple[FieldRequirement, ...]:
    """Parse ``fieldSelector``; labels outside ``supported`` are refused like the API server."""
    requirements: list[FieldRequirement] = []
    for term in (t for t in selector.split(",") if t.strip()):
        match = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not match:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{term}'")
        path, op, value = match.groups()
        if path not in supported:
            raise SelectorError(f"field label not supported: {path}")
        requirements.append(FieldRequirement(path, value, op == "!="))
    return tuple(requirements)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: Mapping[str, Any]) -> bool:
    return all(r.matches(obj) for r in requirements)
