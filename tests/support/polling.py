"""The driving loop shared by the fake controllers (Argo CD, Argo Rollouts) in tests/support.

A fake does one pass in ``process()`` (returning how many objects it changed); this gives it
``settle()`` for deterministic tests, ``running()`` for end-to-end ones that poll, and
``reacting()`` for end-to-end runs and benchmarks that must not poll: the real Argo CD and Argo
Rollouts controllers act on their informers' events, and a fake that listed every few
milliseconds would load the API server (and a benchmark's CPU figures) with reads no real
controller makes. In that mode the fake passes once per ``notify()`` (call it from a watch's
callback) and again when a pass left an operation due later (``due_in()``: a scripted delay).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Self


class PollingController:
    """Mixin: ``settle``/``running``/``reacting``/``tick`` around the subclass's ``process``."""

    # Named in the settle() failure message.
    description = "the fake controller"

    async def process(self) -> int:
        raise NotImplementedError  # pragma: no cover - subclasses define their pass

    def due_in(self) -> float | None:
        """Seconds until an operation in flight is due to move on by itself (a scripted
        delay), or None when only a change in the cluster can move anything."""
        return None

    async def tick(self) -> int:
        return await self.process()

    async def settle(self, max_passes: int = 50) -> None:
        """Pass until nothing changes (a hanging operation stays Running, but stops changing)."""
        for _ in range(max_passes):
            if not await self.process():
                return
        raise AssertionError(f"{self.description} did not settle in {max_passes} passes")

    @contextlib.asynccontextmanager
    async def running(self, interval: float = 0.005) -> AsyncIterator[Self]:
        """Process in the background while the block runs; the task never outlives it."""

        async def loop() -> None:
            while True:
                await self.process()
                await asyncio.sleep(interval)

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def notify(self) -> None:
        """Something the fake follows changed (a watch event): pass again soon."""
        self._changed().set()

    def _changed(self) -> asyncio.Event:
        # Created on first use, inside the running loop (the fakes are dataclasses).
        event: asyncio.Event | None = getattr(self, "_change_event", None)
        if event is None:
            event = asyncio.Event()
            self._change_event = event
        return event

    @contextlib.asynccontextmanager
    async def reacting(self) -> AsyncIterator[Self]:
        """Pass once at the start, then on every ``notify()`` and whenever ``due_in()`` says an
        operation is due, while the block runs; the task never outlives it."""
        changed = self._changed()

        async def loop() -> None:
            while True:
                changed.clear()
                await self.process()
                if changed.is_set():
                    continue  # something changed while we passed: look again
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), self.due_in())

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
