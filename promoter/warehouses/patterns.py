"""Kargo's path selectors (``includePaths``/``excludePaths``) and tag regular expressions.

A path selector is ``glob:<doublestar glob>``, ``regex:<re>`` / ``regexp:<re>``, or a plain
path that matches itself and everything below it (Kargo's ``pkg/pattern.ParsePathPattern``;
``BaseDirMatcher`` uses ``filepath.Rel`` and refuses any result containing ``..``). Globs follow
``bmatcuk/doublestar`` v4: ``*`` and ``?`` stay inside one path segment, ``**`` spans segments,
``[...]`` classes and ``{a,b}`` alternatives.

Kargo compiles regular expressions with Go's RE2, and so do we: every pattern here, a glob
turned into one included, goes through the one regex port (:mod:`promoter.expressions.regex`,
linear time), whose ``search`` is Go's ``MatchString`` (unanchored).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from promoter.expressions.regex import Regex, RegexError, compile_regex, escape

__all__ = ["PathMatcher", "PatternError", "compile_regexes", "glob_regex", "path_matcher"]


class PatternError(ValueError):
    """A selector or regular expression that does not compile."""


def compile_regexes(patterns: Sequence[str], field: str) -> tuple[Regex, ...]:
    """Compile each pattern, naming the field and pattern that fail."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(compile_regex(pattern))
        except RegexError as err:
            raise PatternError(f"{field}: error compiling regex {pattern!r}: {err}") from None
    return tuple(compiled)


def glob_regex(glob: str) -> Regex:
    """A doublestar glob as a regular expression; test a name with ``fullmatch``."""
    out: list[str] = []
    i, n = 0, len(glob)
    depth = 0  # inside {...}
    while i < n:
        ch = glob[i]
        if ch == "*":
            if glob.startswith("**", i):
                before_ok = i == 0 or glob[i - 1] == "/"
                after = i + 2
                if before_ok and (after == n or glob[after] == "/"):
                    # "**/" matches zero or more whole segments; a final "**" matches anything.
                    if after == n:
                        out.append(".*")
                        i = after
                    else:
                        out.append("(?:.*/)?")
                        i = after + 1
                    continue
                out.append("[^/]*")
                i += 2
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = glob.find(
                "]", i + 2 if glob.startswith("[!", i) or glob.startswith("[^", i) else i + 1
            )
            if end < 0:
                raise PatternError(f"bad glob {glob!r}: unclosed '['")
            body = glob[i + 1 : end]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
            i = end
        elif ch == "{":
            depth += 1
            out.append("(?:")
        elif ch == "}" and depth:
            depth -= 1
            out.append(")")
        elif ch == "," and depth:
            out.append("|")
        elif ch == "\\" and i + 1 < n:
            i += 1
            out.append(escape(glob[i]))
        else:
            out.append(escape(ch))
        i += 1
    if depth:
        raise PatternError(f"bad glob {glob!r}: unclosed '{{'")
    try:
        return compile_regex("(?s)" + "".join(out))
    except RegexError as err:  # a class such as [z-a]
        raise PatternError(f"bad glob {glob!r}: {err.reason}") from None


def _base_dir(base: str) -> Callable[[str], bool]:
    clean_base = posixpath.normpath(base) if base else "."

    def matches(path: str) -> bool:
        # Go's filepath.Rel(base, path) on cleaned paths, then Kargo's test: the relative path
        # must not contain ".." (a substring test, as Kargo's is).
        target = posixpath.normpath(path) if path else "."
        if target.startswith("/") != clean_base.startswith("/"):
            return False
        if clean_base == ".":
            rel = target
        elif target == clean_base:
            rel = "."
        elif target.startswith(clean_base + "/"):
            rel = target[len(clean_base) + 1 :]
        else:
            return False
        return ".." not in rel

    return matches


def _test(regex: Regex, anchored: bool) -> Callable[[str], bool]:
    return regex.fullmatch if anchored else regex.search


@dataclass(frozen=True, slots=True)
class PathMatcher:
    """Any of several selectors (Kargo's ``pattern.Matchers``)."""

    selectors: tuple[str, ...]
    tests: tuple[Callable[[str], bool], ...]

    def matches(self, path: str) -> bool:
        return any(test(path) for test in self.tests)


def path_matcher(selectors: Sequence[str], field: str) -> PathMatcher | None:
    """Kargo's ``getPathSelectors``: None when there are none."""
    if not selectors:
        return None
    tests: list[Callable[[str], bool]] = []
    for selector in selectors:
        if selector.startswith("glob:"):
            tests.append(_test(glob_regex(selector.removeprefix("glob:")), anchored=True))
        elif selector.startswith(("regex:", "regexp:")):
            body = selector.split(":", 1)[1]
            (compiled,) = compile_regexes([body], field)
            tests.append(_test(compiled, anchored=False))
        else:
            tests.append(_base_dir(selector))
    return PathMatcher(tuple(selectors), tuple(tests))
