"""The one fake of the chat front ends' cluster port, for tests that need no cluster.

:class:`FakePromotions` is a :class:`promoter.chat.port.PromotionService` (with the optional
ports
``app.controller.promotions.ClusterPromotions`` also offers: Freight annotations and creation,
Warehouses, AnalysisRuns, Argo CD Applications) over plain lists, as the informer caches hold the
objects. It keeps the real port's contract where a front end can tell (``test_promotions_port``
holds both to it): reads are per namespace; ``promote`` refuses a missing Stage or Freight
(``NotFound``), Freight the Stage may not take now (``Refused``, asked again at the last moment
as the real one does) and a Stage without a promotion template (``InvalidInput``), and copies
the template's steps into the Promotion; ``abort`` and ``reverify`` write Kargo's request
annotations and leave the outcome to the controller (the phase stays as it is); ``annotate`` on
a missing Promotion is ``NotFound``; failures come in :mod:`promoter.errors`' kinds only.
End-to-end tests use ``ClusterPromotions`` with the real controller instead.

Recording, one style: every request of the cluster (``promote``, ``approve``, ``abort``,
``reverify``, ``create-freight``, ``refresh-warehouse``, ``wake-pr``) is a tuple in
:attr:`FakePromotions.actions`, in order, ``(verb, *arguments)`` as the port got them, e.g.
``("promote", namespace, stage, freight, actor)``; :meth:`FakePromotions.asked` lists one verb's
arguments. What a front end records for itself (``annotate``, ``annotate_freight``) is not a
request: it lands on the objects, as the real patch does, and :meth:`FakePromotions.annotation`
reads it back.

Test controls: :meth:`~FakePromotions.add_stage` and :meth:`~FakePromotions.add_freight` (the
suite's builders, in this fake's namespace); :meth:`~FakePromotions.put` (a Promotion is now as
the test wrote it, annotations kept as the API server keeps them) and
:meth:`~FakePromotions.update` / :meth:`~FakePromotions.set_status` (the controller moves one
along, recording a finished one on its Stage), both calling ``listeners`` with ``(new, old)``
synchronously, as the controller calls its listeners; ``leader``; ``waiting`` (how many
Promotions wait on a pull request's URL); ``clock`` (the time ``promote`` checks availability
at); :meth:`~FakePromotions.fail` (a port method fails).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from promoter.chat.planner import not_approvable, not_available
from promoter.chat.port import PromotionRef, Snapshot
from promoter.clock import SYSTEM, Clock
from promoter.control.projects import Project
from promoter.errors import InvalidInput, NotFound, Refused
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of, namespace_of
from promoter.resources.stages import Approval, approval_of, approval_patch
from tests.support import objects

Listener = Callable[[dict[str, Any], dict[str, Any] | None], None]

# The promotion template add_stage gives a Stage unless told otherwise (the shape a chat
# message shows: clone, then sync).
DEFAULT_STEPS: tuple[dict[str, str], ...] = (
    {"uses": "git-clone", "as": "clone"},
    {"uses": "argocd-update", "as": "sync"},
)
_CREATED = "2024-01-01T00:00:00Z"
_FINISHED = ("Succeeded", "Failed", "Errored", "Aborted")


class FakePromotions:
    """:class:`promoter.chat.port.PromotionService` over lists, recording what was asked."""

    def __init__(
        self,
        namespace: str = "default",
        *,
        stages: list[dict[str, Any]] | None = None,
        freight: list[dict[str, Any]] | None = None,
        promotions: list[dict[str, Any]] | None = None,
        leader: bool = True,
        clock: Clock = SYSTEM,
    ) -> None:
        self.namespace = namespace
        self.stages = stages if stages is not None else []
        self.freight = freight if freight is not None else []
        self.promotions = promotions if promotions is not None else []
        self.warehouse_list: list[dict[str, Any]] = []
        # promoter.chat.port.ProjectDirectory: the projects chat reaches, with their routing.
        self.project_list: list[Project] = []
        # handlers.progress.AnalysisRunSource: (namespace, name) -> AnalysisRun
        self.analysis_runs: dict[tuple[str, str], dict[str, Any]] = {}
        # handlers.environments.ApplicationSource: (namespace, name) -> Argo CD Application
        self.applications: dict[tuple[str, str], dict[str, Any]] = {}
        self.leader = leader
        self.clock = clock
        self.listeners: list[Listener] = []
        self.waiting: dict[str, int] = {}
        self.actions: list[tuple[Any, ...]] = []
        self._faults: dict[str, tuple[Exception, int | None]] = {}
        self._numbers = itertools.count(1)

    # ---- test setup -------------------------------------------------------------------------

    def add_stage(
        self, name: str, annotations: Mapping[str, str] | None = None, **spec: Any
    ) -> dict[str, Any]:
        """A Stage in this fake's namespace (:func:`tests.support.objects.stage`, which takes
        the rest: ``upstream=``, ``sources=``...), promoting with ``steps``
        (:data:`DEFAULT_STEPS` when not given)."""
        steps = spec.pop("steps", None) or [dict(s) for s in DEFAULT_STEPS]
        stage = objects.stage(
            name,
            namespace=self.namespace,
            annotations=annotations or {},
            status={},
            steps=steps,
            **spec,
        )
        self.stages.append(stage)
        return stage

    def add_freight(self, name: str, alias: str = "", **extra: Any) -> dict[str, Any]:
        """A Freight in this fake's namespace; ``extra`` are its top-level fields."""
        freight = {
            **objects.freight(name, namespace=self.namespace, alias=alias, created=_CREATED),
            **extra,
        }
        self.freight.append(freight)
        return freight

    def fail(self, method: str, error: Exception | None, times: int | None = None) -> None:
        """The next ``times`` calls of the port's ``method`` (every call when None) raise
        ``error`` (one of :mod:`promoter.errors`' kinds, as the real port's); None heals it."""
        if error is None:
            self._faults.pop(method, None)
        else:
            self._faults[method] = (error, times)

    # ---- reading back -----------------------------------------------------------------------

    def asked(self, verb: str) -> list[tuple[Any, ...]]:
        """The arguments of every ``verb`` request, in order."""
        return [action[1:] for action in self.actions if action[0] == verb]

    def stage(self, name: str) -> dict[str, Any]:
        return next(s for s in self.stages if name_of(s) == name)

    def promotion(self, name: str) -> dict[str, Any]:
        return next(p for p in self.promotions if name_of(p) == name)

    def annotation(self, promotion: str, key: str) -> str | None:
        return (meta(self.promotion(promotion)).get("annotations") or {}).get(key)

    # ---- the controller's side --------------------------------------------------------------

    def put(self, promotion: dict[str, Any]) -> dict[str, Any]:
        """The Promotion is now ``promotion``, as the test wrote it: it replaces the stored one
        of its name, keeping the annotations stored there that it does not set (a status write
        keeps metadata), and the listeners hear ``(new, old)``. Nothing else changes: a test
        that writes whole Promotions writes their Stages' status too."""
        namespace, name = namespace_of(promotion), name_of(promotion)
        old = next(
            (p for p in self.promotions if (namespace_of(p), name_of(p)) == (namespace, name)),
            None,
        )
        new = promotion
        metadata = new.setdefault("metadata", {})
        if old is not None:
            metadata["annotations"] = {
                **(meta(old).get("annotations") or {}),
                **(metadata.get("annotations") or {}),
            }
            version = int(meta(old).get("resourceVersion") or 0) + 1
            self.promotions[next(i for i, p in enumerate(self.promotions) if p is old)] = new
        else:
            version = 1
            self.promotions.append(new)
        metadata["resourceVersion"] = str(version)
        for listener in list(self.listeners):
            listener(new, old)
        return new

    def update(self, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """The controller moves Promotion ``name`` along: a changed copy is :meth:`put`, and
        one that has just finished is its Stage's ``lastPromotion``, as the controller records
        it."""
        old = self.promotion(name)
        new = copy.deepcopy(old)
        change(new)
        status = new.get("status") or {}
        was = (old.get("status") or {}).get("phase")
        if status.get("phase") in _FINISHED and status.get("phase") != was:
            stage = next(
                (
                    s
                    for s in self.stages
                    if name_of(s) == (new.get("spec") or {}).get("stage")
                    and namespace_of(s) == namespace_of(new)
                ),
                None,
            )
            if stage is not None:
                stage.setdefault("status", {})["lastPromotion"] = {
                    "name": name,
                    "status": {"phase": status["phase"]},
                    "finishedAt": status.get("finishedAt"),
                }
        return self.put(new)

    def set_status(self, name: str, **status: Any) -> dict[str, Any]:
        def change(obj: dict[str, Any]) -> None:
            obj["status"] = {**(obj.get("status") or {}), **status}

        return self.update(name, change)

    # ---- the port ---------------------------------------------------------------------------

    def _faulty(self, method: str) -> None:
        fault = self._faults.get(method)
        if fault is None:
            return
        error, times = fault
        if times is not None:
            if times <= 1:
                del self._faults[method]
            else:
                self._faults[method] = (error, times - 1)
        raise error

    @staticmethod
    def _in(items: list[dict[str, Any]], namespace: str) -> list[Mapping[str, Any]]:
        return [i for i in items if namespace_of(i) == namespace]

    @staticmethod
    def _find(items: list[dict[str, Any]], kind: str, namespace: str, name: str) -> dict[str, Any]:
        for item in items:
            if (namespace_of(item), name_of(item)) == (namespace, name):
                return item
        raise NotFound(f"{kind} {name!r} not found in namespace {namespace!r}")

    def projects(self) -> list[Project]:
        return list(self.project_list)

    async def snapshot(self, namespace: str) -> Snapshot:
        self._faulty("snapshot")
        # Shared objects, as the informer caches hand them out: readers must not mutate.
        return Snapshot(
            namespace=namespace,
            stages=self._in(self.stages, namespace),
            freight=self._in(self.freight, namespace),
            promotions=self._in(self.promotions, namespace),
            warehouses=self._in(self.warehouse_list, namespace),
        )

    async def promote(
        self, namespace: str, stage: str, freight: str, *, actor: str
    ) -> PromotionRef:
        self._faulty("promote")
        stage_obj = self._find(self.stages, "Stage", namespace, stage)
        freight_obj = self._find(self.freight, "Freight", namespace, freight)
        refusal = not_available(stage_obj, freight_obj, self.clock.now())
        if refusal is not None:
            raise Refused(refusal)
        template = ((stage_obj.get("spec") or {}).get("promotionTemplate") or {}).get("spec")
        steps = (template or {}).get("steps")
        if not steps:  # in the real port's words (promoter.engine.builder.build_promotion)
            raise InvalidInput(
                f"Stage {stage!r} is a control-flow Stage (no spec.promotionTemplate.spec.steps): "
                "Freight is not promoted to it; it passes Freight on to the Stages after it as "
                "soon as it is available"
            )
        name = f"{stage}.{next(self._numbers):04d}"
        self.actions.append(("promote", namespace, stage, freight, actor))
        created = objects.promotion(
            name,
            stage,
            namespace=namespace,
            freight=freight,
            steps=copy.deepcopy(steps),
            created=_CREATED,
            annotations=ann.create_actor(actor),
            phase="Pending",
        )
        return PromotionRef.of(self.put(created))

    async def abort(self, namespace: str, promotion: str, *, actor: str) -> PromotionRef:
        self._faulty("abort")
        stored = self._find(self.promotions, "Promotion", namespace, promotion)
        self.actions.append(("abort", namespace, promotion, actor))
        patched = copy.deepcopy(stored)
        patched["metadata"].setdefault("annotations", {}).update(ann.abort(actor))
        return PromotionRef.of(self.put(patched))

    async def reverify(self, namespace: str, stage: str, *, actor: str) -> None:
        self._faulty("reverify")
        stage_obj = self._find(self.stages, "Stage", namespace, stage)
        self.actions.append(("reverify", namespace, stage, actor))
        request = ann.reverify(actor, self.clock.now())
        stage_obj["metadata"].setdefault("annotations", {}).update(request)

    async def approve(self, namespace: str, stage: str, freight: str, *, actor: str) -> Approval:
        """Writes ``status.approvedFor`` as the real port does; an existing approval stands
        (and is no request)."""
        self._faulty("approve")
        stage_obj = self._find(self.stages, "Stage", namespace, stage)
        freight_obj = self._find(self.freight, "Freight", namespace, freight)
        refusal = not_approvable(stage_obj, freight_obj)
        if refusal is not None:
            raise Refused(refusal)
        existing = approval_of(freight_obj, stage)
        if existing is not None:
            return existing
        self.actions.append(("approve", namespace, stage, freight, actor))
        patch = approval_patch(stage, actor, self.clock.now())["status"]["approvedFor"]
        status = freight_obj.setdefault("status", {})
        status["approvedFor"] = {**(status.get("approvedFor") or {}), **patch}
        approval = approval_of(freight_obj, stage)
        assert approval is not None
        return approval

    async def annotate(self, namespace: str, promotion: str, key: str, value: str) -> None:
        self._faulty("annotate")
        self._find(self.promotions, "Promotion", namespace, promotion)

        def change(obj: dict[str, Any]) -> None:
            obj["metadata"].setdefault("annotations", {})[key] = value

        self.update(promotion, change)

    async def annotate_freight(
        self, namespace: str, freight: str, annotations: Mapping[str, str]
    ) -> None:
        """``promoter.chat.port.FreightAnnotator``: a Freight deleted meanwhile is left alone."""
        self._faulty("annotate_freight")
        for obj in self._in(self.freight, namespace):
            if name_of(obj) == freight:
                obj["metadata"].setdefault("annotations", {}).update(annotations)

    def is_leader(self) -> bool:
        return self.leader

    def wake_pr(self, url: str) -> int:
        self.actions.append(("wake-pr", url))
        return self.waiting.get(url, 0)

    async def analysis_run(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.analysis_runs.get((namespace, name))

    async def application(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.applications.get((namespace, name))

    async def warehouses(self, namespace: str) -> list[Mapping[str, Any]]:
        """``handlers.push.FreightSink``."""
        self._faulty("warehouses")
        return self._in(self.warehouse_list, namespace)

    async def refresh_warehouse(self, namespace: str, name: str) -> None:
        """``handlers.push.WarehouseRefresher``."""
        self._faulty("refresh_warehouse")
        self.actions.append(("refresh-warehouse", namespace, name))

    def all_warehouses(self) -> list[Mapping[str, Any]]:
        """``promoter.warehouses.refresh.WarehouseDirectory``: the registry receivers' port."""
        return list(self.warehouse_list)

    async def create_freight(self, namespace: str, freight: Mapping[str, Any]) -> bool:
        """``promoter.chat.port.FreightCreator``: created unless one of that name exists."""
        self._faulty("create_freight")
        name = freight["metadata"]["name"]
        if any(name_of(f) == name for f in self._in(self.freight, namespace)):
            return False
        self.actions.append(("create-freight", namespace, name))
        self.freight.append(
            {**freight, "metadata": {**freight["metadata"], "namespace": namespace}}
        )
        return True
