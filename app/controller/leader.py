"""Lease-based leader election, with client-go's semantics, so one replica runs controllers.

Candidates share one coordination.k8s.io/v1 Lease. Each one reads it every ``retry_period``;
the holder renews it (``renewTime``), the others take it over once it has not changed for
``leaseDurationSeconds``. Expiry is judged by the *local* clock: a candidate remembers when it
last saw the lease record change (client-go's ``observedTime``), so clock skew between nodes
does not matter. Writes carry the lease's resourceVersion, so when two candidates race, the
API server picks one and the other gets a Conflict.

Every bounded wait is an ``asyncio.timeout`` block, never ``asyncio.wait_for``: on Python 3.11,
``wait_for`` returns the result and drops the cancel when the caller is cancelled in the loop
pass in which the awaited request completes (https://github.com/python/cpython/issues/86296,
fixed in 3.12), and an elector that misses its cancel keeps leading after shutdown began.

A leader that cannot renew within ``renew_deadline`` stops leading at once (its work is
cancelled) before anyone else may take over (``renew_deadline < lease_duration``). On a clean
shutdown the leader releases the lease so a standby takes over within one ``retry_period``.

See k8s.io/client-go/tools/leaderelection/leaderelection.go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.controller.kube import LEASES, Conflict, JsonObject, Kube, KubeError, NotFound, micro_time
from promoter.clock import SYSTEM, Clock

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election-relevant part of a Lease's spec."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> JsonObject:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def claim(current: LeaseRecord | None, identity: str, lease_seconds: int, now: str) -> LeaseRecord:
    """The record ``identity`` writes to acquire or renew the lease at wall time ``now``."""
    if current is None:
        return LeaseRecord(identity, lease_seconds, now, now, 0)
    if current.holder == identity:
        return replace(current, lease_duration_seconds=lease_seconds, renew_time=now)
    return LeaseRecord(identity, lease_seconds, now, now, current.transitions + 1)


def released(current: LeaseRecord, now: str) -> LeaseRecord:
    """What a leader writes on shutdown: no holder, and a 1 s duration for good measure."""
    return LeaseRecord("", 1, now, now, current.transitions)


class LeaderElector:
    """Runs ``on_started_leading`` while this process holds the Lease ``namespace/name``."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_exit: bool = True,
        jitter: float = 0.2,
        clock: Clock = SYSTEM,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not identity:
            raise ValueError("leader election needs a non-empty identity")
        if not lease_duration > renew_deadline > retry_period * (1 + jitter) > 0:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > "
                "retry_period * (1 + jitter) > 0"
            )
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_exit = release_on_exit
        self.jitter = jitter
        self.clock = clock
        self.rand = rand
        self.is_leader = False
        self.leader: str | None = None
        self._lease_seconds = max(1, math.ceil(lease_duration))
        self._lease: JsonObject | None = None
        self._observed: LeaseRecord | None = None
        self._observed_time = 0.0

    # ------------------------------------------------------------ one attempt

    def _observe(self, lease: JsonObject, now: float) -> LeaseRecord:
        record = LeaseRecord.from_lease(lease)
        if record != self._observed:
            self._observed = record
            self._observed_time = now
        self._lease = lease
        self.leader = record.holder or None
        return record

    async def _try_acquire_or_renew(self) -> bool:
        now = self.clock.monotonic()
        if self.is_leader and self._lease is not None and self._observed is not None:
            # Fast path: renew from what we wrote last; a Conflict means someone else wrote
            # since, and the slow path below finds out who.
            with contextlib.suppress(Conflict):
                return await self._write(self._lease, self._observed, now)
        try:
            lease = await self.kube.get(LEASES, self.namespace, self.name)
        except NotFound:
            record = claim(None, self.identity, self._lease_seconds, micro_time(self.clock.now()))
            body: JsonObject = {
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": record.to_spec(),
            }
            try:
                created = await self.kube.create(LEASES, body)
            except Conflict:
                return False  # another candidate created it first
            self._observe(created, now)
            return True
        record = self._observe(lease, now)
        if (
            record.holder
            and record.holder != self.identity
            and self._observed_time + record.lease_duration_seconds > now
        ):
            return False
        try:
            return await self._write(lease, record, now)
        except Conflict:
            return False

    async def _write(self, lease: JsonObject, record: LeaseRecord, now: float) -> bool:
        new = claim(record, self.identity, self._lease_seconds, micro_time(self.clock.now()))
        if new.holder != record.holder:
            logger.info("%s takes over lease %s from %r", self.identity, self.name, record.holder)
        written = await self.kube.replace(LEASES, {**lease, "spec": new.to_spec()})
        self._observe(written, now)
        return True

    async def _attempt(self, limit: float) -> bool:
        """One bounded try; any failure (error, timeout, lost race) is just False."""
        try:
            async with asyncio.timeout(max(limit, 0.001)):
                return await self._try_acquire_or_renew()
        except (KubeError, TimeoutError) as exc:
            logger.info("lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    def _pause(self) -> float:
        return self.retry_period * (1 + self.jitter * self.rand())

    # -------------------------------------------------------------- the loop

    async def _acquire(self) -> float:
        """Try every retry_period until the lease is ours; returns when that happened."""
        while True:
            started = self.clock.monotonic()
            if await self._attempt(self.renew_deadline):
                logger.info("%s is now the leader (lease %s)", self.identity, self.name)
                return started
            await asyncio.sleep(self._pause())

    async def _lead(
        self, renewed_at: float, work: asyncio.Task[None], on_stopped_leading: Callable[[], None]
    ) -> None:
        """Renew until a renewal misses the deadline or the work ends, then step down."""
        try:
            while True:
                await asyncio.wait({work}, timeout=self.retry_period)
                if work.done():
                    return
                while True:
                    started = self.clock.monotonic()
                    remaining = renewed_at + self.renew_deadline - started
                    if remaining > 0 and await self._attempt(remaining):
                        renewed_at = started
                        break
                    if self.leader != self.identity:
                        # Someone else holds the lease now (we were slow, or released it):
                        # two leaders must never overlap, so do not wait for the deadline.
                        logger.warning(
                            "%s lost lease %s to %r", self.identity, self.name, self.leader
                        )
                        return
                    if self.clock.monotonic() >= renewed_at + self.renew_deadline:
                        logger.warning(
                            "%s could not renew lease %s within %.1fs; stepping down",
                            self.identity,
                            self.name,
                            self.renew_deadline,
                        )
                        return
                    await asyncio.sleep(min(self.retry_period, max(0.0, remaining)))
        finally:
            await self._step_down(work, on_stopped_leading)

    async def _step_down(
        self, work: asyncio.Task[None], on_stopped_leading: Callable[[], None]
    ) -> None:
        self.is_leader = False
        try:
            on_stopped_leading()
        except Exception:
            logger.exception("on_stopped_leading failed")
        work.cancel()
        # Wait for the work to wind down so two generations never run side by side here.
        await asyncio.wait({work})

    async def _release(self) -> None:
        if self._lease is None or self._observed is None:
            return
        if self._observed.holder != self.identity:
            return
        record = released(self._observed, micro_time(self.clock.now()))
        try:
            async with asyncio.timeout(self.renew_deadline):
                written = await self.kube.replace(LEASES, {**self._lease, "spec": record.to_spec()})
        except (KubeError, TimeoutError) as exc:
            # Someone else already holds it, or the server is away: the lease expires anyway.
            logger.info("could not release lease %s: %s", self.name, exc)
            return
        self._observe(written, self.clock.monotonic())
        logger.info("%s released lease %s", self.identity, self.name)

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], None],
    ) -> None:
        """Campaign, lead, and campaign again after losing the lease, until cancelled.

        ``on_started_leading()`` runs as a task while leading and is cancelled on losing the
        lease (after ``on_stopped_leading()`` was called). If it returns by itself, the lease
        is released (``release_on_exit``) and ``run`` returns; if it raises, so does ``run``.
        On cancellation the lease is released too. ``release_on_exit=False`` skips releasing,
        which is how tests simulate a crashed leader.
        """

        async def work_body() -> None:
            await on_started_leading()

        try:
            while True:
                renewed_at = await self._acquire()
                self.is_leader = True
                work = asyncio.create_task(work_body(), name=f"leader:{self.name}")
                await self._lead(renewed_at, work, on_stopped_leading)
                if work.cancelled():
                    continue  # lost the lease: campaign again
                error = work.exception()
                if error is not None:
                    raise error
                return
        finally:
            # After a crash (release_on_exit=False) the lease is left to expire, as it would be
            # if the process had died.
            if self.release_on_exit:
                await self._release()
