"""Background work for webhooks and Promotion updates: one queue per key, bounded concurrency.

Jobs with the same key (a pull request, a Promotion) run one after another in the order they
came, so a ``closed`` event is never handled before the ``opened`` one, and a check-run update
never overtakes the one before it; different keys run in parallel, at most ``workers`` at once.
The backlog is bounded: when it is full, :meth:`KeyedQueue.submit` says so and the webhook
answers 503 instead of growing memory without limit (GitHub shows the failed delivery, and it can
be redelivered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from promoter.tasks import stop_tasks

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]


class KeyedQueue:
    def __init__(self, workers: int = 8, max_pending: int = 10_000) -> None:
        self.workers = workers
        self.max_pending = max_pending
        self._semaphore = asyncio.Semaphore(workers)
        self._queues: dict[str, deque[Job]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False

    @property
    def pending(self) -> int:
        """Jobs submitted and not finished yet (running ones included)."""
        return self._pending

    def submit(self, key: str, job: Job) -> bool:
        """Queue ``job`` behind earlier jobs with the same key. False when the backlog is full."""
        if self._closed or self._pending >= self.max_pending:
            return False
        self._pending += 1
        self._idle.clear()
        queue = self._queues.get(key)
        if queue is not None:
            queue.append(job)
            return True
        self._queues[key] = deque([job])
        task = asyncio.create_task(self._run(key), name=f"github-queue:{key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                job = queue.popleft()
                try:
                    async with self._semaphore:
                        await job()
                except asyncio.CancelledError:
                    raise
                except Exception:  # a job's own error handling failed; the queue goes on
                    log.exception("background job for %s failed", key)
                finally:
                    self._finished()
        finally:
            self._pending -= len(queue)
            queue.clear()
            self._queues.pop(key, None)
            if self._pending == 0:
                self._idle.set()

    def _finished(self) -> None:
        self._pending -= 1
        if self._pending == 0:
            self._idle.set()

    async def join(self) -> None:
        """Wait until every submitted job has finished."""
        await self._idle.wait()

    async def close(self, grace: float = 5.0) -> None:
        """Stop taking jobs; give running ones ``grace`` seconds, then cancel the rest."""
        self._closed = True
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancel that
        # arrives as the wait ends (docs/architecture.md, "bounded waits").
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.join()
        await stop_tasks(self._tasks, "webhook jobs")
