"""One read model of a Promotion, built once, that every front end formats.

GitHub check runs (``handlers/checks.py``), the live Slack message (``slack/messages.py``) and
the status pages (``app/ui/views.py``) all show the same step lines and the same Freight label.
Each used to dig into ``spec.steps`` and ``status.stepExecutionMetadata`` itself and work out its
own fallback alias, and they disagreed: a ``task:`` step showed as ``step-N`` where Kargo says
``task-N``, and Slack counted from 0. Here the rule is written once
(:meth:`promoter.model.StepSpec.alias_at`), and renderers only choose how to format plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from promoter.model import StepSpec, TaskRef, name_of, namespace_of, parse_time
from promoter.stages import phase_of

# A Freight name is a 40-hex digest; this much of it tells Freights apart in a one-line title
# (like a git short hash) where the alias is missing.
SHORT_NAME = 12


@dataclass(frozen=True)
class FreightLabel:
    """How a Freight is named to people: alias first, the name where precision matters."""

    name: str
    alias: str = ""

    @property
    def short(self) -> str:
        """For titles and one-liners: the alias, else the start of the name."""
        return self.alias or self.name[:SHORT_NAME] or "?"

    @property
    def full(self) -> str:
        """For pages and messages: ``alias (name)``, else the name."""
        return f"{self.alias} ({self.name})" if self.alias else self.name


def freight_label(
    ref: str,
    freights: Iterable[Mapping[str, Any]] = (),
    fallback: Mapping[str, Any] | None = None,
) -> FreightLabel:
    """The label of the Freight ``ref`` (a name or an alias) among ``freights``, else of
    ``fallback`` (a Promotion's ``status.freight`` outlives a deleted Freight), else the bare
    reference."""
    found = next((f for f in freights if name_of(f) == ref or f.get("alias") == ref), None)
    freight = found if found is not None else fallback
    if freight:
        return FreightLabel(name_of(freight) or ref, str(freight.get("alias") or ""))
    return FreightLabel(ref)


@dataclass(frozen=True)
class StepLine:
    """One step of a Promotion as run so far."""

    index: int  # 1-based, as people count
    alias: str
    uses: str  # "" for a ``task:`` step
    task: str  # the PromotionTask's name, "" for a ``uses:`` step
    status: str  # "" while not started
    message: str
    started_at: datetime | None
    finished_at: datetime | None
    errors: int

    @property
    def kind(self) -> str:
        """What the step does: its ``uses``, or the task it expands."""
        return self.uses or self.task


@dataclass(frozen=True)
class PromotionView:
    """What any front end may show of one Promotion, as plain data."""

    namespace: str
    name: str
    stage: str
    freight: str  # the Freight's name, as in ``spec.freight``
    phase: str
    message: str
    current_step: int
    started_at: datetime | None
    finished_at: datetime | None
    steps: tuple[StepLine, ...]

    @property
    def done(self) -> int:
        return sum(1 for s in self.steps if s.status in ("Succeeded", "Skipped"))


def _step_spec(step: Mapping[str, Any]) -> StepSpec:
    """Just enough of a step to name it (not :func:`promoter.model.parse_step`, which rejects
    what a stored Promotion may still hold and a view must show anyway)."""
    task = step.get("task")
    return StepSpec(
        alias=str(step.get("as") or "") or None,
        task=TaskRef(str(task.get("name") or "")) if isinstance(task, Mapping) and task else None,
    )


def step_lines(promotion: Mapping[str, Any]) -> tuple[StepLine, ...]:
    spec_steps = (promotion.get("spec") or {}).get("steps") or []
    executions = (promotion.get("status") or {}).get("stepExecutionMetadata") or []
    out = []
    for i, raw in enumerate(spec_steps):
        step = raw if isinstance(raw, Mapping) else {}
        execution = (
            executions[i] if i < len(executions) and isinstance(executions[i], Mapping) else {}
        )
        task = step.get("task")
        # The alias the engine recorded wins: a Promotion keeps the names it ran with.
        alias = str(execution.get("alias") or _step_spec(step).alias_at(i))
        out.append(
            StepLine(
                index=i + 1,
                alias=alias,
                uses=str(step.get("uses") or ""),
                task=str(task.get("name") or "") if isinstance(task, Mapping) else "",
                status=str(execution.get("status") or ""),
                message=str(execution.get("message") or ""),
                started_at=parse_time(execution.get("startedAt")),
                finished_at=parse_time(execution.get("finishedAt")),
                errors=int(execution.get("errorCount") or 0),
            )
        )
    return tuple(out)


def promotion_view(promotion: Mapping[str, Any]) -> PromotionView:
    spec = promotion.get("spec") or {}
    status = promotion.get("status") or {}
    return PromotionView(
        namespace=namespace_of(promotion) or "default",
        name=name_of(promotion),
        stage=str(spec.get("stage") or ""),
        freight=str(spec.get("freight") or ""),
        phase=phase_of(promotion).value,
        message=str(status.get("message") or ""),
        current_step=int(status.get("currentStep") or 0),
        started_at=parse_time(status.get("startedAt")),
        finished_at=parse_time(status.get("finishedAt")),
        steps=step_lines(promotion),
    )
