"""One read model of a Promotion, built once, that every front end formats.

GitHub check runs (``handlers/checks.py``), the live Slack message (``slack/messages.py``) and
the status pages (``app/ui/views.py``) all show the same step lines and the same Freight label.
Each used to dig into ``spec.steps`` and ``status.stepExecutionMetadata`` itself and work out its
own fallback alias, and they disagreed: a ``task:`` step showed as ``step-N`` where Kargo says
``task-N``, and Slack counted from 0. Here the rule is written once
(:meth:`promoter.resources.model.StepSpec.alias_at`), and renderers only choose how to format plain
data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from promoter.control.links import ResolvedLink, freight_links, stage_links
from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.resources.annotations import GITHUB_DEPLOYMENT, created_by, is_rollback, read_json
from promoter.resources.freight_refs import FreightList, freight_in
from promoter.resources.model import StepSpec, TaskRef, name_of, namespace_of, parse_time
from promoter.resources.stages import (
    Approval,
    approval_of,
    approvals_of,
    downstream_stages,
    has_verification,
    phase_of,
)
from promoter.urls import without_credentials

# A Freight name is a 40-hex digest; this much of it tells Freights apart in a one-line title
# (like a git short hash) where the alias is missing.
SHORT_NAME = 12


@dataclass(frozen=True, slots=True)
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
    found = freight_in(ref, freights)
    freight = found if found is not None else fallback
    if freight:
        return FreightLabel(name_of(freight) or ref, str(freight.get("alias") or ""))
    return FreightLabel(ref)


@dataclass(frozen=True, slots=True)
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


# ---- verification ---------------------------------------------------------------------------

VerificationState = Literal["none", "superseded", "pending", "running", "passed", "failed"]


@dataclass(frozen=True, slots=True)
class Verification:
    """Where the verification that follows a succeeded Promotion stands, read from its Stage."""

    state: VerificationState
    message: str = ""
    since: str = ""

    @property
    def final(self) -> bool:
        return self.state in ("none", "superseded", "passed", "failed")


def _condition(stage: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (stage.get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c
    return None


_ENTRY_STATE: dict[str, VerificationState] = {
    "Successful": "passed",
    "Failed": "failed",
    "Error": "failed",
    "Inconclusive": "failed",
    "Aborted": "failed",
    "Running": "running",
    "Pending": "pending",
    "Requested": "pending",
}


def verification_of(
    promotion: Mapping[str, Any], stage: Mapping[str, Any] | None
) -> Verification | None:
    """The verification that follows a succeeded Promotion; None before it succeeds.

    Read from the Stage: the newest ``freightHistory[0].verificationHistory`` entry naming this
    Promotion, else (a Stage written by something else) its ``Verified`` condition.
    """
    if phase_of(promotion).value != "Succeeded":
        return None
    if stage is None:
        return Verification("none")
    name = name_of(promotion)
    stage_status = stage.get("status") or {}
    history = stage_status.get("freightHistory") or [{}]
    entries = (history[0] if isinstance(history[0], Mapping) else {}).get("verificationHistory")
    for entry in entries or ():
        if not isinstance(entry, Mapping) or entry.get("promotion") != name:
            continue
        phase = str(entry.get("phase") or "")
        state = _ENTRY_STATE.get(phase, "running")
        if state == "passed" and not entry.get("analysisRun"):
            # Verified on promotion because the Stage configures no verification.
            return Verification("none", str(entry.get("message") or ""))
        message = str(entry.get("message") or "")
        if state == "failed" and phase != "Failed":
            message = f"{phase}: {message}".rstrip(": ")
        return Verification(state, message, f"{entry.get('id', '')}/{phase}")

    status = promotion.get("status") or {}
    last = stage_status.get("lastPromotion") or {}
    if last.get("name") != name:
        theirs = parse_time(last.get("finishedAt"))
        ours = parse_time(status.get("finishedAt"))
        if theirs and ours and theirs > ours:
            return Verification("superseded")
        # The Stage's status has not caught up with this Promotion yet.
        return Verification("pending", "waiting for the Stage to record this Promotion")
    condition = _condition(stage, "Verified")
    if condition is None:
        return Verification("none")
    since = str(condition.get("lastTransitionTime") or "")
    message = str(condition.get("message") or "")
    started = parse_time(status.get("startedAt"))
    moved = parse_time(since)
    if started and moved and moved < started:
        # Still the previous Freight's result: verification of this one has not begun.
        return Verification("pending", "verification has not started yet", since)
    value = condition.get("status")
    if value == "True":
        return Verification("passed", message, since)
    if value == "False":
        return Verification("failed", message or str(condition.get("reason") or ""), since)
    reason = str(condition.get("reason") or "")
    return Verification("running" if reason == "Verifying" else "pending", message, since)


def verified_in(
    stage_name: str, freight: Mapping[str, Any] | None, verification: Verification | None
) -> bool:
    if verification is None or verification.state in ("superseded", "failed"):
        return False
    if verification.state in ("passed", "none"):
        return True
    return stage_name in (((freight or {}).get("status") or {}).get("verifiedIn") or {})


TERMINAL = ("Succeeded", "Failed", "Errored", "Aborted")


# ---- the GitHub environment -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnvironmentLink:
    """Where a Promotion's GitHub Deployments are (``longshoreman.dev/github-deployment``)."""

    name: str  # the GitHub environment
    pages: tuple[tuple[str, str], ...] = ()  # (owner/repo, its Deployments page on GitHub)
    url: str = ""  # where the environment is reached (the Deployments' environment_url)
    warning: str = ""  # why some Deployments could not be written


def environment_link(promotion: Mapping[str, Any] | None) -> EnvironmentLink | None:
    """The Promotion's GitHub environment, as the GitHub front end recorded it; None when it
    has none (the Stage does not opt in, or nothing was written yet)."""
    record = read_json(promotion or {}, GITHUB_DEPLOYMENT)
    name = record.get("environment")
    if not isinstance(name, str) or not name:
        return None
    pages = tuple(
        (str(link.get("repo") or ""), str(link.get("url") or ""))
        for link in record.get("links") or ()
        if isinstance(link, Mapping) and link.get("url")
    )
    return EnvironmentLink(
        name=name,
        pages=pages,
        url=str(record.get("environmentURL") or ""),
        warning=str(record.get("warning") or ""),
    )


@dataclass(frozen=True, slots=True)
class PromotionView:
    """What any front end may show of one Promotion, as plain data: check runs and replies
    (handlers/checks.py), the live Slack message (slack/messages.py) and the status pages format
    this and read nothing else of the Promotion."""

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
    label: FreightLabel = FreightLabel("")
    actor: str = ""  # who asked for it (``github:alice``, ``slack:T1/U1``), "" when unknown
    downstream: tuple[str, ...] = ()  # Stages that take this Freight from this one
    verifiable: bool = False  # the Stage configures verification
    link: str | None = None  # the Promotion's status page, when the server has a public URL
    verification: Verification | None = None  # None until it succeeds
    verified_here: bool = False  # its Freight counts as verified in this Stage
    environment: EnvironmentLink | None = None  # its GitHub Deployments, when it has some
    approved_for: tuple[str, ...] = ()  # downstream Stages its Freight is approved for
    # Every approval its Freight has (for any Stage), with who gave it: shown where the Freight
    # is reported (the check runs on its commits), so an approval given anywhere is seen there.
    approvals: tuple[Approval, ...] = ()
    # Put back the Stage's stable Freight after a failure (kargo.akuity.io/rollback).
    rollback: bool = False
    # The Stage's and the Freight's deep links (ProjectConfig / ClusterConfig), resolved.
    links: tuple[ResolvedLink, ...] = ()

    @property
    def next_stages(self) -> tuple[str, ...]:
        """Where this Freight may go next from here: the downstream Stages, once it is verified
        in this one (before that, a "Promote to NEXT" could only be refused)."""
        return self.downstream if self.verified_here else ()

    @property
    def approve_stages(self) -> tuple[str, ...]:
        """Where a person may let this Freight go next without its verification here (an
        "Approve for NEXT"): the downstream Stages, while it is not verified in this one and
        not approved for them yet."""
        if self.verified_here:
            return ()
        return tuple(s for s in self.downstream if s not in self.approved_for)

    @property
    def done(self) -> int:
        return sum(1 for s in self.steps if s.status in ("Succeeded", "Skipped"))

    @property
    def total(self) -> int:
        return len(self.steps)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    @property
    def active(self) -> bool:
        """Still queued or running: it may be aborted."""
        return not self.terminal

    @property
    def running_step(self) -> StepLine | None:
        """The step a Running Promotion is at (the engine's ``currentStep``)."""
        if self.phase != "Running" or not self.steps:
            return None
        return self.steps[min(self.current_step, len(self.steps) - 1)]

    @property
    def seconds(self) -> int | None:
        """How long it ran, once finished."""
        if self.started_at is None or self.finished_at is None:
            return None
        return int((self.finished_at - self.started_at).total_seconds())


def _step_spec(step: Mapping[str, Any]) -> StepSpec:
    """Just enough of a step to name it (not :func:`promoter.resources.model.parse_step`, which
    rejects
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
                message=without_credentials(str(execution.get("message") or "")),
                started_at=parse_time(execution.get("startedAt")),
                finished_at=parse_time(execution.get("finishedAt")),
                errors=int(execution.get("errorCount") or 0),
            )
        )
    return tuple(out)


def promotion_view(
    promotion: Mapping[str, Any],
    *,
    stage: Mapping[str, Any] | None = None,
    stages: Sequence[Mapping[str, Any]] = (),
    freights: Iterable[Mapping[str, Any]] = (),
    link: str | None = None,
    project: ProjectConfig | None = None,
    cluster: ClusterConfig | None = None,
    freight_link: str | None = None,
) -> PromotionView:
    """The view of ``promotion``, built once from the objects a front end has at hand: its
    ``stage`` (verification), the project's ``stages`` (what follows this one) and ``freights``
    (the alias; a Promotion's ``status.freight`` stands in for a deleted Freight)."""
    spec = promotion.get("spec") or {}
    status = promotion.get("status") or {}
    stage_name = str(spec.get("stage") or "")
    ref = str(spec.get("freight") or "")
    found = freight_in(ref, freights)
    recorded = status.get("freight") if isinstance(status.get("freight"), Mapping) else None
    freight = found if found is not None else recorded
    origin = (freight or {}).get("origin")
    verification = verification_of(promotion, stage)
    downstream = tuple(
        downstream_stages(stage_name, stages, origin if isinstance(origin, Mapping) else None)
    )
    label = freight_label(ref, (), fallback=freight)
    # The Freight's status page first, when the server has a public URL.
    links: list[ResolvedLink] = (
        [ResolvedLink(f"Freight {label.short}", freight_link)] if freight_link else []
    )
    if project is not None or cluster is not None:
        # A link that does not render is left out (its error is the ProjectConfig owner's to
        # see on the pages, not every chat message's).
        if stage is not None:
            links += stage_links(stage, project, cluster)[0]
        if freight is not None:
            links += freight_links(freight, project, cluster)[0]
    return PromotionView(
        namespace=namespace_of(promotion) or "default",
        name=name_of(promotion),
        stage=stage_name,
        freight=ref,
        phase=phase_of(promotion).value,
        message=without_credentials(str(status.get("message") or "")),
        current_step=int(status.get("currentStep") or 0),
        started_at=parse_time(status.get("startedAt")),
        finished_at=parse_time(status.get("finishedAt")),
        steps=step_lines(promotion),
        label=label,
        actor=created_by(promotion) or "",
        downstream=downstream,
        verifiable=has_verification(stage),
        link=link,
        verification=verification,
        verified_here=verified_in(stage_name, freight, verification),
        environment=environment_link(promotion),
        approved_for=tuple(s for s in downstream if approval_of(freight, s) is not None),
        approvals=approvals_of(freight),
        rollback=is_rollback(promotion),
        links=tuple(links),
    )


# ---- Stages -----------------------------------------------------------------------------------

# Kargo's words for a Stage's health (status.health.status); the Healthy condition says True or
# False, which people should never have to translate.
_HEALTH_WORDS = {"True": "Healthy", "False": "Unhealthy", "Unknown": "Unknown"}


@dataclass(frozen=True, slots=True)
class StageView:
    """What any front end may show of one Stage (``/status`` on GitHub and Slack, the pages)."""

    stage: str
    freight: str  # the current Freight by alias (", "-joined with several origins); "-": none
    running: str  # the running Promotion's name, "-" when none
    queued: int
    health: str  # Healthy | Progressing | Unhealthy | Unknown (Kargo's words)
    verification: str  # the Verified condition's reason (Verified, Verifying...), "-" when none
    labels: tuple[FreightLabel, ...] = ()
    downstream: tuple[str, ...] = ()
    environment: EnvironmentLink | None = None  # the GitHub environment of its last Promotion
    # "frozen until Mon 09:00 Europe/Berlin (window `weekend-freeze`)"; "" while open.
    window: str = ""


def health_word(status: Mapping[str, Any]) -> str:
    """The Stage's health in Kargo's words: ``status.health.status`` when recorded, else what
    the ``Healthy`` condition implies."""
    recorded = (status.get("health") or {}).get("status") if isinstance(status, Mapping) else None
    if recorded:
        return str(recorded)
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "Healthy":
            if c.get("reason") == "Progressing":
                return "Progressing"
            return _HEALTH_WORDS.get(str(c.get("status")), "Unknown")
    return "Unknown"


def stage_views(
    stages: Iterable[Mapping[str, Any]],
    promotions: Iterable[Mapping[str, Any]],
    freights: Iterable[Mapping[str, Any]] = (),
    all_stages: Sequence[Mapping[str, Any]] = (),
    windows: Mapping[str, str] | None = None,
) -> list[StageView]:
    """One view per Stage, by name. The Stage's history names its Freight but (as in Kargo)
    carries no alias, so the alias is looked up in ``freights``; ``all_stages`` (the project's)
    gives each its downstream Stages; ``windows`` says which are frozen, and until when."""
    windows = windows or {}
    freights = FreightList.of(freights)  # indexed once for every Stage's lookups
    by_stage: dict[tuple[str | None, str], list[Mapping[str, Any]]] = {}
    for p in promotions:
        by_stage.setdefault((namespace_of(p), (p.get("spec") or {}).get("stage", "")), []).append(p)
    rows = []
    for stage in sorted(stages, key=name_of):
        status = stage.get("status") or {}
        history = status.get("freightHistory") or []
        labels: list[FreightLabel] = []
        if history:
            items = history[0].get("items") or {}
            for v in items.values():
                name = str(v.get("name") or "")
                label = freight_label(name, freights, fallback=v if v.get("alias") else None)
                labels.append(label)
        conditions = {c.get("type"): c for c in status.get("conditions") or ()}
        mine = by_stage.get((namespace_of(stage), name_of(stage)), [])
        running = [name_of(p) for p in mine if phase_of(p).value == "Running"]
        queued = [p for p in mine if phase_of(p).value == "Pending"]
        last = str((status.get("lastPromotion") or {}).get("name") or "")
        last_promotion = next((p for p in mine if name_of(p) == last), None) if last else None
        rows.append(
            StageView(
                stage=name_of(stage),
                freight=", ".join(label.alias or label.name for label in labels) or "-",
                running=running[0] if running else "-",
                queued=len(queued),
                health=health_word(status),
                verification=str((conditions.get("Verified") or {}).get("reason", "-")),
                labels=tuple(labels),
                downstream=tuple(downstream_stages(name_of(stage), all_stages)),
                environment=environment_link(last_promotion),
                window=windows.get(name_of(stage), ""),
            )
        )
    return rows
