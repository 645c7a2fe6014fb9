"""The Freight page, ``/ui/freight/{namespace}/{name}``: one Freight's artifacts, where it is
(now in, verified in, promoting to, waiting for: the timeline's rule,
:func:`app.ui.timeline.freight_timeline`), the Stages it is approved for and by whom, its
Promotions, and what to do next (Promote to a Stage it is available to, Approve for one that
requests it; each with its chat command).

What the Freight would change in each Stage that requests it and does not run it
(``<section id="changes">``): the Freight diff against what each runs now
(:func:`diff_bases` names them; the pages fetch the commit ranges through the GitHub App's
cache before rendering, and :mod:`promoter.chat.diff` builds each diff).

Decided from the objects (:func:`freight_page`) and rendered plainly (:func:`freight_fragment`),
every value escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.ui.timeline import FreightEntry, freight_timeline
from promoter.chat.diff import current_freight
from promoter.resources.model import meta, name_of
from promoter.resources.stages import approval_of, available_to, requests_origin


@dataclass(frozen=True, slots=True)
class Artifact:
    kind: str  # image, commit, chart, artifact (a generic subscription's)
    repo: str  # the repository; a generic artifact's subscription name
    ref: str  # tag, commit id, version
    detail: str = ""  # digest, commit message, a generic artifact's type


@dataclass(frozen=True, slots=True)
class Approved:
    stage: str
    by: str
    at: str


@dataclass(frozen=True, slots=True)
class FreightPage:
    namespace: str
    name: str
    alias: str
    origin: str
    created: str
    artifacts: tuple[Artifact, ...]
    where: FreightEntry
    approved: tuple[Approved, ...]
    # Stages it may be promoted to now (and why not, for the frozen ones), and Stages that
    # request its origin but may not take it yet (approving would let them).
    promotable: tuple[tuple[str, str], ...]
    approvable: tuple[str, ...]


def _artifacts(freight: Mapping[str, Any], mask: Any) -> tuple[Artifact, ...]:
    out = []
    for image in freight.get("images") or ():
        if isinstance(image, Mapping):
            out.append(
                Artifact(
                    "image",
                    mask(str(image.get("repoURL") or "")),
                    str(image.get("tag") or ""),
                    str(image.get("digest") or ""),
                )
            )
    for commit in freight.get("commits") or ():
        if isinstance(commit, Mapping):
            out.append(
                Artifact(
                    "commit",
                    mask(str(commit.get("repoURL") or "")),
                    str(commit.get("tag") or commit.get("id") or ""),
                    mask(str(commit.get("message") or "")),
                )
            )
    for chart in freight.get("charts") or ():
        if isinstance(chart, Mapping):
            repo = str(chart.get("repoURL") or "")
            name = str(chart.get("name") or "")
            out.append(
                Artifact(
                    "chart",
                    mask(f"{repo}/{name}" if name else repo),
                    str(chart.get("version") or ""),
                )
            )
    for artifact in freight.get("artifacts") or ():
        if isinstance(artifact, Mapping):
            out.append(
                Artifact(
                    "artifact",
                    str(artifact.get("subscriptionName") or ""),
                    str(artifact.get("version") or ""),
                    str(artifact.get("artifactType") or ""),
                )
            )
    return tuple(out)


def freight_page(
    namespace: str,
    freight: Mapping[str, Any],
    stages: Sequence[Mapping[str, Any]],
    promotions: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    *,
    order: Sequence[str],
    windows: Mapping[str, str],
    now: datetime | None,
    mask: Any = str,
) -> FreightPage:
    """The page of ``freight``; ``order`` the Stages as the graph draws them, ``windows`` each
    frozen Stage's window text (as the Stage status records it)."""
    name = name_of(freight)
    timeline = freight_timeline(
        stages, promotions, freights, order=order, now=now, limit=len(freights), mask=mask
    )
    where = next(e for e in timeline.entries if e.name == name)
    approved = []
    for stage in stages:
        approval = approval_of(freight, name_of(stage))
        if approval is not None:
            at = approval.approved_at.strftime("%Y-%m-%d %H:%M UTC") if approval.approved_at else ""
            approved.append(Approved(name_of(stage), approval.approved_by, at))
    rank = {n: i for i, n in enumerate(order)}
    ordered = sorted(stages, key=lambda s: (rank.get(name_of(s), len(rank)), name_of(s)))
    promotable = tuple(
        (name_of(s), windows.get(name_of(s), ""))
        for s in ordered
        if available_to(s, freight, now) and name_of(s) not in where.now_in
    )
    approvable = tuple(
        name_of(s)
        for s in ordered
        if requests_origin(s, freight)
        and approval_of(freight, name_of(s)) is None
        and not available_to(s, freight, now)
    )
    origin = freight.get("origin") or {}
    created = str(meta(freight).get("creationTimestamp") or "")
    return FreightPage(
        namespace,
        name,
        str(freight.get("alias") or ""),
        f"{origin.get('kind') or 'Warehouse'}/{origin.get('name') or ''}",
        created.replace("T", " ").replace("Z", " UTC"),
        _artifacts(freight, mask),
        where,
        tuple(approved),
        promotable,
        approvable,
    )


def diff_bases(
    freight: Mapping[str, Any],
    stages: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
) -> list[tuple[str, Mapping[str, Any] | None]]:
    """The Stages the Freight page shows a diff for (those that request its origin and do not
    run it), each with the Freight it runs now from that origin (None: none yet)."""
    out = []
    for stage in sorted(stages, key=name_of):
        if not requests_origin(stage, freight):
            continue
        current = current_freight(stage, freight, freights)
        if current is None or name_of(current) != name_of(freight):
            out.append((name_of(stage), current))
    return out
