"""Engine overhead per step with no I/O: chains of compose-output steps.

Each step renders a small config that reads the previous step's output, so the numbers include
expression evaluation, output bookkeeping and status updates: everything but the steps' own work.
Target: under 0.2 ms per step, growing linearly with the chain length.

Run: .venv/bin/python bench/bench_engine.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import limits
from promoter.engine import engine
from promoter.engine.builder import build_promotion
from promoter.resources.model import Phase, TaskRef, TaskSpec, parse_stage
from promoter.rules.limits import Limits
from promoter.steps.base import StepServices
from promoter.steps.registry import builtin_registry
from tests.support import objects

FREIGHT = objects.freight("abcdef0123", namespace="b")


class NoTasks:
    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return None


def chain(n: int) -> list[dict[str, object]]:
    steps: list[dict[str, object]] = [{"uses": "compose-output", "as": "s0", "config": {"n": 0}}]
    for i in range(1, n):
        steps.append(
            {
                "uses": "compose-output",
                "as": f"s{i}",
                "config": {"n": f"${{{{ outputs.s{i - 1}.n + 1 }}}}", "stage": "${{ ctx.stage }}"},
            }
        )
    return steps


async def run_once(n: int, work_dir: Path) -> float:
    stage = parse_stage(objects.stage("bench", namespace="b", steps=chain(n)))
    # The longest chain is past the server's default step limit (500): the engine's cost per
    # step is what is measured here, so the limit is raised as an operator would.
    promo = build_promotion(stage, FREIGHT, NoTasks(), actor="bench", limits=Limits(max_steps=n))
    runtime = engine.Runtime(
        registry=builtin_registry(), services=StepServices(), work_dir=work_dir, freight=FREIGHT
    )
    start = time.perf_counter()
    out = await engine.advance(promo, runtime)
    elapsed = time.perf_counter() - start
    assert out.promotion.status.phase is Phase.SUCCEEDED, out.promotion.status.message
    assert out.promotion.status.state[f"s{n - 1}"]["n"] == n - 1
    return elapsed


async def main() -> None:
    print(f"{'steps':>6} {'runs':>5} {'median total ms':>16} {'per step ms':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for n, runs in ((10, 200), (100, 50), (1000, 10)):
            await run_once(n, Path(tmp))  # warm the expression cache
            times = [await run_once(n, Path(tmp)) for _ in range(runs)]
            median = statistics.median(times)
            print(f"{n:>6} {runs:>5} {median * 1e3:>16.3f} {median * 1e3 / n:>12.4f}")


if __name__ == "__main__":
    limits.bound()
    asyncio.run(main())
