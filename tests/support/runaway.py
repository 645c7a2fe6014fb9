"""A guard for tests whose point is that a call comes back at all: a runaway regex, say.

``^(a+)+$`` against 10,000 characters takes RE2 well under a millisecond and Python's ``re``
longer than the universe has existed. A test that feeds it to a place that accepts a pattern
shows that place goes through RE2 by finishing; :func:`comes_back` turns the other outcome, a
suite that hangs, into a failure that names the call. The bound is generous on purpose (a
thousand times what RE2 needs on a loaded machine): it is a hang guard, not a benchmark (those
live in bench/, here ``bench/bench_regex.py``).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["RUNAWAY_PATTERN", "RUNAWAY_TEXT", "comes_back"]

# The pattern of the issue (one Warehouse's tag filter stalled the server for 52 s) and a text
# that makes a backtracking engine try every way of splitting the a's.
RUNAWAY_PATTERN = "^(a+)+$"
RUNAWAY_TEXT = "a" * 10_000 + "!"


class Runaway(AssertionError):
    """The guarded call did not come back within its bound."""


@contextmanager
def comes_back(what: str, *, within_seconds: float = 30.0) -> Iterator[None]:
    """Fail with ``what`` if the block is still running after ``within_seconds``.

    SIGALRM reaches the main thread, where pytest runs tests (and pytest-asyncio their loop);
    Python's ``re`` checks for signals while it backtracks, so the guard interrupts it.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Runaway(f"{what} was still running after {within_seconds} s: is it backtracking?")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, within_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
