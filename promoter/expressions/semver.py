"""The semantic-version value that ``semverParse()`` returns, and ``semverDiff()``.

Kargo's ``semverParse`` returns a Masterminds ``*semver.Version`` (v3), so expressions call Go
methods on it: ``semverParse(v).IncMinor().String()``. We mirror that type's parsing and methods.
Expressions can reach only the members listed in :data:`SEMVER_METHODS` / :data:`SEMVER_FIELDS`:
the evaluator never looks up a Python attribute by a name taken from user text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from promoter.expressions.errors import ExpressionError

# Masterminds/semver v3 ``NewVersion`` (the lenient parser): an optional "v", missing minor and
# patch default to 0, optional pre-release and build metadata.
_SEMVER_RE = re.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?"
    r"(?:-([0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*))?"
    r"(?:\+([0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*))?"
)
_UINT64_MAX = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Semver:
    """A parsed semantic version (Masterminds ``semver.Version``)."""

    major: int
    minor: int
    patch: int
    prerelease: str = ""
    metadata: str = ""
    original: str = ""

    @classmethod
    def parse(cls, text: str) -> Semver | None:
        """Parse like Masterminds ``NewVersion``; ``None`` when ``text`` is not a version."""
        match = _SEMVER_RE.fullmatch(text)
        if match is None:
            return None
        numbers = [int(match.group(1)), 0, 0]
        for i in (2, 3):
            if match.group(i):
                numbers[i - 1] = int(match.group(i)[1:])
        if any(n > _UINT64_MAX for n in numbers):
            return None
        pre = match.group(4) or ""
        # semver.org item 9, enforced by Masterminds v3: numeric pre-release identifiers must not
        # have leading zeros.
        for part in pre.split(".") if pre else ():
            if part.isdigit() and len(part) > 1 and part[0] == "0":
                return None
        return cls(numbers[0], numbers[1], numbers[2], pre, match.group(5) or "", text)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += f"-{self.prerelease}"
        if self.metadata:
            text += f"+{self.metadata}"
        return text

    def _v_prefix(self) -> str:
        return "v" if self.original.startswith("v") else ""

    def _next(self, major: int, minor: int, patch: int) -> Semver:
        # Built directly: dataclasses.replace() costs microseconds we do not need to spend.
        original = f"{self._v_prefix()}{major}.{minor}.{patch}"
        return Semver(major, minor, patch, "", "", original)

    def inc_patch(self) -> Semver:
        """Masterminds ``IncPatch``: a pre-release only drops its suffix (1.2.3-rc.1 -> 1.2.3)."""
        if self.prerelease:
            return self._next(self.major, self.minor, self.patch)
        return self._next(self.major, self.minor, self.patch + 1)

    def inc_minor(self) -> Semver:
        """Masterminds ``IncMinor``."""
        return self._next(self.major, self.minor + 1, 0)

    def inc_major(self) -> Semver:
        """Masterminds ``IncMajor``."""
        return self._next(self.major + 1, 0, 0)

    def compare(self, other: Semver) -> int:
        """Precedence per semver.org: build metadata ignored, a pre-release sorts lower."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if self.prerelease == other.prerelease:
            return 0
        if not self.prerelease:
            return 1
        if not other.prerelease:
            return -1
        return _compare_prerelease(self.prerelease, other.prerelease)


def _compare_prerelease(a: str, b: str) -> int:
    left, right = a.split("."), b.split(".")
    for x, y in zip(left, right, strict=False):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return -1 if int(x) < int(y) else 1
        if x.isdigit():
            return -1
        if y.isdigit():
            return 1
        return -1 if x < y else 1
    if len(left) == len(right):
        return 0
    return -1 if len(left) < len(right) else 1


def _other(value: Any, method: str) -> Semver:
    if not isinstance(value, Semver):
        raise ExpressionError(
            reason=f"{method}() needs a semantic version argument (from semverParse)"
        )
    return value


# The only members an expression can reach on a Semver. Go exposes them as methods; Kargo users
# also write them as fields (``.Major``), which we allow as a convenience.
SEMVER_FIELDS: dict[str, Callable[[Semver], Any]] = {
    "Major": lambda v: v.major,
    "Minor": lambda v: v.minor,
    "Patch": lambda v: v.patch,
    "Prerelease": lambda v: v.prerelease,
    "Metadata": lambda v: v.metadata,
    "Original": lambda v: v.original,
}

SEMVER_METHODS: dict[str, Callable[..., Any]] = {
    **SEMVER_FIELDS,
    "String": str,
    "IncMajor": Semver.inc_major,
    "IncMinor": Semver.inc_minor,
    "IncPatch": Semver.inc_patch,
    "Compare": lambda v, o: v.compare(_other(o, "Compare")),
    "LessThan": lambda v, o: v.compare(_other(o, "LessThan")) < 0,
    "GreaterThan": lambda v, o: v.compare(_other(o, "GreaterThan")) > 0,
    "Equal": lambda v, o: v.compare(_other(o, "Equal")) == 0,
}


def semver_parse(text: Any) -> Semver:
    """``semverParse(s)``: a version value, or an error naming the bad input."""
    if not isinstance(text, str):
        raise ExpressionError(reason="semverParse() argument must be a string")
    version = Semver.parse(text)
    if version is None:
        raise ExpressionError(reason=f"semverParse(): invalid semantic version {text!r}")
    return version


def semver_diff(first: Any, second: Any) -> str:
    """``semverDiff(a, b)``: "Major", "Minor", "Patch", "Metadata", "None" or "Incomparable".

    Mirrors Kargo's pkg/expressions/function ``semverDiff``: pre-release differences are not
    reported (they fall through to "Metadata"/"None"), and unparsable input is "Incomparable"
    rather than an error.
    """
    if not isinstance(first, str) or not isinstance(second, str):
        raise ExpressionError(reason="semverDiff() arguments must be strings")
    a, b = Semver.parse(first), Semver.parse(second)
    if a is None or b is None:
        return "Incomparable"
    if a.major != b.major:
        return "Major"
    if a.minor != b.minor:
        return "Minor"
    if a.patch != b.patch:
        return "Patch"
    if a.metadata != b.metadata:
        return "Metadata"
    return "None"
