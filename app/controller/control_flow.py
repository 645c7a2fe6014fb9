"""Control-flow Stages: Stages without promotion steps that pass Freight on (fan-out, fan-in).

Kargo's ``ControlFlowStageReconciler``: nothing is promoted to such a Stage; every Freight that
becomes available to it (verified upstream, soak time and all) is marked verified in it at
once, with a ``FreightVerificationSucceeded`` Event on the Freight, so the Stages that request
Freight from it can take that Freight (by ``/promote`` or auto-promotion). What to mark, and the
Stage's status, are decided in :mod:`promoter.control.selection` and
:mod:`promoter.control.freight_events`; this collaborator applies them. The Stage's status goes
out through the one write path (:class:`app.controller.writes.StatusWriter`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from app.controller import kube as k
from app.controller.caches import Caches
from app.controller.verification import record_event
from promoter.clock import Clock
from promoter.control import selection
from promoter.control.freight_events import verification_event
from promoter.resources.model import format_time, name_of, namespace_of

log = logging.getLogger(__name__)


class ControlFlowStages:
    """Marks the Freight available to control-flow Stages verified in them."""

    def __init__(self, kube: k.Kube, caches: Caches, clock: Clock) -> None:
        self.kube = kube
        self.caches = caches
        self.clock = clock

    async def pass_on(self, stage: Mapping[str, Any]) -> float | None:
        """Mark what is available now; returns when the next Freight becomes available (a
        soak ending), or None."""
        namespace, name = namespace_of(stage) or "default", name_of(stage)
        freight = self.caches.freight.items(namespace)
        now = self.clock.now()
        for freight_name in selection.to_verify(stage, freight, now):
            found = self.caches.freight.get(namespace, freight_name)
            if found is None:
                continue
            try:
                written = await self.kube.patch_status(
                    k.FREIGHT,
                    namespace,
                    freight_name,
                    {"verifiedIn": {name: {"verifiedAt": format_time(now)}}},
                    resource_version=None,
                )
            except k.NotFound:
                continue
            except k.KubeError as e:
                log.warning("marking Freight %s verified in %s: %s", freight_name, name, e)
                continue
            self.caches.freight.observe(written)
            event = verification_event(found, name, "Successful", started=now, finished=now)
            await record_event(self.kube, event)
            log.info("control-flow Stage %s passes Freight %s on", name, freight_name)
        later = selection.next_availability(stage, freight, now)
        return max(0.0, (later - now).total_seconds()) if later is not None else None
