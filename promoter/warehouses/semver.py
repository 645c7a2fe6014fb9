"""Semantic versions and constraints as Kargo's discovery reads them (Masterminds semver v3).

Versions are parsed by :class:`promoter.expressions.semver.Semver` (Masterminds ``NewVersion``,
the lenient parser). Kargo adds a *strict* mode for tags (``pkg/controller/semver.Parse``): the
tag must also pass ``StrictNewVersion`` once a leading ``v`` is removed, so ``v1.2`` or a short
commit hash ``1234567`` never reads as a version. Constraints (``^1.2``, ``>=1.0 <2.0 || 3.x``,
``1.2 - 1.4.5``...) follow Masterminds' ``NewConstraint``/``Check`` line by line, including its
rule that a pre-release version only satisfies an OR-branch that itself names a pre-release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from promoter.expressions.regex import Regex
from promoter.expressions.semver import Semver

__all__ = ["Constraint", "ConstraintError", "Semver", "parse_version", "strict_version"]

_STRICT_PRE = re.compile(r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*")


class ConstraintError(ValueError):
    """A semver constraint that Masterminds would refuse."""


def strict_version(text: str) -> Semver | None:
    """Masterminds ``StrictNewVersion``: exactly MAJOR.MINOR.PATCH, no ``v``, no leading 0s."""
    parts = text.split(".", 2)
    if len(parts) != 3 or not text:
        return None
    patch = parts[2]
    metadata = prerelease = ""
    if "+" in patch:
        patch, metadata = patch.split("+", 1)
        if not _STRICT_PRE.fullmatch(metadata):
            return None
    if "-" in patch:
        patch, prerelease = patch.split("-", 1)
        if not _STRICT_PRE.fullmatch(prerelease):
            return None
        for ident in prerelease.split("."):
            if ident.isdigit() and len(ident) > 1 and ident[0] == "0":
                return None
    numbers = [parts[0], parts[1], patch]
    for number in numbers:
        if not number.isdigit() or not number.isascii():
            return None
        if len(number) > 1 and number[0] == "0":
            return None
    major, minor, patch_n = (int(n) for n in numbers)
    return Semver(major, minor, patch_n, prerelease, metadata, text)


def parse_version(text: str, strict: bool = False) -> Semver | None:
    """Kargo's ``semver.Parse(tag, strict)``: the lenient parse (so ``original`` keeps a
    leading ``v``), refused in strict mode unless the tag without ``v`` is strictly valid."""
    version = Semver.parse(text)
    if version is None:
        return None
    if strict and strict_version(text.removeprefix("v")) is None:
        return None
    return version


# Masterminds' constraint grammar, kept as its regular expressions so the same inputs are
# accepted and refused.
_CV = (
    r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?"
    r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
)
_OPS = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^"
_CONSTRAINT_RE = re.compile(rf"^\s*({_OPS})\s*({_CV})\s*$")
# The two that see the whole constraint a user wrote run on RE2 (promoter/expressions/regex.py),
# as in Go: with Python's re the optional operator and the whitespace runs backtrack, and
# `1   1   1   1   1   1   1   1   1   1 !` took seconds (exponential in the terms).
_RANGE_RE = Regex(rf"\s*({_CV})\s+-\s+({_CV})\s*", captures=True)
_FIND_RE = re.compile(rf"({_OPS})\s*({_CV})")
_VALID_RE = Regex(rf"^(\s*({_OPS})\s*({_CV})\s*)((?:\s+|,\s*)({_OPS})\s*({_CV})\s*)*$")


def _is_x(text: str) -> bool:
    return text in ("x", "X", "*")


@dataclass(frozen=True, slots=True)
class _Term:
    op: str
    version: Semver
    orig: str
    dirty: bool = False
    minor_dirty: bool = False
    patch_dirty: bool = False

    def check(self, v: Semver, include_pre: bool) -> bool:
        if v.prerelease and not include_pre:
            return False
        return _CHECKS[self.op](v, self)


def _equal(v: Semver, c: _Term) -> bool:
    if c.dirty:
        return _tilde(v, c)
    return v.compare(c.version) == 0


def _not_equal(v: Semver, c: _Term) -> bool:
    con = c.version
    if c.dirty:
        if con.major != v.major:
            return True
        if con.minor != v.minor and not c.minor_dirty:
            return True
        if c.minor_dirty:
            return False
        if con.patch != v.patch and not c.patch_dirty:
            return True
        if c.patch_dirty:
            if v.prerelease or con.prerelease:
                return Semver(0, 0, 0, v.prerelease).compare(Semver(0, 0, 0, con.prerelease)) != 0
            return False
    return v.compare(con) != 0


def _greater(v: Semver, c: _Term) -> bool:
    con = c.version
    if not c.dirty:
        return v.compare(con) == 1
    if v.major > con.major:
        return True
    if v.major < con.major or c.minor_dirty:
        return False
    if c.patch_dirty:
        return v.minor > con.minor
    return v.compare(con) == 1


def _less(v: Semver, c: _Term) -> bool:
    return v.compare(c.version) < 0


def _greater_equal(v: Semver, c: _Term) -> bool:
    return v.compare(c.version) >= 0


def _less_equal(v: Semver, c: _Term) -> bool:
    con = c.version
    if not c.dirty:
        return v.compare(con) <= 0
    if v.major > con.major:
        return False
    return not (v.major == con.major and v.minor > con.minor and not c.minor_dirty)


def _tilde(v: Semver, c: _Term) -> bool:
    con = c.version
    if v.compare(con) < 0:
        return False
    if (con.major, con.minor, con.patch) == (0, 0, 0) and not c.minor_dirty and not c.patch_dirty:
        return True
    if v.major != con.major:
        return False
    return not (v.minor != con.minor and not c.minor_dirty)


def _caret(v: Semver, c: _Term) -> bool:
    con = c.version
    if v.compare(con) < 0:
        return False
    if con.major > 0 or c.minor_dirty:
        return v.major == con.major
    if v.major > 0:
        return False
    if con.minor > 0 or c.patch_dirty:
        return v.minor == con.minor
    if v.minor > 0:
        return False
    return v.patch == con.patch


_CHECKS = {
    "": _equal,
    "=": _equal,
    "!=": _not_equal,
    ">": _greater,
    "<": _less,
    ">=": _greater_equal,
    "=>": _greater_equal,
    "<=": _less_equal,
    "=<": _less_equal,
    "~": _tilde,
    "~>": _tilde,
    "^": _caret,
}


def _parse_term(text: str) -> _Term:
    m = _CONSTRAINT_RE.match(text)
    if m is None:
        raise ConstraintError(f"improper constraint: {text!r}")
    op, orig, major, minor, patch, pre = (
        m.group(1),
        m.group(2),
        m.group(3),
        m.group(4),
        m.group(5),
        m.group(6) or "",
    )
    minor_dirty = patch_dirty = dirty = False
    if _is_x(major) or not major:
        version_text, dirty = f"0.0.0{pre}", True
    elif not minor or _is_x(minor.removeprefix(".")):
        version_text, minor_dirty, dirty = f"{major}.0.0{pre}", True, True
    elif not patch or _is_x(patch.removeprefix(".")):
        version_text, patch_dirty, dirty = f"{major}{minor}.0{pre}", True, True
    else:
        version_text = orig
    version = Semver.parse(version_text)
    if version is None:
        raise ConstraintError("constraint parser error")
    return _Term(op, version, orig, dirty, minor_dirty, patch_dirty)


@dataclass(frozen=True, slots=True)
class Constraint:
    """Masterminds ``Constraints``: OR-branches of AND-ed terms."""

    text: str
    branches: tuple[tuple[_Term, ...], ...]
    branch_has_pre: tuple[bool, ...]

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """``semver.NewConstraint``; :class:`ConstraintError` when Masterminds refuses it."""
        rewritten = text
        for groups in _RANGE_RE.finditer(text):
            rewritten = rewritten.replace(str(groups[0]), f">= {groups[1]}, <= {groups[11]} ", 1)
        branches: list[tuple[_Term, ...]] = []
        has_pre: list[bool] = []
        for part in rewritten.split("||"):
            if not _VALID_RE.search(part):
                raise ConstraintError(f"improper constraint: {part!r}")
            terms = tuple(_parse_term(m.group(0)) for m in _FIND_RE.finditer(part))
            branches.append(terms)
            has_pre.append(any(t.version.prerelease for t in terms))
        return cls(text, tuple(branches), tuple(has_pre))

    def check(self, version: Semver) -> bool:
        """Whether ``version`` satisfies any OR-branch (all of its terms)."""
        return any(
            all(term.check(version, pre) for term in terms)
            for terms, pre in zip(self.branches, self.branch_has_pre, strict=True)
        )
