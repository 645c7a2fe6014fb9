"""Which Freight auto-promotion picks for a Stage, and what control-flow Stages decide: Kargo's
rules, purely.

**Selection policies** (``spec.requestedFreight[].sources.autoPromotionOptions.selectionPolicy``,
Kargo's ``SelectAutoPromotionCandidates`` in pkg/api/auto_promotion.go):

* ``NewestFreight`` (the default): the newest Freight of the origin available to the Stage
  (creation time, then the lexically greater name).
* ``MatchUpstream``: only the Freight the one upstream Stage currently has (Kargo's
  ``CurrentlyIn`` filter): the Stage follows its upstream, back to older Freight too. When more
  than one Freight is upstream (the instant between a Promotion's two Freight writes) the origin
  has no candidate this pass. Kargo's Stage webhook refuses the policy with ``direct`` sources
  or with other than exactly one upstream Stage (:func:`selection_problems`).

**Control-flow Stages** (a Stage without promotion steps, Kargo's ``ControlFlowStageReconciler``
in pkg/controller/stages/control_flow_stages.go): nothing is ever promoted *to* one; every
Freight available to it is marked verified in it as soon as it is available, so the Stages
downstream of it see that Freight as theirs to take (fan-out, fan-in).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of
from promoter.resources.stages import Condition, available_at, freight_created, set_condition

NEWEST_FREIGHT = "NewestFreight"
MATCH_UPSTREAM = "MatchUpstream"
POLICIES = (NEWEST_FREIGHT, MATCH_UPSTREAM)


def _requests(stage: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    requests = (stage.get("spec") or {}).get("requestedFreight") or ()
    return [r for r in requests if isinstance(r, Mapping)]


def _sources(request: Mapping[str, Any]) -> Mapping[str, Any]:
    sources = request.get("sources")
    return sources if isinstance(sources, Mapping) else {}


def selection_policy(request: Mapping[str, Any]) -> str:
    options = _sources(request).get("autoPromotionOptions")
    policy = options.get("selectionPolicy") if isinstance(options, Mapping) else None
    return str(policy or NEWEST_FREIGHT)


def origin_key(origin: Mapping[str, Any] | None) -> str:
    """Kargo's ``FreightOrigin.String()``: ``Warehouse/name``."""
    origin = origin or {}
    return f"{origin.get('kind') or 'Warehouse'}/{origin.get('name') or ''}"


def selection_problems(stage: Mapping[str, Any]) -> list[str]:
    """Kargo's Stage webhook on selection policies, as ``field: message``."""
    problems = []
    for i, request in enumerate(_requests(stage)):
        sources = _sources(request)
        where = f"spec.requestedFreight[{i}].sources.autoPromotionOptions.selectionPolicy"
        policy = selection_policy(request)
        if policy not in POLICIES:
            problems.append(f"{where}: Unsupported value: {policy!r}: supported values: "
                            f"{', '.join(repr(p) for p in POLICIES)}")  # fmt: skip
            continue
        if policy != MATCH_UPSTREAM:
            continue
        if sources.get("direct"):
            problems.append(
                f"{where}: Invalid value: {policy!r}: selection policy 'MatchUpstream' cannot "
                "be used when accepting Freight directly from its origin"
            )
        if len(sources.get("stages") or ()) != 1:
            problems.append(
                f"{where}: Invalid value: {policy!r}: selection policy 'MatchUpstream' requires "
                "exactly one upstream Stage to be specified"
            )
    return problems


def _newest_first(freight: Mapping[str, Any]) -> tuple[str, str]:
    return (freight_created(freight), name_of(freight))


def candidates(
    stage: Mapping[str, Any],
    available: Sequence[Mapping[str, Any]],
    current_in: Callable[[str], Collection[str]],
) -> dict[str, Mapping[str, Any]]:
    """For each requested origin, the available Freight its selection policy picks (origin key
    -> Freight). ``available`` is the Freight available to the Stage now; ``current_in(stage)``
    names the Freight a Stage currently has. Whether the pick should be promoted (not current
    already, no Promotion for it yet) is the caller's to check."""
    picked: dict[str, Mapping[str, Any]] = {}
    for request in _requests(stage):
        key = origin_key(request.get("origin"))
        of_origin = [f for f in available if origin_key(f.get("origin")) == key]
        if selection_policy(request) == MATCH_UPSTREAM:
            upstream = list(_sources(request).get("stages") or ())
            if len(upstream) != 1:
                continue  # refused by selection_problems; nothing to follow
            there = current_in(str(upstream[0]))
            of_origin = [f for f in of_origin if name_of(f) in there]
            if len(of_origin) > 1:
                continue  # transient: the upstream Stage is between two Freight
        if of_origin:
            picked[key] = max(of_origin, key=_newest_first)
    return picked


def followed(stage: Mapping[str, Any]) -> set[str]:
    """The upstream Stages a Stage follows with MatchUpstream (whose current Freight decides)."""
    return {
        str(up)
        for r in _requests(stage)
        if selection_policy(r) == MATCH_UPSTREAM
        for up in _sources(r).get("stages") or ()
    }


def matches_upstream(stage: Mapping[str, Any]) -> bool:
    """Whether any request follows its upstream Stage (``MatchUpstream``): auto-promotion may
    then take Freight older than the Stage's current one."""
    return any(selection_policy(r) == MATCH_UPSTREAM for r in _requests(stage))


# ---- control-flow Stages ------------------------------------------------------------------------


def is_control_flow(stage: Mapping[str, Any]) -> bool:
    """A Stage with no promotion steps (Kargo: no ``promotionTemplate``, or one without steps)."""
    template = (stage.get("spec") or {}).get("promotionTemplate")
    spec = template.get("spec") if isinstance(template, Mapping) else None
    return not (isinstance(spec, Mapping) and spec.get("steps"))


def passes_freight_on(stage: Mapping[str, Any], promotions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the controller treats the Stage as a control-flow Stage: no promotion steps, and
    no Promotion to it. Kargo's admission refuses Promotions to such a Stage; a Promotion made
    with kubectl to it makes it a regular Stage here (the Promotion runs its own steps where the
    operator allows that), with a Freight history of its own."""
    return is_control_flow(stage) and not promotions


def to_verify(
    stage: Mapping[str, Any], freight: Sequence[Mapping[str, Any]], now: datetime
) -> list[str]:
    """The Freight a control-flow Stage marks verified in itself now: available to it (soak
    included) and not verified there yet."""
    name = name_of(stage)
    out = []
    for f in freight:
        when = available_at(stage, f)
        if when is None or when > now:
            continue
        if name in ((f.get("status") or {}).get("verifiedIn") or {}):
            continue
        out.append(name_of(f))
    return sorted(out)


def next_availability(
    stage: Mapping[str, Any], freight: Sequence[Mapping[str, Any]], now: datetime
) -> datetime | None:
    """When the next Freight becomes available to the Stage (a soak ending), if any."""
    later = [w for f in freight if (w := available_at(stage, f)) is not None and w > now]
    return min(later) if later else None


def control_flow_status(stage: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """Kargo's ``initializeStatus`` of a control-flow Stage, then Ready: only the Ready and
    Reconciling conditions kept, no Freight history, health or Promotions, ``freightSummary``
    ``N/A``, no auto-promotion; the refresh request and generation recorded as handled."""
    old = dict(stage.get("status") or {})
    generation = meta(stage).get("generation")
    status: dict[str, Any] = {
        key: value
        for key, value in old.items()
        if key
        not in (
            "freightHistory", "health", "currentPromotion", "lastPromotion",
            "autoPromotionHolds", "conditions", "phase", "currentFreight",
        )
    }  # fmt: skip
    status["observedGeneration"] = generation
    token = ann.refresh_token(stage)
    if token:
        status["lastHandledRefresh"] = token
    status["freightSummary"] = "N/A"
    status["autoPromotionEnabled"] = False
    kept = [c for c in old.get("conditions") or () if c.get("type") == "Ready"]
    status["conditions"] = set_condition(kept, Condition("Ready", "True", "Ready"), now, generation)
    return status
