"""Time as a dependency: the one port every layer reads the time through.

Deciding code takes ``now`` as an argument; the code that gathers facts asks a :class:`Clock`
for it, so a test can move time instead of waiting for it. Two readings, because they answer
different questions:

- ``now()``: the wall time (timezone-aware UTC), for what is written down or compared with
  timestamps from elsewhere: a cookie's expiry, ``creationTimestamp``, a soak time.
- ``monotonic()``: seconds on the running event loop's clock, for intervals and deadlines inside
  this process. It is the loop's own time on purpose: timers (``asyncio.sleep``,
  ``wait_for``) run on it, so a test on virtual loop time (looptime) moves both together.

:data:`SYSTEM` is the real clock; tests use ``tests.support.clock.FakeClock``.

A clock whose time can jump (a test's fake) may also offer ``on_advance(callback)``: code that
sleeps on the loop until a deadline it computed from ``monotonic()`` registers a wake-up there
(:func:`wake_on_advance`), so a jump is seen at once instead of after the old timer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final, Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds for intervals and deadlines (the running event loop's time)."""
        ...


class SystemClock:
    """The real clock: the system's wall time and the running loop's time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        try:
            return float(asyncio.get_running_loop().time())
        except RuntimeError:  # called outside a loop (a CLI, a sync test)
            return time.monotonic()


SYSTEM: Final[Clock] = SystemClock()


def wake_on_advance(clock: object, wake: Callable[[], None]) -> None:
    """Call ``wake`` whenever ``clock`` jumps ahead, if it can (the real clock never does)."""
    on_advance = getattr(clock, "on_advance", None)
    if callable(on_advance):
        on_advance(wake)
