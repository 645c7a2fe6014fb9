"""The subset of .gitignore syntax Kargo's ``ignore`` fields accept (``copy``, ``tar``,
``untar``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from promoter.errors import StepError
from promoter.expressions.regex import Regex, RegexError, compile_regex, escape


def _glob_to_regex(pattern: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[":
            end = pattern.find("]", index + 2)
            if end == -1:
                out.append(escape(char))
                index += 1
                continue
            body = pattern[index + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            index = end + 1
        elif char == "\\" and index + 1 < len(pattern):
            out.append(escape(pattern[index + 1]))
            index += 2
        else:
            out.append(escape(char))
            index += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _IgnoreRule:
    regex: Regex
    negated: bool
    directories_only: bool


class IgnoreRules:
    """The subset of .gitignore syntax Kargo's ``copy.ignore`` accepts.

    ``#`` comments, ``!`` negation, a trailing ``/`` for directories only, patterns with a ``/``
    anchored at the copied directory, ``*``, ``?``, ``[...]`` and ``**``. The last matching rule
    wins; like git, nothing inside an ignored directory can be re-included. ``defaults`` come
    before the given rules (``.git`` unless a step says otherwise).
    """

    def __init__(self, text: str, defaults: Sequence[str] = (".git",)) -> None:
        self._rules: list[_IgnoreRule] = []
        for line in [*defaults, *text.splitlines()]:
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            directories_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            if not line:
                continue
            body = _glob_to_regex(line)
            regex = body if anchored else f"(?:.*/)?{body}"
            try:  # through the RE2 port: a user's glob must not make the step backtrack
                compiled = compile_regex(f"(?s){regex}")
            except RegexError as exc:
                raise StepError(f"ignore: {line!r}: {exc.reason}", terminal=True) from None
            self._rules.append(_IgnoreRule(compiled, negated, directories_only))

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        result = False
        for rule in self._rules:
            if rule.directories_only and not is_dir:
                continue
            if rule.regex.fullmatch(relative):
                result = not rule.negated
        return result
