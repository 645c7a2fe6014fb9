"""Compiles a parsed expression into nested Python closures, once per source text.

Each AST node becomes one small function ``scope -> value``; evaluation is then a handful of
plain calls (1-5 µs for typical Kargo expressions) with no tree walking or dispatch on node
types. :func:`compile_expression` is cached on the source text, so a manifest's expressions are
parsed once per process.

Sandboxing: member access only reads keys of mappings and the whitelisted members of our own
value classes (:mod:`promoter.expressions.semver`, :mod:`promoter.expressions.dates`); functions
are looked up by name in the caller's ``Scope.functions`` and our builtins, never found on
values. No Python attribute is ever read by a name taken from expression text, so
``''.__class__`` is just an error.

Closures (``filter(xs, # > 1)``, ``let x = ...; ...``) see their locals as extra variables: a
predicate evaluates its body against a copy of the variables holding ``#``, ``#index`` and
``#acc`` (names no identifier can spell), updated in place for each element.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from promoter.errors import LongshoremanError
from promoter.expressions import parser as syntax
from promoter.expressions.builtins import BUILTINS, total
from promoter.expressions.dates import (
    DURATION_METHODS,
    LOCATION_METHODS,
    TIME_METHODS,
    GoDuration,
    GoLocation,
    GoTime,
)
from promoter.expressions.errors import ExpressionError, ExpressionSyntaxError
from promoter.expressions.regex import RegexError, compile_regex
from promoter.expressions.semver import SEMVER_FIELDS, SEMVER_METHODS, Semver
from promoter.expressions.values import (
    INT64_MAX,
    INT64_MIN,
    charge,
    check_list_length,
    check_string_length,
    equal,
    is_number,
    size_of,
    type_name,
    work_budget,
)


@dataclass(frozen=True, slots=True)
class Scope:
    """What an expression can see: variables by name, and extra functions.

    ``variables`` holds the top-level names (``ctx``, ``vars``, ``outputs``, ``task``...); an
    unknown name evaluates to nil, as in expr-lang without a declared environment.
    ``functions`` extends the builtins and shadows them on a name clash (status functions,
    Freight functions, ``secret()``...).
    """

    variables: Mapping[str, Any]
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


Fn = Callable[[Scope], Any]

# The variable that, when a caller sets it, is what ``$env`` answers (instead of the variables).
ENVIRONMENT = "$env"


class _ShortCircuit(Exception):
    """Raised at a ``?.`` that met nil; the enclosing optional chain turns it into nil."""


def _fail(reason: str) -> ExpressionError:
    return ExpressionError(reason=reason)


def _mismatch(op: str, a: Any, b: Any) -> ExpressionError:
    return ExpressionError(
        reason=f"invalid operation: {op} (mismatched types {type_name(a)} and {type_name(b)})"
    )


def _hashable_key(key: Any) -> bool:
    return key is None or isinstance(key, str | int | float | bool)


# --- member and index access -----------------------------------------------------------------


def _fetch_member(obj: Any, name: str, optional: bool) -> Any:
    if obj is None:
        if optional:
            raise _ShortCircuit
        raise _fail(f"cannot fetch {name!r} from nil")
    if isinstance(obj, Mapping):
        return obj.get(name)
    if isinstance(obj, Semver):
        getter = SEMVER_FIELDS.get(name)
        if getter is not None:
            return getter(obj)
    raise _fail(f"cannot fetch {name!r} from {type_name(obj)}")


def _sequence_index(obj: Any, key: Any) -> Any:
    if not isinstance(key, int) or isinstance(key, bool):
        raise _fail(f"array index must be an int, got {type_name(key)}")
    size = len(obj)
    index = key + size if key < 0 else key
    if not 0 <= index < size:
        raise _fail(f"index out of range: {key} (array length is {size})")
    return obj[index]


def _fetch_index(obj: Any, key: Any, optional: bool) -> Any:
    if obj is None:
        if optional:
            raise _ShortCircuit
        raise _fail(f"cannot fetch {key!r} from nil")
    if isinstance(obj, Mapping):
        if not _hashable_key(key):
            raise _fail(f"invalid map key of type {type_name(key)}")
        return obj.get(key)
    if isinstance(obj, list | tuple | str):
        return _sequence_index(obj, key)
    if isinstance(obj, Semver) and isinstance(key, str) and key in SEMVER_FIELDS:
        return SEMVER_FIELDS[key](obj)
    raise _fail(f"cannot fetch {key!r} from {type_name(obj)}")


def _compile_member(node: syntax.Member) -> Fn:
    target = _compile(node.target)
    name, optional = node.name, node.optional

    def member(scope: Scope) -> Any:
        obj = target(scope)
        if type(obj) is dict:
            return obj.get(name)
        return _fetch_member(obj, name, optional)

    return member


def _compile_index(node: syntax.Index) -> Fn:
    target = _compile(node.target)
    optional = node.optional
    if isinstance(node.index, syntax.Literal) and isinstance(node.index.value, str):
        key = node.index.value

        def constant_key(scope: Scope) -> Any:
            obj = target(scope)
            if type(obj) is dict:
                return obj.get(key)
            return _fetch_index(obj, key, optional)

        return constant_key
    index = _compile(node.index)

    def dynamic_key(scope: Scope) -> Any:
        return _fetch_index(target(scope), index(scope), optional)

    return dynamic_key


def _slice_bound(value: Any, default: int, size: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(f"slice index must be an int, got {type_name(value)}")
    index: int = value + size if value < 0 else value
    return min(max(index, 0), size)


def _compile_slice(node: syntax.Slice) -> Fn:
    target = _compile(node.target)
    low = _compile(node.low) if node.low else None
    high = _compile(node.high) if node.high else None
    optional = node.optional

    def slice_(scope: Scope) -> Any:
        obj = target(scope)
        if obj is None and optional:
            raise _ShortCircuit
        if not isinstance(obj, list | tuple | str):
            raise _fail(f"cannot slice {type_name(obj)}")
        size = len(obj)
        start = _slice_bound(low(scope) if low else None, 0, size)
        end = _slice_bound(high(scope) if high else None, size, size)
        return obj[start : max(start, end)]

    return slice_


def _compile_chain(node: syntax.OptionalChain) -> Fn:
    inner = _compile(node.inner)

    def chain(scope: Scope) -> Any:
        try:
            return inner(scope)
        except _ShortCircuit:
            return None

    return chain


# --- calls -----------------------------------------------------------------------------------


def _invoke(name: str, fn: Callable[..., Any], args: list[Any]) -> Any:
    try:
        result = fn(*args)
        # Functions work in proportion to what they read and build: count both.
        charge(size_of(result) + sum(size_of(arg) for arg in args))
        return result
    except (ExpressionError, LongshoremanError, _ShortCircuit):
        raise
    except RecursionError:
        raise _fail(f"{name}(): nested too deeply") from None
    except Exception as exc:
        # A caller-supplied function failed in a way it did not classify; the expression
        # failed, and the original stays attached as __cause__ for the logs.
        raise _fail(f"{name}(): {exc}") from exc


def _compile_call(node: syntax.Call) -> Fn:
    name = node.name
    builtin = BUILTINS.get(name)
    arg_fns = [_compile(arg) for arg in node.args]

    def call(scope: Scope) -> Any:
        fn = scope.functions.get(name) or builtin
        if fn is None:
            raise _fail(f"unknown function {name}()")
        return _invoke(name, fn, [arg(scope) for arg in arg_fns])

    return call


# Methods callable on our own value classes, by exact type (never looked up on the value).
_METHODS: dict[type, Mapping[str, Callable[..., Any]]] = {
    Semver: SEMVER_METHODS,
    GoTime: TIME_METHODS,
    GoDuration: DURATION_METHODS,
    GoLocation: LOCATION_METHODS,
}


def _compile_method_call(node: syntax.MethodCall) -> Fn:
    target = _compile(node.target)
    arg_fns = [_compile(arg) for arg in node.args]
    name, optional = node.name, node.optional

    def method_call(scope: Scope) -> Any:
        obj = target(scope)
        if obj is None:
            if optional:
                raise _ShortCircuit
            raise _fail(f"cannot call method {name}() on nil")
        if isinstance(obj, Mapping):
            # expr-lang calls a function held in a map (the http step's response.header(...)).
            # Such values are put there by the engine, never built from expression text; classes
            # are refused so no constructor can be reached this way.
            fn = obj.get(name)
            if callable(fn) and not isinstance(fn, type):
                return _invoke(name, fn, [arg(scope) for arg in arg_fns])
            raise _fail(f"cannot call {name}(): the map has no function {name!r}")
        table = _METHODS.get(type(obj))
        method = table.get(name) if table is not None else None
        if method is None:
            raise _fail(f"type {type_name(obj)} has no method {name}()")
        args = [arg(scope) for arg in arg_fns]
        try:
            return method(obj, *args)
        except TypeError:
            raise _fail(f"wrong number of arguments for method {name}()") from None
        except (OverflowError, ValueError) as exc:
            raise _fail(f"{name}(): {exc}") from None

    return method_call


# --- operators -------------------------------------------------------------------------------


def _check_bool(op: str, value: Any) -> bool:
    if type(value) is not bool:
        raise _fail(f"invalid operation: {op} needs bool operands, got {type_name(value)}")
    return value


def _compile_unary(node: syntax.Unary) -> Fn:
    operand = _compile(node.operand)
    op = node.operator
    if op in ("!", "not"):

        def negate(scope: Scope) -> Any:
            return not _check_bool(op, operand(scope))

        return negate

    def sign(scope: Scope) -> Any:
        value = operand(scope)
        if not is_number(value):
            raise _fail(f"invalid operation: {op}{type_name(value)}")
        if op == "+":
            return value
        result = -value
        if type(result) is int and result > INT64_MAX:
            raise _fail("integer overflow")
        return result

    return sign


def _int_result(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise _fail("integer overflow")


def _time_arithmetic(op: str, a: Any, b: Any) -> Any:
    """expr-lang's operators on time.Time and time.Duration (runtime/helpers)."""
    if op == "+":
        if isinstance(a, GoTime) and isinstance(b, GoDuration):
            return GoTime(a.unix_ns + b.ns, a.location)
        if isinstance(a, GoDuration) and isinstance(b, GoTime):
            return GoTime(b.unix_ns + a.ns, b.location)
        if isinstance(a, GoDuration) and isinstance(b, GoDuration):
            return GoDuration(a.ns + b.ns)
    elif op == "-":
        if isinstance(a, GoTime) and isinstance(b, GoTime):
            return GoDuration(a.unix_ns - b.unix_ns)
        if isinstance(a, GoTime) and isinstance(b, GoDuration):
            return GoTime(a.unix_ns - b.ns, a.location)
        if isinstance(a, GoDuration) and isinstance(b, GoDuration):
            return GoDuration(a.ns - b.ns)
    elif op == "*":
        # An int times a Duration is a Duration; a float times one is a float of nanoseconds.
        duration, factor = (a, b) if isinstance(a, GoDuration) else (b, a)
        if isinstance(duration, GoDuration) and type(factor) is int:
            return GoDuration(duration.ns * factor)
        if isinstance(duration, GoDuration) and type(factor) is float:
            return duration.ns * factor
    raise _mismatch(op, a, b)


_DATE_TYPES = (GoTime, GoDuration)


def _add(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        result = a + b
        return _int_result(result) if type(result) is int else result
    if isinstance(a, _DATE_TYPES) or isinstance(b, _DATE_TYPES):
        return _time_arithmetic("+", a, b)
    if isinstance(a, str) and isinstance(b, str):
        check_string_length(len(a) + len(b))
        return a + b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        check_list_length(len(a) + len(b))
        return [*a, *b]
    raise _mismatch("+", a, b)


def _arithmetic(op: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if not (is_number(a) and is_number(b)):
            if isinstance(a, _DATE_TYPES) or isinstance(b, _DATE_TYPES):
                return _time_arithmetic(op, a, b)
            raise _mismatch(op, a, b)
        result = fn(a, b)
        return _int_result(result) if type(result) is int else result

    return apply


def _divide(a: Any, b: Any) -> float:
    if not (is_number(a) and is_number(b)):
        raise _mismatch("/", a, b)
    if b == 0:
        # Go would produce ±Inf or NaN here, which then fails to render as JSON; saying so
        # at the division is clearer.
        raise _fail("division by zero")
    return float(a) / float(b)


def _modulo(a: Any, b: Any) -> int:
    if not (type(a) is int and type(b) is int):
        raise _mismatch("%", a, b)
    if b == 0:
        raise _fail("integer divide by zero")
    # Go truncates toward zero (-7 % 3 == -1); Python floors (-7 % 3 == 2).
    remainder = abs(a) % abs(b)
    return -remainder if a < 0 else remainder


def _power(a: Any, b: Any) -> float:
    if not (is_number(a) and is_number(b)):
        raise _mismatch("**", a, b)
    try:
        # expr-lang computes ** with math.Pow on float64; so do we, which also bounds the size.
        return math.pow(float(a), float(b))
    except OverflowError:
        raise _fail("numeric overflow") from None
    except ValueError:
        raise _fail(f"invalid operation: {a} ** {b}") from None


def _range(a: Any, b: Any) -> list[int]:
    if not (type(a) is int and type(b) is int):
        raise _mismatch("..", a, b)
    check_list_length(b - a + 1)
    return list(range(a, b + 1))


def _ordering(op: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def apply(a: Any, b: Any) -> bool:
        if (is_number(a) and is_number(b)) or (isinstance(a, str) and isinstance(b, str)):
            return compare(a, b)
        if isinstance(a, GoTime) and isinstance(b, GoTime):
            return compare(a.unix_ns, b.unix_ns)
        if isinstance(a, GoDuration) and isinstance(b, GoDuration):
            return compare(a.ns, b.ns)
        raise _mismatch(op, a, b)

    return apply


def _member_of(item: Any, container: Any) -> bool:
    if isinstance(container, list | tuple):
        return any(equal(item, x) for x in container)
    if isinstance(container, Mapping):
        return _hashable_key(item) and item in container
    raise _fail(f'operator "in" not defined on {type_name(container)}')


def _string_operator(op: str, fn: Callable[[str, str], bool]) -> Callable[[Any, Any], bool]:
    def apply(a: Any, b: Any) -> bool:
        if not (isinstance(a, str) and isinstance(b, str)):
            raise _mismatch(op, a, b)
        return fn(a, b)

    return apply


def _regex_search(text: str, pattern: str) -> bool:
    return compile_regex(pattern).search(text)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": _add,
    "-": _arithmetic("-", operator.sub),
    "*": _arithmetic("*", operator.mul),
    "/": _divide,
    "%": _modulo,
    "**": _power,
    "^": _power,
    "..": _range,
    "<": _ordering("<", operator.lt),
    "<=": _ordering("<=", operator.le),
    ">": _ordering(">", operator.gt),
    ">=": _ordering(">=", operator.ge),
    "in": _member_of,
    "contains": _string_operator("contains", lambda a, b: b in a),
    "startsWith": _string_operator("startsWith", str.startswith),
    "endsWith": _string_operator("endsWith", str.endswith),
    "matches": _string_operator("matches", _regex_search),
}


def _compile_binary(node: syntax.Binary) -> Fn:
    op = node.operator
    left, right = _compile(node.left), _compile(node.right)
    if op in ("&&", "and"):

        def and_(scope: Scope) -> Any:
            if not _check_bool(op, left(scope)):
                return False
            return _check_bool(op, right(scope))

        return and_
    if op in ("||", "or"):

        def or_(scope: Scope) -> Any:
            if _check_bool(op, left(scope)):
                return True
            return _check_bool(op, right(scope))

        return or_
    if op == "??":

        def coalesce(scope: Scope) -> Any:
            value = left(scope)
            return right(scope) if value is None else value

        return coalesce
    if op == "==":

        def eq(scope: Scope) -> Any:
            a, b = left(scope), right(scope)
            if type(a) is str and type(b) is str:
                return a == b
            return equal(a, b)

        return eq
    if op == "!=":

        def ne(scope: Scope) -> Any:
            a, b = left(scope), right(scope)
            if type(a) is str and type(b) is str:
                return a != b
            return not equal(a, b)

        return ne
    if op == "matches" and isinstance(node.right, syntax.Literal):
        return _compile_constant_regex(left, node.right.value)
    apply = _BINARY[op]

    def binary(scope: Scope) -> Any:
        return apply(left(scope), right(scope))

    return binary


def _compile_constant_regex(left: Fn, pattern: Any) -> Fn:
    if not isinstance(pattern, str):
        raise ExpressionSyntaxError(
            reason=f"matches needs a string pattern, got {type_name(pattern)}"
        )
    try:
        regex = compile_regex(pattern)
    except RegexError as exc:
        raise ExpressionSyntaxError(reason=exc.reason) from None

    def matches(scope: Scope) -> Any:
        text = left(scope)
        if not isinstance(text, str):
            raise _mismatch("matches", text, pattern)
        return regex.search(text)

    return matches


def _compile_conditional(node: syntax.Conditional) -> Fn:
    condition = _compile(node.condition)
    then, otherwise = _compile(node.then), _compile(node.otherwise)

    def conditional(scope: Scope) -> Any:
        value = condition(scope)
        if value is True:
            return then(scope)
        if value is False:
            return otherwise(scope)
        raise _fail(f"non-bool expression (type {type_name(value)}) used as condition")

    return conditional


# --- literals and names ----------------------------------------------------------------------


def _compile_literal(node: syntax.Literal) -> Fn:
    value = node.value
    return lambda scope: value


def _compile_identifier(node: syntax.Identifier) -> Fn:
    name = node.name
    if name == "$env":

        def environment(scope: Scope) -> Any:
            # A caller whose environment is not a map (a parsed document whose root is a list:
            # Kargo's yaml-parse runs expr over it) gives it as the variable "$env".
            if ENVIRONMENT in scope.variables:
                return scope.variables[ENVIRONMENT]
            # The variables the expression was given; closure locals (#...) are not part of it.
            return {k: v for k, v in scope.variables.items() if not str(k).startswith("#")}

        return environment

    def identifier(scope: Scope) -> Any:
        return scope.variables.get(name)

    return identifier


def _compile_list(node: syntax.ListLiteral) -> Fn:
    items = [_compile(item) for item in node.items]
    check_list_length(len(items))

    def list_literal(scope: Scope) -> Any:
        charge(len(items))
        return [item(scope) for item in items]

    return list_literal


def _compile_map(node: syntax.MapLiteral) -> Fn:
    entries = [(_compile(k), _compile(v)) for k, v in node.entries]

    def map_literal(scope: Scope) -> Any:
        result: dict[Any, Any] = {}
        for key_fn, value_fn in entries:
            key = key_fn(scope)
            if not _hashable_key(key):
                raise _fail(f"invalid map key of type {type_name(key)}")
            result[key] = value_fn(scope)
        return result

    return map_literal


# --- closures --------------------------------------------------------------------------------

# What one evaluation of a predicate body costs against the work budget: more than one unit, so
# nested closures over large arrays (map(1..99999, map(1..99999, #))) stop in about a second.
_ITERATION_COST = 8


def _compile_pointer(node: syntax.Pointer) -> Fn:
    key = "#" + node.name

    def pointer(scope: Scope) -> Any:
        return scope.variables.get(key)

    return pointer


def _compile_sequence(node: syntax.Sequence) -> Fn:
    steps = [_compile(n) for n in node.nodes]
    *first, last = steps

    def sequence(scope: Scope) -> Any:
        for step in first:
            step(scope)
        return last(scope)

    return sequence


def _compile_let(node: syntax.Let) -> Fn:
    name, value, body = node.name, _compile(node.value), _compile(node.body)

    def let(scope: Scope) -> Any:
        local = dict(scope.variables)
        local[name] = value(scope)
        return body(Scope(local, scope.functions))

    return let


def _elements(function: str, value: Any) -> list[Any] | tuple[Any, ...]:
    if isinstance(value, list | tuple):
        return value
    raise _fail(f"{function}(): cannot iterate over {type_name(value)}")


def _truth(function: str, value: Any) -> bool:
    if type(value) is not bool:
        raise _fail(f"{function}(): the predicate must return a bool, got {type_name(value)}")
    return value


class _Loop:
    """Runs a predicate body once per element, with ``#``/``#index`` (and ``#acc``) set."""

    __slots__ = ("inner", "local")

    def __init__(self, scope: Scope):
        self.local = dict(scope.variables)
        self.inner = Scope(self.local, scope.functions)

    def run(self, body: Fn, index: int, item: Any) -> Any:
        charge(_ITERATION_COST)
        self.local["#"] = item
        self.local["#index"] = index
        return body(self.inner)


def _predicate_all(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    for i, item in enumerate(items):
        if not _truth(name, loop.run(body, i, item)):
            return False
    return True


def _predicate_any(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    return any(_truth(name, loop.run(body, i, item)) for i, item in enumerate(items))


def _predicate_none(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    return not _predicate_any(name, items, body, scope)


def _predicate_one(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    return sum(_truth(name, loop.run(body, i, item)) for i, item in enumerate(items)) == 1


def _predicate_filter(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    return [item for i, item in enumerate(items) if _truth(name, loop.run(body, i, item))]


def _predicate_map(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    return [loop.run(body, i, item) for i, item in enumerate(items)]


def _predicate_find(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    last = name in ("findLast", "findLastIndex")
    order = range(len(items) - 1, -1, -1) if last else range(len(items))
    for i in order:
        if _truth(name, loop.run(body, i, items[i])):
            return i if name.endswith("Index") else items[i]
    # Nothing matched: nil for all four, the index forms included (expr-lang v1.17.8's compiler
    # emits OpNil after the loop; there is no -1 as in JavaScript).
    return None


def _predicate_count(name: str, items: Any, body: Fn | None, scope: Scope) -> Any:
    if body is None:  # count(xs) counts the elements that are true
        return sum(_truth(name, item) for item in items)
    loop = _Loop(scope)
    return sum(_truth(name, loop.run(body, i, item)) for i, item in enumerate(items))


def _predicate_sum(name: str, items: Any, body: Fn | None, scope: Scope) -> Any:
    if body is None:
        return total(items)
    loop = _Loop(scope)
    return total([loop.run(body, i, item) for i, item in enumerate(items)])


def _predicate_group_by(name: str, items: Any, body: Fn, scope: Scope) -> Any:
    loop = _Loop(scope)
    groups: dict[Any, list[Any]] = {}
    for i, item in enumerate(items):
        key = loop.run(body, i, item)
        if not _hashable_key(key):
            raise _fail(f"groupBy(): cannot group by a value of type {type_name(key)}")
        groups.setdefault(key, []).append(item)
    return groups


def _sort_key_kind(values: list[Any]) -> None:
    if all(is_number(v) for v in values) or all(isinstance(v, str) for v in values):
        return
    raise _fail("sortBy(): the predicate must return only numbers or only strings")


def _predicate_sort_by(name: str, items: Any, body: Fn, scope: Scope, order: Any) -> Any:
    if order not in ("asc", "desc"):
        raise _fail(f"sortBy(): invalid order {go_sprint_safe(order)}, expected asc or desc")
    loop = _Loop(scope)
    keys = [loop.run(body, i, item) for i, item in enumerate(items)]
    _sort_key_kind(keys)
    ranked = sorted(range(len(items)), key=keys.__getitem__, reverse=order == "desc")
    return [items[i] for i in ranked]


def go_sprint_safe(value: Any) -> str:
    return repr(value) if not isinstance(value, str) else value


_PREDICATE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "all": _predicate_all,
    "any": _predicate_any,
    "none": _predicate_none,
    "one": _predicate_one,
    "filter": _predicate_filter,
    "map": _predicate_map,
    "find": _predicate_find,
    "findIndex": _predicate_find,
    "findLast": _predicate_find,
    "findLastIndex": _predicate_find,
    "groupBy": _predicate_group_by,
}


def _compile_predicate_call(node: syntax.PredicateCall) -> Fn:
    name = node.name
    collection = _compile(node.args[0])
    body: Fn | None = None
    if len(node.args) > 1:
        predicate = node.args[1]
        assert isinstance(predicate, syntax.Predicate)
        body = _compile(predicate.body)
    extra = _compile(node.args[2]) if len(node.args) > 2 else None

    if name == "reduce":
        assert body is not None
        return _compile_reduce(collection, body, extra)
    if name == "sortBy":
        assert body is not None
        sort_body = body

        def sort_by(scope: Scope) -> Any:
            items = _elements(name, collection(scope))
            order = extra(scope) if extra is not None else "asc"
            return _predicate_sort_by(name, items, sort_body, scope, order)

        return sort_by
    if name in ("count", "sum"):
        apply_optional = _predicate_count if name == "count" else _predicate_sum

        def optional_predicate(scope: Scope) -> Any:
            return apply_optional(name, _elements(name, collection(scope)), body, scope)

        return optional_predicate
    apply = _PREDICATE_FUNCTIONS[name]
    assert body is not None
    required = body

    def predicate_call(scope: Scope) -> Any:
        return apply(name, _elements(name, collection(scope)), required, scope)

    return predicate_call


def _compile_reduce(collection: Fn, body: Fn, initial: Fn | None) -> Fn:
    def reduce(scope: Scope) -> Any:
        items = _elements("reduce", collection(scope))
        start = 0
        if initial is not None:
            acc = initial(scope)
        elif items:
            acc, start = items[0], 1
        else:
            raise _fail("reduce of empty array with no initial value")
        loop = _Loop(scope)
        for i in range(start, len(items)):
            loop.local["#acc"] = acc
            acc = loop.run(body, i, items[i])
        return acc

    return reduce


_COMPILERS: dict[type[syntax.Node], Callable[[Any], Fn]] = {
    syntax.Literal: _compile_literal,
    syntax.Identifier: _compile_identifier,
    syntax.Member: _compile_member,
    syntax.Index: _compile_index,
    syntax.Slice: _compile_slice,
    syntax.Call: _compile_call,
    syntax.MethodCall: _compile_method_call,
    syntax.OptionalChain: _compile_chain,
    syntax.Unary: _compile_unary,
    syntax.Binary: _compile_binary,
    syntax.Conditional: _compile_conditional,
    syntax.ListLiteral: _compile_list,
    syntax.MapLiteral: _compile_map,
    syntax.Pointer: _compile_pointer,
    syntax.Sequence: _compile_sequence,
    syntax.Let: _compile_let,
    syntax.PredicateCall: _compile_predicate_call,
}


def _compile(node: syntax.Node) -> Fn:
    return _COMPILERS[type(node)](node)


class Compiled:
    """A compiled expression. Immutable and safe to share between threads and tasks."""

    __slots__ = ("_fn", "source")

    def __init__(self, source: str, fn: Fn):
        self.source = source
        self._fn = fn

    def __repr__(self) -> str:
        return f"Compiled({self.source!r})"

    def evaluate(self, scope: Scope, *, where: str | None = None) -> Any:
        """Evaluate against ``scope``; errors are :class:`ExpressionError` naming the source.

        Errors of the engine's own kinds (:class:`promoter.errors.LongshoremanError`) raised by
        a caller-supplied function pass through unchanged, so "retry later" stays retryable.
        """
        try:
            with work_budget():
                return self._fn(scope)
        except ExpressionError as exc:
            raise exc.add_context(expression=self.source, where=where) from exc.__cause__
        except LongshoremanError:
            raise
        except RecursionError:
            raise ExpressionError(
                reason="nested too deeply to evaluate", expression=self.source, where=where
            ) from None
        except Exception as exc:  # a bug of ours must still surface as an expression error
            raise ExpressionError(
                reason=f"internal error: {type(exc).__name__}: {exc}",
                expression=self.source,
                where=where,
            ) from exc


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> Compiled:
    """Parse and compile a bare expression (no ``${{ }}``); cached on the source text.

    Raises :class:`ExpressionSyntaxError` for text that does not parse.
    """
    try:
        fn = _compile(syntax.parse(source))
    except ExpressionSyntaxError as exc:
        raise exc.add_context(expression=source, where=None) from None
    except RecursionError:
        raise ExpressionSyntaxError(
            reason="expression is nested too deeply", expression=source
        ) from None
    except Exception as exc:  # a bug of ours must still surface as an expression error
        raise ExpressionSyntaxError(
            reason=f"internal error: {type(exc).__name__}: {exc}", expression=source
        ) from exc
    return Compiled(source, fn)
