"""The project's rules on the cluster: ProjectConfig and ClusterConfig informers, what is in force.

Keeps both kinds in informer caches and answers, from them, the questions the reconciler and the
chat port ask about a Stage: does it auto-promote, does it roll back and on what, which
promotion windows apply (decided in :mod:`promoter.control.policies` and
:mod:`promoter.control.windows`). A change of either config wakes the Stages it may concern.

What is in force is written back where people look: each ProjectConfig's ``Ready`` condition
says which Stages auto-promote and roll back and which windows apply, or what is wrong with it
(what Kargo's admission webhook would have refused), which ``kubectl get projectconfigs`` shows
in its Status column. Those writes run on the leader, in a loop of their own, when a config or
the set of Stages changes.

Each ProjectConfig's ``webhookReceivers`` are resolved here on every replica (any of them may
receive a webhook): their Secrets are read once per ProjectConfig version (Kargo does not watch
Secrets either: touch the ProjectConfig after rotating one), and the table of paths
(:attr:`ProjectRules.receivers`) is what ``app/receivers`` serves beside the operator's
receivers. Where each one listens is written to the ProjectConfig's ``status.webhookReceivers``.

Clusters whose CRDs predate these kinds keep working: without the CRDs the caches stay empty
and every Stage follows its own annotations, as before.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.clock import Clock
from promoter.control.policies import (
    CLUSTER_CONFIG_NAME,
    AutoPromotion,
    AutoRollback,
    ClusterConfig,
    ProjectConfig,
    auto_promotion,
    auto_rollback,
    cluster_config,
    in_force,
    project_config,
    schedule_for,
)
from promoter.control.windows import Schedule
from promoter.resources.model import meta, name_of, namespace_of
from promoter.resources.stages import Condition, set_condition
from promoter.warehouses.project_receivers import (
    MIN_SECRET_LENGTH,
    ProjectReceiver,
    project_receivers,
)

log = logging.getLogger(__name__)


class ProjectRules:
    """ProjectConfigs and the ClusterConfig, cached, parsed once per version, and applied."""

    def __init__(
        self,
        kube: k.Kube,
        *,
        stages: Informer,
        clock: Clock,
        namespace: str | None = None,
        enqueue_namespace: Callable[[str | None], None],
        receiver_base_url: str = "",
        receiver_min_secret: int = MIN_SECRET_LENGTH,
        project_labels: Callable[[str], Mapping[str, str]] = lambda namespace: {},
    ) -> None:
        self.kube = kube
        # The labels of a project's namespace: what a ClusterConfig projectSelector matches.
        self.project_labels = project_labels
        self.stages = stages
        self.clock = clock
        # Wakes every Stage of a namespace (None: of every namespace).
        self.enqueue_namespace = enqueue_namespace
        self.projects = Informer(
            kube, k.PROJECT_CONFIGS, namespace=namespace, on_event=self._on_project
        )
        self.clusters = Informer(kube, k.CLUSTER_CONFIGS, on_event=self._on_cluster)
        self.missing = False
        self._parsed: dict[tuple[str, str], Any] = {}
        self._dirty: set[str] = set()
        self._changed = asyncio.Event()
        # The projects' own webhook receivers, by path (every replica serves them).
        self.receiver_base_url = receiver_base_url.rstrip("/")
        self.receiver_min_secret = receiver_min_secret
        self.receivers: dict[str, ProjectReceiver] = {}
        self._receiver_problems: dict[str, list[str]] = {}
        self._receiver_notes: dict[str, list[str]] = {}
        self._receivers_dirty: set[str] = set()
        self._receivers_changed = asyncio.Event()

    @property
    def informers(self) -> tuple[Informer, ...]:
        return () if self.missing else (self.projects, self.clusters)

    async def probe(self) -> None:
        try:
            await self.kube.list(k.PROJECT_CONFIGS)
        except k.NotFound:
            self.missing = True
            log.warning(
                "the ProjectConfig CRD (projectconfigs.%s) is not installed: "
                "promotion policies and windows are off; apply deploy/crds",
                self.kube.api_group,
            )

    # ---- what is in force ---------------------------------------------------------------------

    def _cached(self, obj: Mapping[str, Any] | None, parse: Callable[[Any], Any]) -> Any:
        if obj is None:
            return None
        key = (f"{namespace_of(obj)}/{name_of(obj)}", str(meta(obj).get("resourceVersion")))
        found = self._parsed.get(key)
        if found is None:
            found = self._parsed[key] = parse(obj)
        return found

    def project(self, namespace: str) -> ProjectConfig | None:
        """The project's ProjectConfig (Kargo: named after the project, in its namespace)."""
        parsed: ProjectConfig | None = self._cached(
            self.projects.get(namespace, namespace), project_config
        )
        return parsed

    def cluster(self) -> ClusterConfig | None:
        parsed: ClusterConfig | None = self._cached(
            self.clusters.get(None, CLUSTER_CONFIG_NAME), cluster_config
        )
        return parsed

    def auto_promotion(self, stage: Mapping[str, Any]) -> AutoPromotion:
        return auto_promotion(stage, self.project(namespace_of(stage) or "default"))

    def auto_promotes(self, stage: Mapping[str, Any]) -> bool:
        return self.auto_promotion(stage).enabled

    def may_auto_promote_any(self, namespace: str) -> bool:
        """Whether a policy of the project turns auto-promotion on for some Stage."""
        config = self.project(namespace)
        return config is not None and any(p.auto_promotion_enabled for p in config.policies)

    def auto_rollback(self, stage: Mapping[str, Any]) -> AutoRollback | None:
        return auto_rollback(stage, self.project(namespace_of(stage) or "default"))

    def schedule(self, stage: Mapping[str, Any]) -> Schedule:
        namespace = namespace_of(stage) or "default"
        return schedule_for(
            stage, self.project(namespace), self.cluster(), self.project_labels(namespace)
        )

    # ---- events -------------------------------------------------------------------------------

    def _on_project(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._forget(old)
        namespace = namespace_of(obj) or "default"
        self.enqueue_namespace(namespace)
        self.stages_changed(namespace)
        if old is None or obj.get("spec") != old.get("spec") or kind == "DELETED":
            self._receivers_dirty.add(namespace)
            self._receivers_changed.set()

    def _on_cluster(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._forget(old)
        self.enqueue_namespace(None)

    def _forget(self, old: Mapping[str, Any] | None) -> None:
        if old is not None:
            key = (f"{namespace_of(old)}/{name_of(old)}", str(meta(old).get("resourceVersion")))
            self._parsed.pop(key, None)

    def stages_changed(self, namespace: str) -> None:
        """A Stage came, went or changed labels: the project's in-force line may change."""
        if self.projects.get(namespace, namespace) is not None:
            self._dirty.add(namespace)
            self._changed.set()

    # ---- the projects' webhook receivers --------------------------------------------------------

    async def resolve_receivers(self) -> None:
        """Keep :attr:`receivers` in step with the ProjectConfigs (every replica)."""
        while True:
            self._receivers_changed.clear()
            dirty, self._receivers_dirty = self._receivers_dirty, set()
            for namespace in sorted(dirty):
                try:
                    await self._resolve(namespace)
                except k.KubeError as e:
                    log.warning("reading ProjectConfig %s's receiver Secrets: %s", namespace, e)
                    self._receivers_dirty.add(namespace)
            if self._receivers_dirty:
                await asyncio.sleep(5)  # a Secret read failed: try those again
                continue
            await self._receivers_changed.wait()

    async def _resolve(self, namespace: str) -> None:
        config = self.project(namespace)
        specs = config.webhook_receivers if config is not None else ()
        secrets: dict[str, Mapping[str, str] | None] = {}
        for spec in specs:
            for sender_config in spec.values():
                if not isinstance(sender_config, Mapping):
                    continue
                name = str((sender_config.get("secretRef") or {}).get("name") or "")
                if name and name not in secrets:
                    secrets[name] = await self._secret(namespace, name)
        found, problems, notes = project_receivers(
            namespace, specs, lambda name: secrets.get(name), self.receiver_min_secret
        )
        self.receivers = {
            path: r for path, r in self.receivers.items() if r.project != namespace
        } | {r.path: r for r in found}
        self._receiver_problems[namespace] = problems
        self._receiver_notes[namespace] = notes
        self.stages_changed(namespace)  # its status says where they listen

    async def _secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        try:
            secret = await self.kube.get(k.SECRETS, namespace, name)
        except k.NotFound:
            return None
        data: dict[str, str] = {}
        for key, value in (secret.get("data") or {}).items():
            try:
                data[str(key)] = base64.b64decode(str(value)).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue
        for key, value in (secret.get("stringData") or {}).items():
            data[str(key)] = str(value)
        return data

    def receiver_details(self, namespace: str) -> list[dict[str, str]]:
        """Kargo's ``WebhookReceiverDetails`` of the project's receivers."""
        out = []
        for receiver in sorted(self.receivers.values(), key=lambda r: r.name):
            if receiver.project != namespace:
                continue
            details = {"name": receiver.name, "path": receiver.path}
            if self.receiver_base_url:
                details["url"] = self.receiver_base_url + receiver.path
            out.append(details)
        return out

    # ---- the ProjectConfigs' status -----------------------------------------------------------

    async def write_statuses(self) -> None:
        """Keep every ProjectConfig's Ready condition saying what is in force (leader only)."""
        for config in self.projects.items():
            self._dirty.add(namespace_of(config) or "default")
        while True:
            self._changed.clear()
            dirty, self._dirty = self._dirty, set()
            for namespace in sorted(dirty):
                try:
                    await self._write_status(namespace)
                except k.KubeError as e:
                    log.warning("writing ProjectConfig %s's status: %s", namespace, e)
            await self._changed.wait()

    async def _write_status(self, namespace: str) -> None:
        obj = self.projects.get(namespace, namespace)
        config = self.project(namespace)
        if obj is None or config is None:
            return
        now: datetime = self.clock.now()
        problems = [*config.problems, *self._receiver_problems.get(namespace, ())]
        if problems:
            condition = Condition("Ready", "False", "Invalid", "; ".join(problems))
        else:
            said = [in_force(config, self.stages.items(namespace))]
            said += self._receiver_notes.get(namespace, ())
            condition = Condition("Ready", "True", "InForce", "; ".join(said))
        status = dict(obj.get("status") or {})
        generation = meta(obj).get("generation")
        conditions = set_condition(status.get("conditions") or [], condition, now, generation)
        receivers = self.receiver_details(namespace)
        new = {**status, "conditions": conditions}
        if generation is not None:
            new["observedGeneration"] = generation
        if receivers or status.get("webhookReceivers"):
            new["webhookReceivers"] = receivers
        if new == status:
            return
        patch: dict[str, Any] = {"conditions": conditions, "observedGeneration": generation}
        if "webhookReceivers" in new:
            patch["webhookReceivers"] = receivers
        written = await self.kube.patch_status(
            k.PROJECT_CONFIGS, namespace, namespace, patch, resource_version=None
        )
        self.projects.observe(written)
        log.info("ProjectConfig %s: %s", namespace, condition.message)
