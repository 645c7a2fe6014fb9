"""What a Promotion runs with on the server: its step ports over the cluster, its work
directory, and its :class:`promoter.engine.engine.Runtime`.

:meth:`Runtimes.for_promotion` is the one place the controller gets a Runtime, for a normal run
and for an abort alike; both go through :func:`promoter.engine.runtime.runtime_for`, which the
local runner uses too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.controller import kube as k
from app.controller.argocd import KubeArgoCDApps
from app.controller.caches import Caches
from app.controller.clusterdata import KubeClusterData
from app.controller.metadata import KubeFreightAliases, KubeMetadataStore
from app.logs import REDACTOR
from promoter.clock import Clock
from promoter.engine import engine
from promoter.engine.runtime import runtime_for
from promoter.resources.model import Promotion
from promoter.steps.base import Effect, StepServices, effect_of
from promoter.steps.freight_alias import PORT_KEY as ALIAS_PORT
from promoter.steps.metadata import PORT_KEY as METADATA_PORT
from promoter.steps.registry import StepRegistry


def cluster_services(kube: k.Kube, services: StepServices, caches: Caches) -> StepServices:
    """The steps' ports over this cluster, unless ``services`` already names them."""
    return replace(
        services,
        # secret(), configMap(): one GET per object a step names; values join the log
        # redactor as they are read.
        cluster_data=services.cluster_data or KubeClusterData(kube, on_secret=REDACTOR.add),
        extra={
            # The Argo CD steps reach Applications through the Application watch.
            "argocd": KubeArgoCDApps(kube, caches.applications),
            # set-metadata writes Stages' and Freight's status.metadata; stageMetadata() and
            # freightMetadata() read it from the informers.
            METADATA_PORT: KubeMetadataStore(kube, stages=caches.stages, freight=caches.freight),
            # set-freight-alias writes Freight's alias field and label.
            ALIAS_PORT: KubeFreightAliases(kube, freight=caches.freight),
            **services.extra,
        },
    )


class WorkDirs:
    """One work directory per Promotion under a root, made once and forgotten when it ends."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made: set[Path] = set()

    def of(self, namespace: str, name: str) -> Path:
        path = self.root / namespace / name
        if path not in self._made:
            # Once per Promotion, and inline: one mkdir costs less than handing it to a
            # thread, whose GIL hand-offs cost the loop ~0.3 ms each (bench_scale).
            path.mkdir(parents=True, exist_ok=True)
            self._made.add(path)
        return path

    def release(self, namespace: str, name: str) -> Path:
        """Forget a finished Promotion's directory; the caller removes it."""
        path = self.root / namespace / name
        self._made.discard(path)
        return path


class Runtimes:
    """Builds the Runtime of a Promotion from the caches: its Stage's Freight and Warehouses."""

    def __init__(
        self,
        *,
        registry: StepRegistry,
        services: StepServices,
        work_dirs: WorkDirs,
        caches: Caches,
        clock: Clock,
        running_retry: float,
    ) -> None:
        self.registry = registry
        self.services = services
        self.work_dirs = work_dirs
        self.caches = caches
        self.clock = clock
        self.running_retry = running_retry

    def for_promotion(
        self,
        promotion: Promotion,
        stage: Mapping[str, Any] | None,
        freight: Mapping[str, Any],
    ) -> engine.Runtime:
        namespace = promotion.namespace or "default"
        return runtime_for(
            promotion,
            stage=stage,
            freight=freight,
            warehouse=lambda name: self.caches.warehouses.get(namespace, name),
            registry=self.registry,
            services=self.services,
            work_dir=self.work_dirs.of(namespace, promotion.name),
            clock=self.clock.now,
            running_retry=self.running_retry,
        )

    def effect(self, kind: str | None) -> Effect:
        """What a step kind may change (a task reference or an unknown kind: the worst)."""
        if kind is None or kind not in self.registry:
            return Effect.EXTERNAL
        return effect_of(self.registry[kind])
