"""The garbage collector: deletes old Promotions and Freight on the leader, by Kargo's rules.

What goes is decided in :mod:`promoter.control.garbage` from the informers' caches (every
replica keeps them warm, so a pass costs no list); this module applies the decision, one
DELETE per object with the object's uid and resourceVersion as preconditions, so anything that
changed since the decision (a Promotion that started, a Freight that was replaced) answers
``Conflict`` and is left for the next pass to decide again. Kargo runs its collector as a
CronJob beside the controller; here it is a loop in the leader, every ``interval`` seconds,
first right after the caches sync. A delete that fails is logged and counted as a failure and
the pass goes on with the rest (Kargo's workers do the same per project).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.clock import SYSTEM, Clock
from promoter.control.garbage import Doomed, Garbage, Retention, collect
from promoter.control.shards import NO_SHARD, Shard

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Swept:
    """What one pass did: deleted per kind, and the deletes that failed."""

    promotions: int = 0
    freight: int = 0
    failed: int = 0


class GarbageCollector:
    """Kargo's garbage collector over the controller's caches (leader only)."""

    def __init__(
        self,
        kube: k.Kube,
        *,
        stages: Informer,
        promotions: Informer,
        freight: Informer,
        retention: Retention,
        interval: float,
        clock: Clock = SYSTEM,
        shard: Shard = NO_SHARD,
        on_deleted: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.stages = stages
        self.promotions = promotions
        self.freight = freight
        self.retention = retention
        self.interval = interval
        self.clock = clock
        self.shard = shard
        # Called with the kind ("Promotion", "Freight") of every object deleted: the metric.
        self.on_deleted = on_deleted

    async def run(self) -> None:
        """Sweep now and every ``interval`` seconds until cancelled."""
        while True:
            await self.sweep()
            await asyncio.sleep(self.interval)

    def decide(self) -> Garbage:
        """What goes now. Promotions: those of the Stages this shard runs. Freight: only the
        default controller collects it (Freight belongs to no shard), from caches that hold
        every Stage and Promotion (:meth:`Shard.cache_selector`)."""
        now = self.clock.now()
        stages = [s for s in self.stages.items() if self.shard.responsible_for(s)]
        promotions = [p for p in self.promotions.items() if self.shard.responsible_for(p)]
        mine = collect(
            stages=stages, promotions=promotions, freight=(), retention=self.retention, now=now
        )
        if self.shard.cache_selector() is not None:
            return mine
        freight = collect(
            stages=self.stages.items(),
            promotions=self.promotions.items(),
            freight=self.freight.items(),
            retention=self.retention,
            now=now,
        )
        return Garbage(mine.promotions, freight.freight)

    async def sweep(self) -> Swept:
        """One pass: decide from the caches, then delete (Promotions first: a Freight's last
        Promotions go before it, as Kargo's ``cleanProject`` orders them)."""
        garbage = self.decide()
        promotions = freight = failed = 0
        for doomed in garbage.promotions:
            if await self._delete(k.PROMOTIONS, doomed):
                promotions += 1
            else:
                failed += 1
        for doomed in garbage.freight:
            if await self._delete(k.FREIGHT, doomed):
                freight += 1
            else:
                failed += 1
        if garbage:
            log.info(
                "garbage collection: deleted %d Promotion(s) and %d Freight, %d left for the "
                "next pass",
                promotions,
                freight,
                failed,
            )
        return Swept(promotions, freight, failed)

    async def _delete(self, rt: k.ResourceType, doomed: Doomed) -> bool:
        where = f"{rt.kind} {doomed.namespace}/{doomed.name}"
        try:
            await self.kube.delete(
                rt,
                doomed.namespace,
                doomed.name,
                uid=doomed.uid,
                resource_version=doomed.resource_version,
            )
        except k.NotFound:
            return False  # gone already (someone else deleted it): nothing to count
        except k.Conflict:
            log.info("garbage collection: %s changed since it was judged; kept for now", where)
            return False
        except k.KubeError as e:
            log.warning("garbage collection: could not delete %s: %s", where, e)
            return False
        log.info("garbage collection: deleted %s", where)
        if self.on_deleted is not None:
            self.on_deleted(rt.kind)
        return True
