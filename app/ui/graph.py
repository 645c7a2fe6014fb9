"""The project page's pipeline: Warehouses and Stages as a directed graph, drawn on the server as
inline SVG.

Two halves, both pure:

- :func:`pipeline_graph` decides what the picture says. Nodes are the project's Stages, the
  Warehouses they request Freight from (and any the Warehouse cache knows), and a dashed
  placeholder for an upstream Stage that does not exist. An edge runs from a Warehouse to each
  Stage that takes its Freight directly (``requestedFreight[].sources.direct``) and from a Stage
  to each Stage that lists it in ``sources.stages``. Each Stage node carries its current Freight
  by alias (:func:`promoter.chat.views.freight_label`), health in Kargo's words and verification as
  the Stage card says (:class:`app.ui.views.StageCard`, the same words as ``/status`` in chat),
  and its running and queued Promotions; each Warehouse its latest discovered artifacts, when the
  server keeps Warehouses. The layout (:mod:`app.ui.layout`) is computed here too, once.
- :func:`graph_html` draws it: an ``<svg role="img">`` with a title, a description and an
  ``aria-label`` saying what it shows, every node a link to its page, marks (:mod:`app.ui.marks`)
  whose shape and word say what their colour does, a legend, and the same graph as a list for
  screen readers. No script: it is static markup inside the project fragment, which the page's
  event stream replaces whole, so the picture updates in place.

Everything from the cluster is escaped; names too long for a node are cut with "…" and shown
whole in the node's tooltip (``<title>``) and in the list.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from app.ui.layout import CycleError, Layout, Spacing, layout
from app.ui.marks import MarkKind, health_kind, mark, shape, verification_word
from promoter.chat.views import freight_label
from promoter.resources.model import name_of

if TYPE_CHECKING:  # views.py builds the graph, so this module cannot import it at run time
    from app.ui.views import StageCard

SPACING = Spacing()
# Characters that fit on a node's line (system-ui bold 14 px, monospace 12 px): wider text is
# cut, as SVG text does not wrap.
NAME_CHARS = 21
MONO_CHARS = 24
ARTIFACT_LINES = 3


def stage_href(namespace: str, name: str) -> str:
    # app.ui.html.stage_path's URL; html.py imports this module, so it cannot be imported here.
    return f"/ui/stages/{quote(namespace, safe='')}/{quote(name, safe='')}"


def freight_href(namespace: str, name: str) -> str:
    return f"/ui/freight/{quote(namespace, safe='')}/{quote(name, safe='')}"


def promotion_href(namespace: str, name: str) -> str:
    return f"/ui/promotions/{quote(namespace, safe='')}/{quote(name, safe='')}"


# ---- what the picture says -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Artifact:
    kind: Literal["image", "git", "chart", "artifact"]
    short: str  # what fits on the node: ``nginx:1.27.0``
    full: str  # the whole reference: ``public.ecr.aws/nginx/nginx:1.27.0``


@dataclass(frozen=True, slots=True)
class WarehouseNode:
    name: str
    artifacts: tuple[Artifact, ...] = ()
    # False when the server keeps no Warehouses (no cache): only the name is known.
    known: bool = False
    discovered_at: str = ""

    @property
    def id(self) -> str:
        return f"warehouse:{self.name}"


@dataclass(frozen=True, slots=True)
class StageNode:
    name: str
    freight: tuple[str, ...]  # the current Freight, by alias (else a short name)
    freight_full: str  # ``alias (name)``, for the tooltip and the list
    health: str  # Kargo's word: Healthy | Progressing | Unhealthy | Unknown
    health_message: str
    verification: str  # the Verified condition's reason (Verified, Verifying...)
    running: str | None  # the running Promotion's name
    queued: int
    # The last finished Promotion when it Failed or Errored (a Stage may still look Healthy on
    # its old Freight): its name and phase.
    failed: tuple[str, str] | None = None
    # While its promotion windows are closed: "frozen until ...: Deny window `x` is in effect".
    frozen: str = ""

    @property
    def id(self) -> str:
        return f"stage:{self.name}"

    @property
    def frozen_short(self) -> str:
        """``frozen until 2026-01-12 08:00 UTC``: what fits on the node."""
        return self.frozen.split(": ", 1)[0]

    @property
    def health_kind(self) -> MarkKind:
        return health_kind(self.health)

    @property
    def verification_text(self) -> tuple[str, MarkKind]:
        return verification_word(self.verification)


@dataclass(frozen=True, slots=True)
class MissingNode:
    """An upstream Stage named in ``sources.stages`` that the project does not have."""

    name: str

    @property
    def id(self) -> str:
        return f"missing:{self.name}"


Node = WarehouseNode | StageNode | MissingNode


@dataclass(frozen=True, slots=True)
class Edge:
    source: str  # node ids
    target: str


# No slots: _by_id is a cached_property, which keeps its value in the instance dict.
@dataclass(frozen=True)
class PipelineGraph:
    namespace: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    layout: Layout | None  # None when the edges have a cycle
    cycle: tuple[str, ...] = ()  # node names around the cycle, first repeated last

    @cached_property
    def _by_id(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def node(self, id_: str) -> Node:
        return self._by_id[id_]

    def sources_of(self, id_: str) -> list[Node]:
        return [self.node(e.source) for e in self.edges if e.target == id_]

    def targets_of(self, id_: str) -> list[Node]:
        return [self.node(e.target) for e in self.edges if e.source == id_]

    @property
    def stage_order(self) -> list[str]:
        """Stage names left to right, top to bottom (by name when not drawable)."""
        if self.layout is None:
            return sorted(n.name for n in self.nodes if isinstance(n, StageNode))
        ids = [i for layer in self.layout.layers for i in layer]
        return [i.split(":", 1)[1] for i in ids if i.startswith("stage:")]


def _last_segment(url: str) -> str:
    tail = url.rstrip("/").rsplit("/", 1)[-1]
    return tail.removesuffix(".git") or url


def discovered_artifacts(warehouse: Mapping[str, Any]) -> tuple[Artifact, ...]:
    """The newest artifact per subscription, from ``status.discoveredArtifacts`` (Kargo's
    shape: ``images[].references[]``, ``git[].commits[]``, ``charts[].versions[]``,
    ``results[].artifactReferences[]`` for generic subscriptions, newest first)."""
    found = (warehouse.get("status") or {}).get("discoveredArtifacts") or {}
    if not isinstance(found, Mapping):
        return ()
    out: list[Artifact] = []
    for image in found.get("images") or ():
        refs = image.get("references") or [] if isinstance(image, Mapping) else []
        if not refs or not isinstance(refs[0], Mapping):
            continue
        repo = str(image.get("repoURL") or "")
        tag = str(refs[0].get("tag") or "") or str(refs[0].get("digest") or "")[:19]
        sep = ":" if refs[0].get("tag") else "@"
        out.append(Artifact("image", f"{_last_segment(repo)}{sep}{tag}", f"{repo}{sep}{tag}"))
    for repo_result in [*(found.get("git") or ()), *(found.get("commits") or ())]:
        commits = repo_result.get("commits") or [] if isinstance(repo_result, Mapping) else []
        if not commits or not isinstance(commits[0], Mapping):
            continue
        repo = str(repo_result.get("repoURL") or "")
        ref = str(commits[0].get("tag") or "") or str(commits[0].get("id") or "")[:7]
        out.append(Artifact("git", f"{_last_segment(repo)}@{ref}", f"{repo}@{ref}"))
    for chart in found.get("charts") or ():
        versions = chart.get("versions") or [] if isinstance(chart, Mapping) else []
        if not versions:
            continue
        name = str(chart.get("name") or "") or _last_segment(str(chart.get("repoURL") or ""))
        full = f"{chart.get('repoURL') or ''} {name} {versions[0]}".strip()
        out.append(Artifact("chart", f"{name} {versions[0]}", full))
    for result in found.get("results") or ():
        refs = result.get("artifactReferences") or [] if isinstance(result, Mapping) else []
        if not refs or not isinstance(refs[0], Mapping):
            continue
        name, version = str(result.get("name") or ""), str(refs[0].get("version") or "")
        full = " ".join(x for x in (name, str(refs[0].get("artifactType") or ""), version) if x)
        out.append(Artifact("artifact", f"{name} {version}", full))
    return tuple(out)


def _current_freight(
    stage: Mapping[str, Any], freights: Sequence[Mapping[str, Any]]
) -> tuple[tuple[str, ...], str]:
    history = (stage.get("status") or {}).get("freightHistory") or []
    items = (history[0].get("items") or {}) if history and isinstance(history[0], Mapping) else {}
    labels = [
        freight_label(str(v.get("name") or ""), freights, fallback=v if v.get("alias") else None)
        for v in (items.values() if isinstance(items, Mapping) else ())
        if isinstance(v, Mapping)
    ]
    return tuple(label.short for label in labels), ", ".join(label.full for label in labels)


def _height(node: Node) -> float:
    """A Warehouse is as tall as the lines it shows (caption, name, artifacts)."""
    if isinstance(node, WarehouseNode):
        lines = min(len(node.artifacts), ARTIFACT_LINES) or (1 if node.known else 0)
        return 46 + 16 * lines if lines else 46
    if isinstance(node, MissingNode):
        return 66
    return SPACING.node_height


def pipeline_graph(
    namespace: str,
    stages: Sequence[Mapping[str, Any]],
    cards: Sequence[StageCard],
    freights: Sequence[Mapping[str, Any]],
    warehouses: Sequence[Mapping[str, Any]] | None = None,
    mask: Callable[[str], str] = str,
) -> PipelineGraph:
    """The project's pipeline. ``cards`` are the Stages' cards (health, verification, the
    queue); ``warehouses`` the Warehouse objects, or None when the server keeps none (then
    Warehouses are known by the name Stages request them by). ``mask`` hides secrets in the
    artifacts' repository URLs (:meth:`app.ui.views.Masker.text`)."""
    by_card = {c.name: c for c in cards}
    stage_names = {name_of(s) for s in stages}
    nodes: dict[str, Node] = {}
    edges: set[Edge] = set()
    known = {name_of(w): w for w in warehouses or ()}
    for name, warehouse in sorted(known.items()):
        node = WarehouseNode(
            name,
            tuple(
                Artifact(a.kind, mask(a.short), mask(a.full))
                for a in discovered_artifacts(warehouse)
            ),
            known=True,
            discovered_at=str(
                ((warehouse.get("status") or {}).get("discoveredArtifacts") or {}).get(
                    "discoveredAt"
                )
                or ""
            ),
        )
        nodes[node.id] = node
    for stage in sorted(stages, key=name_of):
        name = name_of(stage)
        card = by_card.get(name)
        freight, full = _current_freight(stage, freights)
        stage_node = StageNode(
            name=name,
            freight=freight,
            freight_full=full,
            health=card.health if card else "Unknown",
            health_message=card.health_message if card else "",
            verification=card.verification if card else "",
            running=card.running.name if card and card.running else None,
            queued=len(card.queued) if card else 0,
            failed=(
                (card.last.name, card.last.phase)
                if card and card.last and card.last.phase in ("Failed", "Errored")
                else None
            ),
            frozen=card.window if card else "",
        )
        nodes[stage_node.id] = stage_node
    for stage in stages:
        target = f"stage:{name_of(stage)}"
        for request in (stage.get("spec") or {}).get("requestedFreight") or ():
            if not isinstance(request, Mapping):
                continue
            origin = request.get("origin") or {}
            sources = request.get("sources") or {}
            if sources.get("direct") and origin.get("kind", "Warehouse") == "Warehouse":
                warehouse_name = str(origin.get("name") or "")
                if warehouse_name:
                    wnode = WarehouseNode(warehouse_name)
                    nodes.setdefault(wnode.id, wnode)
                    edges.add(Edge(wnode.id, target))
            for upstream in sources.get("stages") or ():
                upstream = str(upstream)
                if upstream in stage_names:
                    edges.add(Edge(f"stage:{upstream}", target))
                    continue
                missing = MissingNode(upstream)
                nodes.setdefault(missing.id, missing)
                edges.add(Edge(missing.id, target))
    ordered = tuple(sorted(nodes.values(), key=lambda n: n.id))
    sorted_edges = tuple(sorted(edges, key=lambda e: (e.source, e.target)))
    heights = {n.id: _height(n) for n in ordered if not isinstance(n, StageNode)}
    try:
        drawn: Layout | None = layout(
            [n.id for n in ordered],
            [(e.source, e.target) for e in sorted_edges],
            SPACING,
            heights,
        )
        cycle: tuple[str, ...] = ()
    except CycleError as error:
        drawn, cycle = None, tuple(i.split(":", 1)[1] for i in error.cycle)
    return PipelineGraph(namespace, ordered, sorted_edges, drawn, cycle)


# ---- drawing ------------------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _n(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _mark_at(kind: MarkKind, x: float, y: float, size: float = 13) -> str:
    scale = size / 16
    return (
        f'<g class="mark m-{kind}" transform="translate({_n(x)} {_n(y)}) scale({scale:.4f})">'
        f"{shape(kind)}</g>"
    )


def _text(x: float, y: float, text: str, cls: str) -> str:
    return f'<text x="{_n(x)}" y="{_n(y)}" class="{cls}">{_e(text)}</text>'


def _pill(right: float, y: float, kind: MarkKind | None, text: str, cls: str) -> tuple[str, float]:
    """A pill whose right edge is at ``right``; returns it and its left edge."""
    width = 14 + len(text) * 6.4 + (14 if kind else 0)
    left = right - width
    body = [
        f'<g class="pill {cls}">',
        f'<rect x="{_n(left)}" y="{_n(y)}" width="{_n(width)}" height="18" rx="9"/>',
    ]
    text_x = left + 7
    if kind:
        body.append(_mark_at(kind, left + 6, y + 4, 10))
        text_x += 12
    body.append(_text(text_x, y + 13, text, "pill-text"))
    body.append("</g>")
    return "".join(body), left


def _stage_tooltip(node: StageNode) -> str:
    parts = [f"Stage {node.name}", f"Freight: {node.freight_full or 'none'}"]
    parts.append(
        f"Health: {node.health}" + (f" ({node.health_message})" if node.health_message else "")
    )
    parts.append(f"Verification: {node.verification_text[0]}")
    if node.running:
        parts.append(f"Running: {node.running}")
    if node.queued:
        parts.append(f"Queued: {node.queued}")
    if node.failed:
        parts.append(f"Last Promotion {node.failed[0]}: {node.failed[1]}")
    if node.frozen:
        parts.append(node.frozen)
    return "\n".join(parts)


def _stage_svg(namespace: str, node: StageNode, x: float, y: float, w: float, h: float) -> str:
    verification, vkind = node.verification_text
    hkind = node.health_kind
    classes = (
        f"node stage h-{hkind}"
        + (" running" if node.running else "")
        + (" failed" if node.failed else "")
        + (" frozen" if node.frozen else "")
    )
    out = [
        f'<g class="{classes}" data-node="{_e(node.id)}" data-health="{_e(node.health)}" '
        f'data-verification="{_e(node.verification)}" '
        f'data-freight="{_e(", ".join(node.freight))}" '
        f'data-running="{_e(node.running or "")}" data-queued="{node.queued}" '
        f'data-failed="{_e(node.failed[0] if node.failed else "")}" '
        f'data-frozen="{_e(node.frozen)}">',
        f'<a href="{_e(stage_href(namespace, node.name))}">',
        f"<title>{_e(_stage_tooltip(node))}</title>",
        f'<rect class="box" x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="8"/>',
        f'<rect class="stripe m-{hkind}" x="{_n(x)}" y="{_n(y + 8)}" width="4" '
        f'height="{_n(h - 16)}" rx="2"/>',
        _text(x + 14, y + 24, _fit(node.name, NAME_CHARS), "name"),
    ]
    if node.freight:
        out.append(_mark_at("here", x + 14, y + 34.5, 11))
        label = _fit(", ".join(node.freight), MONO_CHARS - 2)
        out.append(_text(x + 30, y + 44, label, "freight"))
    else:
        out.append(_text(x + 14, y + 44, "no Freight yet", "freight none"))
    out.append(_mark_at(hkind, x + 14, y + 55, 13))
    out.append(_text(x + 32, y + 66, node.health, f"state t-{hkind}"))
    out.append(_mark_at(vkind, x + 14, y + 75, 13))
    out.append(_text(x + 32, y + 86, _fit(verification, NAME_CHARS + 2), f"state t-{vkind}"))
    right = x + w - 8
    # On the bottom edge: what stops this Stage (a failed last Promotion, a closed window).
    bottom = x + w - 8
    if node.frozen:
        pill, bottom = _pill(bottom, y + h - 9, "wait", node.frozen_short, "frozen-badge")
        out.append(pill)
        bottom -= 4
    if node.failed:
        pill, _ = _pill(bottom, y + h - 9, "bad", f"last {node.failed[1]}", "failed-badge")
        out.append(pill)
    if node.queued:
        waits = f"+{node.queued} queued" + (", held" if node.frozen else "")
        pill, right = _pill(right, y - 9, None, waits, "queued")
        out.append(pill)
        right -= 4
    if node.running:
        pill, _ = _pill(right, y - 9, "play", "running", "running-badge")
        out.append(pill)
    out.append("</a></g>")
    return "".join(out)


def _warehouse_svg(node: WarehouseNode, x: float, y: float, w: float, h: float) -> str:
    lines = [a.full for a in node.artifacts]
    tooltip = "\n".join([f"Warehouse {node.name}", *lines]) if lines else f"Warehouse {node.name}"
    out = [
        f'<g class="node warehouse" data-node="{_e(node.id)}" '
        f'data-artifacts="{_e(", ".join(a.short for a in node.artifacts))}">',
        f'<a href="#{_e(_anchor(node.id))}">',
        f"<title>{_e(tooltip)}</title>",
        f'<rect class="box" x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="3"/>',
        # A warehouse's roof line: the node's shape says "Warehouse" as well as its caption.
        f'<path class="roof" d="M{_n(x)} {_n(y + 14)}h{_n(w)}"/>',
        _text(x + 12, y + 11, "WAREHOUSE", "kind"),
        _text(x + 12, y + 34, _fit(node.name, NAME_CHARS), "name"),
    ]
    if node.known and not node.artifacts:
        out.append(_text(x + 12, y + 56, "nothing discovered yet", "artifact none"))
    for i, artifact in enumerate(node.artifacts[:ARTIFACT_LINES]):
        more = len(node.artifacts) - ARTIFACT_LINES
        text = artifact.short if i < ARTIFACT_LINES - 1 or more <= 0 else f"+{more + 1} more"
        out.append(_text(x + 12, y + 55 + i * 16, _fit(text, MONO_CHARS), "artifact"))
    out.append("</a></g>")
    return "".join(out)


def _missing_svg(node: MissingNode, x: float, y: float, w: float, h: float) -> str:
    return (
        f'<g class="node missing" data-node="{_e(node.id)}">'
        f"<title>{_e(f'Stage {node.name} is named as a source but does not exist')}</title>"
        f'<rect class="box" x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="8"/>'
        + _text(x + 14, y + 26, _fit(node.name, NAME_CHARS), "name")
        + _text(x + 14, y + 48, "no such Stage", "freight none")
        + "</g>"
    )


def _edge_path(points: Sequence[tuple[float, float]]) -> str:
    """Horizontal-tangent cubic curves through the points: smooth S-bends between columns."""
    (x0, y0), rest = points[0], points[1:]
    d = [f"M{_n(x0)} {_n(y0)}"]
    for x1, y1 in rest:
        if y1 == y0:
            d.append(f"L{_n(x1)} {_n(y1)}")
        else:
            mid = (x0 + x1) / 2
            d.append(f"C{_n(mid)} {_n(y0)} {_n(mid)} {_n(y1)} {_n(x1)} {_n(y1)}")
        x0, y0 = x1, y1
    return "".join(d)


def _anchor(id_: str) -> str:
    return "pipeline-" + id_.replace(":", "-")


def _describe(graph: PipelineGraph) -> str:
    stages = [n for n in graph.nodes if isinstance(n, StageNode)]
    warehouses = [n for n in graph.nodes if isinstance(n, WarehouseNode)]
    flows = "; ".join(
        f"{n.name} feeds {', '.join(t.name for t in graph.targets_of(n.id))}"
        for n in graph.nodes
        if graph.targets_of(n.id)
    )
    return (
        f"{len(warehouses)} Warehouse(s) and {len(stages)} Stage(s), left to right in the order "
        f"Freight flows. {flows}."
        + (" The list after the picture says the same in text." if stages else "")
    )


def _svg(graph: PipelineGraph, drawn: Layout) -> str:
    ns = graph.namespace
    desc = _describe(graph)
    title = f"Pipeline of project {ns}"
    running = {n.id for n in graph.nodes if isinstance(n, StageNode) and n.running}
    out = [
        f'<svg class="pipeline" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{_e(title + ": " + desc)}" '
        f'width="{_n(drawn.width)}" height="{_n(drawn.height + 10)}" '
        f'viewBox="0 -10 {_n(drawn.width)} {_n(drawn.height + 10)}">',
        f"<title>{_e(title)}</title><desc>{_e(desc)}</desc>",
        '<defs><marker id="pipeline-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto">'
        '<path d="M0 0L10 5L0 10z" class="arrowhead"/></marker>'
        '<marker id="pipeline-arrow-run" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto">'
        '<path d="M0 0L10 5L0 10z" class="arrowhead run"/></marker></defs>',
        '<g class="edges">',
    ]
    for route in drawn.routes:
        active = route.target in running
        marker = "pipeline-arrow-run" if active else "pipeline-arrow"
        out.append(
            f'<path class="edge{" active" if active else ""}" data-from="{_e(route.source)}" '
            f'data-to="{_e(route.target)}" d="{_edge_path(route.points)}" '
            f'marker-end="url(#{marker})"/>'
        )
    out.append('</g><g class="nodes">')
    for node in graph.nodes:
        box = drawn.boxes[node.id]
        x, y, w, h = box.x, box.y, box.width, box.height
        if isinstance(node, StageNode):
            out.append(_stage_svg(ns, node, x, y, w, h))
        elif isinstance(node, WarehouseNode):
            out.append(_warehouse_svg(node, x, y, w, h))
        else:
            out.append(_missing_svg(node, x, y, w, h))
    out.append("</g></svg>")
    return "".join(out)


def _list_item(graph: PipelineGraph, node: Node) -> str:
    ns = graph.namespace
    sources = ", ".join(
        f"{s.name} ({'Warehouse' if isinstance(s, WarehouseNode) else 'Stage'})"
        for s in graph.sources_of(node.id)
    )
    targets = ", ".join(t.name for t in graph.targets_of(node.id))
    flow = (f" Takes Freight from {sources}." if sources else "") + (
        f" Passes it to {targets}." if targets else ""
    )
    if isinstance(node, StageNode):
        verification, _ = node.verification_text
        running = (
            f' Running: <a href="{_e(promotion_href(ns, node.running))}">{_e(node.running)}</a>.'
            if node.running
            else ""
        )
        queued = f" {node.queued} queued." if node.queued else ""
        if node.frozen:
            queued += f" It is {node.frozen}" + (": the queue waits." if node.queued else ".")
        failed = (
            f' Last Promotion <a href="{_e(promotion_href(ns, node.failed[0]))}">'
            f"{_e(node.failed[0])}</a> {_e(node.failed[1])}."
            if node.failed
            else ""
        )
        return (
            f'<li data-node="{_e(node.id)}"><a href="{_e(stage_href(ns, node.name))}">'
            f"{_e(node.name)}</a> (Stage).{_e(flow)} Freight: {_e(node.freight_full or 'none')}. "
            f"Health: {_e(node.health)}. "
            f"Verification: {_e(verification)}.{running}{_e(queued)}{failed}</li>"
        )
    if isinstance(node, WarehouseNode):
        found = (
            " Latest: " + ", ".join(a.full for a in node.artifacts) + "."
            if node.artifacts
            else (" Nothing discovered yet." if node.known else "")
        )
        return (
            f'<li id="{_e(_anchor(node.id))}" data-node="{_e(node.id)}">'
            f"{_e(node.name)} (Warehouse).{_e(flow)}{_e(found)}</li>"
        )
    return (
        f'<li data-node="{_e(node.id)}">{_e(node.name)}: named as an upstream Stage but no such '
        f"Stage exists.{_e(flow)}</li>"
    )


LEGEND: tuple[tuple[MarkKind, str], ...] = (
    ("ok", "Healthy / Verified"),
    ("run", "Progressing / Verifying"),
    ("bad", "Unhealthy / failed"),
    ("wait", "waiting"),
    ("unknown", "Unknown"),
    ("none", "not verified"),
    ("here", "current Freight"),
    ("play", "Promotion running"),
)


def legend_html() -> str:
    items = "".join(f"<li>{mark(kind)} {_e(text)}</li>" for kind, text in LEGEND)
    return f'<ul class="legend" aria-label="What the marks mean">{items}</ul>'


def graph_html(graph: PipelineGraph) -> str:
    """The pipeline section of the project page: the picture (or why there is none), its
    legend, and the same as a list for screen readers."""
    listing = "".join(_list_item(graph, n) for n in graph.nodes)
    text = f'<ul class="sr-only pipeline-list">{listing}</ul>'
    if graph.layout is None:
        cycle = " → ".join(graph.cycle)
        return (
            '<div class="card pipeline-cycle" role="note">'
            f"The Stages' sources form a cycle (<code>{_e(cycle)}</code>), so the pipeline "
            "cannot be drawn. Freight can never reach these Stages through each other; check "
            "their <code>requestedFreight</code>.</div>"
            + listing.join(('<ul class="pipeline-list">', "</ul>"))
        )
    return (
        '<figure class="pipeline-figure">'
        f'<div class="pipeline-scroll">{_svg(graph, graph.layout)}</div>'
        f"<figcaption>{legend_html()}</figcaption></figure>{text}"
    )


GRAPH_CSS = """
.pipeline-figure{margin:.4rem 0 1rem}
.pipeline-scroll{overflow-x:auto;background:var(--panel);border:1px solid var(--border);
border-radius:6px;padding:.3rem}
svg.pipeline{display:block;font:13px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
svg.pipeline .box{fill:var(--panel);stroke:var(--border);stroke-width:1.2}
svg.pipeline .warehouse .box{fill:var(--wh)}
svg.pipeline .warehouse .roof{stroke:var(--border);stroke-width:1.2}
svg.pipeline .missing .box{fill:none;stroke:var(--muted);stroke-dasharray:5 4}
svg.pipeline .running .box{stroke:var(--run);stroke-width:2}
svg.pipeline a:hover .box,svg.pipeline a:focus .box{stroke:var(--link);stroke-width:2}
svg.pipeline a:focus{outline:none}
svg.pipeline a:focus-visible .box{stroke-width:3}
svg.pipeline text{fill:var(--fg)}
svg.pipeline .name{font-weight:600;font-size:14px}
svg.pipeline .kind{font-size:9px;letter-spacing:.08em;fill:var(--muted)}
svg.pipeline .freight,svg.pipeline .artifact{font:12px ui-monospace,SFMono-Regular,Menlo,
Consolas,monospace}
svg.pipeline .none{fill:var(--muted);font-style:italic}
svg.pipeline .state{font-size:12.5px}
svg.pipeline .stripe{fill:currentColor}
svg.pipeline .edge{fill:none;stroke:var(--edge);stroke-width:1.6}
svg.pipeline .edge.active{stroke:var(--run);stroke-width:2.2;stroke-dasharray:6 3}
svg.pipeline .arrowhead{fill:var(--edge)} svg.pipeline .arrowhead.run{fill:var(--run)}
svg.pipeline .pill rect{fill:var(--panel);stroke:var(--border)}
svg.pipeline .pill-text{font-size:11px;font-weight:600}
svg.pipeline .running-badge rect{fill:var(--run);stroke:var(--run)}
svg.pipeline .failed-badge rect{fill:var(--bad);stroke:var(--bad)}
svg.pipeline .frozen-badge rect{fill:var(--wait);stroke:var(--wait)}
svg.pipeline .failed-badge .pill-text,svg.pipeline .frozen-badge .pill-text{fill:var(--on-mark)}
svg.pipeline .failed-badge .mark,svg.pipeline .frozen-badge .mark{color:var(--on-mark)}
svg.pipeline .running-badge .pill-text{fill:var(--on-mark)}
svg.pipeline .running-badge .mark{color:var(--on-mark)}
ul.legend{display:flex;flex-wrap:wrap;gap:.2rem 1rem;list-style:none;padding:0;margin:.4rem 0 0;
font-size:.8rem;color:var(--muted)}
ul.legend li{display:flex;align-items:center;gap:.3rem}
"""
