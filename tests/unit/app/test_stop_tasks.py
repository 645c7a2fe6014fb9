"""Stopping background tasks: every task ends, and one that failed is said, not swallowed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from promoter.tasks import stop_tasks


async def test_every_task_is_cancelled_and_one_that_failed_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async def broken() -> None:
        raise RuntimeError("the follower's bug")

    async def fails_while_stopping() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise ValueError("cleanup went wrong")  # the case under test

    tasks = [asyncio.create_task(c()) for c in (forever, broken, fails_while_stopping)]
    await asyncio.sleep(0)  # they start; broken() has failed already
    with caplog.at_level(logging.ERROR, logger="promoter.tasks"):
        await stop_tasks(tasks, "test jobs")

    assert all(task.done() for task in tasks)
    assert tasks[0].cancelled()
    logged = [(r.getMessage(), r.exc_info and r.exc_info[1]) for r in caplog.records]
    assert [str(error) for _, error in logged] == ["the follower's bug", "cleanup went wrong"]
    assert all("test jobs" in message for message, _ in logged)


async def test_nothing_to_stop_is_fine() -> None:
    await stop_tasks([], "nothing")
