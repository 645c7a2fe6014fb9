"""Benchmark: how long hostile or merely huge input holds the server's event loop (issue 34).

Run: ``.venv/bin/python bench/bench_stalls.py [--runs 3]``.

The whole server (``create_app``) runs in this process on its embedded cluster, seeded with
``tests/support/projects.limits_project``. Beside it a ticker sleeps 1 ms at a time and records
how late each wake-up was: the longest lateness is the longest the loop was held, which is how
long ``/healthz``, every webhook and every other project waited. ``/healthz`` is asked after
each case too. Two columns: the longest stall while the Promotion is created (the bench's own
client serialising it and the embedded API server, in this process, validating and storing it:
on a real cluster neither runs in the server's loop) and the longest after that, while the
controller deals with it (on the embedded cluster this still includes the API server validating
each write of the object). Cases, each a Promotion written as kubectl writes it, timed to its
terminal phase:

- ``10,000 own steps``: a Promotion bringing 10,000 steps (refused: over the step limit);
- ``template of 600``: a Stage whose PromotionTasks inflate to 600 steps (refused while
  inflating, which stops at the limit);
- ``at the limit (500)``: a Stage whose PromotionTasks inflate to exactly 500 steps, run to
  ``Succeeded`` (the most work a Promotion may ask for);
- ``status too large``: a step whose outputs would make a 1.2 MB status (refused before the
  write).

Issue 34 measured, before the limits: ``/healthz`` answered after 78-90 s during a
10,000-step Promotion.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from bench import limits
from tests.support.processes import QUIET
from tests.support.projects import FREIGHT, limits_project

NS = "limits"


class Ticker:
    """Sleeps ``interval`` at a time; the worst lateness of a wake-up is the longest stall."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.worst = 0.0

    def reset(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.worst = max(self.worst, time.perf_counter() - before - self.interval)


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    own = [{"uses": "compose-output", "config": {"n": "1"}} for _ in range(10_000)]
    return [
        ("10,000 own steps", "small", {"steps": own}),
        ("template of 600", "tasks", {}),
        ("at the limit (500)", "limit", {}),
        ("status too large", "small", {"vars": [{"name": "size", "value": "600000"}]}),
    ]


async def terminal(state: Any, name: str) -> Mapping[str, Any]:
    while True:
        got = state.controller.promotions.get(NS, name) or {}
        status: Mapping[str, Any] = got.get("status") or {}
        if status.get("phase") in ("Errored", "Failed", "Succeeded", "Aborted"):
            return status
        await asyncio.sleep(0.01)


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "project.yaml"
        seed.write_text(limits_project(NS))
        settings = Settings.from_env(
            {**QUIET, "LONGSHOREMAN_WORK_DIR": str(Path(tmp) / "work"),
             "LONGSHOREMAN_ALLOW_PROMOTION_STEPS": "true"}
        )  # fmt: skip
        settings = replace(settings, embedded_seed=(seed,), warehouse_discovery=False)
        async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
            state = await wait_started(client.app)
            await asyncio.wait_for(state.controller.wait_synced(), 30)
            ticker = Ticker()
            ticking = asyncio.create_task(ticker.run())
            rows: dict[str, list[tuple[float, float, float, str]]] = {}
            try:
                for run in range(runs):
                    for i, (label, stage, spec) in enumerate(cases()):
                        limits.doing(f"waiting for {label!r}, run {run + 1}")
                        name = f"{stage}-{run}-{i}"
                        body = {"stage": stage, "freight": FREIGHT, **spec}
                        obj = {"metadata": {"name": name, "namespace": NS}, "spec": body}
                        await asyncio.sleep(0.05)  # let the ticker settle
                        ticker.reset()
                        started = time.perf_counter()
                        try:
                            await state.kube.create(k.PROMOTIONS, obj)
                        except k.Invalid:
                            # Refused at admission (the embedded cluster runs the webhooks'
                            # rules): nothing is stored, so there is nothing after to measure.
                            took = time.perf_counter() - started
                            row = (took, ticker.worst, 0.0, "Refused")
                            rows.setdefault(label, []).append(row)
                            continue
                        creating = ticker.worst
                        ticker.reset()
                        status = await terminal(state, name)
                        took = time.perf_counter() - started
                        health = await client.get("/healthz")
                        assert health.status == 200, health.status
                        row = (took, creating, ticker.worst, status["phase"])
                        rows.setdefault(label, []).append(row)
            finally:
                ticking.cancel()
                await asyncio.gather(ticking, return_exceptions=True)
    print(
        f"{'case':<22} {'phase':<10} {'to terminal (s)':>16} "
        f"{'stall creating (ms)':>20} {'stall after (ms)':>17}"
    )
    for label, got in rows.items():
        took = statistics.median(t for t, _, _, _ in got)
        creating = max(c for _, c, _, _ in got) * 1000
        after = max(a for _, _, a, _ in got) * 1000
        print(f"{label:<22} {got[0][3]:<10} {took:>16.3f} {creating:>20.1f} {after:>17.1f}")


if __name__ == "__main__":
    limits.bound()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args().runs))
