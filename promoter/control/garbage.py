"""The garbage collector's rules (Kargo's ``pkg/garbage``), decided purely.

Nothing else ever deletes a Promotion or a Freight, so without these an install that promotes
a few hundred times a day grows etcd and every replica's caches without bound. Kargo's rules,
which this module keeps (``promotions.go``, ``freight.go``):

- **Promotions, per Stage.** Newest first; the oldest Promotion that is not terminal (Pending,
  Running) marks the boundary: the ``max_promotions`` Promotions after it are kept and the
  older ones are deleted once they are ``min_promotion_age`` old. Everything newer than the
  boundary is kept too, so a running or pending Promotion is never deleted, nor a finished one
  that came after it.
- **Freight, per Warehouse** (its ``origin``). Newest first by ``discoveredAt`` (Kargo's
  ``EffectiveDiscoveredAt``; ours, the Warehouse's stamp before ``creationTimestamp``); the
  oldest Freight some Stage holds now marks the boundary, ``max_freight`` older ones are kept,
  and the rest are deleted once they are ``min_freight_age`` old.

Longshoreman keeps more than Kargo, because deleting those would break what it shows or does
next: a Freight in any entry of a Stage's ``freightHistory`` (auto-rollback's stable Freight and
the pages' history point there), one a Pending or Running Promotion names (by name or alias:
a chat ``/promote`` of an old Freight must not lose it under its feet), and the Freight of each
Stage's newest Succeeded Promotion (its current Freight even before the Stage's status says so:
Promotions of a Stage run one at a time, in order, and the Stage's status is written after the
Promotion's, so a pass in between must not take it). Those never count towards the boundary,
which stays Kargo's.

An object without a ``creationTimestamp`` (never one the API server returned) is of unknown age
and kept; Kargo reads its zero time as "very old", which a hand-built object would not mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from promoter.resources.freight_refs import FreightList, find_freight
from promoter.resources.model import Phase, meta, name_of, namespace_of, parse_time
from promoter.resources.stages import freight_created, phase_of, queue_key

# Kargo's defaults (CollectorConfig): 20 of each, two weeks.
DEFAULT_MAX_RETAINED = 20
DEFAULT_MIN_DELETION_AGE = timedelta(hours=336)


@dataclass(frozen=True, slots=True)
class Retention:
    """What the collector keeps (Kargo's ``CollectorConfig``, less its worker count)."""

    max_promotions: int = DEFAULT_MAX_RETAINED
    min_promotion_age: timedelta = DEFAULT_MIN_DELETION_AGE
    max_freight: int = DEFAULT_MAX_RETAINED
    min_freight_age: timedelta = DEFAULT_MIN_DELETION_AGE


@dataclass(frozen=True, slots=True)
class Doomed:
    """One object to delete, with what the delete must still find (its uid and version), so a
    Promotion that started or a Freight that was replaced since the decision is left alone."""

    namespace: str
    name: str
    uid: str
    resource_version: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Doomed:
        m = meta(obj)
        return cls(
            namespace_of(obj) or "",
            name_of(obj),
            str(m.get("uid") or ""),
            str(m.get("resourceVersion") or ""),
        )


@dataclass(frozen=True, slots=True)
class Garbage:
    """What one pass of the collector deletes, oldest first within each kind."""

    promotions: tuple[Doomed, ...] = ()
    freight: tuple[Doomed, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.promotions or self.freight)


def _created(obj: Mapping[str, Any]) -> datetime | None:
    return parse_time(meta(obj).get("creationTimestamp"))


def _old_enough(when: datetime | None, min_age: timedelta, now: datetime) -> bool:
    return when is not None and now - when >= min_age


def promotions_to_delete(
    promotions: Iterable[Mapping[str, Any]], retention: Retention, now: datetime
) -> list[Mapping[str, Any]]:
    """The Promotions of one Stage that the collector deletes (Kargo's
    ``cleanStagePromotions``), oldest first."""
    newest_first = sorted(promotions, key=queue_key, reverse=True)
    if len(newest_first) <= retention.max_promotions:
        return []
    oldest_unfinished = -1
    for i, promotion in enumerate(newest_first):
        if not phase_of(promotion).terminal:
            oldest_unfinished = i
    first = oldest_unfinished + retention.max_promotions + 1
    doomed = [
        p
        for p in newest_first[first:]
        if _old_enough(_created(p), retention.min_promotion_age, now)
    ]
    return doomed[::-1]


def discovered_at(freight: Mapping[str, Any]) -> str:
    """When the Freight was discovered, as text that sorts by time (Kargo's
    ``EffectiveDiscoveredAt``: ``discoveredAt`` when set, else when it was made)."""
    discovered = parse_time(freight.get("discoveredAt"))
    if discovered is not None:
        return discovered.astimezone(UTC).isoformat(timespec="microseconds")
    return freight_created(freight)


def freight_to_delete(
    freight: Iterable[Mapping[str, Any]],
    *,
    in_use: frozenset[str],
    protected: frozenset[str],
    retention: Retention,
    now: datetime,
) -> list[Mapping[str, Any]]:
    """The Freight of one Warehouse that the collector deletes (Kargo's
    ``cleanWarehouseFreight``), oldest first.

    ``in_use``: the names of the Freight some Stage holds now (Kargo's boundary);
    ``protected``: the names of those never deleted whatever their place (see the module)."""
    newest_first = sorted(freight, key=lambda f: (discovered_at(f), name_of(f)), reverse=True)
    if len(newest_first) <= retention.max_freight:
        return []
    oldest_in_use = -1
    for i, f in enumerate(newest_first):
        if name_of(f) in in_use:
            oldest_in_use = i
    first = oldest_in_use + retention.max_freight + 1
    doomed = [
        f
        for f in newest_first[first:]
        if name_of(f) not in protected
        and _old_enough(parse_time(discovered_at(f)), retention.min_freight_age, now)
    ]
    return doomed[::-1]


def current_freight(stage: Mapping[str, Any]) -> set[str]:
    """The Freight a Stage holds now: the head of its ``freightHistory`` (Kargo's
    ``StagesByFreight`` index)."""
    history = (stage.get("status") or {}).get("freightHistory") or []
    return _names(history[:1])


def _names(collections: Sequence[Any]) -> set[str]:
    out: set[str] = set()
    for collection in collections:
        items = collection.get("items") if isinstance(collection, Mapping) else None
        for ref in items.values() if isinstance(items, Mapping) else ():
            if isinstance(ref, Mapping) and ref.get("name"):
                out.add(str(ref["name"]))
    return out


def _origin(freight: Mapping[str, Any]) -> tuple[str, str]:
    origin = freight.get("origin") or {}
    return (str(origin.get("kind") or "Warehouse"), str(origin.get("name") or ""))


def collect(
    *,
    stages: Iterable[Mapping[str, Any]],
    promotions: Iterable[Mapping[str, Any]],
    freight: Iterable[Mapping[str, Any]],
    retention: Retention,
    now: datetime,
) -> Garbage:
    """One pass of the collector over everything it sees: which Promotions and Freight go."""
    promotions = list(promotions)
    by_stage: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for p in promotions:
        by_stage[(namespace_of(p) or "", str((p.get("spec") or {}).get("stage") or ""))].append(p)
    doomed_promotions = [
        Doomed.of(p)
        for key in sorted(by_stage)
        for p in promotions_to_delete(by_stage[key], retention, now)
    ]

    in_use: dict[str, set[str]] = defaultdict(set)
    protected: dict[str, set[str]] = defaultdict(set)
    for s in stages:
        namespace = namespace_of(s) or ""
        in_use[namespace] |= current_freight(s)
        protected[namespace] |= _names((s.get("status") or {}).get("freightHistory") or [])
    for (namespace, _), of_stage in by_stage.items():
        for p in of_stage:
            if not phase_of(p).terminal:
                protected[namespace].add(str((p.get("spec") or {}).get("freight") or ""))
        succeeded = [p for p in of_stage if phase_of(p) is Phase.SUCCEEDED]
        if succeeded:
            # The Stage's Freight as soon as its status catches up with the Promotion: the
            # Stage's own status, written right after, may not be in the cache yet.
            latest = max(succeeded, key=queue_key)
            protected[namespace].add(str((latest.get("spec") or {}).get("freight") or ""))
    by_namespace: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for f in freight:
        by_namespace[namespace_of(f) or ""].append(f)
    doomed_freight: list[Doomed] = []
    for namespace in sorted(by_namespace):
        # References name a Freight or its alias; the one resolver says which Freight they mean.
        lookup = FreightList(by_namespace[namespace])
        kept = {
            name_of(found)
            for ref in protected[namespace] | in_use[namespace]
            if (found := find_freight(ref, lookup)) is not None
        }
        by_origin: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
        for f in lookup:
            by_origin[_origin(f)].append(f)
        for origin in sorted(by_origin):
            doomed_freight += [
                Doomed.of(f)
                for f in freight_to_delete(
                    by_origin[origin],
                    in_use=frozenset(in_use[namespace]),
                    protected=frozenset(kept),
                    retention=retention,
                    now=now,
                )
            ]
    return Garbage(tuple(doomed_promotions), tuple(doomed_freight))
