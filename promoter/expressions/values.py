"""Runtime values of the expression language: limits, equality, and Go-compatible formatting.

Kargo evaluates expressions in Go, so wherever a value turns into text the user sees Go's
spelling: templates JSON-encode non-string results with ``encoding/json`` (sorted map keys,
``2.0`` printed as ``2``, ``<`` escaped as ``\\u003c``), and ``string(x)`` uses ``fmt``'s
``%v``. This module reproduces those spellings so a manifest renders the same here as in Kargo.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from promoter.expressions.dates import GoDuration, GoLocation, GoTime, go_string, time_json
from promoter.expressions.errors import ExpressionError
from promoter.expressions.semver import Semver

# Bounds that keep one expression from exhausting the process. Each is far above legitimate use
# (a rendered manifest field, a list of images) and checked *before* the work is done.
MAX_STRING_LENGTH = 1 << 20  # characters in any string an expression produces
MAX_LIST_LENGTH = 100_000  # items in any list an expression produces
# The total characters and items one evaluation may produce, all results together. The bounds
# above limit each value; this limits how many of them one expression may build (a list literal
# of a thousand toJSON(1..99999) calls would otherwise take minutes and gigabytes). Work grows
# with what is produced, so this bounds both the time and the memory of an evaluation, and
# unlike a clock it gives the same answer on every machine.
MAX_WORK = 8 * MAX_STRING_LENGTH
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_NUMBER_TYPES = (int, float)


def type_name(value: Any) -> str:
    """The name an error message uses for a value's type (expr-lang's names where it has one)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, Semver):
        return "semver.Version"
    if isinstance(value, GoTime):
        return "time.Time"
    if isinstance(value, GoDuration):
        return "time.Duration"
    if isinstance(value, GoLocation):
        return "*time.Location"
    if callable(value):
        return "func"
    return "unknown"


def is_number(value: Any) -> bool:
    """True for ints and floats, but not bools (Python's bool is an int; Go's is not)."""
    return isinstance(value, _NUMBER_TYPES) and not isinstance(value, bool)


# What is left of the running evaluation's work budget (None outside an evaluation).
_work_left: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "expression_work_left", default=None
)


@contextlib.contextmanager
def work_budget(limit: int = MAX_WORK) -> Iterator[None]:
    """Within the block, values produced count against ``limit`` (see :data:`MAX_WORK`)."""
    token = _work_left.set([limit])
    try:
        yield
    finally:
        _work_left.reset(token)


def charge(units: int) -> None:
    """Count ``units`` characters or items produced against the evaluation's budget."""
    left = _work_left.get()
    if left is None:
        return
    left[0] -= units
    if left[0] < 0:
        raise ExpressionError(
            reason=f"expression does too much work (its values add up to more than {MAX_WORK} "
            "characters and items); simplify it"
        )


def size_of(value: Any) -> int:
    """What producing ``value`` costs against the work budget."""
    if isinstance(value, str | list | tuple | Mapping):
        return 1 + len(value)
    return 1


def check_string(value: str) -> str:
    """``value``, or an error when it is longer than :data:`MAX_STRING_LENGTH`."""
    if len(value) > MAX_STRING_LENGTH:
        raise ExpressionError(reason=f"string result longer than {MAX_STRING_LENGTH} characters")
    charge(len(value))
    return value


def check_string_length(length: int) -> None:
    """Refuse, before building it, a string that would be longer than the bound."""
    if length > MAX_STRING_LENGTH:
        raise ExpressionError(reason=f"string result longer than {MAX_STRING_LENGTH} characters")
    charge(length)


def check_list_length(length: int) -> None:
    """Refuse, before building it, a list that would be longer than the bound."""
    if length > MAX_LIST_LENGTH:
        raise ExpressionError(reason=f"list result longer than {MAX_LIST_LENGTH} items")
    charge(length)


def check_int(value: int) -> int:
    """``value``, or an error outside int64.

    expr-lang's ints are Go int64 and wrap silently; an error is kinder than a wrapped number,
    and it keeps Python's unbounded ints from growing without limit.
    """
    if value < INT64_MIN or value > INT64_MAX:
        raise ExpressionError(reason="integer overflow")
    return value


def equal(a: Any, b: Any) -> bool:
    """expr-lang ``==``: numbers compare across int/float, everything else structurally.

    Unlike Python, ``true == 1`` is false (Go bools are not numbers).
    """
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is int or ta is bool or a is None):
        return bool(a == b)
    if ta is bool or tb is bool:
        return False
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            if key not in b or not equal(value, b[key]):
                return False
        return True
    if isinstance(a, Semver | GoTime | GoDuration | GoLocation):
        return bool(a == b)
    if isinstance(a, str) and isinstance(b, str):
        return a == b  # str subclasses
    return a is b


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-tripping decimal digits of a finite, non-zero float and the exponent.

    ``digits * 10**exponent == abs(value)``; Go's ``strconv.FormatFloat(f, _, -1, 64)`` starts
    from the same shortest digits as Python's ``repr``.
    """
    from decimal import Decimal  # here: only float formatting needs it (runner start-up)

    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    assert isinstance(exponent, int)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    return stripped or "0", exponent


def _format_fixed(digits: str, exponent: int) -> str:
    if exponent >= 0:
        return digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{digits[:point]}.{digits[point:]}"
    return "0." + "0" * (-point) + digits


def _format_exponent(digits: str, exponent: int, *, min_exp_digits: int) -> str:
    decimal_exponent = len(digits) - 1 + exponent
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    sign = "-" if decimal_exponent < 0 else "+"
    return f"{mantissa}e{sign}{abs(decimal_exponent):0{min_exp_digits}d}"


def go_json_float(value: float) -> str:
    """A float as Go's ``encoding/json`` writes it (``2.0`` -> ``2``, ``1e21`` -> ``1e+21``)."""
    if math.isnan(value) or math.isinf(value):
        raise ExpressionError(reason=f"json: unsupported value: {go_sprint(value)}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(value)
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        # encoding/json switches to exponent form here and trims "e-07" to "e-7".
        return sign + _format_exponent(digits, exponent, min_exp_digits=1)
    return sign + _format_fixed(digits, exponent)


def go_format_float(value: float) -> str:
    """A float as Go's ``fmt`` ``%v`` writes it (``%g`` with the shortest digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(value)
    decimal_exponent = len(digits) - 1 + exponent
    # strconv uses %e when the exponent is < -4 or >= the precision, which is 6 for "shortest".
    if decimal_exponent < -4 or decimal_exponent >= 6:
        return sign + _format_exponent(digits, exponent, min_exp_digits=2)
    return sign + _format_fixed(digits, exponent)


def go_sprint(value: Any) -> str:
    """``fmt.Sprintf("%v", value)`` for the values expressions handle: what ``string(x)`` does."""
    if value is None:
        return "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, Semver):
        return str(value)
    if isinstance(value, GoTime | GoDuration | GoLocation):
        return go_string(value)
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_sprint(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: _key_sort(kv[0]))
        return "map[" + " ".join(f"{go_sprint(k)}:{go_sprint(v)}" for k, v in items) + "]"
    raise ExpressionError(reason=f"cannot convert {type_name(value)} to string")


def _key_sort(key: Any) -> tuple[int, Any]:
    if is_number(key):
        return (0, key)
    return (1, str(key))


# encoding/json escapes these even inside strings, so HTML-embedded JSON stays safe.
_GO_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json_string(value: str) -> str:
    """A string as Go's ``encoding/json`` writes it."""
    return json.dumps(value, ensure_ascii=False).translate(_GO_JSON_ESCAPES)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if is_number(key) or isinstance(key, bool):
        # Go can only encode maps whose keys are strings or integers; YAML-loaded data may have
        # other scalars as keys, which we spell the way %v would.
        return go_sprint(key)
    raise ExpressionError(reason=f"json: unsupported map key type {type_name(key)}")


def go_json(value: Any, *, indent: str | None = None) -> str:
    """``json.Marshal`` (or ``json.MarshalIndent(v, "", indent)``) of an expression value."""
    out: list[str] = []
    _encode(value, out, indent, "")
    return check_string("".join(out))


def _encode(value: Any, out: list[str], indent: str | None, prefix: str) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(go_json_string(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(go_json_float(value))
    elif isinstance(value, Semver):
        # Masterminds' Version implements MarshalJSON as its String().
        out.append(go_json_string(str(value)))
    elif isinstance(value, GoTime):
        out.append(go_json_string(time_json(value)))
    elif isinstance(value, GoDuration):
        out.append(str(value.ns))  # time.Duration is an int64 to encoding/json
    elif isinstance(value, GoLocation):
        out.append("{}")  # *time.Location has no exported fields
    elif isinstance(value, list | tuple):
        _encode_items(value, out, indent, prefix)
    elif isinstance(value, Mapping):
        _encode_map(value, out, indent, prefix)
    else:
        raise ExpressionError(reason=f"json: unsupported type {type_name(value)}")


def _encode_items(
    items: list[Any] | tuple[Any, ...], out: list[str], indent: str | None, prefix: str
) -> None:
    if not items:
        out.append("[]")
        return
    inner = prefix + indent if indent is not None else prefix
    out.append("[")
    for i, item in enumerate(items):
        if i:
            out.append(",")
        if indent is not None:
            out.append("\n" + inner)
        _encode(item, out, indent, inner)
    if indent is not None:
        out.append("\n" + prefix)
    out.append("]")


def _encode_map(value: Mapping[Any, Any], out: list[str], indent: str | None, prefix: str) -> None:
    if not value:
        out.append("{}")
        return
    entries = sorted(((_json_key(k), v) for k, v in value.items()), key=lambda kv: kv[0])
    inner = prefix + indent if indent is not None else prefix
    out.append("{")
    for i, (key, item) in enumerate(entries):
        if i:
            out.append(",")
        if indent is not None:
            out.append("\n" + inner)
        out.append(go_json_string(key))
        out.append(": " if indent is not None else ":")
        _encode(item, out, indent, inner)
    if indent is not None:
        out.append("\n" + prefix)
    out.append("}")


def plain_data(value: Any) -> Any:
    """``value`` as plain JSON-like data (dicts, lists, scalars), e.g. for YAML output."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ExpressionError(reason=f"unsupported value: {go_sprint(value)}")
        return value
    if isinstance(value, Semver):
        return str(value)
    if isinstance(value, GoTime):
        return time_json(value)
    if isinstance(value, GoDuration | GoLocation):
        return str(value)  # yaml.v3 writes a time.Duration as its String()
    if isinstance(value, list | tuple):
        return [plain_data(item) for item in value]
    if isinstance(value, Mapping):
        return {_json_key(k): plain_data(v) for k, v in value.items()}
    raise ExpressionError(reason=f"unsupported type {type_name(value)}")
