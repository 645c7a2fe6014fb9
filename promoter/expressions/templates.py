"""Renders manifest values containing ``${{ expr }}`` / ``${% expr %}`` the way Kargo does.

This mirrors Kargo's ``pkg/expressions/json_templates.go`` (``EvaluateTemplate``):

* a string without a start delimiter is returned unchanged, so "42" stays a string;
* each expression is replaced by its result: strings as they are, anything else JSON-encoded
  (Go's ``encoding/json``, so ``nil`` becomes ``null`` and a map becomes compact JSON);
* the whole result is then typed: one trailing newline is set aside; text wrapped in double
  quotes loses that one pair and stays a string (no unescaping: this is what makes
  ``quote()``/``unsafeQuote()`` work); otherwise text that Go's ``strconv.ParseFloat`` accepts
  becomes a number, text ``strconv.ParseBool`` accepts (``true``, ``T``, ``0``...) a bool, any
  other valid JSON its value, and everything else stays a string (newline restored).
* the end delimiter is the first ``}}`` (or ``%}``) after the start, even inside a string
  literal, which is why Kargo offers ``${% %}`` for expressions that contain ``}}``.

Deviations, all at edges Kargo turns into errors or imprecision: Go's ParseFloat also accepts
"Inf"/"NaN", which Kargo then fails to JSON-encode; we keep such text as a string. Kargo stores
every number as a float64; we return exact Python ints for integral values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from promoter.expressions.builtins import parse_go_float, parse_go_json
from promoter.expressions.compiler import Compiled, Scope, compile_expression
from promoter.expressions.errors import ExpressionError, ExpressionSyntaxError
from promoter.expressions.values import INT64_MAX, INT64_MIN, check_string, go_json

_DELIMITERS = (("${{", "}}"), ("${%", "%}"))
# strconv.ParseBool
_GO_BOOLS = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}  # fmt: skip
_JSON_STARTS = frozenset('{["tfn-0123456789')
_DECIMAL_INT = re.compile(r"[+-]?[0-9]+")

Segments = tuple[tuple[str, Compiled | None], ...]


def _has_delimiter(text: str) -> bool:
    return "${{" in text or "${%" in text


@functools.lru_cache(maxsize=4096)
def _parse_template(template: str) -> Segments:
    """Split a template into (literal text, compiled expression) pairs; the last has ``None``."""
    segments: list[tuple[str, Compiled | None]] = []
    rest = template
    while True:
        found: tuple[int, str, str] | None = None
        for start, end in _DELIMITERS:
            index = rest.find(start)
            if index >= 0 and (found is None or index < found[0]):
                found = (index, start, end)
        if found is None:
            segments.append((rest, None))
            return tuple(segments)
        index, start, end = found
        body_start = index + len(start)
        body_end = rest.find(end, body_start)
        if body_end < 0:
            raise ExpressionSyntaxError(
                reason=f"unclosed expression: expected {end!r} but reached end of template",
                expression=template,
            )
        segments.append((rest[:index], compile_expression(rest[body_start:body_end].strip())))
        rest = rest[body_end + len(end) :]


def _template_segments(template: str, where: str | None) -> Segments:
    try:
        return _parse_template(template)
    except ExpressionSyntaxError as exc:
        raise exc.add_context(expression=template, where=where) from None


def _as_number(text: str, value: float) -> int | float:
    digits = text.replace("_", "")
    if _DECIMAL_INT.fullmatch(digits):
        exact = int(digits)
        if INT64_MIN <= exact <= INT64_MAX:
            return exact
    if value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def type_template_result(text: str) -> Any:
    """Kargo's typing of a rendered template string (see the module docstring)."""
    newline = ""
    if text.endswith("\n"):
        text, newline = text[:-1], "\n"
    if len(text) > 1 and text[0] == '"' and text[-1] == '"':
        return text[1:-1] + newline
    number = parse_go_float(text)
    if number is not None:
        return _as_number(text, number)
    boolean = _GO_BOOLS.get(text)
    if boolean is not None:
        return boolean
    stripped = text.lstrip()
    if stripped and stripped[0] in _JSON_STARTS:
        try:
            return parse_go_json(text)
        except (ValueError, RecursionError):
            pass
    return text + newline


def _scalar_result(value: Any) -> tuple[bool, Any]:
    """Shortcut for a template that is exactly one expression with a scalar result.

    Equivalent to JSON-encoding and re-typing it (``42`` -> "42" -> 42), without the detour.
    """
    if value is None or value is True or value is False or type(value) is int:
        return True, value
    if type(value) is float and value == value and abs(value) != float("inf"):
        if value.is_integer() and abs(value) < 2**63:
            return True, int(value)
        return True, value
    return False, None


def _text_of(value: Any, compiled: Compiled, where: str | None) -> str:
    if type(value) is str:
        return value
    try:
        return go_json(value)
    except ExpressionError as exc:
        raise exc.add_context(expression=compiled.source, where=where) from None


def render_string(template: str, scope: Scope, *, where: str) -> Any:
    """Render one template string; see the module docstring for how the result is typed."""
    if not _has_delimiter(template):
        return template
    segments = _template_segments(template, where)
    if len(segments) == 2 and not segments[0][0] and not segments[1][0]:
        compiled = segments[0][1]
        assert compiled is not None
        value = compiled.evaluate(scope, where=where)
        if type(value) is str:
            return type_template_result(value)
        done, result = _scalar_result(value)
        if done:
            return result
        return type_template_result(_text_of(value, compiled, where))
    parts: list[str] = []
    for literal, compiled in segments:
        parts.append(literal)
        if compiled is not None:
            parts.append(_text_of(compiled.evaluate(scope, where=where), compiled, where))
    try:
        text = check_string("".join(parts))
    except ExpressionError as exc:
        raise exc.add_context(expression=template, where=where) from None
    return type_template_result(text)


def render(value: Any, scope: Scope, *, where: str = "config") -> Any:
    """Render every template string inside ``value`` (dicts and lists, recursively).

    Returns new containers; keys are never evaluated. ``where`` grows with the path so errors
    name the field: ``config.checkout[0].branch``.
    """
    if isinstance(value, str):
        return render_string(value, scope, where=where)
    if isinstance(value, Mapping):
        return {key: render(item, scope, where=f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [render(item, scope, where=f"{where}[{i}]") for i, item in enumerate(value)]
    return value


def has_expression(value: Any) -> bool:
    """True when any string inside ``value`` (values, not keys) contains ``${{`` or ``${%``."""
    if isinstance(value, str):
        return _has_delimiter(value)
    if isinstance(value, Mapping):
        return any(has_expression(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(has_expression(item) for item in value)
    return False


def check_syntax(value: Any, *, where: str) -> None:
    """Compile every expression inside ``value``; raise :class:`ExpressionSyntaxError` naming
    ``where`` (extended with the path) for the first that does not parse."""
    if isinstance(value, str):
        if _has_delimiter(value):
            _template_segments(value, where)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_syntax(item, where=f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_syntax(item, where=f"{where}[{i}]")
