"""Pure decisions about a Stage: which Promotion may run, and what the Stage's status says.

Only one Promotion runs per Stage; the others wait, oldest first (creation time, then name, as
Kargo's priority queue orders them). The queue is derived from the Promotions themselves every
time, so it survives restarts and any replica computes the same answer. Stage status
(``currentPromotion``, ``lastPromotion``, ``freightHistory``, conditions) is computed from plain
objects and ``now``; the reconciler writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from promoter.resources.annotations import FREIGHT_CREATED
from promoter.resources.model import (
    Phase,
    format_time,
    freight_reference,
    meta,
    name_of,
    parse_time,
)

FREIGHT_HISTORY_LIMIT = 10


def phase_of(promotion: Mapping[str, Any]) -> Phase:
    raw = (promotion.get("status") or {}).get("phase") or "Pending"
    try:
        return Phase(raw)
    except ValueError:
        return Phase.PENDING


def queue_key(promotion: Mapping[str, Any]) -> tuple[str, str]:
    """Oldest first; the name breaks ties (our names embed a ULID, so they sort by time too)."""
    created = parse_time(meta(promotion).get("creationTimestamp"))
    return (format_time(created) or "", name_of(promotion))


class StageQueue:
    """The Promotions of one Stage, in the order they may run.

    Insertion is idempotent (by name: a newer copy of the same Promotion replaces the older) and
    ignores ``None``, so callers can push whatever an event carried without checking.
    """

    def __init__(self, promotions: Iterable[Mapping[str, Any] | None] = ()) -> None:
        self._by_name: dict[str, Mapping[str, Any]] = {}
        for p in promotions:
            self.push(p)

    def push(self, promotion: Mapping[str, Any] | None) -> None:
        if promotion is None:
            return
        self._by_name[name_of(promotion)] = promotion

    def __len__(self) -> int:
        return len(self._by_name)

    def pending(self) -> list[Mapping[str, Any]]:
        return sorted(
            (p for p in self._by_name.values() if phase_of(p) is Phase.PENDING), key=queue_key
        )

    def running(self) -> list[Mapping[str, Any]]:
        return sorted(
            (p for p in self._by_name.values() if phase_of(p) is Phase.RUNNING), key=queue_key
        )

    def next(self) -> Mapping[str, Any] | None:
        """The Promotion that may run now: the running one, else the oldest Pending one.

        Should two be Running (a bug elsewhere, or a restore from backup), the oldest keeps the
        Stage and the others wait; none is started beside them.
        """
        running = self.running()
        if running:
            return running[0]
        pending = self.pending()
        return pending[0] if pending else None


# ---- conditions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str = ""


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    condition: Condition,
    now: datetime,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """Upsert a condition; lastTransitionTime moves only when the status changes."""
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        if c.get("type") != condition.type:
            out.append(dict(c))
            continue
        found = True
        transition = c.get("lastTransitionTime") if c.get("status") == condition.status else None
        out.append(_condition_dict(condition, transition or format_time(now), observed_generation))
    if not found:
        out.append(_condition_dict(condition, format_time(now), observed_generation))
    return out


def _condition_dict(
    condition: Condition, transition: str | None, observed_generation: int | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        out["observedGeneration"] = observed_generation
    return out


def get_condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for c in status.get("conditions") or ():
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


# ---- status -----------------------------------------------------------------------------------


def promotion_summary(promotion: Mapping[str, Any]) -> dict[str, Any]:
    """Kargo's PromotionReference: name, freight, status and finishedAt."""
    status = promotion.get("status") or {}
    out: dict[str, Any] = {"name": name_of(promotion)}
    if status.get("freight"):
        out["freight"] = status["freight"]
    else:
        out["freight"] = {"name": (promotion.get("spec") or {}).get("freight", "")}
    out["status"] = {
        k: status[k] for k in ("phase", "message", "finishedAt") if status.get(k) is not None
    }
    if status.get("finishedAt"):
        out["finishedAt"] = status["finishedAt"]
    return out


def freight_collection(
    freight: Mapping[str, Any], previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A FreightCollection: the new Freight replaces the one of the same origin, others stay."""
    items = dict((previous or {}).get("items") or {})
    origin = freight.get("origin") or {}
    key = f"{origin.get('kind', 'Warehouse')}/{origin.get('name', '')}"
    items[key] = freight_reference(freight)
    ids = ",".join(sorted(f"{k}={v.get('name', '')}" for k, v in items.items()))
    return {"id": _stable_id(ids), "items": items}


def _stable_id(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()


def _last_finished(
    finished: Sequence[Mapping[str, Any]],
    finished_last: str | None,
    recorded: Mapping[str, Any],
) -> Mapping[str, Any]:
    """The Promotion that finished last, of ``finished`` (sorted by finishedAt).

    Promotions finished within the same second tie on finishedAt, and their names need not sort
    by time (``p10`` < ``p9``): the one the caller has just finished wins, then the one recorded
    as last before (it was, when recorded), then queue order.
    """
    latest = (finished[-1].get("status") or {}).get("finishedAt") or ""
    tied = [p for p in finished if ((p.get("status") or {}).get("finishedAt") or "") == latest]
    for wanted in (finished_last, recorded.get("name")):
        for promotion in tied:
            if wanted and name_of(promotion) == wanted:
                return promotion
    return max(tied, key=queue_key)


def stage_status(
    stage: Mapping[str, Any],
    promotions: Iterable[Mapping[str, Any]],
    now: datetime,
    *,
    succeeded_freight: Mapping[str, Any] | None = None,
    finished_last: str | None = None,
) -> dict[str, Any]:
    """The Stage's status after looking at its Promotions.

    ``succeeded_freight`` is the Freight of a Promotion that has just succeeded: it becomes the
    Stage's current Freight (the head of ``freightHistory``). ``finished_last`` names the
    Promotion that has just finished, which ``finishedAt`` alone (second precision) cannot
    always tell.
    """
    old = dict(stage.get("status") or {})
    queue = StageQueue(promotions)
    current = queue.running()
    finished = sorted(
        (p for p in queue._by_name.values() if phase_of(p).terminal),
        key=lambda p: ((p.get("status") or {}).get("finishedAt") or "", name_of(p)),
    )
    status: dict[str, Any] = dict(old)
    generation = meta(stage).get("generation")
    status["observedGeneration"] = generation
    if current:
        status["currentPromotion"] = {
            "name": name_of(current[0]),
            "freight": (current[0].get("status") or {}).get("freight")
            or {"name": (current[0].get("spec") or {}).get("freight", "")},
        }
    else:
        status.pop("currentPromotion", None)
    if finished:
        last = _last_finished(finished, finished_last, old.get("lastPromotion") or {})
        status["lastPromotion"] = promotion_summary(last)
    history = list(old.get("freightHistory") or [])
    if succeeded_freight is not None:
        head = freight_collection(succeeded_freight, history[0] if history else None)
        if not history or history[0].get("id") != head["id"]:
            history.insert(0, head)
        status["freightHistory"] = history[:FREIGHT_HISTORY_LIMIT]
    conditions = list(old.get("conditions") or [])
    if current:
        promoting = Condition(
            "Promoting", "True", "ActivePromotion", f"Promotion {name_of(current[0])} is running"
        )
    else:
        waiting = len(queue.pending())
        promoting = Condition(
            "Promoting",
            "False",
            "NoActivePromotion",
            f"{waiting} Promotion(s) queued" if waiting else "",
        )
    conditions = set_condition(conditions, promoting, now, generation)
    healthy = next((c for c in conditions if c.get("type") == "Healthy"), None)
    verified = next((c for c in conditions if c.get("type") == "Verified"), None)
    ready_ok = (
        not current
        and healthy is not None
        and healthy.get("status") == "True"
        and (verified is None or verified.get("status") == "True")
    )
    if current:
        ready = Condition("Ready", "False", "Promoting", "a Promotion is running")
    elif healthy is None:
        ready = Condition("Ready", "Unknown", "HealthUnknown", "health has not been checked yet")
    elif ready_ok:
        ready = Condition("Ready", "True", "Ready", "")
    elif healthy.get("status") != "True":
        ready = Condition("Ready", "False", "Unhealthy", str(healthy.get("message") or ""))
    else:
        ready = Condition(
            "Ready", "False", "NotVerified", str((verified or {}).get("message") or "")
        )
    status["conditions"] = set_condition(conditions, ready, now, generation)
    status.update(_summaries(stage, status))
    return status


_HEALTH = {"True": "Healthy", "False": "Unhealthy", "Unknown": "Unknown"}
_HEALTH_WORDS = ("Healthy", "Progressing", "Unhealthy", "Unknown")


def _summaries(stage: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """What ``kubectl get stages`` shows (the CRD's printer columns), as Kargo words it: the
    current Freight's name, or "N/M Fulfilled" when the Stage requests several origins; and the
    health of the last check, once there is something to check."""
    out: dict[str, Any] = {}
    history = status.get("freightHistory") or []
    items = (history[0].get("items") or {}) if history else {}
    if isinstance(items, Mapping) and items:
        requested = len((stage.get("spec") or {}).get("requestedFreight") or []) or 1
        if requested == 1 and len(items) == 1:
            [only] = items.values()
            out["freightSummary"] = str(only.get("name") or "")
        else:
            out["freightSummary"] = f"{len(items)}/{requested} Fulfilled"
    healthy = get_condition(status, "Healthy")
    if healthy is not None and history:
        reason = str(healthy.get("reason") or "")
        word = reason if reason in _HEALTH_WORDS else _HEALTH.get(str(healthy.get("status")))
        out["health"] = {"status": word or "Unknown"}
    return out


def with_health(
    stage_status_: Mapping[str, Any],
    healthy: str,
    message: str,
    now: datetime,
    generation: int | None,
    *,
    state: str | None = None,
) -> dict[str, Any]:
    """Record the result of the Stage's health checks as its ``Healthy`` condition; ``state``
    (Kargo's word: Progressing is not False's only cause) becomes its reason."""
    reason = state or {"True": "Healthy", "False": "Unhealthy", "Unknown": "Unknown"}[healthy]
    status = dict(stage_status_)
    status["conditions"] = set_condition(
        status.get("conditions") or [],
        Condition("Healthy", healthy, reason, message),
        now,
        generation,
    )
    return status


# ---- Freight availability ---------------------------------------------------------------------


# How far a Warehouse's stamp (FREIGHT_CREATED) may be from creationTimestamp and still be
# believed: it is written just before the create, so within the same second or the one before.
_STAMP_TRUSTED = timedelta(seconds=2)


def freight_created(freight: Mapping[str, Any]) -> str:
    """When the Freight was made, as text that sorts by time ("" when unknown).

    creationTimestamp has whole seconds, so Freight a Warehouse makes twice within one second
    (two pushes in quick succession) would be of one age, and auto-promotion could not tell the
    newer. The Warehouse's own stamp (``longshoreman.dev/created``, microseconds) decides then;
    it counts only when it agrees with creationTimestamp, so an annotation cannot make an old
    Freight the newest.
    """
    created = parse_time(meta(freight).get("creationTimestamp"))
    if created is None:
        return ""
    stamp = parse_time((meta(freight).get("annotations") or {}).get(FREIGHT_CREATED))
    if stamp is not None and abs(stamp - created) <= _STAMP_TRUSTED:
        created = stamp
    return created.astimezone(UTC).isoformat(timespec="microseconds")


def soaked_since(freight: Mapping[str, Any], upstream: str) -> datetime | None:
    """Since when the Freight has been (continuously) in ``upstream`` and verified there."""
    status = freight.get("status") or {}
    verified = (status.get("verifiedIn") or {}).get(upstream)
    if verified is None:
        return None
    current = (status.get("currentlyIn") or {}).get(upstream) or {}
    since = parse_time(current.get("since")) or parse_time((verified or {}).get("verifiedAt"))
    if since is None:
        # Verified, time unknown (hand-written status): available, but a soak cannot start.
        from datetime import UTC

        return datetime.min.replace(tzinfo=UTC)
    return since


def current_freight_names(stage: Mapping[str, Any]) -> set[str]:
    """The Freight the Stage uses now: its newest FreightCollection's items."""
    history = (stage.get("status") or {}).get("freightHistory") or []
    items = (history[0].get("items") or {}) if history and isinstance(history[0], Mapping) else {}
    return {str(ref.get("name")) for ref in items.values() if isinstance(ref, Mapping)}


def currently_in_patches(
    stage: Mapping[str, Any],
    marked: Iterable[Mapping[str, Any]],
    current: Iterable[Mapping[str, Any]],
    now: datetime,
) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """Freight ``status.currentlyIn`` as Kargo's ``syncFreight`` keeps it: the Freight the
    Stage uses (``current``) are in it since now, the others that still say so (``marked``)
    no longer are. (Freight, status merge patch) pairs; none when all is as it should be."""
    stage_name = name_of(stage)
    using = current_freight_names(stage)
    patches: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
    for freight in marked:
        if name_of(freight) not in using:
            patches.append((freight, {"currentlyIn": {stage_name: None}}))
    for freight in current:
        if stage_name not in ((freight.get("status") or {}).get("currentlyIn") or {}):
            since = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            patches.append((freight, {"currentlyIn": {stage_name: {"since": since}}}))
    return patches


# ---- approval -----------------------------------------------------------------------------------
#
# Kargo's Freight ``status.approvedFor.<stage>`` (``ApprovedStage{approvedAt}``): a person let the
# Freight into that Stage whatever its upstream verification says (a hotfix). Longshoreman also
# records who approved (``approvedBy``, the actor as on a Promotion: ``github:alice``); an approval
# written with kubectl has none, and counts all the same.


@dataclass(frozen=True, slots=True)
class Approval:
    stage: str
    approved_at: datetime | None
    approved_by: str  # "" when unknown (written by hand, or by Kargo)


def approval_of(freight: Mapping[str, Any] | None, stage: str) -> Approval | None:
    """The Freight's approval for ``stage`` (Kargo's ``IsApprovedFor``), None when it has none."""
    approved = ((freight or {}).get("status") or {}).get("approvedFor")
    if not isinstance(approved, Mapping) or stage not in approved:
        return None
    record = approved.get(stage)
    record = record if isinstance(record, Mapping) else {}
    return Approval(
        stage, parse_time(record.get("approvedAt")), str(record.get("approvedBy") or "")
    )


def approvals_of(freight: Mapping[str, Any] | None) -> tuple[Approval, ...]:
    """Every approval of the Freight, by Stage name (a Stage deleted since keeps its entry, as
    in Kargo: the record says who let the Freight in, whatever became of the Stage)."""
    approved = ((freight or {}).get("status") or {}).get("approvedFor")
    if not isinstance(approved, Mapping):
        return ()
    found = (approval_of(freight, str(stage)) for stage in sorted(approved, key=str))
    return tuple(a for a in found if a is not None)


def approval_patch(stage: str, actor: str, now: datetime) -> dict[str, Any]:
    """The merge patch of a Freight's status that approves it for ``stage`` (as Kargo's
    ``AddApprovedStage``: an existing approval is kept, so the caller asks first)."""
    record = {"approvedAt": format_time(now), "approvedBy": actor}
    return {"status": {"approvedFor": {stage: record}}}


def requests_origin(stage: Mapping[str, Any], freight: Mapping[str, Any]) -> bool:
    """Whether the Stage requests Freight of this Freight's origin (Kargo's
    ``RequestsFreightFromOrigin``): an approval for any other Stage could never be acted on."""
    return any(_same_origin(request, freight) for request in _requests(stage))


def _requests(stage: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    requests = (stage.get("spec") or {}).get("requestedFreight") or ()
    return [r for r in requests if isinstance(r, Mapping)]


def _same_origin(request: Mapping[str, Any], freight: Mapping[str, Any]) -> bool:
    wanted = request.get("origin") or {}
    origin = freight.get("origin") or {}
    return (
        bool(wanted.get("name"))
        and wanted.get("name") == origin.get("name")
        and (wanted.get("kind") or "Warehouse") == (origin.get("kind") or "Warehouse")
    )


def available_to(
    stage: Mapping[str, Any], freight: Mapping[str, Any], now: datetime | None = None
) -> bool:
    """Is ``freight`` available to ``stage``? (Kargo's ``Stage.IsFreightAvailable``.)

    Only for a requested origin: when approved for the Stage (``status.approvedFor``), directly
    (``sources.direct``), or once verified in the listed upstream Stages — any of them, or all
    with ``availabilityStrategy: All`` — and, with ``requiredSoakTime``, after it has stayed that
    long in the upstream Stage.
    """
    when = available_at(stage, freight)
    return when is not None and (now is None or when <= now)


def available_at(stage: Mapping[str, Any], freight: Mapping[str, Any]) -> datetime | None:
    """When ``freight`` becomes (or became) available to ``stage``; None when it never will
    with what is known now. ``datetime.min`` (UTC) means "always" (direct)."""
    from datetime import UTC

    from promoter.resources.model import parse_duration

    stage_ns, freight_ns = meta(stage).get("namespace"), meta(freight).get("namespace")
    if stage_ns and freight_ns and stage_ns != freight_ns:
        return None  # another project's Freight, whatever its status says
    best: datetime | None = None
    for request in _requests(stage):
        if not _same_origin(request, freight):
            continue
        if approval_of(freight, name_of(stage)) is not None:
            return datetime.min.replace(tzinfo=UTC)
        sources = request.get("sources") or {}
        if sources.get("direct"):
            return datetime.min.replace(tzinfo=UTC)
        upstream = list(sources.get("stages") or [])
        if not upstream:
            continue
        soak = sources.get("requiredSoakTime")
        soak_seconds = parse_duration(soak, field_name="requiredSoakTime") if soak else 0.0
        times = []
        for name in upstream:
            since = soaked_since(freight, name)
            if since is None:
                continue
            if since.year == 1 and soak_seconds:
                continue  # no known start, so no soak can have elapsed
            times.append(since + timedelta(seconds=soak_seconds) if since.year > 1 else since)
        if not times:
            continue
        if sources.get("availabilityStrategy") == "All":
            if len(times) < len(upstream):
                continue
            when = max(times)
        else:
            when = min(times)
        best = when if best is None else min(best, when)
    return best


def stage_freights(
    stage_obj: Mapping[str, Any], target: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """Freight the expression functions may search: the target first, then what the Stage holds
    now from other origins (Kargo's freight collection), taken from its status."""
    out: list[Mapping[str, Any]] = [target]
    history = (stage_obj.get("status") or {}).get("freightHistory") or []
    if history and isinstance(history[0], Mapping):
        items = history[0].get("items") or {}
        target_origin = (target.get("origin") or {}).get("name")
        for ref in items.values() if isinstance(items, Mapping) else ():
            if not isinstance(ref, Mapping):
                continue
            if (ref.get("origin") or {}).get("name") == target_origin:
                continue
            out.append({"metadata": {"name": ref.get("name", "")}, **ref})
    return out


def requested_warehouses(
    stage_obj: Mapping[str, Any], lookup: Callable[[str], Mapping[str, Any] | None]
) -> dict[str, Mapping[str, Any] | None] | None:
    """The Warehouses a Stage requests Freight from, by name, as ``lookup`` finds them (None for
    one it does not): what decides where imageFrom() and the like look without an origin.

    None when not one of them exists: Freight made with kubectl needs no Warehouse object in
    Longshoreman, and then the Freight that carry an artifact decide (Kargo, which always has
    the Warehouses, would fail with "Warehouse ... not found")."""
    out: dict[str, Mapping[str, Any] | None] = {}
    for request in (stage_obj.get("spec") or {}).get("requestedFreight") or ():
        origin = (request or {}).get("origin") or {}
        name = origin.get("name")
        if isinstance(name, str) and name and origin.get("kind", "Warehouse") == "Warehouse":
            out[name] = lookup(name)
    return out if any(w is not None for w in out.values()) else None


def downstream_stages(
    stage: str, stages: Sequence[Mapping[str, Any]], origin: Mapping[str, Any] | None = None
) -> list[str]:
    """Stages that request Freight from ``stage`` (``sources.stages``); with ``origin`` (a
    Freight's), only those requesting Freight of that origin."""
    out = []
    for candidate in stages:
        for request in (candidate.get("spec") or {}).get("requestedFreight") or ():
            request = request or {}
            wanted = request.get("origin") or {}
            if origin and (
                wanted.get("name") != origin.get("name")
                or wanted.get("kind", "Warehouse") != origin.get("kind", "Warehouse")
            ):
                continue
            if stage in ((request.get("sources") or {}).get("stages") or ()):
                out.append(name_of(candidate))
                break
    return sorted(set(out))


def has_verification(stage: Mapping[str, Any] | None) -> bool:
    """Whether the Stage configures verification (``spec.verification.analysisTemplates``)."""
    verification = ((stage or {}).get("spec") or {}).get("verification") or {}
    return bool(verification.get("analysisTemplates"))
