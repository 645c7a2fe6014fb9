"""The one planner of chat commands: a command plus the facts a front end gathered -> a decision.

Every way a person acts on Longshoreman goes through :func:`plan`: a GitHub comment, a GitHub
check-run button (Abort, Re-verify, Promote to NEXT, Approve for NEXT) or "Re-run", a
``/promote`` or ``/approve`` slash command in Slack and Slack's buttons (Abort, Re-verify,
Promote to NEXT, Confirm, Cancel). A front end

1. parses (:func:`promoter.chat.grammar.parse_comment`, :func:`~promoter.chat.grammar.parse_slash`)
   or maps its button to a :class:`~promoter.chat.grammar.Command`;
2. gathers :class:`Facts`: the project's :class:`~promoter.chat.port.Snapshot`, the actor's
   standing as a pure function of a Stage (the I/O of permissions, teams and user groups is done
   before, for the Stages :func:`stages_to_authorize` names), the time, and on GitHub the Freight
   of the pull request's merge commit;
3. calls :func:`plan`, carries out the decision through the
   :class:`~promoter.chat.port.PromotionService` port, and renders it in its own words.

So GitHub and Slack cannot disagree on a rule: which Freight a name means
(:mod:`promoter.chat.freight_refs`), whether it is available to the Stage, what ``/abort``
aborts, who may act (the front ends say only how they identify a person), who may ``/freeze``
(:func:`freeze_deciders`), when to ask for a Confirm. Those rules live here, below the
planner. Nothing here does I/O or reads the clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from promoter.chat.diff import current_freight
from promoter.chat.freight_refs import requested_freight, resolve_freight
from promoter.chat.grammar import Command
from promoter.chat.port import Snapshot
from promoter.chat.views import FreightLabel, StageView, freight_label, stage_views
from promoter.control.freezes import (
    Freeze,
    FreezeError,
    freeze_of,
    freeze_stand_in,
    parse_until,
)
from promoter.control.windows import format_when
from promoter.resources import annotations as ann
from promoter.resources.model import Phase, meta, name_of
from promoter.resources.stages import (
    Approval,
    approval_of,
    available_to,
    downstream_stages,
    has_verification,
    phase_of,
    queue_key,
    requests_origin,
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A command refused before anything changed; ``reason`` is told to the user."""

    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    """The actor's standing on a Stage: allowed or not, and why (a refusal's reason)."""

    allowed: bool
    reason: str


Authorizer = Callable[[Mapping[str, Any] | None], Decision]
"""The actor's standing on a Stage; ``None`` asks about the project as a whole (``/status``)."""


def _never(stage: Mapping[str, Any]) -> bool:
    return False


def _nobody(freight: Mapping[str, Any]) -> bool | None:
    return False


@dataclass(frozen=True, slots=True)
class Facts:
    """What a front end knows when it asks :func:`plan` to decide."""

    snapshot: Snapshot
    may_act: Authorizer
    now: datetime | None = None
    # GitHub, on a pull request: the name of the Freight holding its merge commit, or a Refusal
    # saying why there is none (not a PR, not merged, not discovered yet). None elsewhere: a
    # promote without a Freight then means `latest`.
    pr_freight: str | Refusal | None = None
    # Whether this front end asks for a Confirm before promoting to the Stage (Slack's
    # longshoreman.dev/slack-confirm); GitHub comments are deliberate enough as they are.
    confirm: Callable[[Mapping[str, Any]], bool] = _never
    # The actor's standing as an approver of a Stage (/approve); None: as may_act says.
    may_approve: Authorizer | None = None
    # Whether the actor authored a change the Freight carries (the front end looks that up for
    # the Freight :func:`freight_to_approve` names, when the Stage forbids self-approval); None
    # when the front end cannot tell.
    authored: Callable[[Mapping[str, Any]], bool | None] = _nobody
    # Who is asking, as the cluster records it (``github:alice``): a freeze says who froze.
    actor: str = ""


# ---- decisions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AskConfirm:
    stage: str
    freight: str  # the Freight's full name (what the Promotion will carry)
    label: FreightLabel  # how it is shown: the alias first


@dataclass(frozen=True, slots=True)
class DoPromote:
    stage: str
    freight: str
    label: FreightLabel
    # Freight to create first: a Manual Warehouse's, assembled on request (None: it exists).
    create: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DoApprove:
    stage: str
    freight: str
    label: FreightLabel


@dataclass(frozen=True, slots=True)
class AlreadyApproved:
    """Nothing to do: the Freight was approved for the Stage before (by ``approval``)."""

    stage: str
    freight: str
    label: FreightLabel
    approval: Approval


@dataclass(frozen=True, slots=True)
class DoAbort:
    promotions: tuple[str, ...]  # the running one first, then the queue in its order
    stages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DoReverify:
    stage: str


@dataclass(frozen=True, slots=True)
class ShowStatus:
    namespace: str
    rows: tuple[StageView, ...]  # empty: the project has no Stages


@dataclass(frozen=True, slots=True)
class ShowDiff:
    """``/diff``: what promoting ``freight`` into ``stage`` would change against ``current``
    (the Freight it runs now from the same origin; None: none). The front end fetches the
    facts (:func:`promoter.chat.diff.ranges_to_fetch`) and formats
    :func:`promoter.chat.diff.freight_diff`."""

    stage: str
    freight: Mapping[str, Any]
    current: Mapping[str, Any] | None
    label: FreightLabel


@dataclass(frozen=True, slots=True)
class ShowHelp:
    namespace: str
    allowed: tuple[str, ...]  # Stages the actor may act on
    refused: tuple[str, ...]  # and those they may not, so help says what is true for them
    approvable: tuple[str, ...] = ()  # Stages the actor may approve Freight for


@dataclass(frozen=True, slots=True)
class DoFreeze:
    """Record ``freeze`` on the Stage (``stage``), or on the project (``stage`` None)."""

    stage: str | None
    freeze: Freeze
    replaces: Freeze | None = None  # the freeze in force there before, which this one replaces

    def said(self, project: str, now: datetime) -> str:
        """``Stage `prod` is frozen until Thu 23:00 UTC: incident 4711. ...``, for both chats."""
        what = f"Stage `{self.stage}`" if self.stage else f"project `{project}` (every Stage)"
        end = (
            f"until {format_when(self.freeze.until, 'UTC', now)}"
            if self.freeze.until is not None
            else "until someone unfreezes it"
        )
        why = f": {self.freeze.reason}" if self.freeze.reason else ""
        before = f" It replaces the freeze by {self.replaces.by}." if self.replaces else ""
        return (
            f"{what} is frozen {end}{why}. Promotions to it wait, auto-promotion included; "
            f"`/unfreeze {self.stage or project}` lifts it.{before}"
        )


@dataclass(frozen=True, slots=True)
class DoUnfreeze:
    stage: str | None  # None: the project's freeze
    lifted: Freeze

    def said(self, project: str) -> str:
        what = f"Stage `{self.stage}`" if self.stage else f"project `{project}`"
        return (
            f"{what} is unfrozen (the freeze by {self.lifted.by}); held Promotions start now "
            "unless a promotion window keeps them"
        )


@dataclass(frozen=True, slots=True)
class Cancelled:
    pass


Plan = (
    Refusal
    | AskConfirm
    | DoPromote
    | DoApprove
    | AlreadyApproved
    | DoAbort
    | DoReverify
    | ShowStatus
    | ShowDiff
    | ShowHelp
    | DoFreeze
    | DoUnfreeze
    | Cancelled
)


# ---- what to look up first --------------------------------------------------------------------


def stages_to_authorize(
    command: Command, snapshot: Snapshot, pr_freight: str | Refusal | None = None
) -> list[Mapping[str, Any]]:
    """The Stages whose promoter lists :func:`plan` will consult for ``command``: a front end
    resolves the teams or user groups those lists name (I/O) before it builds ``may_act``."""
    if command.name == "help":
        return list(snapshot.stages)
    if command.name in ("freeze", "unfreeze"):
        return freeze_deciders(snapshot, command.target or "")
    if command.name in ("promote", "verify", "approve"):
        stage = snapshot.stage(command.stage or "")
        return [stage] if stage is not None else []
    if command.name == "abort":
        targets = abort_targets(
            snapshot,
            command.target,
            queued=command.queued,
            freight=pr_freight if isinstance(pr_freight, str) else None,
        )
        if isinstance(targets, Refusal):
            return []
        names = {_spec(p, "stage") for p in targets}
        return [s for s in snapshot.stages if name_of(s) in names]
    return []


def freight_to_approve(
    command: Command, snapshot: Snapshot, now: datetime | None = None
) -> Mapping[str, Any] | None:
    """The Freight an ``/approve`` names, when its Stage forbids self-approval: a front end
    looks up who authored its changes (I/O) before it asks :func:`plan`. None otherwise."""
    if command.name != "approve" or command.freight is None:
        return None
    stage = snapshot.stage(command.stage or "")
    if stage is None or ann.self_approval_allowed(stage):
        return None
    try:
        return resolve_freight(command.freight, snapshot.freight, stage, now)
    except LookupError:
        return None


def needs_pr_freight(command: Command) -> bool:
    """Whether the command means "this pull request's Freight" (GitHub looks it up, with I/O)."""
    return (command.name == "promote" and command.freight is None) or (
        command.name == "abort" and command.target is None
    )


# ---- the planner ------------------------------------------------------------------------------


def plan(command: Command, facts: Facts) -> Plan:
    """What ``command`` should do, given ``facts``. Never raises for a user's mistake: every
    reason to do nothing is a :class:`~promoter.chat.planner.Refusal` that names it."""
    snapshot = facts.snapshot
    if command.name == "cancel":
        return Cancelled()
    if command.name == "help":
        allowed: list[str] = []
        refused: list[str] = []
        approvable: list[str] = []
        may_approve = facts.may_approve or facts.may_act
        for stage in sorted(snapshot.stages, key=name_of):
            (allowed if facts.may_act(stage).allowed else refused).append(name_of(stage))
            if may_approve(stage).allowed:
                approvable.append(name_of(stage))
        return ShowHelp(snapshot.namespace, tuple(allowed), tuple(refused), tuple(approvable))
    if command.name == "status":
        return _status(command, facts)
    if command.name == "abort":
        return _abort(command, facts)
    if command.name == "diff":
        return _diff(command, facts)
    if command.name in ("freeze", "unfreeze"):
        return _freeze(command, facts)
    found = snapshot.stage(command.stage or "")
    if found is None:
        return Refusal(f"there is no Stage `{command.stage}` in project `{snapshot.namespace}`")
    stage = found
    if command.name == "promote" and command.after is not None:
        # A "Promote to NEXT" button: the pipeline may have changed since it was drawn.
        if name_of(stage) not in downstream_stages(command.after, snapshot.stages):
            return Refusal(f"Stage `{name_of(stage)}` no longer follows `{command.after}`")
    if command.name == "approve":
        return _approve(command, stage, facts)
    decision = facts.may_act(stage)
    if not decision.allowed:
        return Refusal(decision.reason)
    if command.name == "verify":
        unverifiable = no_verification(stage)
        return Refusal(unverifiable) if unverifiable else DoReverify(name_of(stage))
    frozen = frozen_now(snapshot, name_of(stage), facts.now)
    if frozen:
        # Said at once, before any Freight is looked up or a Confirm offered: a closed window
        # would only hold the Promotion, and whoever asked should know for how long.
        return Refusal(frozen)
    return _promote(command, stage, facts)


def frozen_now(snapshot: Snapshot, stage: str, now: datetime | None) -> str:
    """``prod is frozen until Mon 09:00 Europe/Berlin (window `weekend-freeze`)`` while the
    Stage's promotion windows are closed, else ""."""
    schedule = snapshot.schedules.get(stage)
    if not schedule or now is None:
        return ""
    state = schedule.state(now)
    return state.frozen_message(stage, now) if state.closed else ""


def _promote(command: Command, stage: Mapping[str, Any], facts: Facts) -> Plan:
    snapshot = facts.snapshot
    ref = command.freight
    if ref is None:
        if isinstance(facts.pr_freight, Refusal):
            return facts.pr_freight
        ref = facts.pr_freight or "latest"
    create: Mapping[str, Any] | None = None
    try:
        freight = resolve_freight(ref, snapshot.freight, stage, facts.now)
    except LookupError as e:
        made = requested_freight(ref, stage, snapshot.warehouses, snapshot.freight)
        if made is None:
            return Refusal(str(e.args[0] if e.args else e))
        freight = create = made
    # Refused before any Confirm is offered: a click must never be asked for in vain.
    unavailable = not_available(stage, freight, facts.now)
    if unavailable:
        return Refusal(unavailable)
    label = freight_label(name_of(freight), fallback=freight)
    if facts.confirm(stage) and not command.confirmed:
        return AskConfirm(name_of(stage), name_of(freight), label)
    return DoPromote(name_of(stage), name_of(freight), label, create)


def _approve(command: Command, stage: Mapping[str, Any], facts: Facts) -> Plan:
    """Kargo's approve: the approver's standing on the Stage, the Freight, a Stage that requests
    its origin; an approval already there stands. Longshoreman adds the self-approval rule."""
    decision = (facts.may_approve or facts.may_act)(stage)
    if not decision.allowed:
        return Refusal(decision.reason)
    try:
        freight = resolve_freight(command.freight or "", facts.snapshot.freight, stage, facts.now)
    except LookupError as e:
        return Refusal(str(e.args[0] if e.args else e))
    refusal = not_approvable(stage, freight)
    if refusal:
        return Refusal(refusal)
    label = freight_label(name_of(freight), fallback=freight)
    existing = approval_for(freight, name_of(stage))
    if existing is not None:
        return AlreadyApproved(name_of(stage), name_of(freight), label, existing)
    if not ann.self_approval_allowed(stage):
        authored = facts.authored(freight)
        rule = (
            f'Stage `{name_of(stage)}` does not allow self-approval ({ann.SELF_APPROVAL}: "false")'
        )
        if authored is None:
            return Refusal(
                f"{rule} and I cannot tell whether Freight `{label.short}` carries a change of "
                "yours: approve it where I can (a pull request comment), or ask someone else"
            )
        if authored:
            return Refusal(
                f"Freight `{label.short}` carries a change of yours and {rule}: someone else "
                "must approve it"
            )
    return DoApprove(name_of(stage), name_of(freight), label)


def _status(command: Command, facts: Facts) -> Plan:
    snapshot = facts.snapshot
    decision = facts.may_act(None)
    if not decision.allowed:
        return Refusal(decision.reason)
    stages: Sequence[Mapping[str, Any]] = snapshot.stages
    if command.stage:
        stage = snapshot.stage(command.stage)
        if stage is None:
            return Refusal(f"there is no Stage `{command.stage}` in project `{snapshot.namespace}`")
        stages = [stage]
    windows: dict[str, str] = {}
    for stage in stages:
        schedule = snapshot.schedules.get(name_of(stage))
        if schedule and facts.now is not None:
            windows[name_of(stage)] = schedule.state(facts.now).frozen_text(facts.now)
    rows = stage_views(
        stages, snapshot.promotions, snapshot.freight, snapshot.stages, windows=windows
    )
    return ShowStatus(snapshot.namespace, tuple(rows))


def _diff(command: Command, facts: Facts) -> Plan:
    """Anyone who may see the project's status may see what a Freight would change."""
    snapshot = facts.snapshot
    decision = facts.may_act(None)
    if not decision.allowed:
        return Refusal(decision.reason)
    stage = snapshot.stage(command.stage or "")
    if stage is None:
        return Refusal(f"there is no Stage `{command.stage}` in project `{snapshot.namespace}`")
    try:
        freight = resolve_freight(command.freight or "", snapshot.freight, stage, facts.now)
    except LookupError as e:
        return Refusal(str(e))
    label = freight_label(name_of(freight), snapshot.freight)
    return ShowDiff(
        name_of(stage), freight, current_freight(stage, freight, snapshot.freight), label
    )


# ---- freeze -------------------------------------------------------------------------------------

# The promoter lists a freezer list stands in for (each front end reads its own).
_PROMOTER_KEYS = (ann.GITHUB_PROMOTERS, ann.SLACK_PROMOTERS)


def freeze_deciders(snapshot: Snapshot, target: str) -> list[Mapping[str, Any]]:
    """Whose "may act" decides a ``/freeze`` or ``/unfreeze`` of ``target``: the project's
    freezer list (as a stand-in Stage) when its ProjectConfig names one, else the Stage, or
    for the whole project each of its Stages. Empty: no such Stage or project."""
    stage = snapshot.stage(target)
    if stage is None and target != snapshot.namespace:
        return []
    config = snapshot.project_config
    if config is not None and config.freezers:
        return [freeze_stand_in(target, snapshot.namespace, config.freezers, _PROMOTER_KEYS)]
    return [stage] if stage is not None else list(snapshot.stages)


def _freeze(command: Command, facts: Facts) -> Plan:
    """``/freeze`` and ``/unfreeze``: a Stage's name first, then the project's."""
    snapshot = facts.snapshot
    target = command.target or ""
    deciders = freeze_deciders(snapshot, target)
    stage = snapshot.stage(target)
    if stage is None and target != snapshot.namespace:
        return Refusal(
            f"there is no Stage `{target}` in project `{snapshot.namespace}`, and the project "
            f"is `{snapshot.namespace}`"
        )
    if facts.now is None:
        return Refusal("this front end cannot tell the time, so it cannot freeze")
    for decider in deciders:
        decision = facts.may_act(decider)
        if not decision.allowed:
            listed_by = snapshot.project_config and snapshot.project_config.freezers
            why = f" (project `{snapshot.namespace}` names who may freeze)" if listed_by else ""
            return Refusal(decision.reason + why)
    config = snapshot.project_config
    current = freeze_of(stage) if stage is not None else (config.freeze if config else None)
    if command.name == "unfreeze":
        if current is None:
            project_freeze = config.freeze if config is not None and stage is not None else None
            if project_freeze is not None and project_freeze.active(facts.now):
                return Refusal(
                    f"Stage `{target}` has no freeze of its own; project "
                    f"`{snapshot.namespace}` is frozen ({project_freeze.note()}): "
                    f"`/unfreeze {snapshot.namespace}`"
                )
            return Refusal(
                f"{'Stage' if stage is not None else 'project'} `{target}` is not frozen from "
                "chat (promotion windows in the ProjectConfig are not lifted by /unfreeze)"
            )
        return DoUnfreeze(name_of(stage) if stage is not None else None, current)
    until = None
    if command.duration is not None:
        until = facts.now + command.duration
    elif command.until is not None:
        try:
            until = parse_until(command.until, facts.now)
        except FreezeError as e:
            return Refusal(str(e))
    freeze = Freeze(facts.actor or "someone", command.reason, facts.now, until)
    replaced = current if current is not None and current.active(facts.now) else None
    return DoFreeze(name_of(stage) if stage is not None else None, freeze, replaced)


def _abort(command: Command, facts: Facts) -> Plan:
    snapshot = facts.snapshot
    if command.target is None and isinstance(facts.pr_freight, Refusal):
        return facts.pr_freight
    freight = facts.pr_freight if isinstance(facts.pr_freight, str) else None
    targets = abort_targets(snapshot, command.target, queued=command.queued, freight=freight)
    if isinstance(targets, Refusal):
        return targets
    stages = tuple(dict.fromkeys(_spec(p, "stage") for p in targets))
    for stage_name in stages:
        stage = snapshot.stage(stage_name)
        decision = facts.may_act(stage if stage is not None else {"metadata": {"name": stage_name}})
        if not decision.allowed:
            return Refusal(decision.reason)
    return DoAbort(tuple(name_of(p) for p in targets), stages)


# ---- availability -----------------------------------------------------------------------------


def not_available(
    stage: Mapping[str, Any], freight: Mapping[str, Any], now: datetime | None
) -> str | None:
    """Why ``freight`` may not be promoted to ``stage`` now, or None when it may.

    Every front end asks this before it asks anything else (a Confirm button included), and the
    cluster port asks again when it creates the Promotion, since time may have passed.
    """
    if available_to(stage, freight, now):
        return None
    label = freight.get("alias") or name_of(freight)
    return (
        f"Freight `{label}` is not available to Stage `{name_of(stage)}` yet "
        "(it must come from a Warehouse the Stage requests directly, be verified in its "
        "upstream Stages and soaked there, if required, or be approved for the Stage: "
        f"`/approve {label} for {name_of(stage)}`)"
    )


def not_approvable(stage: Mapping[str, Any], freight: Mapping[str, Any]) -> str | None:
    """Why ``freight`` cannot be approved for ``stage`` (Kargo's API refuses the same: an
    approval for a Stage that does not request the Freight's origin could never be acted on)."""
    if requests_origin(stage, freight):
        return None
    origin = freight.get("origin") or {}
    return (
        f"Stage `{name_of(stage)}` does not request Freight from origin "
        f"`{origin.get('kind') or 'Warehouse'}/{origin.get('name') or ''}`"
    )


def approval_for(freight: Mapping[str, Any], stage: str) -> Approval | None:
    """The Freight's approval for ``stage``, None when it has none."""
    return approval_of(freight, stage)


def no_verification(stage: Mapping[str, Any]) -> str | None:
    """Why re-verifying ``stage`` would do nothing, or None when it has verification."""
    if has_verification(stage):
        return None
    return (
        f"Stage `{name_of(stage)}` has no verification configured (spec.verification): its "
        "Freight counts as verified once a Promotion succeeds and the Stage is healthy"
    )


# ---- abort ------------------------------------------------------------------------------------


def _active_first(promotions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pending and Running ones; the running one first, then the queue in its order."""
    active = [p for p in promotions if not phase_of(p).terminal]
    return sorted(active, key=lambda p: (phase_of(p) is not Phase.RUNNING, queue_key(p)))


def abort_targets(
    snapshot: Snapshot,
    target: str | None,
    *,
    queued: bool = False,
    freight: str | None = None,
) -> list[Mapping[str, Any]] | Refusal:
    """What ``/abort`` aborts, the one rule of every front end.

    - a Promotion named: that one; a finished one is refused, saying it already finished;
    - a Stage named: its running Promotion (else its oldest queued one); with ``all`` (``queued``)
      every queued one too;
    - no name (GitHub, on a merged pull request): the active Promotions of that PR's ``freight``.

    Authorizing the caller for each target's Stage is the front end's (its lookups are I/O).
    """
    ns = snapshot.namespace
    if target is None:
        mine = _active_first(p for p in snapshot.promotions if _spec(p, "freight") == freight)
        if not mine:
            return Refusal("no Promotion of this pull request's Freight is running or queued")
        return mine
    named = next((p for p in snapshot.promotions if name_of(p) == target), None)
    if named is not None:
        if phase_of(named).terminal:
            return Refusal(
                f"Promotion `{target}` already finished ({phase_of(named).value}); "
                "there is nothing to abort"
            )
        return [named]
    if snapshot.stage(target) is None:
        return Refusal(f"no Promotion or Stage named `{target}` in project `{ns}`")
    mine = _active_first(p for p in snapshot.promotions if _spec(p, "stage") == target)
    if not mine:
        return Refusal(f"nothing to abort: no Promotion is running or queued in Stage `{target}`")
    return mine if queued else mine[:1]


# ---- who may act: the shared pieces -----------------------------------------------------------


def listed(annotation: str | None) -> list[str]:
    if not annotation:
        return []
    return [p.strip() for p in re.split(r"[,\s]+", annotation) if p.strip()]


def stage_annotation(stage: Mapping[str, Any], key: str) -> str | None:
    """The Stage's annotation ``key`` (a promoter or approver list), None when empty."""
    value = (meta(stage).get("annotations") or {}).get(key)
    return str(value) if value else None


def deciding_list(
    stage: Mapping[str, Any] | None, *, promoters: str, approvers: str, approve: bool
) -> str:
    """Which of a front end's two annotations says who may act on the Stage: to approve Freight
    for it (``approve``), its ``approvers`` list when it has one; else its ``promoters`` list
    (whoever may promote to a Stage may approve for it, as in Kargo)."""
    if approve and stage is not None and stage_annotation(stage, approvers):
        return approvers
    return promoters


def _spec(promotion: Mapping[str, Any], key: str) -> str:
    return str((promotion.get("spec") or {}).get(key) or "")
