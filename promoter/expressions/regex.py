"""The one regex port: every regular expression a user or a manifest writes goes through RE2.

Kargo compiles these patterns with Go's ``regexp``, which is RE2: linear time in the input,
RE2 syntax, no backreferences or look-around. Python's ``re`` backtracks, so one Warehouse's
``^(a+)+$`` would pin the whole server; anyone who can write a manifest can write that. So the
``matches`` operator, Warehouse tag and path filters, credential ``repoURL`` patterns, policy
and window name selectors, the ``copy`` step's ignore globs and the patterns ``date()`` builds
from a user's Go layout all compile here, with Google's own RE2 (PyPI ``google-re2``).
Constant patterns the code itself writes (parsers of known formats) may still use ``re``, when
they cannot backtrack on a user's text; one that can (Masterminds' semver constraint grammar,
whose optional operator and whitespace runs made ``1   1   1 ... !`` take seconds) compiles here
too, with :meth:`Regex.finditer` for the groups of each match.

The port speaks Go's dialect where RE2 and Go differ (each case is in
``tests/unit/expressions/test_regex_port.py``):

- Error messages read like Go's (``error parsing regexp: missing closing ): `(a```), mapped
  from RE2's codes; RE2's ``pattern too large`` is Go's ``expression too large``.
- ``\\C`` (any single byte) exists in RE2 only: refused, as Go refuses it.
- A repeat count of nine digits or more (``x{1,9876543210}``) is literal text to RE2 and an
  invalid repeat count to Go: refused.
- Go refuses patterns that nest more than 1000 deep (``expression nests too deeply``); RE2
  accepts them and still runs in linear time, so such a pattern works here where Kargo
  refuses it. Not ported: it costs a second parser and guards nothing.
- Text is UTF-8 for RE2; a lone surrogate (which a JSON ``\\ud800`` escape can make) becomes
  U+FFFD first, as Go's JSON decoder makes it.

RE2 writes parse errors to stderr through absl unless told not to; ``log_errors`` is off, so
a user's bad pattern is reported once, to the user, and never in the server's log.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import re2

from promoter.expressions.errors import ExpressionError

__all__ = ["Regex", "RegexError", "compile_regex", "escape"]

# RE2's code texts (re2/regexp.cc, CodeText) and Go's for the same error (regexp/syntax).
_GO_MESSAGES = {
    "unexpected error": "regexp/syntax: internal error",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
    "pattern too large - compile failed": "expression too large",
}


class RegexError(ExpressionError):
    """A pattern that is not valid RE2 syntax; ``reason`` reads as Go's error does."""


def _options(*, captures: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a user's pattern is their error, not the server's log line
    # Yes/no answers need no groups, and without them RE2 may answer on its DFA alone.
    options.never_capture = not captures
    return options


_MATCH_ONLY = _options(captures=False)
_CAPTURING = _options(captures=True)


def _go_error(raw: str) -> RegexError:
    code, _, argument = raw.partition(": ")
    if code == "trailing \\":
        argument = ""  # Go quotes nothing here
    message = _GO_MESSAGES.get(code, code)
    return RegexError(reason=f"error parsing regexp: {message}: `{argument or ''}`")


_REPEAT = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")  # our constant; linear, anchored by match()


def _refuse_what_go_refuses(pattern: str) -> None:
    """Refuse the two things RE2 reads and Go does not (skipping classes and ``\\Q...\\E``).

    ``\\C`` is "any byte" to RE2; Go has no such escape. A repeat count of nine digits or more
    is a literal to RE2 (it stops parsing at 100,000,000) and "invalid repeat count" to Go.
    """
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            following = pattern[i + 1]
            if following == "C":
                raise RegexError(reason="error parsing regexp: invalid escape sequence: `\\C`")
            if following == "Q":
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            i += 2
        elif ch == "[":
            i = _class_end(pattern, i)
        elif ch == "{" and (repeat := _REPEAT.match(pattern, i)) is not None:
            counts = [c for c in repeat.groups() if c]
            # Go reads a count with a leading zero as no repeat at all (a literal "{"), as RE2.
            if all(c == "0" or c[0] != "0" for c in counts) and any(len(c) >= 9 for c in counts):
                raise RegexError(
                    reason=f"error parsing regexp: invalid repeat count: `{repeat.group()}`"
                )
            i = repeat.end()
        else:
            i += 1


def _class_end(pattern: str, start: int) -> int:
    """Where the class opened at ``start`` ends (past its ``]``); the end of the text if never."""
    i, n = start + 1, len(pattern)
    if i < n and pattern[i] == "^":
        i += 1
    if i < n and pattern[i] == "]":
        i += 1  # a leading "]" is a member
    while i < n:
        if pattern[i] == "\\":
            i += 2
        elif pattern.startswith("[:", i) and (close := pattern.find(":]", i + 2)) >= 0:
            i = close + 2
        elif pattern[i] == "]":
            return i + 1
        else:
            i += 1
    return n


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: pairs become their character and the rest U+FFFD, as Go's JSON does.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


class Regex:
    """A compiled pattern; one RE2 program, shared by every caller of the same text.

    ``captures`` keeps the named groups for :meth:`groups` (a pattern our code assembles from
    a user's text, as ``date()``'s Go layouts); without it the program only answers yes or no.
    """

    __slots__ = ("_captures", "_program", "pattern")

    def __init__(self, pattern: str, *, captures: bool = False):
        self.pattern = pattern
        self._captures = captures
        _refuse_what_go_refuses(pattern)
        try:
            self._program = re2.compile(_utf8(pattern), _CAPTURING if captures else _MATCH_ONLY)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else b""
            raw = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
            raise _go_error(raw) from None

    def search(self, text: str) -> bool:
        """True when the pattern matches somewhere in ``text`` (Go's ``MatchString``)."""
        return self._program.search(_utf8(text)) is not None

    def fullmatch(self, text: str) -> bool:
        """True when the pattern matches all of ``text`` (for globs, which are anchored)."""
        return self._program.fullmatch(_utf8(text)) is not None

    def groups(self, text: str) -> dict[str, str] | None:
        """The named groups that took part when the pattern matches all of ``text``, else None."""
        if not self._captures:
            raise ValueError(f"{self!r} was compiled without captures")
        match = self._program.fullmatch(_utf8(text))
        if match is None:
            return None
        found = match.groupdict().items()
        return {name.decode(): value.decode() for name, value in found if value is not None}

    def finditer(self, text: str) -> Iterator[tuple[str | None, ...]]:
        """Every non-overlapping match in ``text``, leftmost first, as its groups by number
        (0: the whole match; None: a group that took no part), as Go's
        ``FindAllStringSubmatch`` gives them. Needs ``captures``."""
        if not self._captures:
            raise ValueError(f"{self!r} was compiled without captures")
        for match in self._program.finditer(_utf8(text)):
            groups = (match.group(0), *match.groups())
            yield tuple(None if g is None else g.decode() for g in groups)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Regex)
            and other.pattern == self.pattern
            and other._captures == self._captures
        )

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str, *, captures: bool = False) -> Regex:
    """A compiled :class:`Regex`, cached by pattern text. Raises :class:`RegexError`."""
    return Regex(pattern, captures=captures)


def escape(text: str) -> str:
    """``text`` as a pattern that matches exactly it (RE2's ``QuoteMeta``)."""
    return str(re2.escape(text))
