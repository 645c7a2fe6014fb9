"""Event routing: which Stage a change in the cluster concerns, and when it must be woken.

Informer events (Promotions, Stages, Freight, Argo CD Applications) go to the front ends'
listeners, then enqueue only the Stage they concern: the caches' indexes find the Promotions
waiting on an Application or a pull request, so nothing polls. :class:`Waker` is the one door
to the work queue (only a leader enqueues); :class:`EventRouter` decides what each event wakes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from app.controller.caches import Caches
from app.controller.policies import ProjectRules
from app.controller.workqueue import WorkQueue
from promoter.control import selection
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of, namespace_of
from promoter.resources.stages import available_at, phase_of

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any], dict[str, Any] | None], None]


class Waker:
    """Puts Stages on the work queue while this replica leads (standbys only keep caches)."""

    def __init__(
        self,
        queue: WorkQueue,
        caches: Caches,
        serves: Callable[[str], bool] = lambda namespace: True,
    ) -> None:
        self.queue = queue
        self.caches = caches
        # Only the served projects' Stages are reconciled (app.controller.projects).
        self.serves = serves
        self.leading = False

    def enqueue_stage(
        self, namespace: str, stage: str, *, wake: bool = False, after: float = 0
    ) -> None:
        if self.leading and self.serves(namespace):
            self.queue.add((namespace, stage), wake=wake, after=after)

    def enqueue_namespace(self, namespace: str | None) -> None:
        """Wake every Stage of a namespace (None: all): a ProjectConfig or the ClusterConfig
        changed what is in force for them."""
        for stage in self.caches.stages.items(namespace):
            self.enqueue_stage(namespace_of(stage) or "default", name_of(stage))


class EventRouter:
    """The informers' callbacks: tell the front ends, then wake the Stages concerned."""

    def __init__(self, caches: Caches, waker: Waker, rules: ProjectRules) -> None:
        self.caches = caches
        self.waker = waker
        self.rules = rules
        # Called with (promotion, previous copy) on every Promotion change, on every replica:
        # front ends (check runs, Slack messages) follow Promotions through these. They must
        # not block: enqueue work and return.
        self.listeners: list[Listener] = []
        # The same for Stages (status included: verifications show there), e.g. GitHub's
        # verify check runs.
        self.stage_listeners: list[Listener] = []
        # And for Freight (Slack tells non-auto Stages' channels about new Freight).
        self.freight_listeners: list[Listener] = []
        # Application events seen so far, and the count at each Application's latest one.
        self.app_events = 0
        self._app_changed_at: dict[str, int] = {}
        caches.report_to(
            promotions=self.on_promotion,
            stages=self.on_stage,
            freight=self.on_freight,
            applications=self.on_application,
        )

    def app_changed_since(self, apps: list[str], mark: int) -> bool:
        """Whether one of ``apps`` changed after ``app_events`` was ``mark``."""
        return any(self._app_changed_at.get(app, -1) > mark for app in apps)

    def wake_pr(self, url: str) -> int:
        """Wake the Promotions waiting on a pull request (its merge or close webhook came)."""
        woken = 0
        for promotion in self.caches.promotions.by_index("waiting-pr", url):
            stage = (promotion.get("spec") or {}).get("stage")
            if stage:
                self.waker.enqueue_stage(namespace_of(promotion) or "default", stage, wake=True)
                woken += 1
        return woken

    def on_promotion(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if not self.caches.shard.responsible_for(obj):
            return  # another shard's (a default controller caches every shard's)
        _tell(self.listeners, obj, old, "promotion")
        stage = (obj.get("spec") or {}).get("stage")
        if not stage:
            return
        token = ann.refresh_token(obj)
        wake = token is not None and token != ann.refresh_token(old)
        wake = wake or (ann.abort_request(obj) is not None and ann.abort_request(old or {}) is None)
        self.waker.enqueue_stage(namespace_of(obj) or "default", stage, wake=wake)

    def on_stage(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if not self.caches.shard.responsible_for(obj):
            return
        _tell(self.stage_listeners, obj, old, "stage")
        if kind != "DELETED":
            self.caches.follow_applications_of(obj)
        if old is None or kind == "DELETED" or meta(obj).get("labels") != meta(old).get("labels"):
            # Policies may select Stages by label: what the ProjectConfig says is in force moves.
            self.rules.stages_changed(namespace_of(obj) or "default")
        if old is not None and _current(obj) != _current(old):
            # Stages that follow this one (MatchUpstream) pick what it has now.
            namespace = namespace_of(obj) or "default"
            for follower in self.caches.stages.items(namespace):
                if name_of(obj) in selection.followed(follower):
                    self.waker.enqueue_stage(namespace, name_of(follower))
        # Our own status writes come back as events; only spec, annotation or deletion changes
        # (or a first sight) need a reconcile.
        if old is not None and kind == "MODIFIED":
            if obj.get("spec") == old.get("spec") and meta(obj).get("annotations") == meta(old).get(
                "annotations"
            ):
                return
        self.waker.enqueue_stage(
            namespace_of(obj) or "default",
            name_of(obj),
            wake=ann.refresh_token(obj) != ann.refresh_token(old),
        )

    def on_freight(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind != "DELETED":
            _tell(self.freight_listeners, obj, old, "freight")
        namespace = namespace_of(obj) or "default"
        key = f"{namespace}/{name_of(obj)}"
        # Promotions depend on what the Freight is, not on its status, which every finished
        # Promotion's verification writes: re-checking every queued Promotion of a popular
        # Freight on each of those writes made draining the queues quadratic (bench_scale).
        if kind != "MODIFIED" or old is None or _freight_content(obj) != _freight_content(old):
            for promotion in self.caches.promotions.by_index("freight", key):
                if not phase_of(promotion).terminal:
                    self.on_promotion("MODIFIED", promotion, promotion)
        # New or newly verified Freight may be due for auto-promotion downstream: the Stages
        # whose annotation says so (an index), and where a ProjectConfig policy may turn it on,
        # the project's others.
        if self.rules.may_auto_promote_any(namespace):
            candidates = self.caches.stages.items(namespace)
        else:
            candidates = self.caches.stages.by_index("auto-promote", namespace)
        for stage in candidates:
            if self.rules.auto_promotes(stage) and available_at(stage, obj) is not None:
                self.waker.enqueue_stage(namespace, name_of(stage))
        # Control-flow Stages pass newly available Freight on at once.
        for stage in self.caches.stages.by_index("control-flow", namespace):
            if available_at(stage, obj) is not None:
                self.waker.enqueue_stage(namespace, name_of(stage))

    def on_application(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = f"{namespace_of(obj) or 'argocd'}/{name_of(obj)}"
        # Noted for a Promotion whose step read this Application before its status (naming
        # the Application it now waits on) was written: the index below cannot find it yet.
        self.app_events += 1
        self._app_changed_at[key] = self.app_events
        for promotion in self.caches.promotions.by_index("waiting-app", key):
            stage = (promotion.get("spec") or {}).get("stage")
            if stage:
                self.waker.enqueue_stage(namespace_of(promotion) or "default", stage, wake=True)
        for promotion in self.caches.promotions.by_index("health-app", key):
            stage = (promotion.get("spec") or {}).get("stage")
            if stage:
                self.waker.enqueue_stage(namespace_of(promotion) or "default", stage)


def _tell(
    listeners: list[Listener], obj: dict[str, Any], old: dict[str, Any] | None, what: str
) -> None:
    for listener in listeners:
        try:
            listener(obj, old)
        except Exception:  # a front end's bug must not stop the reconciler
            log.exception("%s listener failed", what)


def _freight_content(freight: Mapping[str, Any]) -> dict[str, Any]:
    """A Freight without its status and metadata: the artifacts it stands for."""
    return {key: value for key, value in freight.items() if key not in ("status", "metadata")}


def _current(stage: Mapping[str, Any] | None) -> Any:
    history = ((stage or {}).get("status") or {}).get("freightHistory") or []
    return history[0].get("items") if history else None
