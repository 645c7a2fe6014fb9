"""Waiting in end-to-end tests for something another task or process will make true."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp.test_utils import TestClient

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


async def answering_healthz(
    client: TestClient[Any, Any], probe: Callable[[], Awaitable[T | None]], what: str
) -> T:
    """:func:`eventually`, asking the server's ``/healthz`` before every probe: each must answer
    200. A server whose event loop is held answers late, and then the 60 s bound fails the test
    instead of hanging it; it asserts that the server answers, never how fast (issue 34)."""

    async def healthy_probe() -> T | None:
        health = await client.get("/healthz")
        assert health.status == 200, await health.text()
        return await probe()

    async with asyncio.timeout(60):
        return await eventually(healthy_probe, what, within=60)
