"""The reconciler: runs Promotions on the cluster, one per Stage, resumably.

Informers keep caches of Promotions, Stages, Freight, tasks and Argo CD Applications. Every
change enqueues only the Stage it concerns (an Application change finds the Promotions waiting on
it through an index, not by polling). A Stage's reconcile handles aborts, picks the Promotion that
may run (:class:`promoter.resources.stages.StageQueue`), advances it one step at a time with the
engine (a status write per step that changes what a takeover resumes from, so any replica can
continue from the object; promoter/engine/recording.py), and refreshes the Stage's status.
Running steps are re-entered on the next relevant event or after their
retry-after. Only the leader runs the queue; standbys keep warm caches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any, cast

from app.controller import kube as k
from app.controller.automatic import AutomaticPromotions
from app.controller.caches import Caches, waiting_apps
from app.controller.control_flow import ControlFlowStages
from app.controller.creation import announce_created
from app.controller.garbage import GarbageCollector
from app.controller.informer import Informer, NamespacedInformers
from app.controller.policies import ProjectRules
from app.controller.projects import ServedProjects
from app.controller.routing import EventRouter, Waker
from app.controller.runtimes import Runtimes, WorkDirs, cluster_services
from app.controller.shards import ShardLabels
from app.controller.verification import Verifier
from app.controller.workqueue import WorkQueue
from app.controller.writes import StatusWriter
from promoter.clock import SYSTEM, Clock
from promoter.control import selection
from promoter.control.garbage import Retention
from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.control.projects import ProjectSelection
from promoter.control.shards import NO_SHARD, Shard
from promoter.control.stage_planner import plan_queue
from promoter.engine import engine
from promoter.engine.builder import ensure_inflated, promotion_vars, template_steps
from promoter.errors import InvalidInput, Refused
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
)
from promoter.rules.limits import (
    DEFAULT_LIMITS,
    Limits,
    object_size_problems,
    own_steps_problem,
    promotion_problems,
)
from promoter.steps.base import Effect, StepServices
from promoter.steps.registry import StepRegistry
from promoter.warehouses.project_receivers import MIN_SECRET_LENGTH

log = logging.getLogger(__name__)


StageKey = tuple[str, str]


class Controller:
    """Informers + work queue + reconcile logic for Promotions and Stages.

    Composed of collaborators, each given what it uses: the caches (:class:`Caches`), the
    event router and the queue's door (:class:`EventRouter`, :class:`Waker`), the project
    rules, the verifier, the Promotions it creates on its own (:class:`AutomaticPromotions`),
    the Runtimes (:class:`Runtimes`) and the status writer (:class:`StatusWriter`). This class
    decides a Stage's reconcile and applies it through them.
    """

    def __init__(
        self,
        kube: k.Kube,
        *,
        registry: StepRegistry,
        services: StepServices,
        work_dir: Path,
        namespace: str | None = None,
        projects: ProjectSelection | None = None,
        max_concurrent: int = 16,
        min_requeue: float = 10.0,
        default_requeue: float = engine.DEFAULT_RUNNING_RETRY,
        health_interval: float = 30.0,
        clock: Clock = SYSTEM,
        on_promotion_finished: Callable[[Mapping[str, Any]], None] | None = None,
        on_reconcile: Callable[[float], None] | None = None,
        receiver_base_url: str = "",
        retention: Retention | None = None,
        gc_interval: float = 3600.0,
        on_garbage_collected: Callable[[str], None] | None = None,
        shard: Shard = NO_SHARD,
        argocd_kube: k.Kube | None = None,
        limits: Limits = DEFAULT_LIMITS,
        receiver_min_secret: int = MIN_SECRET_LENGTH,
    ) -> None:
        self.kube = kube
        self.shard = shard
        # What one Promotion may ask for (promoter.rules.limits; the LONGSHOREMAN_MAX_* settings).
        self.limits = limits
        self.namespace = namespace
        self.max_concurrent = max_concurrent
        self.min_requeue = min_requeue
        self.health_interval = health_interval
        self.clock = clock
        # Called with the seconds each Stage reconcile took (the reconcile latency metric).
        self.on_reconcile = on_reconcile
        self.queue = WorkQueue(clock=clock)
        self.caches = Caches(kube, namespace=namespace, shard=shard, argocd=argocd_kube)
        # The projects served (all, a list, a label selector) and their routing.
        self.served = ServedProjects(
            kube,
            projects or ProjectSelection(),
            namespace=namespace,
        )
        self.waker = Waker(self.queue, self.caches, self.served.serves)
        self.served.on_change.append(self.waker.enqueue_namespace)
        # ProjectConfigs and the ClusterConfig: policies, windows, links (app.controller.policies).
        self.rules = ProjectRules(
            kube,
            stages=self.caches.stages,
            clock=clock,
            namespace=namespace,
            enqueue_namespace=self.waker.enqueue_namespace,
            receiver_base_url=receiver_base_url,
            receiver_min_secret=receiver_min_secret,
            project_labels=self.served.labels,
        )
        self.router = EventRouter(self.caches, self.waker, self.rules)
        self.automatic = AutomaticPromotions(kube, self.caches, self.rules, clock, limits)
        self.control_flow = ControlFlowStages(kube, self.caches, clock)
        self.verifier = Verifier(
            kube,
            clock=clock,
            enqueue=self.waker.enqueue_stage,
            create_promotion=self.automatic.promote,
            auto_promotes=self.rules.auto_promotes,
            namespace=namespace,
            stage_of=self.caches.stages.get,
        )
        work_dirs = WorkDirs(work_dir)
        self.runtimes = Runtimes(
            registry=registry,
            services=cluster_services(kube, services, self.caches),
            work_dirs=work_dirs,
            caches=self.caches,
            clock=clock,
            running_retry=default_requeue,
        )
        self.writer = StatusWriter(
            kube,
            caches=self.caches,
            verifier=self.verifier,
            rules=self.rules,
            work_dirs=work_dirs,
            clock=clock,
            on_promotion_finished=on_promotion_finished,
        )
        # Kargo's garbage collector, on the leader (None: switched off).
        self.garbage = (
            None
            if retention is None
            else GarbageCollector(
                kube,
                stages=self.caches.stages,
                promotions=self.caches.promotions,
                freight=self.caches.freight,
                retention=retention,
                interval=gc_interval,
                clock=clock,
                shard=shard,
                on_deleted=on_garbage_collected,
            )
        )
        # spec.shard into the shard label, for what this controller is responsible for.
        self.labels = ShardLabels(kube, shard, stage=self._stage_anywhere)
        self.router.stage_listeners.append(self.labels.listener("Stage"))
        self.router.listeners.append(self.labels.listener("Promotion"))
        # What the front ends and the wiring read (app.server, app.controller.promotions).
        self.promotions = self.caches.promotions
        self.stages = self.caches.stages
        self.freight = self.caches.freight
        self.freight_refs = self.caches.freight_refs
        self.applications = self.caches.applications
        self.task_source = self.caches.task_source
        self.listeners = self.router.listeners
        self.stage_listeners = self.router.stage_listeners
        self.freight_listeners = self.router.freight_listeners
        self._announced: set[str] = set()
        self.argocd_missing = False
        self._probed = asyncio.Event()
        self._generation = 0

    @property
    def leading(self) -> bool:
        return self.waker.leading

    def wake_pr(self, url: str) -> int:
        """Wake the Promotions waiting on a pull request (its merge or close webhook came)."""
        return self.router.wake_pr(url)

    @property
    def informers(self) -> tuple[Informer | NamespacedInformers, ...]:
        caches = self.caches
        return (
            caches.promotions,
            caches.stages,
            caches.freight,
            caches.warehouses,
            caches.tasks,
            caches.cluster_tasks,
            self.served.namespaces,
            *(() if self.argocd_missing else (caches.applications,)),
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
            await self.caches.applications.kube.list(k.APPLICATIONS, self.namespace)
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
        self.waker.leading = True
        try:
            # Front ends act only while leading, so what changed before this replica led is
            # shown now: every Stage and Promotion goes to the listeners (and is enqueued) again.
            for stage in self.caches.stages.items():
                self.router.on_stage("ADDED", stage, None)
            for promotion in self.caches.promotions.items():
                self.router.on_promotion("ADDED", promotion, None)
                # Application changes seen while this replica did not lead were not acted on
                # (nobody led, or another replica did): re-enter the steps waiting on one now,
                # not at their nextAttemptAt.
                waiting_stage = (promotion.get("spec") or {}).get("stage")
                if waiting_stage and waiting_apps(promotion):
                    namespace = namespace_of(promotion) or "default"
                    self.waker.enqueue_stage(namespace, waiting_stage, wake=True)
            async with asyncio.TaskGroup() as group:
                group.create_task(
                    self.queue.run(self._reconcile_key, concurrency=self.max_concurrent)
                )
                group.create_task(self._health_loop())
                group.create_task(self.rules.write_statuses())
                group.create_task(self.labels.run())
                if self.garbage is not None:
                    group.create_task(self.garbage.run())
        finally:
            if self._generation == generation:
                self.waker.leading = False

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            for stage in self.caches.stages.items():
                self.waker.enqueue_stage(namespace_of(stage) or "default", name_of(stage))

    async def _reconcile_key(self, key: Hashable, wake: bool) -> float | None:
        namespace, stage = cast(tuple[str, str], key)
        started = time.perf_counter()
        # Every line logged during this reconcile says which Stage it is about.
        with log_context(namespace=namespace, stage=stage):
            try:
                async with self.writer.deferring():
                    return await self.reconcile_stage(namespace, stage, wake=wake)
            finally:
                if self.on_reconcile is not None:
                    self.on_reconcile(time.perf_counter() - started)

    async def _stage_anywhere(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Stage from the cache, else from the API server: with shards, another shard's Stage
        is not in this controller's cache."""
        cached = self.caches.stages.get(namespace, name)
        if cached is not None or self.shard.cache_selector() is None:
            return cached
        try:
            return await self.kube.get(k.STAGES, namespace, name)
        except k.NotFound:
            return None

    # ---- the reconcile ------------------------------------------------------------------------

    async def reconcile_stage(
        self, namespace: str, stage_name: str, *, wake: bool = False
    ) -> float | None:
        stage_obj = self.caches.stages.get(namespace, stage_name)
        if stage_obj is None and self.caches.of_stage(namespace, stage_name):
            # A Promotion without a shard label for a Stage this shard does not cache: if the
            # Stage is another shard's, its Promotion moves there (ShardLabels), not fails here.
            stage_obj = await self._stage_anywhere(namespace, stage_name)
        if stage_obj is not None and not self.shard.responsible_for(stage_obj):
            return None
        if stage_obj is not None and selection.passes_freight_on(
            stage_obj, self.caches.of_stage(namespace, stage_name)
        ):
            return await self._reconcile_control_flow(stage_obj)
        now = self.clock.now()
        # The Stage's promotion windows now: a closed schedule holds the queue (every path
        # that creates Promotions ends in this queue), and its next boundary wakes the Stage.
        window = self.rules.schedule(stage_obj).state(now) if stage_obj is not None else None
        boundary = window and (window.next_open or window.next_close)
        window_requeue = max(0.0, (boundary - now).total_seconds()) if boundary else None
        # Decide (promoter.control.stage_planner), then apply: announce, abort, then run the queue.
        plan = plan_queue(
            stage_obj,
            self.caches.of_stage(namespace, stage_name),
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
                self.caches.stages.get(namespace, stage_name),
                self.caches.of_stage(namespace, stage_name),
                announced=self._announced,
                window=window,
            )
            if plan.held is not None:
                await self.writer.hold(plan.queued, plan.held.held_message(now))
            await self.writer.mark_waiting(plan.waiting)
            if plan.run is None:
                break
            requeue, finished = await self._run(plan.run, stage_obj, wake=wake)
            wake = False
            if finished is None:
                break
            finished_last = name_of(finished)
            if phase_of(finished) is Phase.SUCCEEDED:
                succeeded_freight = self.caches.freight_for(finished)
                # Verify this Freight before the next Promotion may start.
                requeue = 0.0
                break
        if stage_obj is not None:
            written = await self.writer.write_stage_status(
                stage_obj, succeeded_freight, finished_last
            )
            if written is not None:
                await self.writer.sync_freight(written)
                await self.automatic.roll_back(written)
                later = await self.verifier.auto_promote(
                    written,
                    self.caches.of_stage(namespace, stage_name),
                    self.caches.freight.items(namespace)
                    if self.rules.auto_promotes(written)
                    else (),
                )
                if later is not None:
                    requeue = later if requeue is None else min(requeue, later)
        if window_requeue is not None:
            requeue = window_requeue if requeue is None else min(requeue, window_requeue)
        return requeue

    async def _reconcile_control_flow(self, stage_obj: Mapping[str, Any]) -> float | None:
        """A Stage without promotion steps (app.controller.control_flow): pass available
        Freight on and write its status."""
        requeue = await self.control_flow.pass_on(stage_obj)
        await self.writer.write_stage_status(stage_obj, None)
        return requeue

    async def _run(
        self, obj: Mapping[str, Any], stage_obj: Mapping[str, Any] | None, *, wake: bool
    ) -> tuple[float | None, Mapping[str, Any] | None]:
        """Advance one Promotion. Returns (requeue after, the object if it became terminal)."""
        namespace = namespace_of(obj) or "default"
        set_log_context(promotion=name_of(obj))
        spec = obj.get("spec") or {}
        # Before anything reads its steps: a huge Promotion costs no more than measuring it.
        problems = promotion_problems(obj, self.limits)
        if problems and not phase_of(obj).terminal:
            return 0.0, await self.writer.fail(obj, "; ".join(problems))
        try:
            promotion = Promotion.from_object(obj)
        except InvalidInput as e:
            return 0.0, await self.writer.fail(obj, f"invalid Promotion: {e}")
        if stage_obj is None:
            return 0.0, await self.writer.fail(
                obj, f"Stage {spec.get('stage')!r} not found in namespace {namespace!r}"
            )
        freight = self.caches.find_freight(namespace, promotion.freight)
        if freight is None:
            return 0.0, await self.writer.fail(
                obj, f"Freight {promotion.freight!r} not found in namespace {namespace!r}"
            )
        try:
            stage = parse_stage(stage_obj)
            inflated = ensure_inflated(promotion, stage, self.task_source, self.limits)
            if promotion.steps and not _started(promotion):
                # Steps come from the Stage: one that brought its own runs none of them.
                template = template_steps(promotion, stage, self.task_source, self.limits)
                refusal = own_steps_problem(
                    inflated.steps,
                    template,
                    stage.name,
                    self.limits,
                    inflated.vars,
                    promotion_vars(stage),
                )
                if refusal is not None:
                    raise Refused(refusal)
        except (InvalidInput, Refused) as e:
            return 0.0, await self.writer.fail(obj, str(e))
        if inflated.steps != promotion.steps or inflated.vars != promotion.vars:
            # Record the inflated steps on the object (kubectl shows what will run), once.
            recorded = await self.writer.write_spec(obj, inflated)
            if recorded is None:
                return 0.0, None
            obj, promotion = recorded, Promotion.from_object(recorded)
        runtime = self.runtimes.for_promotion(promotion, stage_obj, freight)
        while True:
            events_before = self.router.app_events
            outcome = await engine.advance(promotion, runtime, force=wake, max_steps=1)
            wake = False
            if outcome.requeue_after == 0.0 and self._local_to_local(outcome.promotion):
                # Nothing outside the work directory changed, and nothing will before the next
                # step ends: one write records both (a replica taking over in between reruns
                # them). A step that reaches out is always preceded and followed by a write, so
                # a replay reproduces exactly what it pushed or synced.
                promotion = outcome.promotion
                # Steps that never wait (compose-output, yaml-update) would otherwise run back
                # to back: let the other Stages, webhooks and /healthz in between them.
                await asyncio.sleep(0)
                continue
            # A status that cannot be stored ends the Promotion, instead of a write that is
            # refused again on every retry while the Stage's queue waits behind it.
            too_large = object_size_problems(
                {"status": outcome.promotion.status.to_dict()}, self.limits
            )
            if too_large:
                return 0.0, await self.writer.fail(obj, f"{too_large[0]}: {_TOO_LARGE}")
            try:
                written = await self.writer.write_status(obj, promotion, outcome.promotion)
            except k.TooLarge as e:
                message = f"the API server refused the status as too large ({e.server_message})"
                return 0.0, await self.writer.fail(obj, f"{message}: {_TOO_LARGE}")
            if written is None:
                return 0.0, None  # someone else changed it (abort?): the next event re-decides
            obj, promotion = written, outcome.promotion
            phase = promotion.status.phase
            if phase.terminal:
                await self.writer.finished(obj, promotion)
                return 0.0, obj
            if outcome.requeue_after == 0.0:
                continue
            if self.router.app_changed_since(waiting_apps(obj), events_before):
                # An Application it now waits on changed while the step ran and its status was
                # written (the event found nobody waiting yet): look again at once, not after
                # the requeue floor.
                self.waker.enqueue_stage(namespace, promotion.stage, wake=True)
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
            self.runtimes.effect(step.uses) is Effect.LOCAL
            for step in promotion.steps[following - 1 : following + 1]
        )

    async def _abort(
        self, obj: Mapping[str, Any], stage_obj: Mapping[str, Any] | None, actor: str
    ) -> None:
        promotion = Promotion.from_object(obj)
        if promotion.status.phase is Phase.RUNNING:
            # Give the running step a chance to undo what it started (Argo CD: terminate-op),
            # with the Runtime a normal run of it has: the Stage's Freight and Warehouses.
            namespace = namespace_of(obj) or "default"
            freight = self.caches.find_freight(namespace, promotion.freight) or {}
            runtime = self.runtimes.for_promotion(promotion, stage_obj, freight)
            try:
                await engine.abort_step(promotion, runtime)
            except Exception:  # undoing is best effort; the abort itself must not fail
                log.exception("aborting the running step of %s", promotion.name)
        aborted = engine.abort(promotion, actor, self.clock.now())
        written = await self.writer.write_status(obj, promotion, aborted)
        if written is None:
            return
        await self.writer.finished(written, aborted)


_TOO_LARGE = "a step's outputs are too large to record; make them smaller"


def _started(promotion: Promotion) -> bool:
    """Whether a step of the Promotion ran (its steps are then the ones recorded at start)."""
    status = promotion.status
    return status.phase is not Phase.PENDING or bool(status.steps) or status.current_step > 0
