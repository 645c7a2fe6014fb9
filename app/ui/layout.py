"""A small layered ("Sugiyama") layout for the pipeline graph: nodes and directed edges in,
coordinates out, left to right.

A pipeline is a handful to a few dozen nodes, mostly chains and fans, so the classic steps in
their simplest forms draw it well and stay fast (a 50-Stage project lays out in under
two milliseconds):

1. **Layers** by longest path from the sources: every edge points right, and a Stage sits one
   column after the furthest Stage it takes Freight from.
2. **Dummy nodes** split edges that span several layers, so long edges take part in the
   ordering and are routed between nodes rather than through them.
3. **Ordering** within a layer by the barycentre (mean position) of each node's neighbours,
   sweeping down and up a few times and keeping the order with the fewest crossings.
4. **Coordinates**: a layer's nodes are stacked in order, then moved as a block towards their
   neighbours' mean height (forward, backward, forward), so a chain stays on one line and a fan
   centres on its parent.

Cycles cannot be layered; :func:`layout` raises :class:`CycleError` naming one, and the caller
says so instead of drawing (Stages that take Freight from each other in a ring can never
receive any, which is worth saying plainly).

No layout library: graphviz needs a native binary in the image, and the pure-Python ones
(grandalf, networkx's drawing) would be a dependency for what is about 200 lines here, with our
node sizes, ports and dummy routing still to write around them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

# How many down+up sweeps of barycentre ordering: more rarely helps on pipelines.
SWEEPS = 4


class CycleError(ValueError):
    """The edges contain a cycle; ``cycle`` lists one, first node repeated at the end."""

    def __init__(self, cycle: Sequence[str]) -> None:
        self.cycle = list(cycle)
        super().__init__("cycle: " + " → ".join(self.cycle))


@dataclass(frozen=True, slots=True)
class Box:
    """A laid-out node: top-left corner and size."""

    x: float
    y: float
    width: float
    height: float

    @property
    def left_port(self) -> tuple[float, float]:
        return self.x, self.y + self.height / 2

    @property
    def right_port(self) -> tuple[float, float]:
        return self.x + self.width, self.y + self.height / 2


@dataclass(frozen=True, slots=True)
class Route:
    """A laid-out edge: from the source's right side through any bends to the target's left."""

    source: str
    target: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Layout:
    boxes: dict[str, Box]
    routes: list[Route]
    layers: list[list[str]]  # real nodes only, top to bottom
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Spacing:
    node_width: float = 196
    node_height: float = 96
    column_gap: float = 64  # between layers, where edges run
    row_gap: float = 22  # between nodes of a layer
    dummy_height: float = 6  # the room a long edge takes when it passes a layer
    padding: float = 14


def layers_of(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each node's layer: 0 for sources, else one more than its furthest predecessor.

    Raises :class:`CycleError` when the edges have a cycle. Edges naming unknown nodes are an
    error of the caller (it adds a node for each end), so they raise ``KeyError``.
    """
    successors: dict[str, list[str]] = {n: [] for n in nodes}
    indegree = dict.fromkeys(nodes, 0)
    for source, target in set(edges):
        if source == target:
            raise CycleError([source, source])
        successors[source].append(target)
        indegree[target] += 1
    layer = dict.fromkeys(nodes, 0)
    ready = [n for n in nodes if indegree[n] == 0]
    seen = 0
    while ready:
        node = ready.pop()
        seen += 1
        for nxt in successors[node]:
            layer[nxt] = max(layer[nxt], layer[node] + 1)
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    if seen < len(nodes):
        raise CycleError(_a_cycle([n for n in nodes if indegree[n] > 0], successors))
    return layer


def _a_cycle(left: Sequence[str], successors: Mapping[str, Sequence[str]]) -> list[str]:
    """One cycle among ``left``, the nodes the layering could not place. Each of them still has
    a predecessor among them, so walking predecessors must come back to a node on the path."""
    remaining = set(left)
    predecessors: dict[str, list[str]] = {n: [] for n in remaining}
    for source in remaining:
        for target in successors[source]:
            if target in remaining:
                predecessors[target].append(source)
    node = min(remaining)
    path: list[str] = []
    on_path: dict[str, int] = {}
    while node not in on_path:
        on_path[node] = len(path)
        path.append(node)
        node = min(predecessors[node])
    cycle = list(reversed(path[on_path[node] :]))
    first = cycle.index(min(cycle))  # start at the smallest name: the same message every time
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]


def _dummy(source: str, target: str, layer: int) -> str:
    # NUL cannot occur in a Kubernetes name, so no real node is ever taken for a dummy.
    return f"\0{source}\0{target}\0{layer}"


def is_dummy(node: str) -> bool:
    return node.startswith("\0")


def crossings(order: Sequence[Sequence[str]], edges: Iterable[tuple[str, str]]) -> int:
    """How many pairs of edges between adjacent layers cross (edges go layer i -> i+1)."""
    position = {n: i for layer in order for i, n in enumerate(layer)}
    layer_of = {n: li for li, layer in enumerate(order) for n in layer}
    by_layer: dict[int, list[tuple[int, int]]] = {}
    for source, target in edges:
        by_layer.setdefault(layer_of[source], []).append((position[source], position[target]))
    total = 0
    for pairs in by_layer.values():
        for i, (s1, t1) in enumerate(pairs):
            total += sum(1 for s2, t2 in pairs[i + 1 :] if (s1 - s2) * (t1 - t2) < 0)
    return total


def order_layers(layer_of: Mapping[str, int], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Nodes of each layer, top to bottom: barycentre sweeps from a name-sorted start, keeping
    the order with the fewest crossings. ``edges`` join adjacent layers only (dummies in)."""
    depth = max(layer_of.values(), default=-1) + 1
    order: list[list[str]] = [[] for _ in range(depth)]
    for node in sorted(layer_of, key=lambda n: (is_dummy(n), n)):
        order[layer_of[node]].append(node)
    preds: dict[str, list[str]] = {n: [] for n in layer_of}
    succs: dict[str, list[str]] = {n: [] for n in layer_of}
    for source, target in edges:
        preds[target].append(source)
        succs[source].append(target)

    def sweep(layers: range, neighbours: Mapping[str, list[str]]) -> None:
        for li in layers:
            near = order[li - 1] if neighbours is preds else order[li + 1]
            position = {n: i for i, n in enumerate(near)}
            current = {n: i for i, n in enumerate(order[li])}
            keys = {}
            for node in order[li]:
                around = [position[n] for n in neighbours[node]]
                # A node without neighbours on that side keeps its place.
                centre = sum(around) / len(around) if around else current[node]
                keys[node] = (centre, current[node])
            order[li].sort(key=keys.__getitem__)

    best = [list(layer) for layer in order]
    fewest = crossings(order, edges)
    for _ in range(SWEEPS):
        if fewest == 0:
            break
        sweep(range(1, depth), preds)
        sweep(range(depth - 2, -1, -1), succs)
        now = crossings(order, edges)
        if now < fewest:
            best, fewest = [list(layer) for layer in order], now
    return best


def layout(
    nodes: Sequence[str],
    edges: Iterable[tuple[str, str]],
    spacing: Spacing | None = None,
    heights: Mapping[str, float] | None = None,
) -> Layout:
    """Lay out ``nodes`` (ids) joined by directed ``edges`` left to right.

    ``heights`` overrides the node height per node. Raises :class:`CycleError` on a cycle.
    """
    sp = spacing or Spacing()
    unique = sorted(set(edges))
    layer = layers_of(nodes, unique)
    # Split long edges into unit steps through dummies, remembering each edge's chain.
    layer_of: dict[str, int] = dict(layer)
    unit: list[tuple[str, str]] = []
    chains: list[tuple[str, str, list[str]]] = []
    for source, target in unique:
        chain = [source]
        for li in range(layer[source] + 1, layer[target]):
            dummy = _dummy(source, target, li)
            layer_of[dummy] = li
            chain.append(dummy)
        chain.append(target)
        unit.extend(pairwise(chain))
        chains.append((source, target, chain))
    order = order_layers(layer_of, unit)

    def height(node: str) -> float:
        if is_dummy(node):
            return sp.dummy_height
        return (heights or {}).get(node, sp.node_height)

    # Vertical placement: centres, per layer, in order.
    centre: dict[str, float] = {}
    for nodes_ in order:
        y = 0.0
        for node in nodes_:
            centre[node] = y + height(node) / 2
            y += height(node) + sp.row_gap
    preds: dict[str, list[str]] = {n: [] for n in layer_of}
    succs: dict[str, list[str]] = {n: [] for n in layer_of}
    for source, target in unit:
        preds[target].append(source)
        succs[source].append(target)

    def settle(li: int, neighbours: Mapping[str, list[str]]) -> None:
        nodes_ = order[li]
        wanted = []
        for node in nodes_:
            around = [centre[n] for n in neighbours[node]]
            wanted.append(sum(around) / len(around) if around else centre[node])
        # Stack in order, each as near its wish as the one above allows...
        placed: list[float] = []
        bottom = float("-inf")
        for node, want in zip(nodes_, wanted, strict=True):
            top = max(want - height(node) / 2, bottom)
            placed.append(top + height(node) / 2)
            bottom = top + height(node) + sp.row_gap
        # ...then move the block so that, on average, nodes sit where they want to.
        shift = (sum(wanted) - sum(placed)) / len(placed) if placed else 0.0
        for node, y in zip(nodes_, placed, strict=True):
            centre[node] = y + shift

    depth = len(order)
    for li in range(1, depth):
        settle(li, preds)
    for li in range(depth - 2, -1, -1):
        settle(li, succs)
    for li in range(1, depth):
        settle(li, preds)

    top = min((centre[n] - height(n) / 2 for n in centre), default=0.0)
    lowest = max((centre[n] + height(n) / 2 for n in centre), default=0.0)

    def x_of(li: int) -> float:
        return sp.padding + li * (sp.node_width + sp.column_gap)

    def y_of(node: str) -> float:
        return sp.padding + centre[node] - height(node) / 2 - top

    boxes = {
        node: Box(x_of(layer_of[node]), y_of(node), sp.node_width, height(node))
        for nodes_ in order
        for node in nodes_
        if not is_dummy(node)
    }
    routes = []
    for source, target, chain in chains:
        points = [boxes[source].right_port]
        for dummy in chain[1:-1]:
            y = y_of(dummy) + sp.dummy_height / 2
            x = x_of(layer_of[dummy])
            points += [(x, y), (x + sp.node_width, y)]  # straight past the layer
        points.append(boxes[target].left_port)
        routes.append(Route(source, target, tuple(points)))
    return Layout(
        boxes=boxes,
        routes=routes,
        layers=[[n for n in nodes_ if not is_dummy(n)] for nodes_ in order],
        width=2 * sp.padding + depth * sp.node_width + max(depth - 1, 0) * sp.column_gap,
        height=2 * sp.padding + (lowest - top if centre else 0.0),
    )
