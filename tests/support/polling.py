"""The driving loop shared by the fake controllers (Argo CD, Argo Rollouts) in tests/support.

A fake does one pass in ``process()`` (returning how many objects it changed); this gives it
``settle()`` for deterministic tests and ``running()`` for end-to-end ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Self


class PollingController:
    """Mixin: ``settle``/``running``/``tick`` around the subclass's ``process``."""

    # Named in the settle() failure message.
    description = "the fake controller"

    async def process(self) -> int:
        raise NotImplementedError  # pragma: no cover - subclasses define their pass

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
