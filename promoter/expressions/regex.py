"""Linear-time regular expressions for the ``matches`` operator (RE2 syntax, match-only).

Kargo evaluates ``matches`` with Go's ``regexp`` (RE2), which runs in time linear in the input.
Python's ``re`` backtracks: ``"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!" matches "(a+)+$"`` would pin a
worker for hours, and anyone who can write a manifest can write that. So instead of ``re`` we
compile the pattern to a Thompson NFA and simulate it with state sets (memoised into a lazy DFA),
which is linear in the input and bounded by a work budget. ``matches`` only needs a yes/no
answer, so there are no captures. The syntax is RE2's: no backreferences or look-around (Go
rejects them too), ``$`` means end of text unless ``(?m)``, ``\\d``/``\\w``/``\\s``/``\\b`` are
ASCII.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from promoter.expressions.errors import ExpressionError

MAX_PROGRAM_SIZE = 10_000
MAX_NESTING = 100  # RE2 allows 1000; ours recurses in Python, so we stop earlier
MAX_REPEAT = 1000  # RE2's limit for {n,m}
WORK_BUDGET = 20_000_000  # NFA state visits per match before we give up
_CACHE_LIMIT = 10_000

_CHAR, _SPLIT, _JMP, _ASSERT, _MATCH = range(5)
_BOL, _EOL, _BOT, _EOT, _WORD_BOUNDARY, _NOT_WORD_BOUNDARY = range(6)

_WORD = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_DIGITS = ((ord("0"), ord("9")),)
_WORD_RANGES = ((ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("_"), ord("_")),
                (ord("a"), ord("z")))  # fmt: skip
_SPACE_RANGES = ((9, 10), (12, 13), (32, 32))
_POSIX_CLASSES: dict[str, tuple[tuple[int, int], ...]] = {
    "alnum": ((48, 57), (65, 90), (97, 122)),
    "alpha": ((65, 90), (97, 122)),
    "ascii": ((0, 127),),
    "blank": ((9, 9), (32, 32)),
    "cntrl": ((0, 31), (127, 127)),
    "digit": ((48, 57),),
    "graph": ((33, 126),),
    "lower": ((97, 122),),
    "print": ((32, 126),),
    "punct": ((33, 47), (58, 64), (91, 96), (123, 126)),
    "space": ((9, 13), (32, 32)),
    "upper": ((65, 90),),
    "word": _WORD_RANGES,
    "xdigit": ((48, 57), (65, 70), (97, 102)),
}
_ESCAPED_CONTROLS = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}


def _is_count(text: str) -> bool:
    return 0 < len(text) <= 6 and text.isascii() and text.isdigit()


class RegexError(ExpressionError):
    """A pattern that is not valid RE2 syntax, or a match that exceeded its work budget."""


Matcher = Callable[[str], bool]


def _class_matcher(ranges: tuple[tuple[int, int], ...], negated: bool, fold_case: bool) -> Matcher:
    def in_ranges(ch: str) -> bool:
        code = ord(ch)
        return any(lo <= code <= hi for lo, hi in ranges)

    def matches(ch: str) -> bool:
        hit = in_ranges(ch)
        if not hit and fold_case:
            hit = any(in_ranges(v) for v in (ch.lower(), ch.upper()) if len(v) == 1)
        return hit != negated

    return matches


def _literal_matcher(literal: str, fold_case: bool) -> Matcher:
    if fold_case:
        variants = {literal, literal.lower(), literal.upper()}
        return lambda ch: ch in variants or ch.lower() in variants
    return lambda ch: ch == literal


# AST: ("lit", Matcher) | ("assert", kind) | ("cat", [..]) | ("alt", [..]) |
#      ("rep", node, min, max or -1) | ("empty",)
_Node = tuple[object, ...]


class _Parser:
    def __init__(self, pattern: str):
        self.pattern = pattern
        self.pos = 0
        self.fold_case = False
        self.dot_newline = False
        self.multi_line = False
        self.depth = 0

    def error(self, message: str) -> RegexError:
        return RegexError(reason=f"error parsing regexp: {message}: `{self.pattern}`")

    def more(self) -> bool:
        return self.pos < len(self.pattern)

    def peek(self) -> str:
        return self.pattern[self.pos]

    def parse(self) -> _Node:
        node = self.parse_alternation()
        if self.more():
            raise self.error("unexpected )")
        return node

    def parse_alternation(self) -> _Node:
        branches = [self.parse_concat()]
        while self.more() and self.peek() == "|":
            self.pos += 1
            branches.append(self.parse_concat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def parse_concat(self) -> _Node:
        items: list[_Node] = []
        while self.more() and self.peek() not in "|)":
            atom = self.parse_atom()
            if atom is None:
                continue  # a flag group such as (?i): it lasts until the enclosing group ends
            items.append(self.parse_repeat(atom))
        if not items:
            return ("empty",)
        return items[0] if len(items) == 1 else ("cat", items)

    def parse_repeat(self, atom: _Node) -> _Node:
        node = atom
        repeated = False
        while self.more():
            ch = self.peek()
            if ch in "*+?":
                low, high = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[ch]
                self.pos += 1
            elif ch == "{":
                bounds = self.parse_braces()
                if bounds is None:
                    break
                low, high = bounds
            else:
                break
            if repeated:
                raise self.error("invalid nested repetition operator")
            repeated = True
            if self.more() and self.peek() == "?":
                self.pos += 1  # lazy: same yes/no answer
            node = ("rep", node, low, high)
        return node

    def parse_braces(self) -> tuple[int, int] | None:
        end = self.pattern.find("}", self.pos)
        if end < 0:
            return None
        body = self.pattern[self.pos + 1 : end]
        low_text, comma, high_text = body.partition(",")
        if not _is_count(low_text) or (high_text and not _is_count(high_text)):
            return None  # Go treats an ill-formed {…} as literal text
        low = int(low_text)
        high = int(high_text) if high_text else (-1 if comma else low)
        if low > MAX_REPEAT or high > MAX_REPEAT or (high != -1 and high < low):
            raise self.error(f"invalid repeat count {{{body}}}")
        self.pos = end + 1
        return low, high

    def parse_atom(self) -> _Node | None:
        ch = self.peek()
        if ch in "*+?":
            raise self.error("missing argument to repetition operator")
        self.pos += 1
        if ch == "(":
            return self.parse_group()
        if ch == "[":
            return self.parse_class()
        if ch == ".":
            if self.dot_newline:
                return ("lit", lambda c: True)
            return ("lit", lambda c: c != "\n")
        if ch == "^":
            return ("assert", _BOL if self.multi_line else _BOT)
        if ch == "$":
            return ("assert", _EOL if self.multi_line else _EOT)
        if ch == "\\":
            return self.parse_escape()
        return ("lit", _literal_matcher(ch, self.fold_case))

    def parse_group(self) -> _Node | None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error("expression nests too deeply")
        try:
            return self._parse_group()
        finally:
            self.depth -= 1

    def _parse_group(self) -> _Node | None:
        if self.pattern.startswith("?", self.pos):
            rest = self.pattern[self.pos + 1 :]
            if rest.startswith(("P<", "<")) and not rest.startswith(("<=", "<!")):
                close = self.pattern.find(">", self.pos)
                if close < 0:
                    raise self.error("invalid named capture")
                self.pos = close + 1
            else:
                return self.parse_flags()
        saved = (self.fold_case, self.dot_newline, self.multi_line)
        inner = self.parse_alternation()
        self.fold_case, self.dot_newline, self.multi_line = saved
        if not self.more() or self.peek() != ")":
            raise self.error("missing closing )")
        self.pos += 1
        return inner

    def parse_flags(self) -> _Node | None:
        self.pos += 1  # the "?"
        value = True
        flags = (self.fold_case, self.dot_newline, self.multi_line)
        while self.more():
            ch = self.peek()
            self.pos += 1
            if ch == "-":
                value = False
            elif ch == "i":
                self.fold_case = value
            elif ch == "s":
                self.dot_newline = value
            elif ch == "m":
                self.multi_line = value
            elif ch == "U":
                pass  # ungreedy: same yes/no answer
            elif ch == ")":
                return None  # (?i): applies to the rest of the enclosing group
            elif ch == ":":
                inner = self.parse_alternation()
                self.fold_case, self.dot_newline, self.multi_line = flags
                if not self.more() or self.peek() != ")":
                    raise self.error("missing closing )")
                self.pos += 1
                return inner
            else:
                raise self.error("invalid or unsupported Perl syntax")
        raise self.error("missing closing )")

    def parse_escape(self) -> _Node:
        if not self.more():
            raise self.error("trailing backslash at end of expression")
        ch = self.peek()
        self.pos += 1
        simple_classes = {
            "d": (_DIGITS, False), "D": (_DIGITS, True),
            "w": (_WORD_RANGES, False), "W": (_WORD_RANGES, True),
            "s": (_SPACE_RANGES, False), "S": (_SPACE_RANGES, True),
        }  # fmt: skip
        if ch in simple_classes:
            ranges, negated = simple_classes[ch]
            return ("lit", _class_matcher(ranges, negated, False))
        asserts = {"b": _WORD_BOUNDARY, "B": _NOT_WORD_BOUNDARY, "A": _BOT, "z": _EOT}
        if ch in asserts:
            return ("assert", asserts[ch])
        if ch == "Q":
            end = self.pattern.find("\\E", self.pos)
            text = self.pattern[self.pos :] if end < 0 else self.pattern[self.pos : end]
            self.pos = len(self.pattern) if end < 0 else end + 2
            if not text:
                return ("empty",)
            return ("cat", [("lit", _literal_matcher(c, self.fold_case)) for c in text])
        self.pos -= 1
        code = self.escape_code()
        return ("lit", _literal_matcher(chr(code), self.fold_case))

    def escape_code(self) -> int:
        """The character code of the escape at ``self.pos`` (just after the backslash)."""
        ch = self.peek()
        self.pos += 1
        if ch in _ESCAPED_CONTROLS:
            return _ESCAPED_CONTROLS[ch]
        if ch == "x":
            if self.more() and self.peek() == "{":
                end = self.pattern.find("}", self.pos)
                digits = self.pattern[self.pos + 1 : end] if end > 0 else ""
                self.pos = end + 1
            else:
                digits = self.pattern[self.pos : self.pos + 2]
                self.pos += 2
            try:
                code = int(digits, 16)
            except ValueError:
                raise self.error("invalid escape sequence") from None
            if code > 0x10FFFF:
                raise self.error("invalid escape sequence")
            return code
        if ch in "01234567":
            digits = ch
            while len(digits) < 3 and self.more() and self.peek() in "01234567":
                digits += self.peek()
                self.pos += 1
            if ch != "0" and len(digits) == 1:
                raise self.error("invalid escape sequence (backreferences are not supported)")
            return int(digits, 8)
        if not ch.isalnum() and ch.isascii():
            return ord(ch)  # escaped punctuation
        raise self.error(f"invalid escape sequence \\{ch}")

    def parse_class(self) -> _Node:
        negated = self.more() and self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            if not self.more():
                raise self.error("missing closing ]")
            ch = self.peek()
            if ch == "]" and not first:
                self.pos += 1
                break
            first = False
            if self.pattern.startswith("[:", self.pos):
                end = self.pattern.find(":]", self.pos + 2)
                name = self.pattern[self.pos + 2 : end] if end > 0 else ""
                posix_negated = name.startswith("^")
                posix = _POSIX_CLASSES.get(name.lstrip("^"))
                if posix is None:
                    raise self.error("invalid character class range")
                self.pos = end + 2
                ranges.extend(_negate(posix) if posix_negated else posix)
                continue
            if ch == "\\" and self.pattern[self.pos + 1 : self.pos + 2] in ("d", "D", "w", "W", "s",
                                                                          "S"):  # fmt: skip
                letter = self.pattern[self.pos + 1]
                self.pos += 2
                base = {"d": _DIGITS, "w": _WORD_RANGES, "s": _SPACE_RANGES}[letter.lower()]
                ranges.extend(_negate(base) if letter.isupper() else base)
                continue
            low = self.class_char()
            high = low
            if self.pattern.startswith("-", self.pos) and not self.pattern.startswith(
                "-]", self.pos
            ):
                self.pos += 1
                high = self.class_char()
                if high < low:
                    raise self.error("invalid character class range")
            ranges.append((low, high))
        return ("lit", _class_matcher(tuple(ranges), bool(negated), self.fold_case))

    def class_char(self) -> int:
        if not self.more():
            raise self.error("missing closing ]")
        ch = self.peek()
        self.pos += 1
        if ch != "\\":
            return ord(ch)
        if not self.more():
            raise self.error("trailing backslash at end of expression")
        return self.escape_code()


def _negate(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    result: list[tuple[int, int]] = []
    start = 0
    for lo, hi in sorted(ranges):
        if lo > start:
            result.append((start, lo - 1))
        start = max(start, hi + 1)
    if start <= 0x10FFFF:
        result.append((start, 0x10FFFF))
    return tuple(result)


class _Compiler:
    def __init__(self, pattern: str):
        self.pattern = pattern
        self.program: list[list[object]] = []

    def emit(self, *instruction: object) -> int:
        if len(self.program) >= MAX_PROGRAM_SIZE:
            raise RegexError(reason=f"error parsing regexp: expression too large: `{self.pattern}`")
        self.program.append(list(instruction))
        return len(self.program) - 1

    def compile(self, node: _Node) -> None:
        kind = node[0]
        if kind == "empty":
            return
        if kind == "lit":
            self.emit(_CHAR, node[1], len(self.program) + 1)
        elif kind == "assert":
            self.emit(_ASSERT, node[1], len(self.program) + 1)
        elif kind == "cat":
            for item in node[1]:  # type: ignore[attr-defined]
                self.compile(item)
        elif kind == "alt":
            branches: list[_Node] = node[1]  # type: ignore[assignment]
            jumps: list[int] = []
            for branch in branches[:-1]:
                split = self.emit(_SPLIT, len(self.program) + 1, None)
                self.compile(branch)
                jumps.append(self.emit(_JMP, None))
                self.program[split][2] = len(self.program)
            self.compile(branches[-1])
            for jump in jumps:
                self.program[jump][1] = len(self.program)
        elif kind == "rep":
            _, inner, low, high = node
            assert isinstance(low, int) and isinstance(high, int)
            for _ in range(low):
                self.compile(inner)  # type: ignore[arg-type]
            if high == -1:
                loop = self.emit(_SPLIT, len(self.program) + 1, None)
                self.compile(inner)  # type: ignore[arg-type]
                self.emit(_JMP, loop)
                self.program[loop][2] = len(self.program)
            else:
                splits = []
                for _ in range(high - low):
                    splits.append(self.emit(_SPLIT, len(self.program) + 1, None))
                    self.compile(inner)  # type: ignore[arg-type]
                for split in splits:
                    self.program[split][2] = len(self.program)


# Bits of the position context that assertions look at.
_AT_START, _AT_END, _PREV_WORD, _NEXT_WORD, _AFTER_NEWLINE, _BEFORE_NEWLINE = (
    1 << i for i in range(6)
)


def _assertion_holds(kind: object, context: int) -> bool:
    if kind == _BOT:
        return bool(context & _AT_START)
    if kind == _EOT:
        return bool(context & _AT_END)
    if kind == _BOL:
        return bool(context & (_AT_START | _AFTER_NEWLINE))
    if kind == _EOL:
        return bool(context & (_AT_END | _BEFORE_NEWLINE))
    boundary = bool(context & _PREV_WORD) != bool(context & _NEXT_WORD)
    return boundary if kind == _WORD_BOUNDARY else not boundary


class Regex:
    """A compiled pattern; :meth:`search` says whether it matches anywhere in a string.

    Simulates the NFA one character at a time on the set of live states. Each distinct
    (state set, context) closure and (state set, character) step is memoised, so after a few
    characters the loop is two dictionary lookups per character: a DFA built lazily.
    """

    def __init__(self, pattern: str):
        self.pattern = pattern
        compiler = _Compiler(pattern)
        compiler.compile(_Parser(pattern).parse())
        compiler.emit(_MATCH)
        self._program = [tuple(instruction) for instruction in compiler.program]
        kinds = {i[1] for i in self._program if i[0] == _ASSERT}
        # Only the context bits some assertion reads are computed (and key the memo tables).
        self._uses_words = bool(kinds & {_WORD_BOUNDARY, _NOT_WORD_BOUNDARY})
        self._uses_lines = bool(kinds & {_BOL, _EOL})
        self._closures: dict[tuple[frozenset[int], int], tuple[frozenset[int], bool]] = {}
        self._steps: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _closure(self, kernel: frozenset[int], context: int) -> tuple[frozenset[int], bool, int]:
        """Character-consuming states reachable from ``kernel`` (plus the start) without input,
        whether the match state is reachable, and the work done."""
        seen: set[int] = set()
        stack = [0, *kernel]
        states: set[int] = set()
        matched = False
        program = self._program
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            instruction = program[pc]
            op = instruction[0]
            if op == _CHAR:
                states.add(pc)
            elif op == _MATCH:
                matched = True
            elif op == _JMP:
                stack.append(instruction[1])  # type: ignore[arg-type]
            elif op == _SPLIT:
                stack.append(instruction[2])  # type: ignore[arg-type]
                stack.append(instruction[1])  # type: ignore[arg-type]
            elif _assertion_holds(instruction[1], context):
                stack.append(instruction[2])  # type: ignore[arg-type]
        result = frozenset(states)
        if len(self._closures) > _CACHE_LIMIT:
            self._closures.clear()
        self._closures[(kernel, context)] = (result, matched)
        return result, matched, len(seen)

    def _step(self, states: frozenset[int], ch: str) -> frozenset[int]:
        program = self._program
        following: frozenset[int] = frozenset(
            program[pc][2]  # type: ignore[misc]  # an int, in a "lit" instruction
            for pc in states
            if program[pc][1](ch)  # type: ignore[operator]  # its Matcher
        )
        if len(self._steps) > _CACHE_LIMIT:
            self._steps.clear()
        self._steps[(states, ch)] = following
        return following

    def search(self, text: str) -> bool:
        """True when the pattern matches somewhere in ``text`` (Go's ``MatchString``)."""
        kernel: frozenset[int] = frozenset()
        closures, steps = self._closures, self._steps
        uses_words, uses_lines = self._uses_words, self._uses_lines
        work = 0
        length = len(text)
        previous = ""
        for pos in range(length + 1):
            current = text[pos] if pos < length else ""
            context = _AT_START if pos == 0 else 0
            if pos == length:
                context |= _AT_END
            if uses_words:
                context |= (_PREV_WORD if previous in _WORD else 0) | (
                    _NEXT_WORD if current in _WORD else 0
                )
            if uses_lines:
                context |= (_AFTER_NEWLINE if previous == "\n" else 0) | (
                    _BEFORE_NEWLINE if current == "\n" else 0
                )
            cached = closures.get((kernel, context))
            if cached is None:
                states, matched, cost = self._closure(kernel, context)
                work += cost
            else:
                states, matched = cached
            if matched:
                return True
            if pos == length:
                break
            following = steps.get((states, current))
            if following is None:
                following = self._step(states, current)
                work += len(states)
                if work > WORK_BUDGET:
                    raise RegexError(
                        reason=f"regexp `{self.pattern}`: match exceeded its work budget"
                    )
            kernel = following
            previous = current
        return False


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Regex:
    """A compiled :class:`Regex`, cached by pattern text. Raises :class:`RegexError`."""
    return Regex(pattern)
