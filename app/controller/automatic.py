"""The Promotions the controller creates on its own: auto-promotion and auto-rollback.

Both go through :func:`app.controller.creation.create_promotion` (the one way Promotions are
made) and put what they created into the Promotion cache at once, so the Stage's next pass
sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from app.controller import kube as k
from app.controller.caches import Caches
from app.controller.creation import create_promotion
from app.controller.policies import ProjectRules
from app.controller.verification import AUTO_PROMOTION_ACTOR, AUTO_ROLLBACK_ACTOR
from promoter.clock import Clock
from promoter.control.rollback import plan_rollback
from promoter.resources import annotations as ann
from promoter.resources.model import name_of, namespace_of
from promoter.rules.limits import DEFAULT_LIMITS, Limits

log = logging.getLogger(__name__)


class AutomaticPromotions:
    """Creates auto-promotions (the verifier asks) and auto-rollbacks (a failure asks)."""

    def __init__(
        self,
        kube: k.Kube,
        caches: Caches,
        rules: ProjectRules,
        clock: Clock,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.kube = kube
        self.limits = limits
        self.caches = caches
        self.rules = rules
        self.clock = clock

    async def _create(
        self,
        stage: Mapping[str, Any],
        freight: Mapping[str, Any],
        actor: str,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        created = await create_promotion(
            self.kube,
            stage,
            freight,
            self.caches.task_source,
            actor=actor,
            now=self.clock.now(),
            annotations=annotations,
            limits=self.limits,
        )
        self.caches.promotions.observe(created)
        return created

    async def promote(self, stage: Mapping[str, Any], freight: Mapping[str, Any]) -> None:
        created = await self._create(stage, freight, AUTO_PROMOTION_ACTOR)
        log.info(
            "auto-promoting Freight %s to Stage %s as %s",
            name_of(freight),
            name_of(stage),
            name_of(created),
        )

    async def roll_back(self, stage: Mapping[str, Any]) -> None:
        """Roll the Stage back to its stable Freight if its ProjectConfig says so and something
        just failed (promoter.control.rollback decides; once per failure)."""
        policy = self.rules.auto_rollback(stage)
        if policy is None:
            return
        namespace, name = namespace_of(stage) or "default", name_of(stage)

        def verified_here(freight: str) -> bool:
            found = self.caches.freight.get(namespace, freight) or {}
            return name in ((found.get("status") or {}).get("verifiedIn") or {})

        promotions = self.caches.of_stage(namespace, name)
        decided = plan_rollback(stage, promotions, policy, verified_here, self.clock.now())
        if decided is None:
            return
        freight = self.caches.find_freight(namespace, decided.freight)
        if freight is None:
            log.warning("cannot roll %s back: Freight %s is gone", name, decided.freight)
            return
        created = await self._create(
            stage, freight, AUTO_ROLLBACK_ACTOR, annotations=ann.rollback(decided.failure)
        )
        await self.kube.emit_event(
            dict(stage),
            reason="AutoRollback",
            message=f"rolling back to Freight {decided.freight} ({name_of(created)}): "
            f"{decided.reason}",
            type="Warning",
        )
        log.info(
            "rolling Stage %s back to Freight %s as %s: %s",
            name,
            decided.freight,
            name_of(created),
            decided.reason,
        )
