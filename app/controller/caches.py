"""The controller's caches: one informer per kind it reads, with the indexes its routing needs.

Built once and handed to the collaborators that read them (the event router, the status
writer, the runtimes, the automatic Promotions), so each says which caches it uses. The indexes
are what lets an event find the Stage it concerns without a scan: Promotions by Stage, by
Freight, by the Argo CD Applications and pull requests they wait on; auto-promoting Stages by
namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.controller import kube as k
from app.controller.creation import InformerTasks
from app.controller.informer import FreightRefs, Informer, NamespacedInformers, OnEvent
from app.controller.verification import auto_promote_enabled
from promoter.control import selection
from promoter.control.shards import NO_SHARD, Shard
from promoter.engine.builder import TaskSource
from promoter.resources.model import Phase, namespace_of
from promoter.resources.stages import phase_of


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


# Where argocd-update looks for an Application whose namespace it is not told (Kargo's default).
ARGOCD_NAMESPACE = "argocd"


def application_namespaces(stage: Mapping[str, Any]) -> set[str]:
    """The namespaces of the Applications a Stage's own argocd-update steps name literally (an
    expression is only known when the step runs: it reads with a GET then)."""
    template = ((stage.get("spec") or {}).get("promotionTemplate") or {}).get("spec") or {}
    out: set[str] = set()
    for step in template.get("steps") or ():
        if not isinstance(step, Mapping) or step.get("uses") != "argocd-update":
            continue
        for app in (step.get("config") or {}).get("apps") or ():
            if isinstance(app, Mapping):
                namespace = app.get("namespace") or ARGOCD_NAMESPACE
                if isinstance(namespace, str) and "${{" not in namespace:
                    out.add(namespace)
    return out


def _stage_index(obj: Mapping[str, Any]) -> list[str]:
    stage = (obj.get("spec") or {}).get("stage")
    return [f"{namespace_of(obj) or 'default'}/{stage}"] if stage else []


def _freight_index(obj: Mapping[str, Any]) -> list[str]:
    freight = (obj.get("spec") or {}).get("freight")
    return [f"{namespace_of(obj) or 'default'}/{freight}"] if freight else []


def _currently_in_index(obj: Mapping[str, Any]) -> list[str]:
    stages = (obj.get("status") or {}).get("currentlyIn") or {}
    namespace = namespace_of(obj) or "default"
    return [f"{namespace}/{stage}" for stage in stages] if isinstance(stages, Mapping) else []


def _auto_promote_index(obj: Mapping[str, Any]) -> list[str]:
    return [namespace_of(obj) or "default"] if auto_promote_enabled(obj) else []


def _control_flow_index(obj: Mapping[str, Any]) -> list[str]:
    return [namespace_of(obj) or "default"] if selection.is_control_flow(obj) else []


class Caches:
    """The informers of Promotions, Stages, Freight, Warehouses, tasks and Applications."""

    def __init__(
        self,
        kube: k.Kube,
        *,
        namespace: str | None = None,
        shard: Shard = NO_SHARD,
        argocd: k.Kube | None = None,
    ) -> None:
        # A shard's controller caches its shard's Stages and Promotions only (Kargo's cache
        # options); everything else every shard reads.
        self.shard = shard
        selector = shard.cache_selector()
        self.promotions = Informer(kube, k.PROMOTIONS, namespace=namespace, label_selector=selector)
        self.stages = Informer(kube, k.STAGES, namespace=namespace, label_selector=selector)
        self.freight = Informer(kube, k.FREIGHT, namespace=namespace)
        # Freight by name, then by alias (an index on the alias label): chat, pages, kubectl.
        self.freight_refs = FreightRefs(self.freight)
        # The Stages' requested Warehouses decide where imageFrom() and the like look (Kargo).
        self.warehouses = Informer(kube, k.WAREHOUSES, namespace=namespace)
        self.tasks = Informer(kube, k.PROMOTION_TASKS, namespace=namespace)
        self.cluster_tasks = Informer(kube, k.CLUSTER_PROMOTION_TASKS)
        # Argo CD Applications: everywhere, or (one namespace served) only in that namespace,
        # Argo CD's own and the namespaces the Stages' argocd-update steps name. They live in
        # the cluster Argo CD runs in: this one, or the one a second kubeconfig names (a shard
        # next to its Argo CD); everything that reads or writes them uses this client.
        argocd_kube = argocd or kube
        self.applications: Informer | NamespacedInformers = (
            Informer(argocd_kube, k.APPLICATIONS)
            if namespace is None
            else NamespacedInformers(argocd_kube, k.APPLICATIONS, (namespace, ARGOCD_NAMESPACE))
        )
        self.promotions.add_index("stage", _stage_index)
        self.promotions.add_index("waiting-app", waiting_apps)
        self.promotions.add_index("health-app", health_apps)
        self.promotions.add_index("waiting-pr", waiting_prs)
        self.promotions.add_index("freight", _freight_index)
        # Freight by the Stages it says it is currently in (Kargo's field index of the same).
        self.freight.add_index("currently-in", _currently_in_index)
        # Namespaces of the Stages that auto-promote: a Freight change looks at those only,
        # not at every Stage (which made each Freight write cost O(Stages)).
        self.stages.add_index("auto-promote", _auto_promote_index)
        # Namespaces of the control-flow Stages, which pass Freight on as soon as it is theirs.
        self.stages.add_index("control-flow", _control_flow_index)
        self.task_source: TaskSource = InformerTasks(self.tasks, self.cluster_tasks)

    def report_to(
        self,
        *,
        promotions: OnEvent,
        stages: OnEvent,
        freight: OnEvent,
        applications: OnEvent,
    ) -> None:
        """Where the informers send their events (the router, which reads these caches too,
        so it is told after both exist)."""
        self.promotions.on_event = promotions
        self.stages.on_event = stages
        self.freight.on_event = freight
        self.applications.on_event = applications

    def follow_applications_of(self, stage: Mapping[str, Any]) -> None:
        """Watch the Applications a Stage's argocd-update steps name, where not everywhere."""
        if isinstance(self.applications, NamespacedInformers):
            for namespace in application_namespaces(stage):
                self.applications.add(namespace)

    def of_stage(self, namespace: str, stage: str) -> list[dict[str, Any]]:
        """The Promotions of one Stage."""
        return self.promotions.by_index("stage", f"{namespace}/{stage}")

    def find_freight(self, namespace: str, ref: str) -> Mapping[str, Any] | None:
        """A Freight by name or by alias, by the one rule (exact name first, then alias)."""
        return self.freight_refs.find(namespace, ref)

    def freight_for(self, promotion: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The Freight a Promotion promotes (the copy on its status when the object is gone)."""
        name = (promotion.get("spec") or {}).get("freight") or ""
        return self.find_freight(namespace_of(promotion) or "", name) or (
            promotion.get("status") or {}
        ).get("freight")
