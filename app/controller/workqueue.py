"""A keyed work queue: one key is processed by at most one worker at a time.

Both controllers run on it. The Promotion controller's keys are Stages (``(namespace, name)``):
that is what makes "one Promotion per Stage" safe while different Stages run in parallel up to a
limit. The Warehouse controller's keys are Warehouses: one discovery per Warehouse at a time.

Adding a key that is already queued merges the request (the earliest due time and any wake-up
flag win); adding a key that is being processed marks it dirty, so it runs once more afterwards
and no event is lost. Delayed adds (a Running step's retry-after, a Warehouse's next poll) keep
only the earliest due time per key; so does what the handler returns (seconds to requeue after).

A key whose handler raises is retried after a per-key exponential backoff (as client-go's
rate-limited queue does), so one broken key backs off while the others go on, and a transient
failure is retried quickly. A handler that has met an expected failure and reported it itself
(a Warehouse's discovery, written to its conditions) returns :class:`RetryLater` instead: the
same backoff, with a ceiling of its own for that key (the Warehouse's polling interval) and a
floor (a registry's ``Retry-After``). Any other outcome (a requeue time, or None) starts the
backoff over.

A run cut short (the leader stepped down) leaves its key queued for the next :meth:`run`.
Time is read through the injected ``clock`` (the loop's time by default), so tests on virtual
loop time move it instead of waiting.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from app.controller.informer import Backoff
from promoter.clock import SYSTEM, Clock, wake_on_advance
from promoter.tasks import stop_tasks

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryLater:
    """A handler's answer when its key failed in a way it has already reported: run it again
    after the key's next backoff delay, capped at ``cap`` seconds (None: the queue's own cap)
    and no sooner than ``not_before`` seconds."""

    cap: float | None = None
    not_before: float = 0.0


Handler = Callable[[Hashable, bool], Awaitable[float | RetryLater | None]]


def default_backoff() -> Backoff:
    """Retries of a failing key: 0.5 s, 1 s, 2 s, ... up to 5 minutes, with jitter."""
    return Backoff(base=0.5, cap=300.0)


@dataclass
class _Entry:
    due: float
    wake: bool


class WorkQueue:
    """Deduplicating, delaying, per-key-serial queue with bounded concurrency."""

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM,
        backoff: Callable[[], Backoff] = default_backoff,
    ) -> None:
        self._clock = clock.monotonic
        self._new_backoff = backoff
        # Keys whose last run failed, with their consecutive failures so far.
        self._failing: dict[Hashable, Backoff] = {}
        self._pending: dict[Hashable, _Entry] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._counter = itertools.count()
        self._active: set[Hashable] = set()
        self._dirty: dict[Hashable, _Entry] = {}
        self._changed = asyncio.Event()
        # A clock that jumps (a test's FakeClock) makes the queue look at its due times again.
        wake_on_advance(clock, self.nudge)

    def nudge(self) -> None:
        """Look at the due times again now: the clock jumped
        (promoter.clock.wake_on_advance)."""
        self._changed.set()

    def add(self, key: Hashable, *, after: float = 0.0, wake: bool = False) -> None:
        due = self._clock() + max(0.0, after)
        if key in self._active:
            old = self._dirty.get(key)
            self._dirty[key] = _Entry(
                min(due, old.due) if old else due, wake or bool(old and old.wake)
            )
            return
        old = self._pending.get(key)
        if old is not None and old.due <= due:
            old.wake = old.wake or wake
            return
        entry = _Entry(due, wake or bool(old and old.wake))
        self._pending[key] = entry
        heapq.heappush(self._heap, (due, next(self._counter), key))
        self._changed.set()

    def forget(self, key: Hashable) -> None:
        """Drop ``key`` (its object was deleted): no queued run, no rerun, no failure history.
        A run in progress finishes; what it returns is queued as usual."""
        self._pending.pop(key, None)  # its heap entry is skipped as superseded
        self._dirty.pop(key, None)
        self._failing.pop(key, None)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is queued or being processed (so a run of it is still to come)."""
        return key in self._pending or key in self._active

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def active(self) -> int:
        return len(self._active)

    def _pop_due(self) -> tuple[Hashable, bool] | None:
        now = self._clock()
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._pending.get(key)
            if entry is None or entry.due != due:
                heapq.heappop(self._heap)  # superseded by an earlier add
                continue
            if due > now:
                return None
            heapq.heappop(self._heap)
            del self._pending[key]
            return key, entry.wake
        return None

    def _next_due_in(self) -> float | None:
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._pending.get(key)
            if entry is None or entry.due != due:
                heapq.heappop(self._heap)
                continue
            return max(0.0, due - self._clock())
        return None

    async def run(self, handler: Handler, *, concurrency: int) -> None:
        """Process keys until cancelled. ``handler`` returns seconds to requeue after, None
        (nothing more to do until the next add) or :class:`RetryLater`."""
        slots = asyncio.Semaphore(concurrency)
        tasks: dict[asyncio.Task[None], tuple[Hashable, bool]] = {}
        try:
            while True:
                await slots.acquire()
                item = self._pop_due()
                while item is None:
                    self._changed.clear()
                    delay = self._next_due_in()
                    # asyncio.timeout, not wait_for: in Python 3.11 wait_for returns the inner
                    # result when a cancellation arrives as the event is set, so the queue
                    # would go on running after its leader stepped down.
                    try:
                        async with asyncio.timeout(delay):
                            await self._changed.wait()
                    except TimeoutError:
                        pass
                    item = self._pop_due()
                key, wake = item
                self._active.add(key)
                task = asyncio.create_task(self._process(handler, key, wake, slots))
                tasks[task] = item
                task.add_done_callback(lambda done: tasks.pop(done, None))
        finally:
            # What was being processed is queued again for the next run (a new leadership):
            # a task cancelled before it started never reaches _process's own bookkeeping, and
            # one that started is cut short below. Done before stopping them (no task runs in
            # between), as the wait may itself be cut short by a second cancellation.
            for key, wake in list(tasks.values()):
                self._active.discard(key)
                dirty = self._dirty.pop(key, None)
                self.add(key, wake=wake or bool(dirty and dirty.wake))
            await stop_tasks(tasks, "reconciles")

    async def _process(
        self, handler: Handler, key: Hashable, wake: bool, slots: asyncio.Semaphore
    ) -> None:
        requeue: float | None = None
        try:
            outcome = await handler(key, wake)
            if isinstance(outcome, RetryLater):
                backoff = self._failing.setdefault(key, self._new_backoff())
                requeue = max(backoff.next_delay(cap=outcome.cap), outcome.not_before)
            else:
                requeue = outcome
                self._failing.pop(key, None)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug or an unexpected API failure: try again later rather than drop the key,
            # backing off while it keeps failing.
            requeue = self._failing.setdefault(key, self._new_backoff()).next_delay()
            log.exception("reconcile of %s failed; retrying in %.2fs", key, requeue)
        finally:
            self._active.discard(key)
            slots.release()
        dirty = self._dirty.pop(key, None)
        if dirty is not None:
            self.add(key, after=max(0.0, dirty.due - self._clock()), wake=dirty.wake)
        if requeue is not None:
            self.add(key, after=requeue)
