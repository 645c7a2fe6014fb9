"""The write path: every Promotion and Stage write the reconciler makes, and how it lands.

Each write is a merge patch of what changed, with the resourceVersion as precondition, so a
replica never overwrites a newer object blindly: on a conflict it re-reads and re-decides. Our
own writes go into the informers' caches at once. Every conflict is retried the one way,
:func:`app.controller.kube.retry_on_conflict`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from app.controller import kube as k
from app.controller.caches import Caches
from app.controller.policies import ProjectRules
from app.controller.runtimes import WorkDirs
from app.controller.verification import Verifier
from promoter.clock import Clock
from promoter.control import selection
from promoter.control.stage_planner import apps_to_refresh, plan_status
from promoter.engine.recording import progress_only
from promoter.resources import annotations as ann
from promoter.resources.model import (
    Phase,
    Promotion,
    PromotionStatus,
    format_time,
    meta,
    name_of,
    namespace_of,
)
from promoter.resources.stages import (
    current_freight_names,
    currently_in_patches,
    phase_of,
    stage_status,
)
from promoter.rules.argocd import REFRESH_ANNOTATION

log = logging.getLogger(__name__)

# Work a Stage's reconcile puts off until its status is written: per task, as Stages reconcile
# concurrently (each in its own task, so each sees only its own list).
_DEFERRED: ContextVar[list[Callable[[], Awaitable[None]]] | None] = ContextVar(
    "longshoreman_deferred", default=None
)


class StatusWriter:
    """The reconciler's writes to Promotions and Stages."""

    def __init__(
        self,
        kube: k.Kube,
        *,
        caches: Caches,
        verifier: Verifier,
        rules: ProjectRules,
        work_dirs: WorkDirs,
        clock: Clock,
        on_promotion_finished: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        self.kube = kube
        self.caches = caches
        self.verifier = verifier
        self.rules = rules
        self.work_dirs = work_dirs
        self.clock = clock
        self.on_promotion_finished = on_promotion_finished

    def _observe(self, obj: dict[str, Any]) -> None:
        """Put our own write into the cache at once, so the next pass does not act on the copy
        from before it (the watch event follows a moment later with the same version)."""
        self.caches.promotions.observe(obj)

    async def write_spec(
        self, obj: Mapping[str, Any], promotion: Promotion
    ) -> dict[str, Any] | None:
        spec = promotion.to_object()["spec"]
        try:
            written = await self.kube.patch(
                k.PROMOTIONS,
                namespace_of(obj),
                name_of(obj),
                {"spec": {"steps": spec["steps"], "vars": spec.get("vars", [])}},
                resource_version=str(meta(obj).get("resourceVersion")),
            )
        except (k.Conflict, k.NotFound):
            return None
        self._observe(written)
        return written

    async def write_status(
        self, obj: Mapping[str, Any], before: Promotion, after: Promotion
    ) -> dict[str, Any] | None:
        new = after.status.to_dict()
        old = dict(obj.get("status") or {})
        # Only what changed goes over the wire (a step's entry, its outputs, the phase): the
        # resourceVersion precondition makes the diff exact.
        patch = k.merge_patch_between(old, new)
        if not patch:
            return dict(obj)
        if progress_only(
            PromotionStatus.from_dict(old), PromotionStatus.from_dict(new), self.clock.now()
        ):
            # A waiting step's new message only (promoter/engine/recording.py): the stored
            # object is still what a takeover resumes from.
            return dict(obj)
        namespace, name = namespace_of(obj), name_of(obj)

        async def attempt(n: int) -> dict[str, Any] | None:
            version = str(meta(obj).get("resourceVersion"))
            if n > 0:
                # Never overwrite a newer object blindly: re-read and re-decide.
                try:
                    fresh = await self.kube.get(k.PROMOTIONS, namespace, name)
                except k.NotFound:
                    return None
                self._observe(fresh)
                if phase_of(fresh).terminal or ann.abort_request(fresh) is not None:
                    return None
                if (fresh.get("status") or {}) != old:
                    # Someone else moved it on (another replica?): let the next pass decide.
                    return None
                version = str(meta(fresh).get("resourceVersion"))
            try:
                written = await self.kube.patch_status(
                    k.PROMOTIONS, namespace, name, patch, resource_version=version
                )
            except k.NotFound:
                return None
            self._observe(written)
            return written

        try:
            return await k.retry_on_conflict(attempt)
        except k.Conflict:
            return None

    async def fail(self, obj: Mapping[str, Any], message: str) -> dict[str, Any] | None:
        promotion_status = dict(obj.get("status") or {})
        now = self.clock.now()
        status = {
            **promotion_status,
            "phase": Phase.ERRORED.value,
            "message": message,
            "finishedAt": format_time(now),
            "startedAt": promotion_status.get("startedAt") or format_time(now),
        }
        try:
            written = await self.kube.patch_status(
                k.PROMOTIONS,
                namespace_of(obj),
                name_of(obj),
                status,
                resource_version=str(meta(obj).get("resourceVersion")),
            )
        except (k.Conflict, k.NotFound):
            return None
        self._observe(written)
        await self.kube.emit_event(
            written, reason="PromotionErrored", message=message, type="Warning"
        )
        self._notify_finished(written)
        return written

    async def finished(self, obj: Mapping[str, Any], promotion: Promotion) -> None:
        phase = promotion.status.phase
        reason = f"Promotion{phase.value}"
        message = promotion.status.message or phase.value
        path = self.work_dirs.release(namespace_of(obj) or "default", name_of(obj))
        finished = dict(obj)

        async def afterwards() -> None:
            # The Event and the work directory's removal wait until the Stage's status (and a
            # verification it starts) is written: the next hop of the pipeline should not
            # queue behind them. client-go's event recorder sends Events off the reconcile's
            # path too.
            await self.kube.emit_event(
                finished,
                reason=reason,
                message=message,
                type="Normal" if phase is Phase.SUCCEEDED else "Warning",
            )
            try:
                path.rmdir()  # most steps leave nothing behind: one call, inline
            except FileNotFoundError:
                pass
            except OSError:
                # A real tree (a git clone): walking it would stall every Stage.
                await asyncio.to_thread(shutil.rmtree, path, ignore_errors=True)

        pending = _DEFERRED.get()
        if pending is None:
            await afterwards()
        else:
            pending.append(afterwards)
        self._notify_finished(obj)

    @contextlib.asynccontextmanager
    async def deferring(self) -> AsyncIterator[None]:
        """Run the block (a Stage's reconcile), then what it put off (see _finished)."""
        pending: list[Callable[[], Awaitable[None]]] = []
        token = _DEFERRED.set(pending)
        try:
            yield
        finally:
            _DEFERRED.reset(token)
            for work in pending:
                await work()

    def _notify_finished(self, obj: Mapping[str, Any]) -> None:
        if self.on_promotion_finished:
            self.on_promotion_finished(obj)

    async def hold(self, queued: Sequence[Mapping[str, Any]], message: str) -> None:
        """Say on each queued Promotion what it waits for (a closed promotion window)."""
        await self.mark_waiting([(promotion, message) for promotion in queued])

    async def mark_waiting(self, waiting: Sequence[tuple[Mapping[str, Any], str]]) -> None:
        """Show each queued Promotion as Kargo does: phase Pending, and what it waits for.
        Written only when it differs, so a queue that stands still costs no writes."""
        for promotion, message in waiting:
            status = promotion.get("status") or {}
            if status.get("phase") == "Pending" and status.get("message") == message:
                continue
            try:
                written = await self.kube.patch_status(
                    k.PROMOTIONS,
                    namespace_of(promotion),
                    name_of(promotion),
                    {"phase": "Pending", "message": message},
                    resource_version=str(meta(promotion).get("resourceVersion")),
                )
            except (k.Conflict, k.NotFound):
                continue  # it moved on (aborted?): the next pass decides again
            self._observe(written)

    async def sync_freight(self, stage: Mapping[str, Any]) -> None:
        """Keep Freight ``status.currentlyIn`` as Kargo does for the Stage as it now stands:
        the Freight it uses say so since now, those that no longer are its drop it. Read from
        the Freight informer (an index on currentlyIn), written only where it changes."""
        namespace, name = namespace_of(stage) or "default", name_of(stage)
        marked = self.caches.freight.by_index("currently-in", f"{namespace}/{name}")
        current = [
            found
            for ref in sorted(current_freight_names(stage))
            if (found := self.caches.freight.get(namespace, ref)) is not None
        ]
        for freight, patch in currently_in_patches(stage, marked, current, self.clock.now()):
            try:
                # A merge of this Stage's key only: other writers' keys stay, so no
                # resourceVersion guard is needed.
                written = await self.kube.patch_status(
                    k.FREIGHT, namespace, name_of(freight), patch, resource_version=None
                )
            except k.NotFound:
                continue  # deleted meanwhile: nothing left to keep
            self.caches.freight.observe(written)

    async def write_stage_status(
        self,
        stage_obj: Mapping[str, Any],
        succeeded_freight: Mapping[str, Any] | None,
        finished_last: str | None = None,
    ) -> Mapping[str, Any] | None:
        """Decide the Stage's whole status and write it in (at most) one patch.

        The Promotions' outcome (current Freight, last Promotion, conditions), its health and
        its verification (which starts from the outcome decided here) go out together: one
        status write per reconcile. Returns the Stage as it now stands, None if it is gone.
        """
        namespace, name = namespace_of(stage_obj) or "default", name_of(stage_obj)

        async def attempt(n: int) -> Mapping[str, Any] | None:
            current: Mapping[str, Any] = self.caches.stages.get(namespace, name) or stage_obj
            if n > 0:
                # Someone else wrote the Stage (a spec or annotation edit): decide again on
                # the newer object rather than overwrite it. (Verification adopts what it
                # started on the first pass: the AnalysisRun, the Freight's verifiedIn.)
                try:
                    current = await self.kube.get(k.STAGES, namespace, name)
                except k.NotFound:
                    return None
                self.caches.stages.observe(current)
            promotions = self.caches.of_stage(namespace, name)
            now = self.clock.now()
            if selection.passes_freight_on(current, promotions):
                # No Promotions, health or verification: Kargo's control-flow Stage status.
                return await self._write_stage(current, selection.control_flow_status(current, now))
            new = plan_status(
                current,
                promotions,
                self.caches.applications.items(),
                now,
                succeeded_freight=succeeded_freight,
                finished_last=finished_last,
            )
            new.update(
                await self.verifier.reconcile(
                    {**current, "status": new}, promotions, self.caches.find_freight
                )
            )
            # Ready follows Healthy and Verified as just decided.
            new = stage_status({**current, "status": new}, promotions, now)
            # Kargo's PromotionWindowStatus: advisory, for people and front ends; the queue
            # asks the windows again before it starts anything.
            schedule = self.rules.schedule(current)
            if schedule:
                new["promotionWindowStatus"] = schedule.state(now).to_status()
            else:
                new.pop("promotionWindowStatus", None)
            await self._request_app_refreshes(new, promotions)
            return await self._write_stage(current, new)

        try:
            return await k.retry_on_conflict(attempt)
        except k.Conflict:
            # Still conflicting: the write that beat us comes back as an event and a new
            # reconcile.
            return None

    async def _write_stage(
        self, current: Mapping[str, Any], new: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """One merge patch from the Stage's status to ``new`` (none when nothing but times
        would change), on the version decided on; None when the Stage is gone."""
        old = dict(current.get("status") or {})
        if _without_times(dict(new)) == _without_times(old):
            return current
        patch = k.merge_patch_between(old, dict(new))
        try:
            written = await self.kube.patch_status(
                k.STAGES,
                namespace_of(current) or "default",
                name_of(current),
                patch,
                resource_version=str(meta(current).get("resourceVersion")),
            )
        except k.NotFound:
            return None
        self.caches.stages.observe(written)
        return written

    async def _request_app_refreshes(
        self, status: Mapping[str, Any], promotions: list[dict[str, Any]]
    ) -> None:
        """Ask Argo CD to refresh the Applications whose health it has not assessed since their
        last operation (Kargo does the same): the Application's next event wakes the Stage."""
        for namespace, name in apps_to_refresh(
            status, promotions, self.caches.applications.items()
        ):
            try:
                written = await self.caches.applications.kube.patch(
                    k.APPLICATIONS,
                    namespace,
                    name,
                    {"metadata": {"annotations": {REFRESH_ANNOTATION: "normal"}}},
                )
            except k.KubeError as e:
                log.warning("asking Argo CD to refresh Application %s/%s: %s", namespace, name, e)
                continue
            self.caches.applications.observe(written)


def _without_times(status: Mapping[str, Any]) -> Any:
    out = dict(status)
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or ()
    ]
    return out
