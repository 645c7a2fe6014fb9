"""Rendering a project's status page on the server: a 50-Stage project, its pipeline graph and
Freight timeline included.

What a page request and every event-stream refresh do after reading the caches: build the view
(:func:`app.ui.views.project_view`: Stage cards, the graph with its layout, the timeline), render
the fragment (:func:`app.ui.html.project_fragment`: tables, SVG, timeline) and wrap it in the
page (:func:`app.ui.html.layout`). The project (``tests/support/pipelines.big_project``) has
Stages in waves of five, each taking Freight from one or two Stages of the wave before (fan-out
and fan-in), every Stage holding Freight, a running and a queued Promotion in every fifth Stage,
30 Freight and a Warehouse with discovered artifacts. Pure CPU, one thread, no I/O.

Target: median < 50 ms per render for 50 Stages.

Run: .venv/bin/python bench/bench_pages.py [--stages 50] [--freight 30] [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.ui import html as h
from app.ui.graph import graph_html, pipeline_graph
from app.ui.views import Masker, project_view
from bench import limits
from tests.support.pipelines import NS, big_project

TARGET_MS = 50.0


def timed(runs: int, work: Callable[[], Any]) -> list[float]:
    work()  # warm up (imports, caches)
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        out.append((time.perf_counter() - start) * 1000)
    return out


def row(name: str, values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return (
        f"{name:<26} median {statistics.median(values):7.2f} ms   p95 {p95:7.2f} ms   "
        f"max {values[-1]:7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=50)
    parser.add_argument("--freight", type=int, default=30)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    project = big_project(args.stages, args.freight)
    stages, promotions = project["stages"], project["promotions"]
    freights, warehouses = project["freights"], project["warehouses"]
    masker = Masker(["a-configured-secret-value"])
    now = datetime.now(UTC)

    def view() -> Any:
        return project_view(
            NS, stages, promotions, freights, masker=masker, warehouses=warehouses, now=now
        )

    built = view()

    def page() -> str:
        fragment = h.project_fragment(view())
        return h.layout(f"Project {NS}", fragment, crumbs=(("Projects", "/ui/"), (NS, None)))

    assert built.graph is not None
    graph = built.graph
    results = [
        ("whole page (view + HTML)", timed(args.runs, page)),
        ("  view (project_view)", timed(args.runs, view)),
        ("  fragment HTML", timed(args.runs, lambda: h.project_fragment(built))),
        (
            "  graph + layout alone",
            timed(
                args.runs,
                lambda: pipeline_graph(NS, stages, built.stages, freights, warehouses),
            ),
        ),
        ("  graph SVG alone", timed(args.runs, lambda: graph_html(graph))),
    ]
    size = len(page().encode())
    print(
        f"{args.stages} Stages, {len(promotions)} Promotions, {len(freights)} Freight, "
        f"{len(graph.edges)} edges, {len(graph.layout.layers) if graph.layout else 0} columns; "
        f"page {size / 1024:.0f} KiB; {args.runs} runs"
    )
    for name, values in results:
        print(row(name, values))
    median = statistics.median(results[0][1])
    verdict = "OK" if median < TARGET_MS else "OVER"
    print(f"target: median whole page < {TARGET_MS:.0f} ms: {verdict} ({median:.1f} ms)")


if __name__ == "__main__":
    limits.bound()
    main()
