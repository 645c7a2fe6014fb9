"""Builtin functions available to every expression.

expr-lang's builtins as of v1.17 (strings, numbers, arrays, maps, conversions, dates, bitwise
operations; the closure builtins such as ``filter`` are compiled in
:mod:`promoter.expressions.compiler`), Kargo's template functions (``quote``, ``unsafeQuote``,
``asJSON``, ``asYAML``) and utility functions (``semverParse``, ``semverDiff``). Status
functions (``success()``...) and Freight functions come from the caller through
``Scope.functions``, which may also shadow anything here.

Every function checks its argument types itself and raises :class:`ExpressionError` with a
message an author can act on; every result is bounded (see :mod:`promoter.expressions.values`).
"""

from __future__ import annotations

import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import yaml

from promoter.expressions import dates
from promoter.expressions.errors import ExpressionError
from promoter.expressions.semver import semver_diff, semver_parse
from promoter.expressions.values import (
    INT64_MAX,
    INT64_MIN,
    check_int,
    check_list_length,
    check_string,
    check_string_length,
    equal,
    go_json,
    go_sprint,
    is_number,
    plain_data,
    type_name,
)

BuiltinFunction = Callable[..., Any]
BUILTINS: dict[str, BuiltinFunction] = {}
_F = TypeVar("_F", bound=BuiltinFunction)


def _builtin(name: str, min_args: int, max_args: int | None = None) -> Callable[[_F], _F]:
    """Register a builtin ``name`` that checks its argument count before running.

    ``max_args`` defaults to ``min_args``; -1 means any number.
    """
    most = min_args if max_args is None else max_args
    if most == -1:
        expected = f"at least {min_args} argument{'s' if min_args != 1 else ''}"
    elif most == min_args:
        expected = f"{min_args} argument{'s' if min_args != 1 else ''}"
    else:
        expected = f"{min_args} to {most} arguments"

    def register(fn: _F) -> _F:
        def checked(*args: Any) -> Any:
            count = len(args)
            if count < min_args or (most != -1 and count > most):
                raise ExpressionError(reason=f"{name}() expects {expected}, got {count}")
            return fn(*args)

        BUILTINS[name] = checked
        return fn

    return register


def _string_arg(function: str, value: Any, position: str = "argument") -> str:
    if not isinstance(value, str):
        raise ExpressionError(
            reason=f"{function}() {position} must be a string, got {type_name(value)}"
        )
    return value


def _int_arg(function: str, value: Any, position: str = "argument") -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ExpressionError(
            reason=f"{function}() {position} must be an int, got {type_name(value)}"
        )
    return value


def _list_arg(function: str, value: Any) -> list[Any] | tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise ExpressionError(
            reason=f"{function}() argument must be an array, got {type_name(value)}"
        )
    return value


def _map_arg(function: str, value: Any) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ExpressionError(reason=f"{function}() argument must be a map, got {type_name(value)}")
    return value


# --- Kargo's template functions (pkg/expressions/json_templates.go) --------------------------

_GO_CONTROL_ESCAPES = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
    '"': '\\"', "\\": "\\\\",
}  # fmt: skip


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` (``fmt``'s ``%q``): printable runes kept, the rest escaped."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = ['"']
    for ch in text:
        if ch in _GO_CONTROL_ESCAPES:
            out.append(_GO_CONTROL_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x20 or code == 0x7F:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


@_builtin("quote", 1)
def quote(value: Any) -> str:
    """Kargo ``quote``: a string in Go ``%q`` quotes, anything else as ``unsafeQuote``.

    The template renderer strips one pair of enclosing quotes and then keeps the text as a
    string, which is how ``${{ quote(42) }}`` yields the string "42" rather than a number.
    """
    if isinstance(value, str):
        return check_string(go_quote(value))
    return unsafe_quote(value)


@_builtin("unsafeQuote", 1)
def unsafe_quote(value: Any) -> str:
    """Kargo ``unsafeQuote``: the JSON encoding of ``value``, wrapped in one more pair of quotes.

    For a string that leaves visible quotes after the renderer strips the outer pair:
    ``${{ unsafeQuote("string") }}`` renders as ``"string"``.
    """
    return check_string(f'"{go_json(value)}"')


@_builtin("asJSON", 1)
def as_json(value: Any) -> str:
    """Kargo ``asJSON``: indented JSON (two spaces) plus a newline, wrapped in quotes."""
    return check_string(f'"{go_json(value, indent="  ")}\n"')


class _GoYAMLDumper(yaml.SafeDumper):
    """PyYAML tuned to look like Go's yaml.v3 output: 4-space indent, indented sequences."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # yaml.v3 writes multi-line strings as literal blocks; PyYAML would use escaped quotes.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_GoYAMLDumper.add_representer(str, _represent_str)


@_builtin("asYAML", 1)
def as_yaml(value: Any) -> str:
    """Kargo ``asYAML``: the YAML encoding of ``value``, wrapped in quotes."""
    text = yaml.dump(
        plain_data(value),
        Dumper=_GoYAMLDumper,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        indent=4,
        width=1 << 30,
    )
    if text.endswith("\n...\n"):
        text = text[: -len("...\n")]  # PyYAML's end-of-document marker after a bare scalar
    return check_string(f'"{text}"')


# --- strings ---------------------------------------------------------------------------------


@_builtin("len", 1)
def length(value: Any) -> int:
    if isinstance(value, str | list | tuple | Mapping):
        return len(value)
    raise ExpressionError(reason=f"invalid argument for len (type {type_name(value)})")


@_builtin("lower", 1)
def lower(value: Any) -> str:
    return check_string(_string_arg("lower", value).lower())


@_builtin("upper", 1)
def upper(value: Any) -> str:
    return check_string(_string_arg("upper", value).upper())


@_builtin("trim", 1, 2)
def trim(value: Any, cutset: Any = None) -> str:
    text = _string_arg("trim", value)
    if cutset is None:
        return text.strip()
    return text.strip(_string_arg("trim", cutset, "second argument"))


@_builtin("trimPrefix", 1, 2)
def trim_prefix(value: Any, prefix: Any = " ") -> str:
    return _string_arg("trimPrefix", value).removeprefix(
        _string_arg("trimPrefix", prefix, "second argument")
    )


@_builtin("trimSuffix", 1, 2)
def trim_suffix(value: Any, suffix: Any = " ") -> str:
    return _string_arg("trimSuffix", value).removesuffix(
        _string_arg("trimSuffix", suffix, "second argument")
    )


def _go_split(function: str, value: Any, separator: Any, limit: Any, keep: bool) -> list[str]:
    """Go's ``strings.SplitN`` / ``SplitAfterN``: ``limit`` 0 gives [], negative splits all."""
    text = _string_arg(function, value)
    sep = _string_arg(function, separator, "second argument")
    n = _int_arg(function, limit, "third argument")
    if n == 0:
        return []
    pieces = len(text) if sep == "" else text.count(sep) + 1
    check_list_length(pieces if n < 0 else min(pieces, n))
    if sep == "":
        chars = list(text)
        if 0 < n < len(chars):
            return [*chars[: n - 1], text[n - 1 :]]
        return chars
    parts = text.split(sep, n - 1 if n > 0 else -1)
    if keep:
        return [part + sep for part in parts[:-1]] + parts[-1:]
    return parts


@_builtin("split", 2, 3)
def split(value: Any, separator: Any, limit: Any = -1) -> list[str]:
    return _go_split("split", value, separator, limit, keep=False)


@_builtin("splitAfter", 2, 3)
def split_after(value: Any, separator: Any, limit: Any = -1) -> list[str]:
    """Go ``strings.SplitAfterN``: like split, but each piece keeps its separator."""
    return _go_split("splitAfter", value, separator, limit, keep=True)


@_builtin("join", 1, 2)
def join(values: Any, glue: Any = "") -> str:
    items = _list_arg("join", values)
    separator = _string_arg("join", glue, "second argument")
    total = len(separator) * max(len(items) - 1, 0)
    for item in items:
        if not isinstance(item, str):
            raise ExpressionError(
                reason=f"join() needs an array of strings, found {type_name(item)}"
            )
        total += len(item)
    check_string_length(total)
    return separator.join(items)


@_builtin("replace", 3, 4)
def replace(value: Any, old: Any, new: Any, limit: Any = -1) -> str:
    """Go ``strings.Replace`` (``strings.ReplaceAll`` without ``limit``)."""
    text = _string_arg("replace", value)
    before = _string_arg("replace", old, "second argument")
    after = _string_arg("replace", new, "third argument")
    n = _int_arg("replace", limit, "fourth argument")
    count = len(text) + 1 if before == "" else text.count(before)
    if n >= 0:
        count = min(count, n)
    check_string_length(len(text) + count * (len(after) - len(before)))
    return text.replace(before, after, n if n >= 0 else -1)


@_builtin("repeat", 2)
def repeat(value: Any, times: Any) -> str:
    text = _string_arg("repeat", value)
    n = _int_arg("repeat", times, "second argument")
    if n < 0:
        raise ExpressionError(reason="repeat() count must not be negative")
    check_string_length(len(text) * n)
    return text * n


def _string_predicate(name: str, test: Callable[[str, str], bool]) -> None:
    def predicate(value: Any, other: Any) -> bool:
        return test(_string_arg(name, value), _string_arg(name, other, "second argument"))

    _builtin(name, 2)(predicate)


_string_predicate("hasPrefix", str.startswith)
_string_predicate("hasSuffix", str.endswith)
_string_predicate("startsWith", str.startswith)
_string_predicate("endsWith", str.endswith)


@_builtin("contains", 2)
def contains(container: Any, item: Any) -> bool:
    """``contains(s, sub)`` for strings, ``contains(list, x)`` for membership."""
    if isinstance(container, list | tuple):
        return any(equal(item, x) for x in container)
    return _string_arg("contains", item, "second argument") in _string_arg("contains", container)


@_builtin("indexOf", 2)
def index_of(value: Any, sub: Any) -> int:
    return _string_arg("indexOf", value).find(_string_arg("indexOf", sub, "second argument"))


@_builtin("lastIndexOf", 2)
def last_index_of(value: Any, sub: Any) -> int:
    text = _string_arg("lastIndexOf", value)
    return text.rfind(_string_arg("lastIndexOf", sub, "second argument"))


@_builtin("toBase64", 1)
def to_base64(value: Any) -> str:
    import base64

    data = _string_arg("toBase64", value).encode("utf-8", "surrogatepass")
    return check_string(base64.b64encode(data).decode("ascii"))


@_builtin("fromBase64", 1)
def from_base64(value: Any) -> str:
    import base64

    try:
        data = base64.b64decode(_string_arg("fromBase64", value), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ExpressionError(reason=f"fromBase64(): illegal base64 data: {exc}") from None
    return data.decode("utf-8", "replace")


# --- conversions -----------------------------------------------------------------------------


@_builtin("string", 1)
def to_string(value: Any) -> str:
    return check_string(go_sprint(value))


_GO_ATOI = re.compile(r"[+-]?[0-9]+")


@_builtin("int", 1)
def to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ExpressionError(reason="invalid operation: int(bool)")
    if isinstance(value, int):
        return value
    if isinstance(value, dates.GoDuration):
        return value.ns  # Go converts a time.Duration to its nanoseconds
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or not INT64_MIN <= value <= INT64_MAX:
            raise ExpressionError(reason=f"int(): {go_sprint(value)} is out of range")
        return int(value)
    if isinstance(value, str):
        # Go's strconv.Atoi: an optional sign and decimal digits, nothing else.
        if not _GO_ATOI.fullmatch(value) or len(value) > 20:
            raise ExpressionError(reason=f'int(): strconv.Atoi: parsing "{value}": invalid syntax')
        return check_int(int(value))
    raise ExpressionError(reason=f"invalid operation: int({type_name(value)})")


_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?"
    r"|0[xX](?:[0-9a-fA-F](?:_?[0-9a-fA-F])*(?:\.(?:[0-9a-fA-F](?:_?[0-9a-fA-F])*)?)?"
    r"|\.[0-9a-fA-F](?:_?[0-9a-fA-F])*)[pP][+-]?\d(?:_?\d)*)",
    re.ASCII,
)


def parse_go_float(text: str) -> float | None:
    """Go's ``strconv.ParseFloat(text, 64)`` for finite numbers; ``None`` where Go errors.

    Accepts what Go does (underscores between digits, ``1.``, ``.5``, hex floats with a ``p``
    exponent, a leading ``+``). Go also accepts "inf" and "NaN"; callers treat those as text,
    because Kargo could not JSON-encode the result anyway.
    """
    if len(text) > 400 or not _GO_FLOAT.fullmatch(text):
        return None
    digits = text.replace("_", "")
    try:
        if "x" in digits or "X" in digits:
            value = float.fromhex(digits)
        else:
            value = float(digits)
    except (ValueError, OverflowError):
        return None
    if math.isinf(value):
        return None  # Go reports ErrRange
    return value


@_builtin("float", 1)
def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ExpressionError(reason="invalid operation: float(bool)")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        parsed = parse_go_float(value)
        if parsed is None:
            raise ExpressionError(
                reason=f'float(): strconv.ParseFloat: parsing "{value}": invalid syntax'
            )
        return parsed
    raise ExpressionError(reason=f"invalid operation: float({type_name(value)})")


@_builtin("toJSON", 1)
def to_json(value: Any) -> str:
    """expr-lang ``toJSON``: ``json.MarshalIndent(v, "", "  ")``."""
    return go_json(value, indent="  ")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"cannot unmarshal number {text} into a float64")
    return value


def _json_int(text: str) -> int | float:
    value = int(text)
    # Go decodes JSON numbers into float64; we keep exact ints where int64 can hold them.
    if INT64_MIN <= value <= INT64_MAX:
        return value
    return _json_float(text)


def parse_go_json(text: str) -> Any:
    """Decode JSON the way Go's ``json.Unmarshal`` into ``any`` would accept it.

    Raises ``ValueError`` (no NaN/Infinity literals, no numbers beyond float64) or
    ``RecursionError`` for absurd nesting.
    """
    return json.loads(
        text, parse_constant=_reject_constant, parse_float=_json_float, parse_int=_json_int
    )


def _go_json_number(text: str) -> float:
    return _json_float(text)


@_builtin("fromJSON", 1)
def from_json(value: Any) -> Any:
    """expr-lang ``fromJSON``: ``json.Unmarshal`` into ``any``, so every number is a float."""
    text = _string_arg("fromJSON", value)
    try:
        return json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_json_float,
            parse_int=_go_json_number,
        )
    except RecursionError:
        raise ExpressionError(reason="fromJSON(): JSON nested too deeply") from None
    except ValueError as exc:
        raise ExpressionError(reason=f"fromJSON(): {exc}") from None


# --- collections -----------------------------------------------------------------------------


@_builtin("keys", 1)
def keys(value: Any) -> list[Any]:
    return list(_map_arg("keys", value).keys())


@_builtin("values", 1)
def values(value: Any) -> list[Any]:
    return list(_map_arg("values", value).values())


@_builtin("first", 1)
def first(value: Any) -> Any:
    if value is None:
        return None  # expr-lang recovers from fetching out of nil and returns nil
    items = _list_arg("first", value)
    return items[0] if items else None


@_builtin("last", 1)
def last(value: Any) -> Any:
    if value is None:
        return None
    items = _list_arg("last", value)
    return items[-1] if items else None


@_builtin("take", 2)
def take(value: Any, count: Any) -> list[Any]:
    items = _list_arg("take", value)
    n = _int_arg("take", count, "second argument")
    if n < 0:
        raise ExpressionError(reason=f"take(): cannot take {n} elements")
    return list(items[:n])


_MAX_FLATTEN_DEPTH = 100


def _flatten_into(out: list[Any], items: list[Any] | tuple[Any, ...], depth: int) -> None:
    if depth > _MAX_FLATTEN_DEPTH:
        raise ExpressionError(reason="recursion depth exceeded")
    for item in items:
        if isinstance(item, list | tuple):
            _flatten_into(out, item, depth + 1)
        else:
            out.append(item)
    check_list_length(len(out))


@_builtin("flatten", 1)
def flatten(value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ExpressionError(reason=f"cannot flatten {type_name(value)}")
    out: list[Any] = []
    _flatten_into(out, value, 0)
    return out


@_builtin("get", 2)
def get(container: Any, key: Any) -> Any:
    """expr-lang ``get``: like indexing, but nil instead of an error when absent."""
    if isinstance(container, Mapping):
        try:
            return container.get(key)
        except TypeError:
            return None
    if isinstance(container, list | tuple):
        if not isinstance(key, int) or isinstance(key, bool):
            return None
        index = key + len(container) if key < 0 else key
        return container[index] if 0 <= index < len(container) else None
    if container is None or isinstance(container, str):
        return None
    raise ExpressionError(reason=f"type {type_name(container)} does not support indexing")


@_builtin("toPairs", 1)
def to_pairs(value: Any) -> list[list[Any]]:
    if not isinstance(value, Mapping):
        raise ExpressionError(reason=f"cannot transform {type_name(value)} to pairs")
    return [[k, v] for k, v in value.items()]


@_builtin("fromPairs", 1)
def from_pairs(value: Any) -> dict[Any, Any]:
    if not isinstance(value, list | tuple):
        raise ExpressionError(reason=f"cannot transform {type_name(value)} from pairs")
    out: dict[Any, Any] = {}
    for pair in value:
        if not isinstance(pair, list | tuple):
            raise ExpressionError(reason=f"invalid pair {go_sprint(pair)}")
        if len(pair) != 2:
            raise ExpressionError(reason=f"invalid pair length {go_sprint(pair)}")
        key = pair[0]
        if not (key is None or isinstance(key, str | int | float | bool)):
            raise ExpressionError(reason=f"invalid map key of type {type_name(key)}")
        out[key] = pair[1]
    return out


@_builtin("reverse", 1)
def reverse(value: Any) -> list[Any]:
    return list(reversed(_list_arg("reverse", value)))


@_builtin("uniq", 1)
def uniq(value: Any) -> list[Any]:
    result: list[Any] = []
    for item in _list_arg("uniq", value):
        if not any(equal(item, seen) for seen in result):
            result.append(item)
    return result


@_builtin("concat", 1, -1)
def concat(*lists: Any) -> list[Any]:
    total = sum(len(_list_arg("concat", items)) for items in lists)
    check_list_length(total)
    return [item for items in lists for item in items]


def _sortable(function: str, items: list[Any] | tuple[Any, ...]) -> None:
    if all(is_number(i) for i in items) or all(isinstance(i, str) for i in items):
        return
    raise ExpressionError(reason=f"{function}() needs an array of numbers or of strings")


@_builtin("sort", 1, 2)
def sort(value: Any, order: Any = "asc") -> list[Any]:
    items = _list_arg("sort", value)
    _sortable("sort", items)
    direction = _string_arg("sort", order, "second argument")
    if direction not in ("asc", "desc"):
        raise ExpressionError(reason='sort() order must be "asc" or "desc"')
    return sorted(items, reverse=direction == "desc")


def _aggregate(function: str, values: Any, out: list[int | float], depth: int = 0) -> None:
    """The numbers in ``values``, arrays flattened, as expr-lang's min/max/mean/median read them."""
    if depth > _MAX_FLATTEN_DEPTH:
        raise ExpressionError(reason="recursion depth exceeded")
    for value in values:
        if isinstance(value, list | tuple):
            _aggregate(function, value, out, depth + 1)
        elif is_number(value):
            out.append(value)
        else:
            raise ExpressionError(
                reason=f"invalid argument for {function} (type {type_name(value)})"
            )


def _extreme(function: str, args: tuple[Any, ...], pick: Callable[..., Any]) -> Any:
    numbers: list[int | float] = []
    _aggregate(function, args, numbers)
    # Every argument an empty array: expr-lang finds nothing and returns nil.
    return pick(numbers) if numbers else None


@_builtin("min", 1, -1)
def minimum(*args: Any) -> int | float | None:
    """expr-lang ``min``: numbers and arrays of numbers (nested arrays too); keeps the type."""
    result: int | float | None = _extreme("min", args, min)
    return result


@_builtin("max", 1, -1)
def maximum(*args: Any) -> int | float | None:
    result: int | float | None = _extreme("max", args, max)
    return result


@_builtin("mean", 1, -1)
def mean(*args: Any) -> float:
    """expr-lang ``mean``: the average as a float; 0.0 for no numbers."""
    numbers: list[int | float] = []
    _aggregate("mean", args, numbers)
    return math.fsum(numbers) / len(numbers) if numbers else 0.0


@_builtin("median", 1, -1)
def median(*args: Any) -> float:
    numbers: list[int | float] = []
    _aggregate("median", args, numbers)
    if not numbers:
        return 0.0
    ordered = sorted(float(n) for n in numbers)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@_builtin("sum", 1)
def total(value: Any) -> int | float:
    """expr-lang ``sum``: an int while every item is one, else a float; 0 for []."""
    items = _list_arg("sum", value)
    result: int | float = 0
    for item in items:
        if not is_number(item):
            raise ExpressionError(reason=f"sum() needs numbers, got {type_name(item)}")
        result += item
    return check_int(result) if isinstance(result, int) else result


def _number_arg(function: str, value: Any) -> int | float:
    if not is_number(value):
        raise ExpressionError(
            reason=f"{function}() argument must be a number, got {type_name(value)}"
        )
    assert isinstance(value, int | float)
    return value


@_builtin("abs", 1)
def absolute(value: Any) -> int | float:
    number = _number_arg("abs", value)
    return check_int(abs(number)) if isinstance(number, int) else abs(number)


@_builtin("ceil", 1)
def ceil(value: Any) -> float:
    number = _number_arg("ceil", value)
    return float(math.ceil(number)) if math.isfinite(number) else float(number)


@_builtin("floor", 1)
def floor(value: Any) -> float:
    number = _number_arg("floor", value)
    return float(math.floor(number)) if math.isfinite(number) else float(number)


@_builtin("round", 1)
def round_half_away(value: Any) -> float:
    """Go ``math.Round``: halves away from zero (Python's ``round`` rounds halves to even)."""
    number = float(_number_arg("round", value))
    if not math.isfinite(number):
        return number
    whole = float(math.trunc(number))
    if abs(number - whole) >= 0.5:
        whole += math.copysign(1.0, number)
    return whole


@_builtin("type", 1)
def type_of(value: Any) -> str:
    return type_name(value)


# --- bitwise operations (expr-lang bitand, bitor...) ------------------------------------------


def _wrap_int64(value: int) -> int:
    """Go's int arithmetic wraps around at 64 bits; the bit functions rely on it."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value > INT64_MAX else value


def _bit_function(name: str, fn: Callable[[int, int], int], *, shift: bool = False) -> None:
    def apply(a: Any, b: Any) -> int:
        x = _int_arg(name, a, "first argument")
        y = _int_arg(name, b, "second argument")
        if shift and y < 0:
            raise ExpressionError(reason=f"invalid operation: negative shift count {y} (type int)")
        if shift and y > 64:
            y = 64
        return _wrap_int64(fn(x, y))

    _builtin(name, 2)(apply)


_bit_function("bitand", lambda x, y: x & y)
_bit_function("bitor", lambda x, y: x | y)
_bit_function("bitxor", lambda x, y: x ^ y)
_bit_function("bitnand", lambda x, y: x & ~y)
_bit_function("bitshl", lambda x, y: x << y, shift=True)
_bit_function("bitshr", lambda x, y: x >> y, shift=True)
_bit_function("bitushr", lambda x, y: (x & ((1 << 64) - 1)) >> y, shift=True)


@_builtin("bitnot", 1)
def bit_not(value: Any) -> int:
    return ~_int_arg("bitnot", value)


# --- dates and durations (see promoter.expressions.dates) ------------------------------------

_builtin("now", 0, 1)(dates.now)
_builtin("duration", 1)(dates.duration)
_builtin("date", 1, 4)(dates.date)
_builtin("timezone", 1)(dates.load_location)

# --- utility functions (Kargo pkg/expressions/function) --------------------------------------

_builtin("semverParse", 1)(semver_parse)
_builtin("semverDiff", 2)(semver_diff)
