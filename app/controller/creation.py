"""How Promotions come into being: one way for every creator (the CLI's demo, chat commands,
auto-promotion) through the one builder, announced once with its actor as Kargo's API server
does; and the PromotionTask source the builder reads, over the task informers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.engine.builder import TaskSource, build_promotion
from promoter.errors import InvalidInput
from promoter.resources import annotations as ann
from promoter.resources.model import StageSpec, TaskRef, TaskSpec, Var, parse_stage, parse_task
from promoter.rules.limits import DEFAULT_LIMITS, Limits, promotion_problems


class InformerTasks:
    """TaskSource over the task informers."""

    def __init__(self, tasks: Informer, cluster_tasks: Informer) -> None:
        self.tasks = tasks
        self.cluster_tasks = cluster_tasks

    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        if ref.kind == "ClusterPromotionTask":
            obj = self.cluster_tasks.get(None, ref.name)
        else:
            obj = self.tasks.get(namespace, ref.name)
        return parse_task(obj) if obj is not None else None


async def announce_created(kube: k.Kube, promotion: Mapping[str, Any]) -> None:
    """The PromotionCreated Event (best effort, like every Event)."""
    spec = promotion.get("spec") or {}
    actor = ann.created_by(promotion)
    await kube.emit_event(
        dict(promotion),
        reason="PromotionCreated",
        message=f"Promotion for Freight {spec.get('freight')} into Stage {spec.get('stage')} "
        "is queued" + (f" (created by {actor})" if actor else ""),
    )


async def create_promotion(
    kube: k.Kube,
    stage_obj: Mapping[str, Any],
    freight_obj: Mapping[str, Any],
    tasks: TaskSource,
    *,
    actor: str,
    extra_vars: Iterable[Var] = (),
    name: str | None = None,
    now: datetime | None = None,
    annotations: Mapping[str, str] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Create a Promotion through the one builder (CLI, chat commands, auto-promotion).

    The creator announces it (PromotionCreated) as Kargo's API server does, once, with the
    actor; the reconciler then only emits the outcome. One over the limits (too many steps once
    inflated, too large) is refused here with :class:`InvalidInput`, before anything is written.
    """
    stage: StageSpec = parse_stage(stage_obj)
    promotion = build_promotion(
        stage,
        freight_obj,
        tasks,
        actor=actor,
        extra_vars=tuple(extra_vars),
        name=name,
        now=now,
        limits=limits,
    )
    obj = promotion.to_object()
    obj.pop("status", None)
    if annotations:
        # e.g. an automatic rollback's (ann.rollback): Kargo's flag, which the engine reads
        # back as ctx.meta.promotion.rollback, and the failure it answers.
        obj["metadata"].setdefault("annotations", {}).update(annotations)
    problems = promotion_problems(obj, limits)
    if problems:
        raise InvalidInput("; ".join(problems))
    created = await kube.create(k.PROMOTIONS, obj)
    await announce_created(kube, created)
    return created
