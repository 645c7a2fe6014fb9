"""Compiles a parsed expression into nested Python closures, once per source text.

Each AST node becomes one small function ``scope -> value``; evaluation is then a handful of
plain calls (1-5 µs for typical Kargo expressions) with no tree walking or dispatch on node
types. :func:`compile_expression` is cached on the source text, so a manifest's expressions are
parsed once per process.

Sandboxing: member access only reads keys of mappings and the whitelisted members of our own
value classes (:mod:`promoter.expressions.semver`); functions are looked up by name in the
caller's ``Scope.functions`` and our builtins, never found on values. No Python attribute is
ever read by a name taken from expression text, so ``''.__class__`` is just an error.
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
from promoter.expressions.builtins import BUILTINS
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


@dataclass(frozen=True)
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


def _compile_method_call(node: syntax.MethodCall) -> Fn:
    target = _compile(node.target)
    arg_fns = [_compile(arg) for arg in node.args]
    name, optional = node.name, node.optional
    method = SEMVER_METHODS.get(name)

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
        if not isinstance(obj, Semver) or method is None:
            raise _fail(f"type {type_name(obj)} has no method {name}()")
        args = [arg(scope) for arg in arg_fns]
        try:
            return method(obj, *args)
        except TypeError:
            raise _fail(f"wrong number of arguments for method {name}()") from None

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


def _add(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        result = a + b
        return _int_result(result) if type(result) is int else result
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
