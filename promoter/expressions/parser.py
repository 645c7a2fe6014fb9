"""Lexer and Pratt parser for our expr-lang dialect, producing a small AST.

Why our own parser instead of a library: cel-python, the closest maintained expression library,
has no ``??`` and no ``?.``, errors on a missing map key where expr-lang yields nil (Kargo
manifests rely on ``vars.x ?? 'default'``), has no expr-lang method or pipe syntax
(``semverParse(v).IncMinor().String()``), and its tree-walking evaluation is too slow for our
50 µs budget per cached evaluation. A ~500-line precedence-climbing parser whose AST is compiled
once into Python closures (see :mod:`promoter.expressions.compiler`) is faster, and lets us
mirror expr-lang's precedences and nil rules exactly. User text is never handed to Python's
``eval``, ``exec`` or ``ast``.

Operator precedences are expr-lang's (``parser/operator/operator.go``); notably ``??`` binds
tighter than every other binary operator, so ``a ?? b + 1`` is ``(a ?? b) + 1``.

The grammar follows expr-lang v1.17 (the version Kargo builds with): ``let x = 1; x + 1``,
``if c { a } else { b }``, ``a; b`` sequences, chained comparisons (``1 < x < 3`` is
``1 < x && x < 3``), and predicates: the second argument of ``filter``, ``map``, ``all``...
(:data:`PREDICATES`) is parsed as a closure in which ``#`` is the element, ``#index`` its
position, ``#acc`` the accumulator of ``reduce``, and a leading ``.name`` means ``#.name``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from promoter.expressions.errors import ExpressionSyntaxError

# Deeper input is refused with a syntax error instead of exhausting Python's recursion limit
# while parsing, compiling or evaluating (every AST level costs a few stack frames).
MAX_NESTING = 64
MAX_AST_DEPTH = 200
MAX_SOURCE_LENGTH = 100_000

INT64_MAX = (1 << 63) - 1


# --- AST -----------------------------------------------------------------------------------


class Node:
    """Base of AST nodes. ``depth`` is the height of the subtree, bounded by MAX_AST_DEPTH."""

    __slots__ = ("depth",)
    depth: int


class Literal(Node):
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value
        self.depth = 1


class Identifier(Node):
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name
        self.depth = 1


class Member(Node):
    """``target.name`` or ``target?.name``."""

    __slots__ = ("name", "optional", "target")

    def __init__(self, target: Node, name: str, optional: bool):
        self.target, self.name, self.optional = target, name, optional
        self.depth = target.depth + 1


class Index(Node):
    """``target[index]`` or ``target?.[index]``."""

    __slots__ = ("index", "optional", "target")

    def __init__(self, target: Node, index: Node, optional: bool):
        self.target, self.index, self.optional = target, index, optional
        self.depth = max(target.depth, index.depth) + 1


class Slice(Node):
    """``target[low:high]`` (either bound optional)."""

    __slots__ = ("high", "low", "optional", "target")

    def __init__(self, target: Node, low: Node | None, high: Node | None, optional: bool):
        self.target, self.low, self.high, self.optional = target, low, high, optional
        self.depth = max(target.depth, low.depth if low else 0, high.depth if high else 0) + 1


class Call(Node):
    """``name(args...)``: a builtin or a function from the Scope."""

    __slots__ = ("args", "name")

    def __init__(self, name: str, args: list[Node]):
        self.name, self.args = name, args
        self.depth = max((a.depth for a in args), default=0) + 1


class MethodCall(Node):
    """``target.name(args...)``: only on values with a whitelist of methods (semver)."""

    __slots__ = ("args", "name", "optional", "target")

    def __init__(self, target: Node, name: str, args: list[Node], optional: bool):
        self.target, self.name, self.args, self.optional = target, name, args, optional
        self.depth = max([target.depth, *(a.depth for a in args)]) + 1


class OptionalChain(Node):
    """Root of a member chain containing ``?.``: a nil met at a ``?.`` makes the whole chain nil."""

    __slots__ = ("inner",)

    def __init__(self, inner: Node):
        self.inner = inner
        self.depth = inner.depth + 1


class Unary(Node):
    __slots__ = ("operand", "operator")

    def __init__(self, operator: str, operand: Node):
        self.operator, self.operand = operator, operand
        self.depth = operand.depth + 1


class Binary(Node):
    __slots__ = ("left", "operator", "right")

    def __init__(self, operator: str, left: Node, right: Node):
        self.operator, self.left, self.right = operator, left, right
        self.depth = max(left.depth, right.depth) + 1


class Conditional(Node):
    """``cond ? a : b``; ``cond ?: b`` is parsed with ``then is cond`` as expr-lang does."""

    __slots__ = ("condition", "otherwise", "then")

    def __init__(self, condition: Node, then: Node, otherwise: Node):
        self.condition, self.then, self.otherwise = condition, then, otherwise
        self.depth = max(condition.depth, then.depth, otherwise.depth) + 1


class ListLiteral(Node):
    __slots__ = ("items",)

    def __init__(self, items: list[Node]):
        self.items = items
        self.depth = max((i.depth for i in items), default=0) + 1


class MapLiteral(Node):
    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[Node, Node]]):
        self.entries = entries
        self.depth = max((max(k.depth, v.depth) for k, v in entries), default=0) + 1


class Pointer(Node):
    """``#`` (``name`` ""), ``#index`` or ``#acc`` inside a predicate."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name
        self.depth = 1


class Predicate(Node):
    """A closure argument of a predicate builtin: evaluated once per element."""

    __slots__ = ("body",)

    def __init__(self, body: Node):
        self.body = body
        self.depth = body.depth + 1


class PredicateCall(Node):
    """``filter(xs, pred)`` and the other :data:`PREDICATES`; some args are :class:`Predicate`."""

    __slots__ = ("args", "name")

    def __init__(self, name: str, args: list[Node]):
        self.name, self.args = name, args
        self.depth = max((a.depth for a in args), default=0) + 1


class Sequence(Node):
    """``a; b; c``: evaluates each in turn, its value is the last one's."""

    __slots__ = ("nodes",)

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.depth = max(n.depth for n in nodes) + 1


class Let(Node):
    """``let name = value; body``."""

    __slots__ = ("body", "name", "value")

    def __init__(self, name: str, value: Node, body: Node):
        self.name, self.value, self.body = name, value, body
        self.depth = max(value.depth, body.depth) + 1


# --- Lexer ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "num", "str", "ident", "op", "eof"
    value: Any
    pos: int
    text: str


_SKIP = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F](?:_?[0-9a-fA-F])*"
    r"|0[oO][0-7](?:_?[0-7])*"
    r"|0[bB][01](?:_?[01])*"
    r"|\d(?:_?\d)*(?:\.\d(?:_?\d)*)?(?:[eE][+-]?\d(?:_?\d)*)?",
    re.ASCII,
)
# expr-lang letters include "_" and "$" ($env); digits may follow the first letter.
_IDENT = re.compile(r"(?:[^\W\d]|\$)(?:\w|\$)*")
_POINTER = re.compile(r"#(\w*)")
_LEADING_DOT_NUMBER = re.compile(r"\.\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?", re.ASCII)
_OPERATORS = (
    "?.", "??", "..", "**", "==", "!=", "<=", ">=", "&&", "||",
    "-", "+", "*", "/", "%", "<", ">", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{", "}",
    "|", "^", ";", "=",
)  # fmt: skip
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`",
}  # fmt: skip


def _position(source: str, pos: int) -> str:
    line = source.count("\n", 0, pos) + 1
    column = pos - (source.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"


def _error(source: str, pos: int, message: str) -> ExpressionSyntaxError:
    return ExpressionSyntaxError(reason=f"{message} ({_position(source, pos)})", expression=source)


def _read_string(source: str, start: int) -> tuple[str, int]:
    quote = source[start]
    if quote == "`":
        end = source.find("`", start + 1)
        if end < 0:
            raise _error(source, start, "literal not terminated")
        return source[start + 1 : end], end + 1
    out: list[str] = []
    i = start + 1
    n = len(source)
    while True:
        if i >= n or source[i] == "\n":
            raise _error(source, start, "literal not terminated")
        ch = source[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            raise _error(source, start, "literal not terminated")
        esc = source[i + 1]
        if esc in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[esc])
            i += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(esc)
        if width is not None:
            digits = source[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _error(source, i, "invalid char escape")
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise _error(source, i, "invalid char escape")
            out.append(chr(code))
            i += 2 + width
            continue
        if esc in "01234567":
            digits = source[i + 1 : i + 4]
            if len(digits) != 3 or not all(c in "01234567" for c in digits):
                raise _error(source, i, "invalid char escape")
            code = int(digits, 8)
            if code > 255:
                raise _error(source, i, "invalid char escape")
            out.append(chr(code))
            i += 4
            continue
        raise _error(source, i, "invalid char escape")


def _number_value(source: str, pos: int, text: str) -> int | float:
    digits = text.replace("_", "")
    lowered = digits.lower()
    if lowered.startswith(("0x", "0o", "0b")):
        value: int | float = int(digits, 0)
    elif any(c in lowered for c in ".e"):
        value = float(digits)
        if value == float("inf"):
            raise _error(source, pos, f"number {text} out of range")
        return value
    else:
        value = int(digits, 10)
    if value > INT64_MAX:
        raise _error(source, pos, f"integer {text} out of range")
    return value


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens, ending with an ``eof`` token."""
    tokens: list[Token] = []
    pos = 0
    n = len(source)
    while True:
        skipped = _SKIP.match(source, pos)
        if skipped:
            pos = skipped.end()
        if pos >= n:
            tokens.append(Token("eof", None, pos, ""))
            return tokens
        ch = source[pos]
        if "0" <= ch <= "9":
            match = _NUMBER.match(source, pos)
            assert match is not None
            end = match.end()
            if end < n and (source[end].isalnum() or source[end] == "_"):
                raise _error(source, pos, "bad number syntax")
            text = match.group()
            tokens.append(Token("num", _number_value(source, pos, text), pos, text))
            pos = end
            continue
        if ch in "\"'`":
            value, end = _read_string(source, pos)
            tokens.append(Token("str", value, pos, source[pos:end]))
            pos = end
            continue
        if ch == "." and pos + 1 < n and "0" <= source[pos + 1] <= "9":
            match = _LEADING_DOT_NUMBER.match(source, pos)  # expr-lang reads ".5" as 0.5
            assert match is not None
            text = match.group()
            tokens.append(Token("num", _number_value(source, pos, "0" + text), pos, text))
            pos = match.end()
            continue
        if ch == "#":
            match = _POINTER.match(source, pos)
            assert match is not None
            tokens.append(Token("pointer", match.group(1), pos, match.group()))
            pos = match.end()
            continue
        if source.startswith(("${{", "${%"), pos):
            raise _error(source, pos, "unexpected '$': a bare expression is written without ${{ }}")
        match = _IDENT.match(source, pos)
        if match:
            tokens.append(Token("ident", match.group(), pos, match.group()))
            pos = match.end()
            continue
        for op in _OPERATORS:
            if source.startswith(op, pos):
                tokens.append(Token("op", op, pos, op))
                pos += len(op)
                break
        else:
            raise _error(source, pos, f"unexpected character {ch!r}")


# --- Parser --------------------------------------------------------------------------------

_LEFT, _RIGHT = 1, 2

# expr-lang parser/operator/operator.go.
BINARY_OPERATORS: dict[str, tuple[int, int]] = {
    "|": (0, _LEFT),
    "or": (10, _LEFT),
    "||": (10, _LEFT),
    "and": (15, _LEFT),
    "&&": (15, _LEFT),
    "==": (20, _LEFT),
    "!=": (20, _LEFT),
    "<": (20, _LEFT),
    ">": (20, _LEFT),
    ">=": (20, _LEFT),
    "<=": (20, _LEFT),
    "in": (20, _LEFT),
    "matches": (20, _LEFT),
    "contains": (20, _LEFT),
    "startsWith": (20, _LEFT),
    "endsWith": (20, _LEFT),
    "..": (25, _LEFT),
    "+": (30, _LEFT),
    "-": (30, _LEFT),
    "*": (60, _LEFT),
    "/": (60, _LEFT),
    "%": (60, _LEFT),
    "**": (100, _RIGHT),
    "^": (100, _RIGHT),
    "??": (500, _LEFT),
}
UNARY_OPERATORS = {"not": 50, "!": 50, "-": 90, "+": 90}
_WORD_OPERATORS = frozenset({"or", "and", "in", "matches", "contains", "startsWith", "endsWith"})
_NEGATABLE = frozenset({"in", "matches", "contains", "startsWith", "endsWith"})
_LITERAL_WORDS = {"true": True, "false": False, "nil": None}
_COMPARISONS = frozenset({"<", ">", "<=", ">="})

# expr-lang parser/parser.go ``predicates``: the argument kinds of each closure builtin.
# "expr" is an ordinary argument, "pred" a closure; a trailing "?" marks an optional one.
PREDICATES: dict[str, tuple[str, ...]] = {
    "all": ("expr", "pred"),
    "none": ("expr", "pred"),
    "any": ("expr", "pred"),
    "one": ("expr", "pred"),
    "filter": ("expr", "pred"),
    "map": ("expr", "pred"),
    "count": ("expr", "pred?"),
    "sum": ("expr", "pred?"),
    "find": ("expr", "pred"),
    "findIndex": ("expr", "pred"),
    "findLast": ("expr", "pred"),
    "findLastIndex": ("expr", "pred"),
    "groupBy": ("expr", "pred"),
    "sortBy": ("expr", "pred", "expr?"),
    "reduce": ("expr", "pred", "expr?"),
}


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0
        self.nesting = 0
        self.predicate_depth = 0  # > 0 inside a predicate, where "#" and ".name" are allowed

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def peek(self) -> Token:
        return self.tokens[min(self.index + 1, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != "eof":
            self.index += 1
        return token

    def error(self, message: str, token: Token | None = None) -> ExpressionSyntaxError:
        return _error(self.source, (token or self.token).pos, message)

    def unexpected(self, token: Token | None = None) -> ExpressionSyntaxError:
        token = token or self.token
        if token.kind == "eof":
            return self.error("unexpected end of expression", token)
        return self.error(f"unexpected token {token.text!r}", token)

    def is_op(self, value: str) -> bool:
        token = self.token
        return token.kind == "op" and token.value == value

    def expect_op(self, value: str) -> None:
        if not self.is_op(value):
            if self.token.kind == "eof":
                raise self.error(f"expected {value!r} but reached the end of the expression")
            raise self.error(f"expected {value!r} but found {self.token.text!r}")
        self.advance()

    def checked(self, node: Node) -> Node:
        if node.depth > MAX_AST_DEPTH:
            raise self.error("expression is nested too deeply")
        return node

    def is_word(self, value: str) -> bool:
        token = self.token
        return token.kind == "ident" and token.value == value

    def parse(self) -> Node:
        node = self.parse_sequence()
        if self.token.kind != "eof":
            raise self.unexpected()
        return node

    def parse_sequence(self) -> Node:
        nodes = [self.parse_expression(0)]
        while self.is_op(";"):
            self.advance()
            if self.token.kind == "eof":
                break  # a trailing ";" is allowed
            nodes.append(self.parse_expression(0))
        return nodes[0] if len(nodes) == 1 else self.checked(Sequence(nodes))

    def parse_let(self) -> Node:
        self.advance()
        name = self.token
        if name.kind != "ident" or name.value in _LITERAL_WORDS:
            raise self.error("expected a variable name after 'let'")
        self.advance()
        self.expect_op("=")
        value = self.parse_expression(0)
        self.expect_op(";")
        return self.checked(Let(name.value, value, self.parse_sequence()))

    def parse_if(self) -> Node:
        self.advance()
        condition = self.parse_expression(0)
        self.expect_op("{")
        then = self.parse_sequence()
        self.expect_op("}")
        if not self.is_word("else"):
            raise self.error("expected 'else' after the block of 'if'")
        self.advance()
        if self.is_word("if"):
            otherwise = self.parse_if()
        else:
            self.expect_op("{")
            otherwise = self.parse_sequence()
            self.expect_op("}")
        return self.checked(Conditional(condition, then, otherwise))

    def parse_expression(self, precedence: int) -> Node:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error("expression is nested too deeply")
        try:
            if precedence == 0 and self.is_word("let"):
                return self.parse_let()
            if precedence == 0 and self.is_word("if"):
                return self.parse_if()
            left = self.parse_primary()
            while True:
                token = self.token
                if token.kind == "op":
                    operator = token.value
                elif token.kind == "ident" and (
                    token.value in _WORD_OPERATORS or token.value == "not"
                ):
                    operator = token.value
                else:
                    break
                negate = False
                if operator == "not":
                    follower = self.peek()
                    if follower.kind != "ident" or follower.value not in _NEGATABLE:
                        break
                    operator, negate = follower.value, True
                info = BINARY_OPERATORS.get(operator)
                if info is None or info[0] < precedence:
                    break
                self.advance()
                if negate:
                    self.advance()
                if operator == "|":
                    left = self.parse_pipe(left)
                    continue
                op_precedence, associativity = info
                if operator in _COMPARISONS:
                    left = self.parse_comparison(left, operator, op_precedence)
                    continue
                right = self.parse_expression(
                    op_precedence + 1 if associativity == _LEFT else op_precedence
                )
                left = self.checked(Binary(operator, left, right))
                if negate:
                    left = self.checked(Unary("not", left))
            if precedence == 0:
                left = self.parse_conditional(left)
            return left
        finally:
            self.nesting -= 1

    def parse_comparison(self, left: Node, operator: str, precedence: int) -> Node:
        """``a < b < c`` is ``a < b && b < c``, as in expr-lang (``parseComparison``)."""
        root: Node | None = None
        while True:
            right = self.parse_expression(precedence + 1)
            comparison = self.checked(Binary(operator, left, right))
            root = comparison if root is None else self.checked(Binary("&&", root, comparison))
            token = self.token
            if token.kind != "op" or token.value not in _COMPARISONS:
                return root
            self.advance()
            left, operator = right, token.value

    def parse_conditional(self, node: Node) -> Node:
        while self.is_op("?"):
            self.advance()
            if self.is_op(":"):
                self.advance()
                then = node
                otherwise = self.parse_expression(0)
            else:
                then = self.parse_expression(0)
                self.expect_op(":")
                otherwise = self.parse_expression(0)
            node = self.checked(Conditional(node, then, otherwise))
        return node

    def parse_pipe(self, left: Node) -> Node:
        token = self.token
        if token.kind != "ident" or token.value in _LITERAL_WORDS:
            raise self.error("expected a function name after '|'")
        self.advance()
        if token.value in PREDICATES and self.is_op("("):
            return self.parse_predicate_call(token.value, [left])
        args = self.parse_arguments() if self.is_op("(") else []
        return self.checked(Call(token.value, [left, *args]))

    def parse_predicate_call(self, name: str, args: list[Node]) -> Node:
        kinds = PREDICATES[name][len(args) :]
        self.expect_op("(")
        for i, kind in enumerate(kinds):
            if self.is_op(")"):
                if kind.endswith("?"):
                    break
                raise self.error(f"{name}() expects at least {len(PREDICATES[name])} arguments")
            if i > 0:
                self.expect_op(",")
            if kind.startswith("pred"):
                args.append(self.parse_predicate())
            else:
                args.append(self.parse_expression(0))
        if self.is_op(","):
            self.advance()
        self.expect_op(")")
        return self.checked(PredicateCall(name, args))

    def parse_predicate(self) -> Node:
        braces = self.is_op("{")
        if braces:
            self.advance()
        self.predicate_depth += 1
        try:
            if braces:
                body = self.parse_sequence()
            else:
                body = self.parse_expression(0)
                if self.is_op(";"):
                    raise self.error("wrap predicate with brackets { and }")
        finally:
            self.predicate_depth -= 1
        if braces:
            self.expect_op("}")
        return self.checked(Predicate(body))

    def parse_primary(self) -> Node:
        token = self.token
        unary = None
        if token.kind == "op" and token.value in ("!", "-", "+"):
            unary = token.value
        elif token.kind == "ident" and token.value == "not":
            unary = "not"
        if unary is not None:
            self.advance()
            operand = self.parse_expression(UNARY_OPERATORS[unary])
            if unary == "-" and isinstance(operand, Literal) and _is_plain_number(operand.value):
                return Literal(-operand.value)
            return self.checked(Unary(unary, operand))
        if self.is_op("("):
            self.advance()
            inner = self.parse_sequence()
            self.expect_op(")")
            return self.parse_postfix(inner)
        if token.kind == "pointer" or (self.predicate_depth and self.is_op(".")):
            if not self.predicate_depth:
                raise self.error(f"{token.text!r} can only be used inside a predicate")
            if token.kind == "pointer":
                self.advance()
            # ".name" inside a predicate is "#.name": parse_postfix reads the ".name".
            return self.parse_postfix(Pointer(token.value if token.kind == "pointer" else ""))
        return self.parse_postfix(self.parse_secondary())

    def parse_secondary(self) -> Node:
        token = self.token
        if token.kind in ("num", "str"):
            self.advance()
            return Literal(token.value)
        if token.kind == "ident":
            self.advance()
            if token.value in _LITERAL_WORDS:
                return Literal(_LITERAL_WORDS[token.value])
            if self.is_op("("):
                if token.value in PREDICATES:
                    return self.parse_predicate_call(token.value, [])
                return self.checked(Call(token.value, self.parse_arguments()))
            return Identifier(token.value)
        if self.is_op("["):
            return self.parse_list()
        if self.is_op("{"):
            return self.parse_map()
        raise self.unexpected()

    def parse_arguments(self) -> list[Node]:
        self.expect_op("(")
        args: list[Node] = []
        while not self.is_op(")"):
            args.append(self.parse_expression(0))
            if not self.is_op(")"):
                self.expect_op(",")
        self.advance()
        return args

    def parse_list(self) -> Node:
        self.expect_op("[")
        items: list[Node] = []
        while not self.is_op("]"):
            items.append(self.parse_expression(0))
            if not self.is_op("]"):
                self.expect_op(",")
        self.advance()
        return self.checked(ListLiteral(items))

    def parse_map(self) -> Node:
        self.expect_op("{")
        entries: list[tuple[Node, Node]] = []
        while not self.is_op("}"):
            token = self.token
            key: Node
            if token.kind in ("str", "num"):
                self.advance()
                key = Literal(token.value)
            elif token.kind == "ident":
                # expr-lang allows bare identifiers as keys: {name: "x"} has the key "name".
                self.advance()
                key = Literal(token.value)
            elif self.is_op("("):
                self.advance()
                key = self.parse_expression(0)
                self.expect_op(")")
            else:
                raise self.error(
                    "a map key must be a quoted string, a number, an identifier, "
                    "or an expression in parentheses"
                )
            self.expect_op(":")
            entries.append((key, self.parse_expression(0)))
            if not self.is_op("}"):
                self.expect_op(",")
        self.advance()
        return self.checked(MapLiteral(entries))

    def parse_postfix(self, node: Node) -> Node:
        optional_chain = False
        while True:
            if self.is_op(".") or self.is_op("?."):
                optional = self.advance().value == "?."
                optional_chain = optional_chain or optional
                if optional and self.is_op("["):
                    node = self.parse_index(node, optional=True)
                    continue
                name = self.token
                if name.kind != "ident":
                    raise self.error("expected a member name after '.'")
                self.advance()
                if self.is_op("("):
                    args = self.parse_arguments()
                    node = self.checked(MethodCall(node, name.value, args, optional))
                else:
                    node = self.checked(Member(node, name.value, optional))
            elif self.is_op("["):
                node = self.parse_index(node, optional=False)
            else:
                break
        if optional_chain:
            node = self.checked(OptionalChain(node))
        return node

    def parse_index(self, node: Node, *, optional: bool) -> Node:
        self.expect_op("[")
        low: Node | None = None
        if not self.is_op(":"):
            low = self.parse_expression(0)
            if self.is_op("]"):
                self.advance()
                assert low is not None
                return self.checked(Index(node, low, optional))
        self.expect_op(":")
        high = None if self.is_op("]") else self.parse_expression(0)
        self.expect_op("]")
        return self.checked(Slice(node, low, high, optional))


def _is_plain_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse(source: str) -> Node:
    """Parse one bare expression into an AST, or raise :class:`ExpressionSyntaxError`."""
    if len(source) > MAX_SOURCE_LENGTH:
        raise ExpressionSyntaxError(
            reason=f"expression longer than {MAX_SOURCE_LENGTH} characters", expression=source[:200]
        )
    if not source.strip():
        raise ExpressionSyntaxError(reason="empty expression", expression=source)
    return _Parser(source).parse()
