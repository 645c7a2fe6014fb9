"""A keyed work queue: one key is processed by at most one worker at a time.

Keys are Stages (``(namespace, name)``): that is what makes "one Promotion per Stage" safe while
different Stages run in parallel up to a limit. Adding a key that is already queued merges the
request (the earliest due time and any wake-up flag win); adding a key that is being processed
marks it dirty, so it runs once more afterwards and no event is lost. Delayed adds (a Running
step's retry-after) keep only the earliest due time per key. A key whose handler raises is
retried after a per-key exponential backoff (as client-go's rate-limited queue does), so one
broken Stage backs off while the others go on, and a transient failure is retried quickly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from app.controller.informer import Backoff
from promoter.clock import SYSTEM

log = logging.getLogger(__name__)

Handler = Callable[[Hashable, bool], Awaitable[float | None]]


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
        clock: Callable[[], float] = SYSTEM.monotonic,
        backoff: Callable[[], Backoff] = default_backoff,
    ) -> None:
        self._clock = clock
        self._new_backoff = backoff
        # Keys whose last run failed, with their consecutive failures so far.
        self._failing: dict[Hashable, Backoff] = {}
        self._pending: dict[Hashable, _Entry] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._counter = itertools.count()
        self._active: set[Hashable] = set()
        self._dirty: dict[Hashable, _Entry] = {}
        self._changed = asyncio.Event()

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
        """Process keys until cancelled. ``handler`` returns seconds to requeue after, or None."""
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
            interrupted = list(tasks.values())
            for task in list(tasks):
                task.cancel()
            # What was being processed is queued again for the next run (a new leadership):
            # a task cancelled before it started never reaches _process's own bookkeeping, and
            # one that started was cut short. Done before waiting, which a second cancellation
            # may cut short too.
            for key, wake in interrupted:
                self._active.discard(key)
                dirty = self._dirty.pop(key, None)
                self.add(key, wake=wake or bool(dirty and dirty.wake))
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _process(
        self, handler: Handler, key: Hashable, wake: bool, slots: asyncio.Semaphore
    ) -> None:
        requeue: float | None = None
        try:
            requeue = await handler(key, wake)
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
