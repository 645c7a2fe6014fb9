"""Shared pytest configuration: the hypothesis profiles and the conformance group.

Property and fuzz tests run on a fixed budget so the suite's time is predictable:

- ``ci`` (the default): a bounded number of examples, a per-example deadline (so an input that
  makes code crawl fails the test instead of slowing the suite), derandomized so a CI run is
  reproducible and a failure can be replayed locally;
- ``dev``: the same budget with random examples, for exploring;
- ``hunt``: many more examples and no deadline, for a long local search
  (``HYPOTHESIS_PROFILE=hunt pytest tests/integration/test_fuzz.py``).

Tests that set their own ``@settings`` keep those values and inherit the rest from the profile.

The conformance group (``tests/conformance/``) checks Longshoreman against data others wrote, which
lives outside the repository (:mod:`tests.support.conformance`):

- ``LONGSHOREMAN_CONFORMANCE_FIXTURES`` unset: the group is left out of collection and the run
  ends with one line saying so and how to run it; asking for a conformance test by path is an
  error instead, since it cannot run.
- set to a folder that is missing or incomplete: the run stops before any test, with the reason.

The groups are folders, and each folder's tests carry its marker (``_marks``), so a group can be
picked or left out with ``-m``: ``unit``, ``integration``, ``e2e``, ``cluster`` and ``conformance``,
plus ``browser`` on the test that drives chromium. ``pytest -m "not e2e and not cluster"`` is the
fast suite. The markers are registered in pyproject.toml and pytest runs with ``--strict-markers``,
so a misspelt one is an error rather than a test that no selection picks.

And for the whole suite: a ``parametrize`` list that comes out empty (a glob that matched nothing)
stops the run, where pytest would otherwise skip the test quietly; and an asyncio test that leaves
tasks running after its fixtures are torn down fails (``_no_leaked_tasks``).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

from tests.support import conformance

_COMMON = {
    "suppress_health_check": [HealthCheck.too_slow],
    "print_blob": True,
}

# Derandomized runs replay nothing, so they keep no example database (no .hypothesis/ dir).
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=timedelta(seconds=2),
    derandomize=True,
    database=None,
    **_COMMON,
)
settings.register_profile("dev", max_examples=100, deadline=timedelta(seconds=2), **_COMMON)
settings.register_profile("hunt", max_examples=5000, deadline=None, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# ---- the conformance group ----------------------------------------------------------------------

CONFORMANCE_DIR = Path(__file__).resolve().parent / "conformance"


def _in_conformance(path: Path) -> bool:
    return path == CONFORMANCE_DIR or CONFORMANCE_DIR in path.parents


def _requested(config: pytest.Config) -> list[tuple[str, Path]]:
    """The paths on the command line (or ``testpaths``), each with what it names."""
    here = config.invocation_params.dir
    return [(arg, (here / arg.split("::")[0]).resolve()) for arg in config.args]


def pytest_sessionstart(session: pytest.Session) -> None:
    value = conformance.configured()
    if value is not None:
        reason = conformance.problem(value)
        if reason is not None:
            raise pytest.UsageError(reason)
        return
    # Paths given on the command line are collected even when pytest_ignore_collect says no.
    for arg, path in _requested(session.config):
        if _in_conformance(path):
            raise pytest.UsageError(
                f"{arg} is in the conformance group, which needs its data: {conformance.HOW_TO_SET}"
            )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if conformance.configured() is None and _in_conformance(collection_path):
        return True
    return None


# ---- markers by folder --------------------------------------------------------------------------

TESTS_DIR = Path(__file__).resolve().parent
# A test's first folder under tests/ names its group.
_FOLDER_MARKS = {"unit", "integration", "e2e", "cluster", "conformance"}
# Tests that need a program from Debian's packages beyond git, by module.
_MODULE_MARKS = {
    "test_pages_browser.py": ("browser",),
    "test_pages_actions_browser.py": ("browser",),
}


def _marks(path: Path) -> tuple[str, ...]:
    """The markers of the tests in one module, from where it lies."""
    try:
        parts = path.relative_to(TESTS_DIR).parts
    except ValueError:
        return ()
    folder = (parts[0],) if len(parts) > 1 and parts[0] in _FOLDER_MARKS else ()
    return folder + _MODULE_MARKS.get(path.name, ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in _marks(item.path):
            item.add_marker(name)
    empty = [
        item.nodeid
        for item in items
        if any(
            str(mark.kwargs.get("reason", "")).startswith("got empty parameter set")
            for mark in item.iter_markers("skip")
        )
    ]
    if empty:
        raise pytest.UsageError(
            "parametrize lists came out empty (nothing would be checked): " + ", ".join(empty)
        )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    # Only when the run covered the group: pytest also asks about folders beside a requested file.
    covered = any(path in CONFORMANCE_DIR.parents for _, path in _requested(config))
    # Asked of the setting, not of collection: under pytest-xdist the workers collect.
    if covered and conformance.configured() is None:
        modules = len(list(CONFORMANCE_DIR.glob("test_*.py")))
        terminalreporter.write_line(
            f"conformance group skipped ({modules} modules in tests/conformance/): "
            f"{conformance.HOW_TO_SET} to run it"
        )


# ---- no leaked tasks ----------------------------------------------------------------------------
#
# An asyncio test passes only if every task it (or its fixtures) started has ended by the time its
# fixtures are torn down: a task left running is work nobody waits for, and with a loop per test
# pytest-asyncio would cancel it silently. Kopf's suite holds its tests to the same rule.

LEAK_GRACE_PASSES = 20


@pytest.fixture(autouse=True)
def _no_leaked_tasks(request: pytest.FixtureRequest) -> None:
    # Requested first (autouse), so torn down last: after every fixture the test uses.
    if inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("_leaked_task_guard")


@pytest_asyncio.fixture
async def _leaked_task_guard() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    leaked: list[asyncio.Task[Any]] = []
    for _ in range(LEAK_GRACE_PASSES):  # cancelled tasks need a few loop passes to finish
        leaked = [t for t in asyncio.all_tasks() - before if t is not current and not t.done()]
        if not leaked:
            return
        await asyncio.sleep(0)
    for task in leaked:
        task.cancel()
    await asyncio.gather(*leaked, return_exceptions=True)
    pytest.fail(
        "the test left asyncio tasks running (end them in the test or its fixtures): "
        + "; ".join(f"{t.get_name()} {t.get_coro()!r}" for t in leaked),
        pytrace=False,
    )
