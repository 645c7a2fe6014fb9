"""``app.controller.workqueue.WorkQueue``: per-key serial processing, merging, and backoff of
failing keys.

The queue runs real handlers on the running loop; retry delays come from an injected
deterministic backoff of a few milliseconds, so the tests observe which delays were chosen and
in what order keys ran, never how long anything took.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

from app.controller.informer import Backoff
from app.controller.workqueue import Handler, WorkQueue


class RecordingBackoff(Backoff):
    """A deterministic backoff that remembers the delays it handed out."""

    def __init__(self, chosen: list[float]) -> None:
        super().__init__(0.001, 0.004, jitter=0.0)
        self.chosen = chosen

    def next_delay(self) -> float:
        delay = super().next_delay()
        self.chosen.append(delay)
        return delay


@asynccontextmanager
async def running(queue: WorkQueue, handler: Handler) -> AsyncIterator[None]:
    task = asyncio.create_task(queue.run(handler, concurrency=4))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_failing_key_backs_off_exponentially_and_resets_after_success() -> None:
    chosen: list[float] = []
    queue = WorkQueue(backoff=lambda: RecordingBackoff(chosen))
    outcomes = iter(["fail", "fail", "fail", "ok", "fail", "ok"])
    calls: list[str] = []
    done = asyncio.Event()

    async def handler(key: Hashable, wake: bool) -> float | None:
        outcome = next(outcomes)
        calls.append(outcome)
        if outcome == "fail":
            raise RuntimeError("the API server said 500")
        if len(calls) == 4:
            queue.add(key)  # a new event after the recovery: fails once more
        else:
            done.set()
        return None

    async with running(queue, handler):
        queue.add("stage-a")
        await asyncio.wait_for(done.wait(), 5)
    assert calls == ["fail", "fail", "fail", "ok", "fail", "ok"]
    # 1 ms, 2 ms, 4 ms while failing; after a success the next failure starts over.
    assert chosen == [0.001, 0.002, 0.004, 0.001]


async def test_one_failing_key_does_not_hold_up_the_others() -> None:
    chosen: list[float] = []
    queue = WorkQueue(backoff=lambda: RecordingBackoff(chosen))
    seen: list[Hashable] = []
    healthy_done = asyncio.Event()

    async def handler(key: Hashable, wake: bool) -> float | None:
        seen.append(key)
        if key == "broken":
            raise RuntimeError("a bug")
        if seen.count("healthy") == 3:
            healthy_done.set()
        else:
            queue.add("healthy")
        return None

    async with running(queue, handler):
        queue.add("broken")
        queue.add("healthy")
        await asyncio.wait_for(healthy_done.wait(), 5)
    assert seen.count("healthy") == 3
    assert "broken" in seen
    # The broken key's delays grow on their own; the healthy key never failed.
    assert chosen == sorted(chosen)


async def test_adds_while_running_merge_into_one_more_run() -> None:
    queue = WorkQueue()
    runs: list[bool] = []
    first_started = asyncio.Event()
    release = asyncio.Event()
    second_done = asyncio.Event()

    async def handler(key: Hashable, wake: bool) -> float | None:
        runs.append(wake)
        if len(runs) == 1:
            first_started.set()
            await release.wait()
        else:
            second_done.set()
        return None

    async with running(queue, handler):
        queue.add("stage")
        await asyncio.wait_for(first_started.wait(), 5)
        queue.add("stage")
        queue.add("stage", wake=True)
        queue.add("stage")
        release.set()
        await asyncio.wait_for(second_done.wait(), 5)
        await asyncio.sleep(0)
    assert runs == [False, True]  # three adds while running: one more run, woken


async def test_a_key_cut_short_by_a_lost_leadership_runs_again_under_the_next() -> None:
    """A run cancelled mid-reconcile (the lease lost) leaves the key queued for the next run,
    with what was added while it ran: the next leader reconciles that Stage instead of never."""
    queue = WorkQueue()
    started = asyncio.Event()
    calls: list[tuple[Hashable, bool]] = []

    async def hangs(key: Hashable, wake: bool) -> float | None:
        calls.append((key, wake))
        started.set()
        await asyncio.Event().wait()  # a step waiting on something: cut short below
        return None

    async with running(queue, hangs):
        queue.add("stage-a")
        await started.wait()
        queue.add("stage-a", wake=True)  # a webhook while it runs: marked dirty
    assert len(queue) == 1 and queue.active == 0

    again = asyncio.Event()

    async def finishes(key: Hashable, wake: bool) -> float | None:
        calls.append((key, wake))
        again.set()
        return None

    async with running(queue, finishes):
        await asyncio.wait_for(again.wait(), 5)
    assert calls == [("stage-a", False), ("stage-a", True)]
