"""The pure planner of one Stage: what the controller should do next, decided from objects.

The controller (``app/controller/reconciler.py``) gathers a Stage, its Promotions and the Argo
CD Applications from its caches, asks this module, and applies the answer through its one write
path. Nothing here does I/O or reads a clock, so every rule has a table test
(tests/unit/control/test_stage_planner.py):

- :func:`plan_queue`: which Promotions to announce (created with kubectl, so nobody announced
  them), which to abort (an abort was requested on them), and which one runs next: the Stage's
  queue head, oldest first, unless the Freight just promoted is still being verified or the
  Stage's promotion windows are closed (then the queue is held, in its order, until they open);
- :func:`stage_health`: the Stage's health in Kargo's words (Healthy, Progressing, Unhealthy,
  Unknown), from the health checks of the Promotion that put its current Freight in place, and
  Unknown while a Promotion is running (Kargo's ``ActivePromotion``);
- :func:`plan_status`: the Stage's status from its Promotions and that health (verification is
  then added by the Verifier, which creates and follows AnalysisRuns);
- :func:`verification_in_progress`: whether a verification holds the queue.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from promoter.control.windows import WindowState
from promoter.resources import annotations as ann
from promoter.resources.model import Phase, meta, name_of
from promoter.resources.stages import (
    StageQueue,
    get_condition,
    phase_of,
    stage_status,
    with_health,
)
from promoter.rules.argocd import (
    HEALTHY,
    REFRESH_ANNOTATION,
    UNKNOWN,
    app_key,
    health_check_keys,
    health_of,
    merge_health,
    reconciled_after_operation,
)

# ---- the queue --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueuePlan:
    """What to do with a Stage's Promotions now, in this order."""

    announce: tuple[Mapping[str, Any], ...] = ()  # PromotionCreated, once per process
    aborts: tuple[tuple[Mapping[str, Any], str], ...] = ()  # (Promotion, who asked)
    run: Mapping[str, Any] | None = None  # advance this one
    waiting_for_verification: bool = False  # the queue head waits for the Stage's verification
    # The Stage's promotion windows are closed: the queued Promotions wait, in their order.
    held: WindowState | None = None
    queued: tuple[Mapping[str, Any], ...] = ()  # the Pending ones a hold keeps waiting
    # Every other queued Promotion, with what it waits for (its status says so, phase Pending,
    # as Kargo shows a queued Promotion).
    waiting: tuple[tuple[Mapping[str, Any], str], ...] = ()


def _waiting(
    queue: StageQueue, head: Mapping[str, Any] | None, reason: str
) -> tuple[tuple[Mapping[str, Any], str], ...]:
    return tuple((p, reason) for p in queue.pending() if head is None or p is not head)


def plan_queue(
    stage: Mapping[str, Any] | None,
    promotions: Sequence[Mapping[str, Any]],
    *,
    announced: Container[str] = frozenset(),
    window: WindowState | None = None,
) -> QueuePlan:
    """Decide the Stage's queue. ``announced`` holds the uids already announced by this process;
    ``window`` is the state of the Stage's promotion windows now.

    Whoever creates a Promotion through the builder announces it; only Promotions created
    otherwise (kubectl: no ``created-by`` annotation) are announced here. A Promotion with an
    abort request is aborted and never run. The next one to run is the running one, else the
    oldest queued one (:class:`~promoter.resources.stages.StageQueue`), except that a queued one
    waits
    while the Stage verifies the Freight promoted before it.
    """
    announce = tuple(
        p
        for p in promotions
        if phase_of(p) is Phase.PENDING
        and not ann.created_by(p)
        and str(meta(p).get("uid")) not in announced
    )
    aborts: list[tuple[Mapping[str, Any], str]] = []
    for p in promotions:
        actor = ann.abort_request(p)
        if actor is not None and not phase_of(p).terminal:
            aborts.append((p, actor))
    aborted = {name_of(p) for p, _ in aborts}
    queue = StageQueue([p for p in promotions if name_of(p) not in aborted])
    head = queue.next()
    closed = window is not None and window.closed
    if head is not None and phase_of(head) is Phase.PENDING and closed:
        # Every path that creates Promotions ends here (chat, auto-promotion, rollbacks,
        # kubectl), so this one check enforces the windows for all of them. A running
        # Promotion goes on: windows gate starts, as in Kargo.
        held = tuple(queue.pending())
        return QueuePlan(announce, tuple(aborts), None, held=window, queued=held)
    if (
        head is not None
        and phase_of(head) is Phase.PENDING
        and stage is not None
        and verification_in_progress(stage)
    ):
        # The verification's end wakes the Stage again.
        reason = f"waiting for the verification of Stage {name_of(stage)}'s Freight to finish"
        return QueuePlan(
            announce,
            tuple(aborts),
            None,
            waiting_for_verification=True,
            waiting=_waiting(queue, None, reason),
        )
    reason = f"waiting for Promotion {name_of(head)} to finish" if head is not None else ""
    return QueuePlan(announce, tuple(aborts), head, waiting=_waiting(queue, head, reason))


def latest_verification(stage: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The newest verification of the Stage's current Freight (Kargo's verificationHistory)."""
    history = (stage.get("status") or {}).get("freightHistory") or []
    if not history:
        return None
    entries = history[0].get("verificationHistory") or []
    return entries[0] if entries else None


def verification_in_progress(stage: Mapping[str, Any]) -> bool:
    """Is a verification running that queued Promotions must wait for?

    They wait only while the Stage is healthy: an unhealthy Stage needs a fix more than it
    needs its verification finished.
    """
    latest = latest_verification(stage)
    if latest is None or latest.get("phase") not in ("Pending", "Running"):
        return False
    healthy = get_condition(stage.get("status") or {}, "Healthy")
    return healthy is None or healthy.get("status") == "True"


# ---- health -----------------------------------------------------------------------------------

ACTIVE_PROMOTION_MESSAGE = "Stage has a Promotion in progress"  # Kargo's words


@dataclass(frozen=True, slots=True)
class Health:
    """A Stage's health: Kargo's state word and why."""

    state: str  # Healthy | Progressing | Unhealthy | Unknown
    message: str
    reason: str = ""  # the Healthy condition's reason when it is not the state word

    @property
    def condition(self) -> str:
        """The ``Healthy`` condition's status: Progressing is not healthy yet."""
        if self.state == HEALTHY:
            return "True"
        return "Unknown" if self.state == UNKNOWN else "False"


def _health_source(
    status: Mapping[str, Any], promotions: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The Promotion whose health checks decide the Stage's health: the last one, succeeded."""
    last = (status.get("lastPromotion") or {}).get("name")
    source = None
    for p in promotions:
        if name_of(p) == last and phase_of(p) is Phase.SUCCEEDED:
            source = p
    return source


def apps_to_refresh(
    status: Mapping[str, Any],
    promotions: Iterable[Mapping[str, Any]],
    applications: Iterable[Mapping[str, Any]],
) -> list[tuple[str, str]]:
    """Applications the Stage's health checks read that Argo CD has not reconciled since their
    last operation finished (so their health is not trusted yet) and that no refresh has been
    asked of. Kargo asks Argo CD to refresh them: Argo CD may skip writing a status that did not
    change, leaving ``reconciledAt`` stale until its next periodic refresh (3 minutes by
    default), and the Stage's verification waiting on it."""
    source = _health_source(status, promotions)
    if source is None:
        return []
    apps = {app_key(a): a for a in applications}
    out: list[tuple[str, str]] = []
    for check in (source.get("status") or {}).get("healthChecks") or []:
        for key in health_check_keys((check or {}).get("config") or {}):
            app = apps.get(key)
            if app is None or key in out or reconciled_after_operation(app):
                continue
            if REFRESH_ANNOTATION not in (meta(app).get("annotations") or {}):
                out.append(key)
    return out


def stage_health(
    status: Mapping[str, Any],
    promotions: Iterable[Mapping[str, Any]],
    applications: Iterable[Mapping[str, Any]],
) -> Health:
    """The health of the Stage whose (about to be written) status is ``status``: the health
    checks recorded by the Promotion that put its current Freight in place, each against the
    Argo CD Applications it names, merged as Kargo merges them (the most severe wins).

    While a Promotion runs, Kargo does not assess health (its assessHealth: "Promotion is in
    progress"): the Applications are being changed on purpose, and what they show mid-sync
    says nothing about the Freight. It also keeps the Stage's status still while the sync
    moves, instead of one status write per Argo CD event (akuity/kargo#6831)."""
    if status.get("currentPromotion"):
        return Health(UNKNOWN, ACTIVE_PROMOTION_MESSAGE, reason="ActivePromotion")
    source = _health_source(status, promotions)
    if source is None:
        if not status.get("freightHistory"):
            return Health(UNKNOWN, "no Freight has been promoted to this Stage yet")
        return Health(HEALTHY, "no health checks")
    checks = (source.get("status") or {}).get("healthChecks") or []
    if not checks:
        return Health(HEALTHY, "no health checks")
    apps: dict[tuple[str, str], Mapping[str, Any] | None] = {app_key(a): a for a in applications}
    overall = HEALTHY
    messages = []
    for check in checks:
        state, message = health_of((check or {}).get("config") or {}, apps)
        overall = merge_health(overall, state)
        if state != HEALTHY:
            messages.append(message)
    return Health(overall, "; ".join(messages) or "all Applications healthy and synced")


# ---- status -----------------------------------------------------------------------------------


def plan_status(
    stage: Mapping[str, Any],
    promotions: Sequence[Mapping[str, Any]],
    applications: Iterable[Mapping[str, Any]],
    now: datetime,
    *,
    succeeded_freight: Mapping[str, Any] | None = None,
    finished_last: str | None = None,
) -> dict[str, Any]:
    """The Stage's status from its Promotions' outcome (current Freight, last Promotion,
    conditions) and its health, before verification adds its part."""
    generation = meta(stage).get("generation")
    new = stage_status(
        stage, promotions, now, succeeded_freight=succeeded_freight, finished_last=finished_last
    )
    health = stage_health(new, promotions, applications)
    new = with_health(
        new, health.condition, health.message, now, generation, state=health.reason or health.state
    )
    # Ready and the printer columns (health.status) follow the health just decided.
    return stage_status({**stage, "status": new}, promotions, now)
