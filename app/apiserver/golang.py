"""How Go prints values, for the messages and table cells that must read as kube-apiserver's.

Validation messages (``Invalid value: "abc"``, ``Invalid value: 0.5``) and printer-column cells
come from Go's ``fmt``: strings quoted with ``%q``; numbers with ``%v``, which writes a float64
in its shortest form but with an exponent from 1e6 on (``1.5e+06``), unlike JSON.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any


def stored_number(value: Any) -> Any:
    """A JSON number as kube-apiserver holds it once stored: integral floats become integers.

    (apimachinery's JSON decoding makes whole numbers int64; a stored ``1500000.0`` is read
    back as ``1500000``.) Anything else is returned as it is.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def go_float(value: float) -> str:
    """``fmt.Sprint(float64)``: shortest digits; an exponent when it is < -4 or >= 6
    (strconv's %g with the shortest precision decides with precision 6)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent
    minus = "-" if sign else ""
    scientific = point - 1
    if scientific < -4 or scientific >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'+' if scientific >= 0 else '-'}{abs(scientific):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{minus}{digits}{'0' * (point - len(digits))}"
    return f"{minus}{digits[:point]}.{digits[point:]}"


def go_quote(text: str) -> str:
    """``%q`` of a string (JSON escaping, which agrees for everything printable)."""
    return json.dumps(text, ensure_ascii=False)


def go_value(value: Any) -> str:
    """How apimachinery's field errors print a bad value: ``%v`` for numbers and booleans,
    ``%q`` for strings, ``null`` for nothing (field.Error.ErrorBody)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def go_json(value: Any) -> str:
    """``json.Marshal``: sorted keys, no spaces, HTML-sensitive characters escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
