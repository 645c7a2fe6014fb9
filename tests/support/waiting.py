"""Waiting in end-to-end tests for something another task or process will make true."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str, within: float = 20) -> T:
    """Poll ``probe`` until it returns something; fail naming ``what`` after ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await probe()
        if found is not None:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
