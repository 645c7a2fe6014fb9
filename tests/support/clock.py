"""The test fake of :class:`promoter.clock.Clock`: time that moves only when a test moves it.

Pass it where the code takes a ``clock`` (``create_app(settings, clock=...)``, the controller,
the emulator's ``clock=fake.now``) and call :meth:`FakeClock.advance` instead of sleeping until
a cookie expires or a timestamp ticks over. Waits on the event loop's timers run on virtual
time instead (``@pytest.mark.looptime``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from promoter.clock import SYSTEM

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    """Wall time frozen at ``start`` (the real time when none is given) until :meth:`advance`.

    ``monotonic()`` stays the running loop's time (plus what was advanced): the code sleeps on
    the loop's timers for the deadlines it computes from it, so a frozen one would never come.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)
        self._advanced = 0.0
        self._on_advance: list[Callable[[], None]] = []

    def on_advance(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every :meth:`advance` (promoter.clock.wake_on_advance: the
        work queues look at their due times again instead of waiting out the old timer)."""
        self._on_advance.append(callback)

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return SYSTEM.monotonic() + self._advanced

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._advanced += seconds
        for callback in self._on_advance:
            callback()
