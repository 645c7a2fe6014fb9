"""The reconciler: runs Promotions on the cluster, one per Stage, resumably.

Informers keep caches of Promotions, Stages, Freight, tasks and Argo CD Applications. Every
change enqueues only the Stage it concerns (an Application change finds the Promotions waiting on
it through an index, not by polling). A Stage's reconcile handles aborts, picks the Promotion that
may run (:class:`promoter.resources.stages.StageQueue`), advances it one step at a time with the
engine
(one status write per step, so any replica can continue from the object), and refreshes the
Stage's status. Running steps are re-entered on the next relevant event or after their
retry-after. Only the leader runs the queue; standbys keep warm caches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from app.controller import kube as k
from app.controller.argocd import KubeArgoCDApps
from app.controller.clusterdata import KubeClusterData
from app.controller.creation import InformerTasks, announce_created
from app.controller.informer import FreightRefs, Informer
from app.controller.metadata import KubeFreightAliases, KubeMetadataStore
from app.controller.policies import ProjectRules
from app.controller.routing import EventRouting, health_apps, waiting_apps, waiting_prs
from app.controller.verification import Verifier
from app.controller.workqueue import WorkQueue
from app.controller.writes import StatusWrites
from app.logs import REDACTOR
from promoter.clock import SYSTEM, Clock
from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.control.stage_planner import plan_queue
from promoter.engine import engine
from promoter.engine.builder import TaskSource, ensure_inflated
from promoter.errors import InvalidInput
from promoter.ports.telemetry import log_context, set_log_context
from promoter.resources.model import (
    Phase,
    Promotion,
    meta,
    name_of,
    namespace_of,
    parse_stage,
)
from promoter.resources.stages import (
    phase_of,
    requested_warehouses,
    stage_freights,
)
from promoter.rules.metadata import metadata_functions
from promoter.steps.base import Effect, StepServices, effect_of
from promoter.steps.freight_alias import PORT_KEY as ALIAS_PORT
from promoter.steps.metadata import PORT_KEY as METADATA_PORT
from promoter.steps.registry import StepRegistry

log = logging.getLogger(__name__)


StageKey = tuple[str, str]


class Controller(EventRouting, StatusWrites):
    """Informers + work queue + reconcile logic for Promotions and Stages."""

    def __init__(
        self,
        kube: k.Kube,
        *,
        registry: StepRegistry,
        services: StepServices,
        work_dir: Path,
        namespace: str | None = None,
        max_concurrent: int = 16,
        min_requeue: float = 10.0,
        default_requeue: float = engine.DEFAULT_RUNNING_RETRY,
        health_interval: float = 30.0,
        clock: Clock = SYSTEM,
        on_promotion_finished: Callable[[Mapping[str, Any]], None] | None = None,
        on_reconcile: Callable[[float], None] | None = None,
        receiver_base_url: str = "",
    ) -> None:
        self.kube = kube
        self.registry = registry
        self.applications = Informer(kube, k.APPLICATIONS, on_event=self._on_application)
        # The Argo CD steps reach Applications through this cluster (reading the watch above)
        # unless told otherwise.
        self.services = replace(
            services,
            extra={"argocd": KubeArgoCDApps(kube, self.applications), **services.extra},
        )
        self.work_dir = work_dir
        self.max_concurrent = max_concurrent
        self.min_requeue = min_requeue
        self.default_requeue = default_requeue
        self.health_interval = health_interval
        self.clock = clock
        self.on_promotion_finished = on_promotion_finished
        # Called with the seconds each Stage reconcile took (the reconcile latency metric).
        self.on_reconcile = on_reconcile
        self.queue = WorkQueue(clock=clock)
        self.promotions = Informer(
            kube, k.PROMOTIONS, namespace=namespace, on_event=self._on_promotion
        )
        self.stages = Informer(kube, k.STAGES, namespace=namespace, on_event=self._on_stage)
        self.freight = Informer(kube, k.FREIGHT, namespace=namespace, on_event=self._on_freight)
        self.freight_refs = FreightRefs(self.freight)
        # The Stages' requested Warehouses decide where imageFrom() and the like look (Kargo).
        self.warehouses = Informer(kube, k.WAREHOUSES, namespace=namespace)
        self.tasks = Informer(kube, k.PROMOTION_TASKS, namespace=namespace)
        self.cluster_tasks = Informer(kube, k.CLUSTER_PROMOTION_TASKS)
        # set-metadata writes Stages' and Freight's status.metadata through this cluster, and
        # stageMetadata()/freightMetadata() read it from these informers.
        self.services = replace(
            self.services,
            # secret(), configMap(): one GET per object a step names; values join the log
            # redactor as they are read.
            cluster_data=self.services.cluster_data
            or KubeClusterData(kube, on_secret=REDACTOR.add),
            extra={
                METADATA_PORT: KubeMetadataStore(kube, stages=self.stages, freight=self.freight),
                # set-freight-alias writes Freight's alias field and label.
                ALIAS_PORT: KubeFreightAliases(kube, freight=self.freight),
                **self.services.extra,
            },
        )
        self.promotions.add_index("stage", self._stage_index)
        self.promotions.add_index("waiting-app", waiting_apps)
        self.promotions.add_index("health-app", health_apps)
        self.promotions.add_index("waiting-pr", waiting_prs)
        # Called with (promotion, previous copy) on every Promotion change, on every replica:
        # front ends (check runs, Slack messages) follow Promotions through these. They must
        # not block: enqueue work and return.
        self.listeners: list[Callable[[dict[str, Any], dict[str, Any] | None], None]] = []
        # The same for Stages (status included: verifications show there), e.g. GitHub's
        # verify check runs.
        self.stage_listeners: list[Callable[[dict[str, Any], dict[str, Any] | None], None]] = []
        # And for Freight (Slack tells non-auto Stages' channels about new Freight).
        self.freight_listeners: list[Callable[[dict[str, Any], dict[str, Any] | None], None]] = []
        self.promotions.add_index("freight", self._freight_index)
        # Namespaces of the Stages that auto-promote: a Freight change looks at those only,
        # not at every Stage (which made each Freight write cost O(Stages)).
        self.stages.add_index("auto-promote", self._auto_promote_index)
        self.task_source: TaskSource = InformerTasks(self.tasks, self.cluster_tasks)
        # ProjectConfigs and the ClusterConfig: policies, windows, links (app.controller.policies).
        self.rules = ProjectRules(
            kube,
            stages=self.stages,
            clock=clock,
            namespace=namespace,
            enqueue_namespace=self._enqueue_namespace,
            receiver_base_url=receiver_base_url,
        )
        self.verifier = Verifier(
            kube,
            clock=clock,
            enqueue=lambda ns, stage: self._enqueue_stage(ns, stage),
            create_promotion=self._auto_promote,
            auto_promotes=self.rules.auto_promotes,
        )
        self._announced: set[str] = set()
        self._work_dirs: set[Path] = set()
        self.argocd_missing = False
        self._probed = asyncio.Event()
        self._leading = False
        self._generation = 0
        self._app_events = 0
        self._app_changed_at: dict[str, int] = {}

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (
            self.promotions,
            self.stages,
            self.freight,
            self.warehouses,
            self.tasks,
            self.cluster_tasks,
            *(() if self.argocd_missing else (self.applications,)),
            *self.verifier.informers,
            *self.rules.informers,
        )

    def configs(self, namespace: str) -> tuple[ProjectConfig | None, ClusterConfig | None]:
        """The project's ProjectConfig and the ClusterConfig, parsed (the pages' deep links)."""
        return self.rules.project(namespace), self.rules.cluster()

    def synced(self) -> bool:
        return self._probed.is_set() and all(i.synced.is_set() for i in self.informers)

    # ---- running ------------------------------------------------------------------------------

    async def run_informers(self) -> None:
        await self.verifier.probe()
        await self.rules.probe()
        try:
            await self.kube.list(k.APPLICATIONS)
        except k.NotFound:
            # Without Argo CD's CRD there is nothing to watch; argocd steps say so when used.
            self.argocd_missing = True
            log.warning("Argo CD's Application CRD is not installed: argocd steps will fail")
        self._probed.set()
        async with asyncio.TaskGroup() as group:
            for informer in self.informers:
                group.create_task(informer.run())
            if not self.rules.missing:
                # Every replica serves the projects' webhook receivers.
                group.create_task(self.rules.resolve_receivers())

    async def wait_synced(self) -> None:
        await self._probed.wait()
        await asyncio.gather(*(i.synced.wait() for i in self.informers))

    async def lead(self) -> None:
        """Run the work queue (and the periodic health checks) until cancelled."""
        await self.wait_synced()
        # Leadership is this call's until it returns; a generation that is still winding down
        # must not turn off the next one's (the elector waits for it, but say so here too).
        self._generation += 1
        generation = self._generation
        self._leading = True
        try:
            # Front ends act only while leading, so what changed before this replica led is
            # shown now: every Stage and Promotion goes to the listeners (and is enqueued) again.
            for stage in self.stages.items():
                self._on_stage("ADDED", stage, None)
            for promotion in self.promotions.items():
                self._on_promotion("ADDED", promotion, None)
                # Application changes seen while this replica did not lead were not acted on
                # (nobody led, or another replica did): re-enter the steps waiting on one now,
                # not at their nextAttemptAt.
                waiting_stage = (promotion.get("spec") or {}).get("stage")
                if waiting_stage and waiting_apps(promotion):
                    namespace = namespace_of(promotion) or "default"
                    self._enqueue_stage(namespace, waiting_stage, wake=True)
            async with asyncio.TaskGroup() as group:
                group.create_task(
                    self.queue.run(self._reconcile_key, concurrency=self.max_concurrent)
                )
                group.create_task(self._health_loop())
                group.create_task(self.rules.write_statuses())
        finally:
            if self._generation == generation:
                self._leading = False

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            for stage in self.stages.items():
                self._enqueue_stage(namespace_of(stage) or "default", name_of(stage))

    async def _reconcile_key(self, key: Hashable, wake: bool) -> float | None:
        namespace, stage = cast(tuple[str, str], key)
        started = time.perf_counter()
        # Every line logged during this reconcile says which Stage it is about.
        with log_context(namespace=namespace, stage=stage):
            try:
                async with self._deferring():
                    return await self.reconcile_stage(namespace, stage, wake=wake)
            finally:
                if self.on_reconcile is not None:
                    self.on_reconcile(time.perf_counter() - started)

    # ---- the reconcile ------------------------------------------------------------------------

    async def reconcile_stage(
        self, namespace: str, stage_name: str, *, wake: bool = False
    ) -> float | None:
        stage_obj = self.stages.get(namespace, stage_name)
        key = f"{namespace}/{stage_name}"
        now = self.clock.now()
        # The Stage's promotion windows now: a closed schedule holds the queue (every path
        # that creates Promotions ends in this queue), and its next boundary wakes the Stage.
        window = self.rules.schedule(stage_obj).state(now) if stage_obj is not None else None
        boundary = window and (window.next_open or window.next_close)
        window_requeue = max(0.0, (boundary - now).total_seconds()) if boundary else None
        # Decide (promoter.control.stage_planner), then apply: announce, abort, then run the queue.
        plan = plan_queue(
            stage_obj,
            self.promotions.by_index("stage", key),
            announced=self._announced,
            window=window,
        )
        for promotion in plan.announce:
            self._announced.add(str(meta(promotion).get("uid")))
            await announce_created(self.kube, promotion)
        for promotion, actor in plan.aborts:
            await self._abort(promotion, stage_obj, actor)
        requeue: float | None = None
        succeeded_freight: Mapping[str, Any] | None = None
        finished_last: str | None = None
        for _ in range(1000):  # a Stage's queue drains within one reconcile, one at a time
            plan = plan_queue(
                self.stages.get(namespace, stage_name),
                self.promotions.by_index("stage", key),
                announced=self._announced,
                window=window,
            )
            if plan.held is not None:
                await self._hold(plan.queued, plan.held.held_message(now))
            if plan.run is None:
                break
            requeue, finished = await self._run(plan.run, stage_obj, wake=wake)
            wake = False
            if finished is None:
                break
            finished_last = name_of(finished)
            if phase_of(finished) is Phase.SUCCEEDED:
                succeeded_freight = self._freight_for(finished)
                # Verify this Freight before the next Promotion may start.
                requeue = 0.0
                break
        if stage_obj is not None:
            written = await self._write_stage_status(stage_obj, succeeded_freight, finished_last)
            if written is not None:
                await self._auto_rollback(written)
                later = await self.verifier.auto_promote(
                    written,
                    self.promotions.by_index("stage", f"{namespace}/{stage_name}"),
                    self.freight.items(namespace) if self.rules.auto_promotes(written) else (),
                )
                if later is not None:
                    requeue = later if requeue is None else min(requeue, later)
        if window_requeue is not None:
            requeue = window_requeue if requeue is None else min(requeue, window_requeue)
        return requeue

    def _freight_for(self, promotion: Mapping[str, Any]) -> Mapping[str, Any] | None:
        # spec.freight may name the Freight by its alias (chat and kubectl users do).
        name = (promotion.get("spec") or {}).get("freight") or ""
        return self._find_freight(namespace_of(promotion) or "", name) or (
            promotion.get("status") or {}
        ).get("freight")

    def _find_freight(self, namespace: str, ref: str) -> Mapping[str, Any] | None:
        return self.freight_refs.find(namespace, ref)

    async def _run(
        self, obj: Mapping[str, Any], stage_obj: Mapping[str, Any] | None, *, wake: bool
    ) -> tuple[float | None, Mapping[str, Any] | None]:
        """Advance one Promotion. Returns (requeue after, the object if it became terminal)."""
        namespace = namespace_of(obj) or "default"
        set_log_context(promotion=name_of(obj))
        spec = obj.get("spec") or {}
        try:
            promotion = Promotion.from_object(obj)
        except InvalidInput as e:
            return 0.0, await self._fail(obj, f"invalid Promotion: {e}")
        if stage_obj is None:
            return 0.0, await self._fail(
                obj, f"Stage {spec.get('stage')!r} not found in namespace {namespace!r}"
            )
        freight = self._find_freight(namespace, promotion.freight)
        if freight is None:
            return 0.0, await self._fail(
                obj, f"Freight {promotion.freight!r} not found in namespace {namespace!r}"
            )
        try:
            stage = parse_stage(stage_obj)
            inflated = ensure_inflated(promotion, stage, self.task_source)
        except InvalidInput as e:
            return 0.0, await self._fail(obj, str(e))
        if inflated.steps != promotion.steps or inflated.vars != promotion.vars:
            # Record the inflated steps on the object (kubectl shows what will run), once.
            recorded = await self._write_spec(obj, inflated)
            if recorded is None:
                return 0.0, None
            obj, promotion = recorded, Promotion.from_object(recorded)
        runtime = engine.Runtime(
            registry=self.registry,
            services=self.services,
            work_dir=self._work_dir(namespace, promotion.name),
            freight=freight,
            freights=stage_freights(stage_obj, freight),
            warehouses=requested_warehouses(
                stage_obj, lambda name: self.warehouses.get(namespace, name)
            ),
            extra_functions=self._functions(namespace),
            clock=self.clock.now,
            running_retry=self.default_requeue,
        )
        while True:
            events_before = self._app_events
            outcome = await engine.advance(promotion, runtime, force=wake, max_steps=1)
            wake = False
            if outcome.requeue_after == 0.0 and self._local_to_local(outcome.promotion):
                # Nothing outside the work directory changed, and nothing will before the next
                # step ends: one write records both (a replica taking over in between reruns
                # them). A step that reaches out is always preceded and followed by a write, so
                # a replay reproduces exactly what it pushed or synced.
                promotion = outcome.promotion
                continue
            written = await self._write_status(obj, promotion, outcome.promotion)
            if written is None:
                return 0.0, None  # someone else changed it (abort?): the next event re-decides
            obj, promotion = written, outcome.promotion
            phase = promotion.status.phase
            if phase.terminal:
                await self._finished(obj, promotion)
                return 0.0, obj
            if outcome.requeue_after == 0.0:
                continue
            if any(self._app_changed_at.get(a, -1) > events_before for a in waiting_apps(obj)):
                # An Application it now waits on changed while the step ran and its status was
                # written (the event found nobody waiting yet): look again at once, not after
                # the requeue floor.
                self._enqueue_stage(namespace, promotion.stage, wake=True)
            after = (
                outcome.requeue_after
                if outcome.requeue_after is not None
                else engine.DEFAULT_RUNNING_RETRY
            )
            return max(self.min_requeue, after), None

    def _local_to_local(self, promotion: Promotion) -> bool:
        """Whether the step that just ended and the one to run next are both LOCAL (they change
        nothing but the work directory), with the Promotion still running."""
        if promotion.status.phase.terminal:
            return False
        following = promotion.status.current_step
        if not 0 < following < len(promotion.steps):
            return False
        return all(
            self._effect(step.uses) is Effect.LOCAL
            for step in promotion.steps[following - 1 : following + 1]
        )

    def _effect(self, kind: str | None) -> Effect:
        if kind is None or kind not in self.registry:
            return Effect.EXTERNAL  # a task reference or an unknown kind: assume the worst
        return effect_of(self.registry[kind])

    def _functions(self, namespace: str) -> dict[str, Callable[..., Any]]:
        """Expression functions that read the cluster (from the caches) for one project."""
        return metadata_functions(self.services.extra[METADATA_PORT], namespace)

    def _work_dir(self, namespace: str, name: str) -> Path:
        path = self.work_dir / namespace / name
        if path not in self._work_dirs:
            # Once per Promotion, and inline: one mkdir costs less than handing it to a
            # thread, whose GIL hand-offs cost the loop ~0.3 ms each (bench_scale).
            path.mkdir(parents=True, exist_ok=True)
            self._work_dirs.add(path)
        return path
