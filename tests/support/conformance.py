"""Where the conformance group (tests/conformance/) finds the data others wrote, and its rules.

Conformance tests check Longshoreman against what real peers write and send: Kargo's
documentation examples (``kargo-docs/``), GitHub's webhook samples (``github/payloads/``) and Argo
Rollouts' own templates (``argo/``). That data is not ours to ship, so it stays outside the
repository, in a folder that ``LONGSHOREMAN_CONFORMANCE_FIXTURES`` names (CI lays it at
``../shared/fixtures`` beside the clone and ``.ci/run`` sets the variable). The rest of the suite
uses the fixtures the project writes itself (:mod:`tests.support.fixtures`), so a clone anywhere
runs it.

- Unset: ``tests/conftest.py`` leaves the group out and says so in one summary line.
- Set to a folder that is missing, or that lacks one of the three parts: the run stops with the
  reason (:func:`problem`), before any test runs.
- A list of cases derived from those files must not come out empty (:func:`files`,
  :func:`cases`): a test parametrised over nothing would pass without checking anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeVar

ENV_VAR = "LONGSHOREMAN_CONFORMANCE_FIXTURES"
# The parts the group reads, each with the files it expects there.
PARTS = {"kargo-docs": "*.yaml", "github/payloads": "*.json", "argo": "*.yaml"}
HOW_TO_SET = (
    f"set {ENV_VAR} to the folder holding kargo-docs/, github/payloads/ and argo/ "
    "(CI sets ../shared/fixtures, beside the clone)"
)

T = TypeVar("T")


class ConformanceFixturesError(Exception):
    """The conformance data is not where the environment says, or a list of it came out empty."""


def configured(environ: Mapping[str, str] = os.environ) -> str | None:
    """The variable's value, or None when it is unset or blank."""
    value = environ.get(ENV_VAR, "").strip()
    return value or None


def problem(value: str) -> str | None:
    """Why ``value`` cannot serve as the conformance folder, or None when it can."""
    folder = Path(value).expanduser()
    if not folder.is_dir():
        return f"{ENV_VAR}={value}: no such directory; {HOW_TO_SET}"
    missing = [
        f"{part}/{pattern}" for part, pattern in PARTS.items() if not _has(folder / part, pattern)
    ]
    if missing:
        return f"{ENV_VAR}={value}: found no {', no '.join(missing)}; {HOW_TO_SET}"
    return None


def _has(folder: Path, pattern: str) -> bool:
    return folder.is_dir() and any(folder.glob(pattern))


def root() -> Path:
    """The conformance folder; raises with the reason when it is not usable."""
    value = configured()
    if value is None:
        raise ConformanceFixturesError(f"{ENV_VAR} is not set: {HOW_TO_SET}")
    reason = problem(value)
    if reason is not None:
        raise ConformanceFixturesError(reason)
    return Path(value).expanduser().resolve()


def files(part: str, pattern: str) -> list[Path]:
    """The files of one part matching ``pattern``, sorted; never an empty list."""
    found = sorted((root() / part).glob(pattern))
    if not found:
        raise ConformanceFixturesError(f"no {part}/{pattern} in {root()}")
    return found


def cases(items: Iterable[T], what: str) -> list[T]:
    """``items`` as a list for ``pytest.mark.parametrize``; raises when there are none."""
    found = list(items)
    if not found:
        raise ConformanceFixturesError(f"no {what} found in {root()}")
    return found
