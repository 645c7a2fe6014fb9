"""Event routing: which Stage a change in the cluster concerns, and when it must be woken.

Informer events (Promotions, Stages, Freight, Argo CD Applications) go to the front ends'
listeners, then enqueue only the Stage they concern: an index finds the Promotions waiting on an
Application or a pull request, so nothing polls. The Promotions the controller creates on its
own (auto-promotion, auto-rollback) start here too. Mixed into
:class:`app.controller.reconciler.Controller`, which owns the caches and the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from app.controller import kube as k
from app.controller.creation import create_promotion
from app.controller.informer import Informer
from app.controller.policies import ProjectRules
from app.controller.verification import (
    AUTO_PROMOTION_ACTOR,
    AUTO_ROLLBACK_ACTOR,
    auto_promote_enabled,
)
from app.controller.workqueue import WorkQueue
from promoter.clock import Clock
from promoter.control.rollback import plan_rollback
from promoter.engine.builder import TaskSource
from promoter.resources import annotations as ann
from promoter.resources.model import Phase, meta, name_of, namespace_of
from promoter.resources.stages import available_at, phase_of

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any], dict[str, Any] | None], None]


def waiting_apps(promotion: Mapping[str, Any]) -> list[str]:
    """``ns/name`` of the Argo CD Applications a Running Promotion's current step waits on."""
    if phase_of(promotion) is not Phase.RUNNING:
        return []
    status = promotion.get("status") or {}
    out: list[str] = []
    for output in (status.get("state") or {}).values():
        if not isinstance(output, Mapping):
            continue
        for app in output.get("apps") or ():
            if isinstance(app, Mapping) and app.get("name"):
                out.append(f"{app.get('namespace') or 'argocd'}/{app['name']}")
    return out


def waiting_prs(promotion: Mapping[str, Any]) -> list[str]:
    """URLs of the pull requests a Running Promotion's steps wait on (git-wait-for-pr et al.)."""
    if phase_of(promotion) is not Phase.RUNNING:
        return []
    out: list[str] = []
    for output in ((promotion.get("status") or {}).get("state") or {}).values():
        if isinstance(output, Mapping):
            pr = output.get("pr")
            if isinstance(pr, Mapping) and pr.get("url"):
                out.append(str(pr["url"]))
    return out


def health_apps(promotion: Mapping[str, Any]) -> list[str]:
    """``ns/name`` of the Applications a Promotion's health checks look at."""
    out: list[str] = []
    for check in (promotion.get("status") or {}).get("healthChecks") or ():
        for app in ((check or {}).get("config") or {}).get("apps") or ():
            if isinstance(app, Mapping) and app.get("name"):
                out.append(f"{app.get('namespace') or 'argocd'}/{app['name']}")
    return out


class EventRouting:
    """The reconciler's informer callbacks and indexes."""

    kube: k.Kube
    clock: Clock
    queue: WorkQueue
    promotions: Informer
    stages: Informer
    task_source: TaskSource
    listeners: list[Listener]
    stage_listeners: list[Listener]
    freight_listeners: list[Listener]
    rules: ProjectRules
    freight: Informer
    _find_freight: Callable[[str, str], Mapping[str, Any] | None]
    _leading: bool
    # Application events seen so far, and the count at each Application's latest one.
    _app_events: int
    _app_changed_at: dict[str, int]

    @staticmethod
    def _stage_index(obj: Mapping[str, Any]) -> list[str]:
        stage = (obj.get("spec") or {}).get("stage")
        return [f"{namespace_of(obj) or 'default'}/{stage}"] if stage else []

    @staticmethod
    def _auto_promote_index(obj: Mapping[str, Any]) -> list[str]:
        return [namespace_of(obj) or "default"] if auto_promote_enabled(obj) else []

    @staticmethod
    def _freight_index(obj: Mapping[str, Any]) -> list[str]:
        freight = (obj.get("spec") or {}).get("freight")
        return [f"{namespace_of(obj) or 'default'}/{freight}"] if freight else []

    def _enqueue_stage(
        self, namespace: str, stage: str, *, wake: bool = False, after: float = 0
    ) -> None:
        if self._leading:
            self.queue.add((namespace, stage), wake=wake, after=after)

    def _enqueue_namespace(self, namespace: str | None) -> None:
        """Wake every Stage of a namespace (None: all): a ProjectConfig or the ClusterConfig
        changed what is in force for them."""
        for stage in self.stages.items(namespace):
            self._enqueue_stage(namespace_of(stage) or "default", name_of(stage))

    @property
    def leading(self) -> bool:
        return self._leading

    def wake_pr(self, url: str) -> int:
        """Wake the Promotions waiting on a pull request (its merge or close webhook came)."""
        woken = 0
        for promotion in self.promotions.by_index("waiting-pr", url):
            stage = (promotion.get("spec") or {}).get("stage")
            if stage:
                self._enqueue_stage(namespace_of(promotion) or "default", stage, wake=True)
                woken += 1
        return woken

    def _on_promotion(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for listener in self.listeners:
            try:
                listener(obj, old)
            except Exception:  # a front end's bug must not stop the reconciler
                log.exception("promotion listener failed")
        stage = (obj.get("spec") or {}).get("stage")
        if not stage:
            return
        token = ann.refresh_token(obj)
        wake = token is not None and token != ann.refresh_token(old)
        wake = wake or (ann.abort_request(obj) is not None and ann.abort_request(old or {}) is None)
        self._enqueue_stage(namespace_of(obj) or "default", stage, wake=wake)

    def _on_stage(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for listener in self.stage_listeners:
            try:
                listener(obj, old)
            except Exception:  # a front end's bug must not stop the reconciler
                log.exception("stage listener failed")
        if old is None or kind == "DELETED" or meta(obj).get("labels") != meta(old).get("labels"):
            # Policies may select Stages by label: what the ProjectConfig says is in force moves.
            self.rules.stages_changed(namespace_of(obj) or "default")
        # Our own status writes come back as events; only spec, annotation or deletion changes
        # (or a first sight) need a reconcile.
        if old is not None and kind == "MODIFIED":
            if obj.get("spec") == old.get("spec") and meta(obj).get("annotations") == meta(old).get(
                "annotations"
            ):
                return
        self._enqueue_stage(
            namespace_of(obj) or "default",
            name_of(obj),
            wake=ann.refresh_token(obj) != ann.refresh_token(old),
        )

    def _on_freight(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind != "DELETED":
            for listener in self.freight_listeners:
                try:
                    listener(obj, old)
                except Exception:  # a front end's bug must not stop the reconciler
                    log.exception("freight listener failed")
        namespace = namespace_of(obj) or "default"
        key = f"{namespace}/{name_of(obj)}"
        # Promotions depend on what the Freight is, not on its status, which every finished
        # Promotion's verification writes: re-checking every queued Promotion of a popular
        # Freight on each of those writes made draining the queues quadratic (bench_scale).
        if kind != "MODIFIED" or old is None or _freight_content(obj) != _freight_content(old):
            for promotion in self.promotions.by_index("freight", key):
                if not phase_of(promotion).terminal:
                    self._on_promotion("MODIFIED", promotion, promotion)
        # New or newly verified Freight may be due for auto-promotion downstream: the Stages
        # whose annotation says so (an index), and where a ProjectConfig policy may turn it on,
        # the project's others.
        if self.rules.may_auto_promote_any(namespace):
            candidates = self.stages.items(namespace)
        else:
            candidates = self.stages.by_index("auto-promote", namespace)
        for stage in candidates:
            if self.rules.auto_promotes(stage) and available_at(stage, obj) is not None:
                self._enqueue_stage(namespace, name_of(stage))

    async def _auto_promote(self, stage: Mapping[str, Any], freight: Mapping[str, Any]) -> None:
        created = await create_promotion(
            self.kube,
            stage,
            freight,
            self.task_source,
            actor=AUTO_PROMOTION_ACTOR,
            now=self.clock.now(),
        )
        self.promotions.observe(created)
        log.info(
            "auto-promoting Freight %s to Stage %s as %s",
            name_of(freight),
            name_of(stage),
            name_of(created),
        )

    async def _auto_rollback(self, stage: Mapping[str, Any]) -> None:
        """Roll the Stage back to its stable Freight if its ProjectConfig says so and something
        just failed (promoter.control.rollback decides; once per failure)."""
        policy = self.rules.auto_rollback(stage)
        if policy is None:
            return
        namespace, name = namespace_of(stage) or "default", name_of(stage)

        def verified_here(freight: str) -> bool:
            found = self.freight.get(namespace, freight) or {}
            return name in ((found.get("status") or {}).get("verifiedIn") or {})

        promotions = self.promotions.by_index("stage", f"{namespace}/{name}")
        decided = plan_rollback(stage, promotions, policy, verified_here, self.clock.now())
        if decided is None:
            return
        freight = self._find_freight(namespace, decided.freight)
        if freight is None:
            log.warning("cannot roll %s back: Freight %s is gone", name, decided.freight)
            return
        created = await create_promotion(
            self.kube,
            stage,
            freight,
            self.task_source,
            actor=AUTO_ROLLBACK_ACTOR,
            now=self.clock.now(),
            annotations=ann.rollback(decided.failure),
        )
        self.promotions.observe(created)
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

    def _on_application(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = f"{namespace_of(obj) or 'argocd'}/{name_of(obj)}"
        # Noted for a Promotion whose step read this Application before its status (naming
        # the Application it now waits on) was written: the index below cannot find it yet.
        self._app_events += 1
        self._app_changed_at[key] = self._app_events
        for promotion in self.promotions.by_index("waiting-app", key):
            stage = (promotion.get("spec") or {}).get("stage")
            if stage:
                self._enqueue_stage(namespace_of(promotion) or "default", stage, wake=True)
        for promotion in self.promotions.by_index("health-app", key):
            stage = (promotion.get("spec") or {}).get("stage")
            if stage:
                self._enqueue_stage(namespace_of(promotion) or "default", stage)


def _freight_content(freight: Mapping[str, Any]) -> dict[str, Any]:
    """A Freight without its status and metadata: the artifacts it stands for."""
    return {key: value for key, value in freight.items() if key not in ("status", "metadata")}
