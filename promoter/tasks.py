"""Stopping background tasks: cancel them all, wait for each, and say which one failed.

Every component that runs work in tasks of its own (the server's supervised loops, the webhook
queue, the registry receivers, Slack's jobs and live-message followers) stops them the same way
on shutdown. A task that had already failed, or that fails while winding down, is logged with
its traceback instead of being swallowed: shutdown goes on, but the failure is not hidden.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def stop_tasks(tasks: Iterable[asyncio.Future[Any]], what: str) -> None:
    """Cancel ``tasks``, wait until each has ended, and log those that ended in an error.

    ``what`` names the tasks in the log ("Slack jobs"). A cancellation of the caller itself
    still propagates: only the tasks' own outcomes are collected.
    """
    stopping = list(tasks)
    for task in stopping:
        task.cancel()
    if not stopping:
        return
    outcomes = await asyncio.gather(*stopping, return_exceptions=True)
    for task, outcome in zip(stopping, outcomes, strict=True):
        if isinstance(outcome, Exception):
            log.error("one of the %s failed while stopping (%r)", what, task, exc_info=outcome)
