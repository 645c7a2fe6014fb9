"""The project page's Freight timeline: the project's Freight, newest first, each with where it is
now and where it has been, so a glance answers "is this release in prod yet?" and "what is
waiting for uat?".

For each Freight, in the pipeline's Stage order (left to right, as the graph draws them):

- **now in**: the Stages whose current Freight (``status.freightHistory[0]``) it is;
- **verified in**: ``status.verifiedIn`` of the Freight, and any Stage whose Freight history
  records a successful verification of it (the two agree once the controller has written both);
- **promoting to**: Stages with a running or queued Promotion of it;
- **waiting for**: Stages it is available to (:func:`promoter.resources.stages.available_to`:
directly from
  its Warehouse, or verified upstream and soaked) that hold older Freight of the same origin or
  none, and are not already promoting it. Freight older than what a Stage holds is available
  too, but nobody is waiting for it there.

Decided purely here (:func:`freight_timeline`, objects and ``now`` in); drawn by the template
``app/ui/templates/timeline.html`` (:func:`app.ui.html.timeline_html`), with the same marks
as the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from promoter.chat.views import SHORT_NAME
from promoter.resources.model import meta, name_of, parse_time
from promoter.resources.stages import available_to, phase_of

# Older Freight is summarised in one line: a busy Warehouse makes hundreds.
TIMELINE_LIMIT = 15


@dataclass(frozen=True, slots=True)
class FreightEntry:
    name: str
    alias: str
    origin: str  # the Warehouse
    created: str
    artifacts: tuple[str, ...]
    now_in: tuple[str, ...]
    verified_in: tuple[str, ...]
    promoting: tuple[tuple[str, str], ...]  # (Stage, "running" / "queued" / "running, 1 queued")
    waiting: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.alias or self.name[:SHORT_NAME]


@dataclass(frozen=True, slots=True)
class FreightTimeline:
    entries: tuple[FreightEntry, ...]
    older: int = 0  # Freight not shown


def _artifacts(freight: Mapping[str, Any]) -> tuple[str, ...]:
    out = []
    for image in freight.get("images") or ():
        if isinstance(image, Mapping):
            ref = image.get("tag") or str(image.get("digest") or "")[:19]
            out.append(f"{image.get('repoURL', '')}:{ref}")
    for commit in freight.get("commits") or ():
        if isinstance(commit, Mapping):
            ref = commit.get("tag") or str(commit.get("id") or "")[:7]
            out.append(f"{commit.get('repoURL', '')}@{ref}")
    for chart in freight.get("charts") or ():
        if isinstance(chart, Mapping):
            out.append(
                f"{chart.get('name') or chart.get('repoURL', '')} {chart.get('version', '')}"
            )
    for artifact in freight.get("artifacts") or ():  # generic subscriptions'
        if isinstance(artifact, Mapping):
            out.append(f"{artifact.get('subscriptionName', '')} {artifact.get('version', '')}")
    return tuple(out)


def _created(freight: Mapping[str, Any]) -> datetime | None:
    return parse_time(meta(freight).get("creationTimestamp"))


def _origin_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    origin = obj.get("origin") or {}
    return str(origin.get("kind") or "Warehouse"), str(origin.get("name") or "")


def _in_order(names: Iterable[str], order: Sequence[str]) -> tuple[str, ...]:
    rank = {n: i for i, n in enumerate(order)}
    return tuple(sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n)))


def _busy(running: int, queued: int) -> str:
    words = ["running"] if running else []
    return ", ".join([*words, f"{queued} queued"] if queued else words)


def freight_timeline(
    stages: Sequence[Mapping[str, Any]],
    promotions: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    *,
    order: Sequence[str],
    now: datetime | None = None,
    limit: int = TIMELINE_LIMIT,
    mask: Callable[[str], str] = str,
) -> FreightTimeline:
    """The newest ``limit`` Freight with where each is; ``order``: Stage names as drawn;
    ``mask`` hides secrets in artifacts' repository URLs."""
    by_name = {name_of(f): f for f in freights}
    by_alias = {str(f.get("alias")): name_of(f) for f in freights if f.get("alias")}
    here: dict[str, list[str]] = {}
    verified: dict[str, set[str]] = {}
    # What each Stage holds now, per origin: what newer Freight would replace.
    holding: dict[str, dict[tuple[str, str], str]] = {}
    for stage in stages:
        stage_name = name_of(stage)
        history = (stage.get("status") or {}).get("freightHistory") or []
        for i, collection in enumerate(history):
            if not isinstance(collection, Mapping):
                continue
            items = collection.get("items") or {}
            names = [
                str(v.get("name") or "")
                for v in (items.values() if isinstance(items, Mapping) else ())
                if isinstance(v, Mapping)
            ]
            if i == 0:
                for v in items.values() if isinstance(items, Mapping) else ():
                    if isinstance(v, Mapping):
                        holding.setdefault(stage_name, {})[_origin_key(v)] = str(v.get("name"))
                for name in names:
                    here.setdefault(name, []).append(stage_name)
            entries = collection.get("verificationHistory") or ()
            if any(isinstance(e, Mapping) and e.get("phase") == "Successful" for e in entries):
                for name in names:
                    verified.setdefault(name, set()).add(stage_name)
    # Freight name -> Stage -> [running, queued] Promotions of it.
    promoting: dict[str, dict[str, list[int]]] = {}
    for promotion in promotions:
        phase = phase_of(promotion).value
        if phase not in ("Running", "Pending"):
            continue
        spec = promotion.get("spec") or {}
        ref = str(spec.get("freight") or "")
        name = ref if ref in by_name else by_alias.get(ref, ref)
        counts = promoting.setdefault(name, {}).setdefault(str(spec.get("stage") or ""), [0, 0])
        counts[phase == "Pending"] += 1

    newest = sorted(
        freights,
        key=lambda f: (str(meta(f).get("creationTimestamp") or ""), name_of(f)),
        reverse=True,
    )
    entries = []
    for freight in newest[:limit]:
        name = name_of(freight)
        status = freight.get("status") or {}
        verified_in = set(verified.get(name, ())) | set(status.get("verifiedIn") or {})
        now_in = here.get(name, [])
        busy = promoting.get(name, {})
        busy_stages = set(busy)
        created = _created(freight)
        waiting = []
        for stage in stages:
            stage_name = name_of(stage)
            if stage_name in now_in or stage_name in busy_stages:
                continue
            current = holding.get(stage_name, {}).get(_origin_key(freight))
            if current is not None:
                theirs = _created(by_name.get(current, {}))
                if created is None or theirs is None or theirs >= created:
                    continue
            if available_to(stage, freight, now):
                waiting.append(stage_name)
        entries.append(
            FreightEntry(
                name=name,
                alias=str(freight.get("alias") or ""),
                origin=_origin_key(freight)[1],
                created=created.strftime("%Y-%m-%d %H:%M UTC") if created else "",
                artifacts=tuple(mask(a) for a in _artifacts(freight)),
                now_in=_in_order(now_in, order),
                verified_in=_in_order(verified_in, order),
                promoting=tuple(
                    (stage_name, _busy(*busy[stage_name]))
                    for stage_name in _in_order(busy_stages, order)
                ),
                waiting=_in_order(waiting, order),
            )
        )
    return FreightTimeline(tuple(entries), max(0, len(newest) - limit))


TIMELINE_CSS = """
ol.timeline{list-style:none;margin:.4rem 0;padding:0 0 0 1.1rem;border-left:2px solid
var(--border)}
ol.timeline>li{position:relative;background:var(--panel);border:1px solid var(--border);
border-radius:6px;padding:.55rem .8rem;margin:0 0 .6rem}
ol.timeline>li::before{content:"";position:absolute;left:-1.55rem;top:.9rem;width:.7rem;
height:.7rem;border-radius:50%;background:var(--panel);border:2px solid var(--edge)}
.fr-head{display:flex;flex-wrap:wrap;gap:.2rem .6rem;align-items:baseline}
.fr-alias{font-size:1rem}
.fr-facts{margin:.1rem 0 .3rem;overflow-wrap:anywhere}
ul.fr-where{list-style:none;padding:0;margin:0;display:grid;gap:.15rem}
ul.fr-where li{display:flex;gap:.4rem;align-items:baseline;flex-wrap:wrap}
ul.fr-where .mark{align-self:center}
.fr-label{color:var(--muted);font-size:.85rem;min-width:6.3rem}
"""
