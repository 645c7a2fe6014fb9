"""Automatic rollback (ProjectConfig ``autoRollback``), decided purely.

Kargo's auto-rollback ("Working with Projects", *Auto-Rollback*): when a Promotion ends in one of
the policy's ``onPromotion`` phases (``Failed``, ``Errored``; none by default) or a verification
in one of its ``onVerification`` phases (``Failed``, ``Error``; ``[Failed]`` by default), the
Stage is promoted back to its *stable Freight*, the newest Freight verified in it, by a
Promotion annotated ``kargo.akuity.io/rollback: "true"`` (``ctx.meta.promotion.rollback`` in its
steps). Kargo's guards, kept here:

- **settled**: only when no Promotion of the Stage is Pending or Running (a queued one may fix
  the failure itself);
- **maximum failure age**: failures that ended more than 20 minutes ago are ignored (enabling
  the policy on a Stage in a bad state must not roll it back for old news);
- **no rollbacks of rollbacks**: a rollback that fails, or whose verification fails, is left
  alone, so there is never a loop;
- **no stable Freight, nothing to do**; nor when the stable Freight is the failing one.

And one of Longshoreman's: **once per failure**. The rollback Promotion records which failure it
answers (``longshoreman.dev/rollback-of``: ``promotion/<name>`` or ``verification/<id>``), and a
failure some Promotion already answers is never answered again, also after a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from promoter.control.policies import AutoRollback
from promoter.resources import annotations as ann
from promoter.resources.model import name_of, parse_time
from promoter.resources.stages import phase_of

MAX_FAILURE_AGE = timedelta(minutes=20)


@dataclass(frozen=True, slots=True)
class Rollback:
    """Promote ``freight`` (the stable Freight) back into the Stage, answering ``failure``."""

    freight: str
    failure: str  # promotion/<name> | verification/<id>
    reason: str  # what failed, as people read it


def _history(stage: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((stage.get("status") or {}).get("freightHistory") or [])


def _names(entry: Mapping[str, Any]) -> list[str]:
    return [str((v or {}).get("name") or "") for v in (entry.get("items") or {}).values()]


def _verified(entry: Mapping[str, Any]) -> bool:
    return any(
        (v or {}).get("phase") == "Successful" for v in entry.get("verificationHistory") or ()
    )


def stable_freight(
    stage: Mapping[str, Any], failing: str, verified_here: Callable[[str], bool]
) -> str | None:
    """The newest Freight of the Stage's history, other than ``failing``, that was verified in
    it (its history says so, or the Freight's ``status.verifiedIn``)."""
    for entry in _history(stage):
        for name in _names(entry):
            if name and name != failing and (_verified(entry) or verified_here(name)):
                return name
    return None


def _recent(when: str | None, now: datetime) -> bool:
    at = parse_time(when)
    return at is not None and now - at <= MAX_FAILURE_AGE


def _failures(
    stage: Mapping[str, Any],
    promotions: Sequence[Mapping[str, Any]],
    policy: AutoRollback,
    now: datetime,
) -> list[tuple[str, str, str, str]]:
    """(finished at, failure key, failing Freight, reason) of the failures the policy names,
    newest first."""
    by_name = {name_of(p): p for p in promotions}
    out: list[tuple[str, str, str, str]] = []
    history = _history(stage)
    if history:
        entries = history[0].get("verificationHistory") or []
        latest = entries[0] if entries else None
        if latest is not None and latest.get("phase") in policy.on_verification:
            promotion = by_name.get(str(latest.get("promotion") or ""))
            rolled_back = promotion is not None and ann.is_rollback(promotion)
            if not rolled_back and _recent(latest.get("finishTime"), now):
                names = _names(history[0])
                freight = names[0] if names else ""
                message = str(latest.get("message") or "").strip()
                reason = f"verification of Freight {freight} ended {latest.get('phase')}" + (
                    f": {message}" if message else ""
                )
                key = f"verification/{latest.get('id') or latest.get('promotion')}"
                out.append((str(latest.get("finishTime")), key, freight, reason))
    for promotion in promotions:
        phase = phase_of(promotion)
        status = promotion.get("status") or {}
        if phase.value not in policy.on_promotion or ann.is_rollback(promotion):
            continue
        if not _recent(status.get("finishedAt"), now):
            continue
        freight = str((status.get("freight") or {}).get("name") or "") or str(
            (promotion.get("spec") or {}).get("freight") or ""
        )
        message = str(status.get("message") or "").strip()
        reason = f"Promotion {name_of(promotion)} ended {phase.value}" + (
            f": {message}" if message else ""
        )
        out.append(
            (str(status.get("finishedAt")), f"promotion/{name_of(promotion)}", freight, reason)
        )
    out.sort(key=lambda f: f[0], reverse=True)
    return out


def plan_rollback(
    stage: Mapping[str, Any],
    promotions: Sequence[Mapping[str, Any]],
    policy: AutoRollback | None,
    verified_here: Callable[[str], bool],
    now: datetime,
) -> Rollback | None:
    """The rollback the Stage needs now, if any (see the module's rules)."""
    if policy is None:
        return None
    if any(not phase_of(p).terminal for p in promotions):
        return None  # not settled: what is queued or running may fix it
    answered = {ann.rollback_of(p) for p in promotions} - {None}
    failures = _failures(stage, promotions, policy, now)
    if not failures:
        return None
    # Only the newest failure counts: an older one was followed by something newer (a later
    # Promotion, a re-verification) that speaks for the Stage now.
    _, key, failing, reason = failures[0]
    if key in answered:
        return None
    stable = stable_freight(stage, failing, verified_here)
    if stable is None or stable == failing:
        return None
    return Rollback(stable, key, reason)


__all__ = ["MAX_FAILURE_AGE", "Rollback", "plan_rollback", "stable_freight"]
