"""The one builder that turns a Stage and a Freight into a Promotion's steps and vars.

Every path that creates or starts Promotions (the local runner, chat commands, auto-promotion, a
Promotion written with kubectl holding only ``stage`` and ``freight``) goes through
:func:`build_promotion` or :func:`inflate`, so task inflation, alias rules and var precedence are
decided in exactly one place. Mirrors Kargo's PromotionBuilder (``InflateSteps`` and
``promotionTaskVarsToStepVars``): a task's defaults yield to Promotion-level vars, required task
vars must come from the referencing step or the Promotion, and an inflated step's vars are
``task defaults < referencing step's vars < the task step's own vars``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from promoter.clock import SYSTEM
from promoter.errors import InvalidInput
from promoter.expressions import ExpressionSyntaxError, check_syntax
from promoter.resources.model import (
    RESERVED_ALIAS,
    TASK_SEPARATOR,
    Promotion,
    StageSpec,
    StepSpec,
    TaskRef,
    TaskSpec,
    Var,
    name_of,
)
from promoter.rules.limits import DEFAULT_LIMITS, Limits, too_many_steps


class TaskSource(Protocol):
    """Where (Cluster)PromotionTasks are looked up: manifests on disk or the cluster."""

    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None: ...


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def new_ulid(now_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A lower-case ULID as Kargo uses in Promotion names: sortable by creation time."""
    ms = int(SYSTEM.now().timestamp() * 1000) if now_ms is None else now_ms
    rand = os.urandom(10) if randomness is None else randomness
    value = (ms << 80) | int.from_bytes(rand, "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def promotion_name(stage: str, freight_name: str, ulid: str | None = None) -> str:
    """``<stage>.<ulid>.<first 7 of freight>``, Kargo's naming scheme, within 253 characters."""
    name = f"{stage}.{ulid or new_ulid()}.{freight_name[:7]}"
    return name[:253]


def _check_alias(alias: str, where: str) -> None:
    if RESERVED_ALIAS.match(alias):
        raise InvalidInput(
            f"alias {alias!r} is reserved (Kargo names unnamed steps step-N and task-N); choose "
            "another `as`",
            field=where,
        )
    if TASK_SEPARATOR in alias:
        raise InvalidInput(f"alias {alias!r} must not contain {TASK_SEPARATOR!r}", field=where)


def _task_vars_to_step_vars(
    task: TaskSpec, promo_vars: Sequence[Var], step_vars: Sequence[Var], where: str
) -> list[Var]:
    set_on_promotion = {v.name for v in promo_vars if v.value not in (None, "")}
    set_on_step = {v.name for v in step_vars if v.value not in (None, "")}
    out: list[Var] = []
    for v in task.vars:
        if v.name in set_on_promotion:
            continue
        if v.value not in (None, ""):
            out.append(v)
            continue
        if v.name not in set_on_step:
            raise InvalidInput(
                f"{task.kind} {task.name!r} requires var {v.name!r}: set it in the step's `vars` "
                "or as a Promotion var",
                field=where,
            )
    out.extend(step_vars)
    return out


def inflate(
    steps: Sequence[StepSpec],
    *,
    namespace: str,
    promo_vars: Sequence[Var],
    tasks: TaskSource,
    where: str = "steps",
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[StepSpec, ...]:
    """Replace every ``task`` step by the task's steps, aliased ``<taskAlias>::<stepAlias>``.

    Stops at the first step past ``limits.max_steps``: a huge template costs no more than the
    limit's worth of work before it is refused.
    """
    out: list[StepSpec] = []
    seen: dict[str, str] = {}

    def add(step: StepSpec, step_where: str) -> None:
        assert step.alias is not None
        if len(out) >= limits.max_steps:
            raise InvalidInput(str(too_many_steps(len(out) + 1, limits, where)))
        if step.alias in seen:
            raise InvalidInput(
                f"duplicate alias {step.alias!r} (also used by {seen[step.alias]})",
                field=step_where,
            )
        seen[step.alias] = step_where
        out.append(step)

    for i, step in enumerate(steps):
        step_where = f"{where}[{i}]"
        if step.alias:
            _check_alias(step.alias, f"{step_where}.as")
        alias = step.alias_at(i)
        if step.task is None:
            add(replace(step, alias=alias), step_where)
            continue
        if alias in seen:
            raise InvalidInput(
                f"duplicate alias {alias!r} (also used by {seen[alias]})", field=step_where
            )
        # The task's own alias names its outputs (outputs.<taskAlias>), so it is taken too.
        seen[alias] = step_where
        task = tasks.get_task(step.task, namespace)
        if task is None:
            scope = (
                "cluster"
                if step.task.kind == "ClusterPromotionTask"
                else f"namespace {namespace!r}"
            )
            raise InvalidInput(
                f"{step.task.kind} {step.task.name!r} not found in {scope}",
                field=f"{step_where}.task",
            )
        if step.config:
            raise InvalidInput(
                "a task step takes `vars`, not `config`", field=f"{step_where}.config"
            )
        task_vars = _task_vars_to_step_vars(task, promo_vars, step.vars, f"{step_where}.vars")
        for j, task_step in enumerate(task.steps):
            task_where = f"{task.kind} {task.name}: spec.steps[{j}]"
            if task_step.task is not None:
                raise InvalidInput("tasks cannot reference other tasks", field=f"{task_where}.task")
            if task_step.alias:
                _check_alias(task_step.alias, f"{task_where}.as")
            inner = task_step.alias_at(j)
            add(
                replace(
                    task_step,
                    alias=f"{alias}{TASK_SEPARATOR}{inner}",
                    vars=(*task_vars, *task_step.vars),
                ),
                task_where,
            )
    return tuple(out)


def check_expressions(
    steps: Sequence[StepSpec], promo_vars: Sequence[Var], where: str = "steps"
) -> None:
    """Compile every expression up front, so a syntax error is an input error, not a failed step."""
    try:
        for i, v in enumerate(promo_vars):
            check_syntax(v.value, where=f"vars[{i}] ({v.name})")
        for i, step in enumerate(steps):
            label = f"{where}[{i}] ({step.alias})" if step.alias else f"{where}[{i}]"
            if step.if_ is not None:
                check_syntax(step.if_, where=f"{label}.if")
            for v in step.vars:
                check_syntax(v.value, where=f"{label}.vars.{v.name}")
            if step.config is not None:
                check_syntax(step.config, where=f"{label}.config")
    except ExpressionSyntaxError as e:
        raise InvalidInput(str(e)) from None


def promotion_vars(stage: StageSpec, extra: Sequence[Var] = ()) -> tuple[Var, ...]:
    """Promotion-level vars in evaluation order: Stage vars, template vars, then the caller's."""
    return (*stage.vars, *stage.template_vars, *extra)


def build_promotion(
    stage: StageSpec,
    freight: Mapping[str, Any],
    tasks: TaskSource,
    *,
    actor: str,
    extra_vars: Sequence[Var] = (),
    name: str | None = None,
    now: datetime | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Promotion:
    """A new Pending Promotion of ``freight`` into ``stage`` with its steps inflated; its
    generated name's ULID carries ``now`` (the system clock's time when not given)."""
    if not stage.steps:
        raise InvalidInput(
            f"Stage {stage.name!r} is a control-flow Stage (no spec.promotionTemplate.spec.steps): "
            "Freight is not promoted to it; it passes Freight on to the Stages after it as soon "
            "as it is available"
        )
    freight_name = name_of(freight)
    vars_ = promotion_vars(stage, extra_vars)
    steps = inflate(
        stage.steps,
        namespace=stage.namespace,
        promo_vars=vars_,
        tasks=tasks,
        where=f"Stage {stage.name}: spec.promotionTemplate.spec.steps",
        limits=limits,
    )
    check_expressions(steps, vars_)
    return Promotion(
        name=name
        or promotion_name(
            stage.name,
            freight_name,
            new_ulid(int(now.timestamp() * 1000)) if now is not None else None,
        ),
        namespace=stage.namespace,
        stage=stage.name,
        freight=freight_name,
        steps=steps,
        vars=tuple(vars_),
        actor=actor,
    )


def ensure_inflated(
    promotion: Promotion, stage: StageSpec, tasks: TaskSource, limits: Limits = DEFAULT_LIMITS
) -> Promotion:
    """Fill in a Promotion created with only ``stage`` and ``freight`` (e.g. with kubectl).

    A Promotion without steps takes the Stage's template and the Stage's vars, replacing any
    it was written with, as Kargo's webhook does (unless the operator allows Promotions their
    own: ``LONGSHOREMAN_ALLOW_PROMOTION_STEPS``, then they come last and win); one whose steps
    still reference tasks has them inflated. Already inflated Promotions come back unchanged.
    """
    if not promotion.steps:
        vars_ = promotion_vars(stage, promotion.vars if limits.allow_own_steps else ())
        steps = inflate(
            stage.steps,
            namespace=promotion.namespace,
            promo_vars=vars_,
            tasks=tasks,
            where=f"Stage {stage.name}: spec.promotionTemplate.spec.steps",
            limits=limits,
        )
        if not steps:
            raise InvalidInput(f"Stage {stage.name!r} has no promotion steps")
        check_expressions(steps, vars_)
        return replace(promotion, steps=steps, vars=tuple(vars_))
    if any(s.task is not None for s in promotion.steps) or any(
        s.alias is None for s in promotion.steps
    ):
        steps = inflate(
            promotion.steps,
            namespace=promotion.namespace,
            promo_vars=promotion.vars,
            tasks=tasks,
            where="spec.steps",
            limits=limits,
        )
        check_expressions(steps, promotion.vars)
        return replace(promotion, steps=steps)
    return promotion


def template_steps(
    promotion: Promotion, stage: StageSpec, tasks: TaskSource, limits: Limits = DEFAULT_LIMITS
) -> tuple[StepSpec, ...]:
    """The steps the Stage's template inflates to for this Promotion (its vars as stored):
    what every Promotion the server creates holds, so anything else was brought by its
    creator (see :func:`promoter.rules.limits.own_steps_problem`)."""
    return inflate(
        stage.steps,
        namespace=promotion.namespace,
        promo_vars=promotion.vars,
        tasks=tasks,
        where=f"Stage {stage.name}: spec.promotionTemplate.spec.steps",
        limits=limits,
    )
