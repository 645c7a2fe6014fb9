"""The port the chat front ends implement against: what they may do to the cluster.

``handlers/`` (GitHub) and ``slack/`` act on the cluster only through :class:`PromotionService`
(the app layer implements it over Kubernetes, ``app.controller.promotions``); they read the
project through its :class:`Snapshot` and carry out a decided promotion with
:func:`promote_decided`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.control.projects import Project
from promoter.control.windows import Schedule
from promoter.errors import InvalidInput
from promoter.resources.model import name_of, namespace_of
from promoter.resources.stages import Approval


@dataclass(frozen=True, slots=True)
class PromotionRef:
    namespace: str
    name: str
    stage: str
    freight: str
    phase: str = "Pending"
    message: str = ""

    @classmethod
    def of(cls, promotion: Mapping[str, Any]) -> PromotionRef:
        """The reference to a Promotion object, its phase and message as its status says."""
        spec = promotion.get("spec") or {}
        status = promotion.get("status") or {}
        return cls(
            namespace_of(promotion) or "",
            name_of(promotion),
            str(spec.get("stage", "")),
            str(spec.get("freight", "")),
            str(status.get("phase", "Pending")),
            str(status.get("message", "")),
        )


@dataclass
class Snapshot:
    """What a command needs to decide: the project's objects, read from the cluster caches."""

    namespace: str
    stages: list[Mapping[str, Any]] = field(default_factory=list)
    freight: list[Mapping[str, Any]] = field(default_factory=list)
    promotions: list[Mapping[str, Any]] = field(default_factory=list)
    # The project's Warehouses (with their discovered artifacts), where the port has them:
    # a Manual Warehouse's Freight is made on request from these.
    warehouses: list[Mapping[str, Any]] = field(default_factory=list)
    # Each Stage's promotion windows (its ProjectConfig's and the ClusterConfig's), by name:
    # a Stage without any is always open.
    schedules: Mapping[str, Schedule] = field(default_factory=dict)
    # The project's ProjectConfig and the cluster's ClusterConfig (deep links), where known.
    project_config: ProjectConfig | None = None
    cluster_config: ClusterConfig | None = None

    def stage(self, name: str) -> Mapping[str, Any] | None:
        return next((s for s in self.stages if name_of(s) == name), None)


class PromotionService(Protocol):
    """What chat front ends may do to the cluster. The app layer implements it over Kubernetes.

    Its methods fail with :mod:`promoter.errors`' kinds only: ``NotFound`` (no such Stage,
    Freight or Promotion), ``Refused`` (not available, or the cluster said no),
    ``TemporaryError`` (still starting, the cluster did not answer: try again).
    """

    async def snapshot(self, namespace: str) -> Snapshot: ...

    async def promote(
        self, namespace: str, stage: str, freight: str, *, actor: str
    ) -> PromotionRef: ...

    async def abort(self, namespace: str, promotion: str, *, actor: str) -> PromotionRef: ...

    async def reverify(self, namespace: str, stage: str, *, actor: str) -> None: ...

    async def approve(self, namespace: str, stage: str, freight: str, *, actor: str) -> Approval:
        """Approve the Freight for the Stage (``status.approvedFor``, recording ``actor``); an
        existing approval stands and is returned as it is."""
        ...

    async def annotate(self, namespace: str, promotion: str, key: str, value: str) -> None:
        """Record front-end state on a Promotion (a check-run id, a Slack message's ts), so any
        replica continues it after a restart."""
        ...

    def is_leader(self) -> bool:
        """Only the leader posts and updates messages, so no replica posts a duplicate."""
        ...

    def wake_pr(self, url: str) -> int:
        """Wake the Promotions waiting on this pull request; returns how many."""
        ...


@runtime_checkable
class FreightAnnotator(Protocol):
    """What a PromotionService may also offer: record front-end state on a Freight (which
    Stages' channels were told it is available), so no replica tells anyone twice."""

    async def annotate_freight(
        self, namespace: str, freight: str, annotations: Mapping[str, str]
    ) -> None: ...


@runtime_checkable
class ProjectDirectory(Protocol):
    """What a PromotionService may also offer: the projects chat can reach, each with the
    places (Slack channels, GitHub repositories) it names (``promoter.chat.projects``)."""

    def projects(self) -> list[Project]: ...


def projects_of(service: PromotionService) -> list[Project]:
    """The reachable projects, or none when the service does not know of projects."""
    return service.projects() if isinstance(service, ProjectDirectory) else []


@runtime_checkable
class FreightCreator(Protocol):
    """What a PromotionService may also offer: create Freight (a Manual Warehouse's, on
    request from chat)."""

    async def create_freight(self, namespace: str, freight: Mapping[str, Any]) -> bool:
        """Create it unless a Freight of that name exists; True when created."""
        ...


@runtime_checkable
class Freezer(Protocol):
    """What a PromotionService may also offer: record or lift a freeze from chat
    (:mod:`promoter.control.freezes`) on a Stage, or on the project when ``stage`` is None."""

    async def freeze(self, namespace: str, stage: str | None, value: str | None) -> None:
        """Write the freeze annotation's ``value`` (None: remove it)."""
        ...


async def set_freeze(
    service: PromotionService, namespace: str, stage: str | None, value: str | None
) -> None:
    """Carry out a decided freeze or unfreeze."""
    if not isinstance(service, Freezer):
        raise InvalidInput("this Longshoreman cannot freeze Stages")
    await service.freeze(namespace, stage, value)


async def promote_decided(
    service: PromotionService,
    namespace: str,
    stage: str,
    freight: str,
    create: Mapping[str, Any] | None,
    *,
    actor: str,
) -> PromotionRef:
    """Carry out a decided promotion: first create the Freight it was decided to make on
    request (the same name whatever replica or retry does it), then promote it."""
    if create is not None:
        if not isinstance(service, FreightCreator):
            raise InvalidInput("this Longshoreman cannot create Freight on request")
        await service.create_freight(namespace, create)
    return await service.promote(namespace, stage, freight, actor=actor)
