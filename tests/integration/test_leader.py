"""``app.controller.leader.LeaderElector`` with real Leases on the API server emulator.

The tests run on virtual loop time (looptime): the elector's clock is the loop's, requests over
the in-process emulator take no loop time, and waiting out a lease costs no wall time. Durations
are short (lease 1.0 s, renew deadline 0.6 s, retry 0.1 s) and every timing assertion leaves room
for one retry period of jitter.

Only the test body runs on virtual time; fixtures run on the wall clock, so at teardown the loop's
clock leaps ahead and every timeout armed during the test fires in the pass that stops the
candidates. That is how a lost cancel showed up (the teardown hung): Python 3.11's
``asyncio.wait_for`` and aiohttp's request timer could each swallow a cancel that coincided with
a timeout. The elector and ``Kube`` now bound their waits with ``asyncio.timeout``;
``test_a_stop_is_never_lost_whatever_the_elector_was_doing`` here and
``test_a_kube_request_cancelled_as_it_times_out_is_cancelled`` in test_hardening.py pin that, and
``Candidate.stop`` fails instead of hanging if a cancel is ever lost again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.apiserver import RequestInfo
from app.controller.kube import LEASES, Kube
from app.controller.leader import LeaderElector, LeaseRecord, claim, released
from tests.support.kube import RunningApiServer, running_apiserver

NS = "demo"
LEASE = "longshoreman-leader"
TIMINGS: dict[str, Any] = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

pytestmark = pytest.mark.looptime


def loop_time() -> float:
    return asyncio.get_running_loop().time()


@dataclass
class Candidate:
    """An elector plus a record of what its callbacks saw."""

    elector: LeaderElector
    started: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    stopped_at: float | None = None
    work_cancelled: int = 0
    task: asyncio.Task[None] | None = None

    async def work(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.work_cancelled += 1
            raise

    def on_stopped(self) -> None:
        self.stopped_at = loop_time()
        self.started.clear()
        self.stopped.set()

    def start(self) -> Candidate:
        self.task = asyncio.create_task(self.elector.run(self.work, self.on_stopped))
        return self

    async def stop(self, seconds: float = 5.0) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.wait({self.task}, timeout=seconds)
        assert self.task.done(), f"{self.elector.identity} still runs after its cancel"
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@pytest.fixture
async def server() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[NS]) as started:
        yield started


@pytest.fixture
async def make(server: RunningApiServer) -> AsyncIterator[Callable[..., Candidate]]:
    candidates: list[Candidate] = []

    def factory(identity: str, **options: Any) -> Candidate:
        kube = Kube(server.api_client(), request_timeout=2.0)
        elector = LeaderElector(
            kube, namespace=NS, name=LEASE, identity=identity, **{**TIMINGS, **options}
        )
        candidate = Candidate(elector).start()
        candidates.append(candidate)
        return candidate

    yield factory
    for candidate in candidates:
        await candidate.stop()


async def lease_spec(server: RunningApiServer) -> dict[str, object]:
    kube = Kube(server.api_client())
    spec: dict[str, object] = (await kube.get(LEASES, NS, LEASE))["spec"]
    return spec


async def first_leader(*candidates: Candidate, seconds: float = 3.0) -> Candidate:
    waits = {asyncio.create_task(c.started.wait()): c for c in candidates}
    done, pending = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    assert done, "nobody became leader"
    return waits[done.pop()]


# ----------------------------------------------------------------------- pure parts


def test_claim_and_release_records() -> None:
    fresh = claim(None, "a", 15, "t0")
    assert fresh == LeaseRecord("a", 15, "t0", "t0", 0)
    assert claim(fresh, "a", 15, "t1") == LeaseRecord("a", 15, "t0", "t1", 0)
    taken = claim(fresh, "b", 15, "t2")
    assert taken == LeaseRecord("b", 15, "t2", "t2", 1)
    assert released(taken, "t3") == LeaseRecord("", 1, "t3", "t3", 1)


def test_durations_are_validated() -> None:
    kube = Kube.__new__(Kube)
    with pytest.raises(ValueError):
        LeaderElector(
            kube,
            namespace=NS,
            name=LEASE,
            identity="a",
            lease_duration=1.0,
            renew_deadline=1.0,
            retry_period=0.1,
        )
    with pytest.raises(ValueError):
        LeaderElector(
            kube,
            namespace=NS,
            name=LEASE,
            identity="",
        )


# ------------------------------------------------------------------------- over HTTP


async def test_one_of_two_leads(server: RunningApiServer, make: Callable[..., Candidate]) -> None:
    a, b = make("pod-a"), make("pod-b")
    leader = await first_leader(a, b)
    follower = b if leader is a else a
    await asyncio.sleep(0.5)  # several retry periods: the follower keeps following
    assert leader.elector.is_leader and not follower.elector.is_leader
    assert not follower.started.is_set()
    assert follower.elector.leader == leader.elector.identity
    spec = await lease_spec(server)
    assert spec["holderIdentity"] == leader.elector.identity
    assert spec["leaseDurationSeconds"] == 1 and spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(str(spec["acquireTime"])) and MICRO_TIME.match(str(spec["renewTime"]))
    assert spec["renewTime"] > spec["acquireTime"]  # type: ignore[operator]


async def test_standby_takes_over_quickly_after_a_release(
    server: RunningApiServer, make: Callable[..., Candidate]
) -> None:
    a = make("pod-a")
    await asyncio.wait_for(a.started.wait(), 3)
    b = make("pod-b")
    await asyncio.sleep(0.3)
    assert not b.started.is_set()

    released_at = loop_time()
    await a.stop()
    assert a.work_cancelled == 1 and a.stopped.is_set() and not a.elector.is_leader
    await asyncio.wait_for(b.started.wait(), 3)
    # Released: no need to wait out the lease duration.
    assert loop_time() - released_at < TIMINGS["lease_duration"]
    spec = await lease_spec(server)
    assert spec["holderIdentity"] == "pod-b" and spec["leaseTransitions"] == 1


async def test_standby_takes_over_after_the_leader_crashes(
    server: RunningApiServer, make: Callable[..., Candidate]
) -> None:
    a = make("pod-a", release_on_exit=False)
    await asyncio.wait_for(a.started.wait(), 3)
    b = make("pod-b")
    await asyncio.sleep(0.3)

    crashed_at = loop_time()
    await a.stop()
    assert (await lease_spec(server))["holderIdentity"] == "pod-a"  # not released
    await asyncio.wait_for(b.started.wait(), 3)
    elapsed = loop_time() - crashed_at
    # The last renewal was at most one (jittered) retry period before the crash.
    lease, retry = TIMINGS["lease_duration"], TIMINGS["retry_period"]
    assert lease - 1.2 * retry - 0.05 <= elapsed <= lease + 3 * retry + 0.3
    assert (await lease_spec(server))["leaseTransitions"] == 1


async def test_leader_steps_down_when_renewals_fail(
    server: RunningApiServer, make: Callable[..., Candidate]
) -> None:
    a = make("pod-a")
    await asyncio.wait_for(a.started.wait(), 3)
    b = make("pod-b")
    await asyncio.sleep(0.25)

    def failing_lease_writes(request: RequestInfo) -> str | None:
        return "error" if request.method == "PUT" and "/leases/" in request.path else None

    server.faults.hook = failing_lease_writes  # type: ignore[assignment]
    failing_since = loop_time()
    await asyncio.wait_for(a.stopped.wait(), 3)
    assert a.stopped_at is not None
    elapsed = a.stopped_at - failing_since
    deadline, retry = TIMINGS["renew_deadline"], TIMINGS["retry_period"]
    assert deadline - 1.2 * retry - 0.05 <= elapsed <= deadline + 0.15
    await asyncio.sleep(0.05)
    assert a.work_cancelled == 1 and not a.elector.is_leader and not b.elector.is_leader

    server.faults.hook = None
    leader = await first_leader(a, b)
    assert (await lease_spec(server))["holderIdentity"] == leader.elector.identity


async def test_leader_steps_down_at_once_when_someone_else_holds_the_lease(
    server: RunningApiServer, make: Callable[..., Candidate]
) -> None:
    a = make("pod-a")
    await asyncio.wait_for(a.started.wait(), 3)
    kube = Kube(server.api_client())
    lease = await kube.get(LEASES, NS, LEASE)
    lease["spec"]["holderIdentity"] = "intruder"
    await kube.replace(LEASES, lease)
    overwritten_at = loop_time()
    await asyncio.wait_for(a.stopped.wait(), 3)
    assert a.stopped_at is not None
    assert a.stopped_at - overwritten_at < TIMINGS["renew_deadline"]
    assert a.elector.leader == "intruder"


async def test_run_returns_and_releases_when_the_work_ends(server: RunningApiServer) -> None:
    kube = Kube(server.api_client())
    elector = LeaderElector(kube, namespace=NS, name=LEASE, identity="pod-a", **TIMINGS)
    stopped: list[bool] = []

    async def short_work() -> None:
        await asyncio.sleep(0.15)

    await asyncio.wait_for(elector.run(short_work, lambda: stopped.append(True)), 3)
    assert stopped == [True] and not elector.is_leader
    spec = await lease_spec(server)
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1

    async def broken_work() -> None:
        raise RuntimeError("controller crashed")

    with pytest.raises(RuntimeError, match="controller crashed"):
        await asyncio.wait_for(elector.run(broken_work, lambda: None), 3)


async def test_a_healthy_leader_renews_once_per_period(
    server: RunningApiServer, make: Callable[..., Candidate]
) -> None:
    """The leader renews with one PUT per retry period (no re-read); the follower only reads."""
    a = make("pod-a")
    await asyncio.wait_for(a.started.wait(), 3)
    make("pod-b")
    before = len(server.requests)
    await asyncio.sleep(0.6)
    window = server.requests[before:]
    puts = [r for r in window if r.method == "PUT"]
    gets = [r for r in window if r.method == "GET"]
    # 0.6 s at 0.1-0.12 s per period, for each of: the leader's PUT, the follower's GET.
    assert 3 <= len(puts) <= 7 and 3 <= len(gets) <= 7
    assert all(r.status == 200 for r in window)


async def test_a_stop_is_never_lost_whatever_the_elector_was_doing(
    make: Callable[..., Candidate],
) -> None:
    """Cancelling ends the elector at any point of its loop, even in the very loop pass in which
    one of its requests completes (where Python 3.11's ``asyncio.wait_for`` dropped the cancel)."""
    for passes in range(24):
        candidate = make(f"pod-{passes}")
        for _ in range(passes):
            await asyncio.sleep(0)
        await candidate.stop(seconds=1.0)
