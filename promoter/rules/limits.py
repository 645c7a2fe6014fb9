"""How much work one Promotion may ask for, and whose steps it may run: pure rules, object in,
problems out.

Every input is bounded so that no project can stall the server for the others: a Promotion of
10,000 steps once held the event loop for over a minute while its template was inflated and its
status rebuilt, and its status then grew past what the API server stores (413), so the write
was retried forever and the Stage's queue never moved again. The limits:

- **steps per Promotion**, counted after PromotionTasks are inflated (a task step counts as the
  steps it brings); inflation stops as soon as the count passes the limit, so refusing a huge
  template costs no more than the limit's worth of work;
- **object size**: a Promotion (or any object whose JSON we are about to store) larger than the
  limit is refused, well under what etcd keeps (1.5 MiB) and what the API server accepts in one
  request (3 MiB).

**Steps come from the Stage.** As in Kargo (its Promotion webhook "unconditionally
(re-)populate[s] the Promotion's steps ... according to the Stage's PromotionTemplate"), a
Promotion runs its Stage's template, inflated. One written with steps of its own (with kubectl)
would otherwise run them with the project's credentials, which the Stage's owners never
reviewed; it is refused unless the operator allows it (``allow_own_steps``, for installations
where everyone who may create a Promotion may also edit the Stage anyway).

The same functions serve every place that decides: the controller before it runs a Promotion,
the builder while it inflates, the creation path of chat and auto-promotion, and admission.
Each problem names the field and, where an operator can change it, the setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "object_size_problems",
    "own_steps_problem",
    "promotion_problems",
    "size_of",
    "too_many_steps",
]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one object may ask for (``app.settings``: ``LONGSHOREMAN_MAX_PROMOTION_STEPS``,
    ``LONGSHOREMAN_MAX_OBJECT_BYTES``, ``LONGSHOREMAN_ALLOW_PROMOTION_STEPS``)."""

    max_steps: int = 500
    max_object_bytes: int = 768 * 1024
    allow_own_steps: bool = False


DEFAULT_LIMITS = Limits()


def too_many_steps(count: int, limits: Limits, field: str = "spec.steps") -> str | None:
    """The problem with ``count`` steps (after inflation), or None."""
    if count <= limits.max_steps:
        return None
    return (
        f"{field}: more than {limits.max_steps} steps (LONGSHOREMAN_MAX_PROMOTION_STEPS); "
        "split the work across Stages or PromotionTasks run by different Stages"
    )


def size_of(obj: Any) -> int:
    """Bytes of ``obj`` as compact JSON, as the API server stores it (near enough)."""
    return len(json.dumps(obj, separators=(",", ":"), default=str).encode())


def object_size_problems(obj: Mapping[str, Any], limits: Limits, what: str = "") -> list[str]:
    """The object, or its status, over the size limit."""
    size = size_of(obj)
    if size <= limits.max_object_bytes:
        return []
    status = obj.get("status")
    field = "status" if status and size_of(status) * 2 > size else "the object"
    name = f"{what}: " if what else ""
    return [
        f"{name}{field}: {size} bytes of JSON, more than the {limits.max_object_bytes} allowed "
        "(LONGSHOREMAN_MAX_OBJECT_BYTES)"
    ]


def promotion_problems(obj: Mapping[str, Any], limits: Limits) -> list[str]:
    """What is wrong with a Promotion object as written, before anything is inflated: the
    steps it brings (each task step counted once; inflation checks the rest) and its size."""
    problems: list[str] = []
    spec = obj.get("spec")
    steps = spec.get("steps") if isinstance(spec, Mapping) else None
    if isinstance(steps, Sequence) and not isinstance(steps, str):
        problem = too_many_steps(len(steps), limits)
        if problem:
            problems.append(problem)
    problems += object_size_problems(obj, limits)
    return problems


def own_steps_problem(
    steps: Sequence[Any],
    template: Sequence[Any],
    stage: str,
    limits: Limits,
    vars_: Sequence[Any] = (),
    stage_vars: Sequence[Any] = (),
) -> str | None:
    """Why a Promotion may not run ``steps`` (its own, inflated) with ``vars_`` when its
    Stage's template inflates to ``template`` and its vars are ``stage_vars``, or None. Equal
    ones are the Stage's (every Promotion the server creates holds its Stage's template,
    inflated, and its vars, as Kargo's webhook sets them): vars of its own would change what
    the Stage's steps do as surely as steps of its own."""
    if limits.allow_own_steps:
        return None
    if list(steps) == list(template) and list(vars_) != list(stage_vars):
        return (
            f"spec.vars: a Promotion runs with Stage {stage!r}'s vars (spec.vars, then "
            "spec.promotionTemplate.spec.vars); these differ from them (written with vars of its "
            "own, or the Stage changed since it was created). Promote again, or have the "
            "operator allow Promotions to bring their own steps and vars "
            "(LONGSHOREMAN_ALLOW_PROMOTION_STEPS)"
        )
    if list(steps) == list(template):
        return None
    return (
        f"spec.steps: a Promotion runs the steps of Stage {stage!r}'s promotion template; these "
        "differ from it (written with steps of their own, or the template changed since it was "
        "created). Promote again, or have the operator allow Promotions to bring their own "
        "steps (LONGSHOREMAN_ALLOW_PROMOTION_STEPS)"
    )
