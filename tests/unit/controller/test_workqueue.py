"""``app.controller.workqueue.WorkQueue``: per-key serial processing, merging, and backoff of
failing keys, for both controllers (Stages and Warehouses).

The queue runs real handlers on the running loop. The first tests take retry delays from an
injected deterministic backoff of a few milliseconds and observe which delays were chosen and in
what order keys ran; the Warehouse tests below run on virtual loop time (looptime) with the
real-sized delays (5 s backoffs, 5-minute polls) and observe exactly when each run happened,
never how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from app.controller.informer import Backoff
from app.controller.workqueue import Handler, RetryLater, WorkQueue
from tests.support.clock import FakeClock


class RecordingBackoff(Backoff):
    """A deterministic backoff that remembers the delays it handed out."""

    def __init__(self, chosen: list[float]) -> None:
        super().__init__(0.001, 0.004, jitter=0.0)
        self.chosen = chosen

    def next_delay(self, cap: float | None = None) -> float:
        delay = super().next_delay(cap)
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


# ---- what the Warehouse controller needs, on virtual loop time --------------------------------
#
# The queue reads the loop's clock (its default, promoter.clock.SYSTEM.monotonic), and
# looptime
# makes that clock virtual: a 5-minute poll passes at once, and the times a key ran at are exact.


def warehouse_backoff() -> Backoff:
    """The Warehouse controller's backoff without its jitter: 5 s, 10 s, ... up to 60 s here."""
    return Backoff.deterministic(base=5.0, cap=60.0)


Outcome = float | RetryLater | None


async def run_times(
    queue: WorkQueue, outcomes: list[Outcome], *, while_running: Any = None
) -> list[float]:
    """Add one key and run it once per outcome (the handler returns them in turn); the seconds
    between consecutive runs. ``while_running(queue, run)`` is called inside each run."""
    times: list[float] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def handler(key: Hashable, wake: bool) -> Outcome:
        times.append(loop.time())
        if while_running is not None:
            while_running(queue, len(times))
        if len(times) == len(outcomes):
            done.set()
        return outcomes[len(times) - 1] if len(times) <= len(outcomes) else None

    async with running(queue, handler):
        queue.add("warehouse")
        await asyncio.wait_for(done.wait(), 100_000)
        await asyncio.sleep(0)
    return [round(b - a, 6) for a, b in itertools.pairwise(times)]


FAIL = RetryLater()


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("outcomes", "gaps"),
    [
        pytest.param([FAIL] * 6, [5, 10, 20, 40, 60], id="doubles-up-to-the-queue-cap"),
        pytest.param(
            [RetryLater(cap=30.0)] * 6, [5, 10, 20, 30, 30], id="never-beyond-the-key-interval"
        ),
        pytest.param([RetryLater(cap=1.0)] * 3, [5, 5], id="a-cap-below-the-base-is-the-base"),
        pytest.param(
            [RetryLater(cap=600.0)] * 7, [5, 10, 20, 40, 60, 60], id="never-above-the-queue-cap"
        ),
        pytest.param(
            [RetryLater(cap=30.0, not_before=45.0)] * 2 + [RetryLater(cap=30.0)] * 2,
            [45, 45, 20],
            id="retry-after-wins-over-a-shorter-backoff",
        ),
        pytest.param([FAIL, FAIL, 100.0, FAIL, None], [5, 10, 100, 5], id="success-starts-over"),
        pytest.param([300.0, 300.0, 0.5], [300, 300], id="requeue-after-is-the-next-poll"),
    ],
)
async def test_a_failing_key_backs_off_within_its_own_cap_and_polls_on_success(
    outcomes: list[Outcome], gaps: list[float]
) -> None:
    queue = WorkQueue(backoff=warehouse_backoff)
    assert await run_times(queue, outcomes) == gaps


def add_now(queue: WorkQueue, run: int) -> None:
    if run == 1:
        queue.add("warehouse")  # a spec change or a refresh while it discovers


def add_in_50(queue: WorkQueue, run: int) -> None:
    if run == 1:
        queue.add("warehouse", after=50.0)


def add_in_500(queue: WorkQueue, run: int) -> None:
    if run == 1:
        queue.add("warehouse", after=500.0)


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("while_running", "first", "gap"),
    [
        pytest.param(None, 300.0, 300, id="nothing-arrives:-the-next-poll"),
        pytest.param(add_now, 300.0, 0, id="an-event-runs-it-again-at-once"),
        pytest.param(add_in_50, 300.0, 50, id="an-earlier-delayed-add-wins"),
        pytest.param(add_in_500, 300.0, 300, id="a-later-delayed-add-loses"),
        pytest.param(add_now, FAIL, 0, id="an-event-beats-the-backoff"),
        pytest.param(add_now, None, 0, id="an-event-when-nothing-was-due"),
    ],
)
async def test_an_event_while_a_key_runs_merges_with_what_the_run_asks_for(
    while_running: Any, first: Outcome, gap: float
) -> None:
    queue = WorkQueue(backoff=warehouse_backoff)
    assert await run_times(queue, [first, None], while_running=while_running) == [gap]


@pytest.mark.looptime
async def test_a_forgotten_key_does_not_run_and_its_backoff_starts_over() -> None:
    queue = WorkQueue(backoff=warehouse_backoff)
    calls: list[float] = []
    loop = asyncio.get_running_loop()

    async def fails(key: Hashable, wake: bool) -> Outcome:
        calls.append(loop.time())
        return FAIL

    queue.add("deleted", after=10.0)
    assert "deleted" in queue and "other" not in queue
    queue.forget("deleted")  # the Warehouse was deleted before its poll
    assert "deleted" not in queue and len(queue) == 0
    async with running(queue, fails):
        await asyncio.sleep(100)
    assert calls == []

    async with running(queue, fails):
        queue.add("recreated")
        await asyncio.sleep(5 + 10 + 1)  # runs at 0, 5 and 15: two failures counted
        queue.forget("recreated")
        queue.add("recreated")
        await asyncio.sleep(1)  # runs at once: forgotten is forgotten, history included
        started = len(calls)
        await asyncio.sleep(5)
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(calls)]
    assert started == 4 and gaps[:2] == [5, 10]
    assert gaps[3] == 5  # the first backoff again, not the third (20 s)


@pytest.mark.looptime
async def test_a_key_waiting_for_its_next_poll_keeps_its_time_across_leaderships() -> None:
    queue = WorkQueue(backoff=warehouse_backoff)
    calls: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def polls(key: Hashable, wake: bool) -> Outcome:
        calls.append(round(loop.time() - start, 6))
        return 100.0

    async with running(queue, polls):
        queue.add("warehouse")
        await asyncio.sleep(30)  # the lease lost between two polls
    assert "warehouse" in queue and queue.active == 0
    async with running(queue, polls):
        await asyncio.sleep(150)
    assert calls == [0, 100]


async def test_a_clock_that_jumps_wakes_the_queue_at_once() -> None:
    """A test's FakeClock moved past a key's due time: the key runs now, not when the loop's
    timer for the old deadline fires (promoter.clock.wake_on_advance)."""
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    ran = asyncio.Event()

    async def handler(key: Hashable, wake: bool) -> None:
        ran.set()

    queue.add("w", after=3600)
    runner = asyncio.create_task(queue.run(handler, concurrency=1))
    try:
        await asyncio.sleep(0)
        assert not ran.is_set()
        clock.advance(3601)
        async with asyncio.timeout(5):  # a bound on a failure, not a wait: it runs at once
            await ran.wait()
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
