"""Benchmark of the expression language: cached evaluation and first-compile cost.

Run: ``.venv/bin/python bench/bench_expressions.py``. Prints µs per operation (the median of
several ``timeit`` repeats). The budget is 50 µs per cached evaluation; compiled closures
usually take 1-5 µs.
"""

from __future__ import annotations

import functools
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import limits
from promoter.expressions import (
    Scope,
    compile_expression,
    freight_functions,
    render,
    render_string,
)
from promoter.expressions.compiler import compile_expression as cached_compile
from promoter.expressions.templates import _parse_template

BUDGET_US = 50.0
REPEATS = 7

FREIGHT = {
    "metadata": {"name": "f1"},
    "origin": {"kind": "Warehouse", "name": "w"},
    "images": [{"repoURL": "ghcr.io/example/app", "tag": "1.10.0", "digest": "sha256:abc"}],
    "commits": [{"repoURL": "https://github.com/example/repo.git", "id": "abc123"}],
}
SCOPE = Scope(
    variables={
        "ctx": {"stage": "prod", "project": "demo", "promotion": "p-1"},
        "vars": {"x": "1", "tag": None, "gitRepo": "https://github.com/example/repo.git"},
        "outputs": {"open-pr": {"pr": {"id": 42, "url": "https://x"}}},
        "task": {"outputs": {}},
    },
    functions=freight_functions([FREIGHT]),
)

EXPRESSIONS = [
    "outputs['open-pr'].pr.id",
    "vars.tag ?? 'latest'",
    "ctx.stage == 'prod' && vars.x != nil",
    "imageFrom('ghcr.io/example/app').Tag",
    "semverParse('1.2.3').IncMinor().String()",
    "vars.gitRepo matches '^https://github.com/'",
]
TEMPLATES = [
    "stage/${{ ctx.stage }}",
    "${{ vars.x }}",
    "${{ quote(outputs['open-pr'].pr.id) }}",
]
CONFIG = {
    "repoURL": "${{ vars.gitRepo }}",
    "targetBranch": "stage/${{ ctx.stage }}",
    "message": "Promote ${{ imageFrom('ghcr.io/example/app').Tag }} to ${{ ctx.stage }}",
    "labels": ["promotion", "${{ ctx.project }}"],
}


def per_call_us(fn: Callable[[], Any], number: int) -> float:
    """Median over REPEATS runs of ``number`` calls, in µs per call."""
    runs = timeit.repeat(fn, number=number, repeat=REPEATS)
    return statistics.median(runs) / number * 1e6


def first_compile_us(source: str, *, template: bool) -> float:
    def compile_fresh() -> None:
        cached_compile.cache_clear()
        _parse_template.cache_clear()
        if template:
            render_string(source, SCOPE, where="bench")
        else:
            compile_expression(source)

    return per_call_us(compile_fresh, 200)


def main() -> int:
    rows: list[tuple[str, str, float, float]] = []
    for source in EXPRESSIONS:
        evaluate = per_call_us(
            functools.partial(compile_expression(source).evaluate, SCOPE), 20_000
        )
        rows.append(("expr", source, evaluate, first_compile_us(source, template=False)))
    for template in TEMPLATES:
        render_one = functools.partial(render_string, template, SCOPE, where="bench")
        evaluate = per_call_us(render_one, 20_000)
        rows.append(("template", template, evaluate, first_compile_us(template, template=True)))
    whole = per_call_us(lambda: render(CONFIG, SCOPE), 5_000)
    rows.append(("render", "4-field step config", whole, float("nan")))

    width = max(len(r[1]) for r in rows)
    print(f"{'kind':<9} {'expression':<{width}} {'cached µs':>10} {'compile µs':>11}")
    for kind, source, evaluate, compile_cost in rows:
        print(f"{kind:<9} {source:<{width}} {evaluate:>10.2f} {compile_cost:>11.1f}")
    worst = max(r[2] for r in rows if r[0] != "render")
    verdict = "within" if worst < BUDGET_US else "OVER"
    print(f"\nslowest cached evaluation {worst:.2f} µs: {verdict} the {BUDGET_US:.0f} µs budget")
    # Reported, never a failure: on a shared machine the timing is the scheduler's as much as
    # ours, and `make bench-smoke` (CI) must fail only when a benchmark breaks.
    return 0


if __name__ == "__main__":
    limits.bound()
    raise SystemExit(main())
