"""The chat front ends' port to the cluster (:class:`promoter.chat.port.PromotionService`).

Reads come from the controller's informer caches (every replica keeps them warm, so a webhook
answered by a standby sees what the leader sees); writes go through :mod:`app.controller.kube`, and
Promotions are created through the one builder. The cluster's errors reach the front ends in
:mod:`promoter.errors`' kinds (:func:`_translated`), so a chat user is told what to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.controller import kube as k
from app.controller.creation import create_promotion
from app.controller.reconciler import Controller
from app.controller.warehouses.reconciler import request_refresh
from promoter.chat.planner import not_approvable, not_available
from promoter.chat.port import PromotionRef, Snapshot
from promoter.control.projects import Project
from promoter.errors import LongshoremanError, NotFound, Refused, TemporaryError
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of, namespace_of
from promoter.resources.stages import Approval, approval_of, approval_patch


def _translated(error: k.KubeError, what: str, namespace: str) -> LongshoremanError:
    """The kind of a failed write about ``what``, in words for the user who asked for it."""
    if isinstance(error, k.NotFound):
        return NotFound(f"{what} not found in namespace {namespace!r}")
    if isinstance(error, k.TemporaryError):
        # The details (host, path) are for the server log, which has the chained error.
        return TemporaryError(
            "the cluster did not answer; try again in a moment", retry_after=error.retry_after
        )
    # Refused by the cluster (validation, admission, RBAC): its own words tell the user (and
    # the operator) what to change; a stack trace in the server log would not.
    return Refused(f"the cluster refused {what}: {error.server_message}")


async def write_freeze(
    kube: k.Kube, namespace: str, stage: str | None, value: str | None
) -> dict[str, Any] | None:
    """The freeze annotation (:mod:`promoter.control.freezes`) on the Stage, or on the project's
    ProjectConfig when ``stage`` is None (made, empty, when the project has none: an empty
    ProjectConfig changes no rule); ``value`` None removes it. Returns the ProjectConfig
    written, None for a Stage. Raises the Kubernetes module's errors."""
    patch = {"metadata": {"annotations": {ann.FREEZE: value}}}
    if stage:
        await kube.patch(k.STAGES, namespace, stage, patch)
        return None
    try:
        return await kube.patch(k.PROJECT_CONFIGS, namespace, namespace, patch)
    except k.NotFound:
        if value is None:
            return None
        metadata = {"name": namespace, "namespace": namespace, "annotations": {ann.FREEZE: value}}
        return await kube.create(k.PROJECT_CONFIGS, {"metadata": metadata, "spec": {}})


class ClusterPromotions:
    def __init__(self, kube: k.Kube, controller: Controller) -> None:
        self.kube = kube
        self.controller = controller
        # The Warehouse informer's contents, once the Warehouse controller runs (a Manual
        # Warehouse's Freight is made on request from what it discovered).
        self.warehouse_source: Callable[[], Sequence[Mapping[str, Any]]] = lambda: ()

    async def snapshot(self, namespace: str) -> Snapshot:
        c = self.controller
        return Snapshot(
            namespace=namespace,
            stages=list(c.stages.items(namespace)),
            freight=list(c.freight.items(namespace)),
            promotions=list(c.promotions.items(namespace)),
            warehouses=[w for w in self.warehouse_source() if namespace_of(w) == namespace],
            schedules={
                name_of(s): schedule
                for s in c.stages.items(namespace)
                if (schedule := c.rules.schedule(s))
            },
            project_config=c.rules.project(namespace),
            cluster_config=c.rules.cluster(),
        )

    async def promote(
        self, namespace: str, stage: str, freight: str, *, actor: str
    ) -> PromotionRef:
        stage_obj = self.controller.stages.get(namespace, stage)
        if stage_obj is None:
            raise NotFound(f"Stage {stage!r} not found in namespace {namespace!r}")
        freight_obj = self.controller.freight.get(namespace, freight)
        if freight_obj is None:
            raise NotFound(f"Freight {freight!r} not found in namespace {namespace!r}")
        # Asked again here, at the last moment: a Confirm button is pressed minutes later.
        now = self.controller.clock.now()
        refusal = not_available(stage_obj, freight_obj, now)
        if refusal is not None:
            raise Refused(refusal)
        window = self.controller.rules.schedule(stage_obj).state(now)
        if window.closed:
            raise Refused(window.frozen_message(stage, now))
        try:
            created = await create_promotion(
                self.kube,
                stage_obj,
                freight_obj,
                self.controller.task_source,
                actor=actor,
                now=self.controller.clock.now(),
                limits=self.controller.limits,
            )
        except k.KubeError as e:
            raise _translated(e, "the Promotion", namespace) from e
        self.controller.promotions.observe(created)
        return PromotionRef(namespace, name_of(created), stage, freight)

    async def abort(self, namespace: str, promotion: str, *, actor: str) -> PromotionRef:
        try:
            patched = await self.kube.patch(
                k.PROMOTIONS,
                namespace,
                promotion,
                {"metadata": {"annotations": ann.abort(actor)}},
            )
        except k.KubeError as e:
            raise _translated(e, f"Promotion {promotion!r}", namespace) from e
        return PromotionRef.of(patched)

    async def reverify(self, namespace: str, stage: str, *, actor: str) -> None:
        try:
            await self.kube.patch(
                k.STAGES,
                namespace,
                stage,
                {"metadata": {"annotations": ann.reverify(actor, self.controller.clock.now())}},
            )
        except k.KubeError as e:
            raise _translated(e, f"Stage {stage!r}", namespace) from e

    async def approve(self, namespace: str, stage: str, freight: str, *, actor: str) -> Approval:
        """Kargo's approve (``pkg/server/approve_freight.go``): ``status.approvedFor.<stage>``
        on the Freight, with who approved, and a ``FreightApproved`` Event in Kargo's words. An
        approval already there stands. The write carries the resourceVersion read, so of two
        approvers racing one writes and the other finds the approval standing."""
        stage_obj = self.controller.stages.get(namespace, stage)
        if stage_obj is None:
            raise NotFound(f"Stage {stage!r} not found in namespace {namespace!r}")

        async def attempt(n: int) -> Approval:
            current = self.controller.freight.get(namespace, freight)
            if n > 0:  # the cached copy was stale: ask the API server
                try:
                    current = await self.kube.get(k.FREIGHT, namespace, freight)
                except k.NotFound:
                    current = None
                except k.KubeError as e:
                    raise _translated(e, f"Freight {freight!r}", namespace) from e
            if current is None:
                raise NotFound(f"Freight {freight!r} not found in namespace {namespace!r}")
            refusal = not_approvable(stage_obj, current)
            if refusal is not None:
                raise Refused(refusal)
            existing = approval_of(current, stage)
            if existing is not None:
                return existing
            patch = approval_patch(stage, actor, self.controller.clock.now())
            try:
                patched = await self.kube.patch_status(
                    k.FREIGHT,
                    namespace,
                    freight,
                    patch["status"],
                    resource_version=meta(current).get("resourceVersion"),
                )
            except k.Conflict:
                raise
            except k.KubeError as e:
                raise _translated(e, f"Freight {freight!r}", namespace) from e
            self.controller.freight.observe(patched)
            await self.kube.emit_event(
                patched,
                reason="FreightApproved",
                message=f'Freight approved for Stage "{stage}" by "{actor}"',
            )
            approval = approval_of(patched, stage)
            assert approval is not None  # the server kept what was just written
            return approval

        try:
            return await k.retry_on_conflict(attempt)
        except k.Conflict:
            raise TemporaryError("the Freight kept changing; try again in a moment") from None

    async def annotate(self, namespace: str, promotion: str, key: str, value: str) -> None:
        try:
            await self.kube.patch(
                k.PROMOTIONS, namespace, promotion, {"metadata": {"annotations": {key: value}}}
            )
        except k.KubeError as e:
            raise _translated(e, f"Promotion {promotion!r}", namespace) from e

    async def annotate_freight(
        self, namespace: str, freight: str, annotations: Mapping[str, str]
    ) -> None:
        with contextlib.suppress(k.NotFound):  # deleted meanwhile: nothing left to record on
            await self.kube.patch(
                k.FREIGHT, namespace, freight, {"metadata": {"annotations": dict(annotations)}}
            )

    async def freeze(self, namespace: str, stage: str | None, value: str | None) -> None:
        what = f"Stage {stage!r}" if stage else f"the ProjectConfig {namespace!r}"
        try:
            config = await write_freeze(self.kube, namespace, stage, value)
        except k.KubeError as e:
            raise _translated(e, what, namespace) from e
        if config is not None:
            # Seen at once by the next command on this replica. (A Stage is not observed: its
            # watch event must find the annotation new, or it is not reconciled.)
            self.controller.rules.projects.observe(config)

    def projects(self) -> list[Project]:
        return self.controller.served.projects()

    def is_leader(self) -> bool:
        return self.controller.leading

    async def warehouses(self, namespace: str) -> list[Mapping[str, Any]]:
        items, _ = await self.kube.list(k.WAREHOUSES, namespace)
        return list(items)

    async def refresh_warehouse(self, namespace: str, name: str) -> None:
        """Ask the Warehouse to discover now: its refresh annotation, which the leader's
        Warehouse reconciler watches (any replica may receive the webhook)."""
        await request_refresh(self.kube, namespace, name, self.controller.clock.now())

    async def create_freight(self, namespace: str, freight: Mapping[str, Any]) -> bool:
        """Create it unless a Freight of that name exists (its name derives from its
        artifacts, so a redelivered push finds its own Freight)."""
        obj = dict(freight)
        obj["metadata"] = {**(freight.get("metadata") or {}), "namespace": namespace}
        try:
            created = await self.kube.create(k.FREIGHT, obj)
        except k.Conflict:
            return False
        self.controller.freight.observe(created)
        return True

    def wake_pr(self, url: str) -> int:
        return self.controller.wake_pr(url)

    async def analysis_run(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """An AnalysisRun from the verifier's cache (``handlers.progress.AnalysisRunSource``)."""
        return self.controller.verifier.runs.get(namespace, name)

    async def application(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """An Argo CD Application from the informer cache (``handlers.environments``)."""
        return self.controller.applications.get(namespace, name)


class DeferredPromotions:
    """A PromotionService whose cluster side is attached once the controller has started.

    Webhook routes are mounted when the app is built, before the cluster connection exists; a
    request that arrives in between gets a clear "starting" error rather than a crash.
    """

    def __init__(self) -> None:
        self.target: ClusterPromotions | None = None

    def _get(self) -> ClusterPromotions:
        if self.target is None:
            raise TemporaryError("Longshoreman is still starting; try again in a moment")
        return self.target

    async def snapshot(self, namespace: str) -> Snapshot:
        return await self._get().snapshot(namespace)

    async def promote(
        self, namespace: str, stage: str, freight: str, *, actor: str
    ) -> PromotionRef:
        return await self._get().promote(namespace, stage, freight, actor=actor)

    async def abort(self, namespace: str, promotion: str, *, actor: str) -> PromotionRef:
        return await self._get().abort(namespace, promotion, actor=actor)

    async def reverify(self, namespace: str, stage: str, *, actor: str) -> None:
        await self._get().reverify(namespace, stage, actor=actor)

    async def approve(self, namespace: str, stage: str, freight: str, *, actor: str) -> Approval:
        return await self._get().approve(namespace, stage, freight, actor=actor)

    async def annotate(self, namespace: str, promotion: str, key: str, value: str) -> None:
        await self._get().annotate(namespace, promotion, key, value)

    async def annotate_freight(
        self, namespace: str, freight: str, annotations: Mapping[str, str]
    ) -> None:
        await self._get().annotate_freight(namespace, freight, annotations)

    async def freeze(self, namespace: str, stage: str | None, value: str | None) -> None:
        await self._get().freeze(namespace, stage, value)

    def projects(self) -> list[Project]:
        return [] if self.target is None else self.target.projects()

    def is_leader(self) -> bool:
        return self.target is not None and self.target.is_leader()

    async def warehouses(self, namespace: str) -> list[Mapping[str, Any]]:
        return await self._get().warehouses(namespace)

    async def create_freight(self, namespace: str, freight: Mapping[str, Any]) -> bool:
        return await self._get().create_freight(namespace, freight)

    async def refresh_warehouse(self, namespace: str, name: str) -> None:
        await self._get().refresh_warehouse(namespace, name)

    def wake_pr(self, url: str) -> int:
        return self.target.wake_pr(url) if self.target is not None else 0

    async def analysis_run(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return await self.target.analysis_run(namespace, name) if self.target else None

    async def application(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return await self.target.application(namespace, name) if self.target else None
