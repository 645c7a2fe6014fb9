"""Many projects on one server: 20 projects x 50 Stages against 1 project x 1,000 Stages.

One install serving a whole organisation must cost no more than one project of the same size.
Each layout runs in its own process (so their memory does not mix) against the API server
emulator in a child process (``bench_scale.py``'s, so its CPU and memory are not ours): the
projects are namespaces labelled ``kargo.akuity.io/project`` (with a Slack channel and a GitHub
repository on each, as routing needs), each Stage has one ``compose-output`` step, each project
one Freight. The controller starts, its informers sync (the namespace informer included), then
``--runs`` Promotions are created one after another, each in a random Stage of a random project,
and each is timed from its creation until the controller reports it finished ("reaction").

Reported per layout: controller RSS after sync and at the end (MB; VmRSS of the process, whose
only other resident is the Python runtime, measured before the controller started and shown as
the baseline), sync time, and reaction p50 / p99 / max.

Run: .venv/bin/python bench/bench_projects.py [--projects 20] [--stages 50] [--runs 200]
     (the single-project layout has projects x stages Stages in one namespace)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes.aio import client as aio_client

from app.controller import kube as k
from app.controller.creation import create_promotion
from app.controller.reconciler import Controller
from bench import limits
from bench.bench_scale import NoTasks, apiserver_process, in_batches
from promoter.steps.base import StepServices
from promoter.steps.registry import builtin_registry

STEP = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]


def rss_mb() -> float:
    """This process's resident set now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def namespace(name: str, index: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"kargo.akuity.io/project": "true", "team": name},
            "annotations": {
                "longshoreman.dev/slack-channels": f"C{index:08d}",
                "longshoreman.dev/github-repositories": f"acme/{name}",
            },
        }
    }


def stage(ns: str, name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "requestedFreight": [
                {"origin": {"kind": "Warehouse", "name": "app"}, "sources": {"direct": True}}
            ],
            "promotionTemplate": {"spec": {"steps": STEP}},
        },
    }


def freight(ns: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "f0", "namespace": ns},
        "alias": "first",
        "origin": {"kind": "Warehouse", "name": "app"},
    }


async def layout_run(
    url: str, projects: int, stages: int, runs: int, limit: float
) -> dict[str, Any]:
    def connect() -> aio_client.ApiClient:
        return aio_client.ApiClient(aio_client.Configuration(host=url))

    setup = k.Kube(connect())
    names = [f"team-{i:03d}" for i in range(projects)]
    await in_batches(
        [lambda n=n, i=i: setup.create(k.NAMESPACES, namespace(n, i)) for i, n in enumerate(names)]
    )
    pairs = [(n, f"stage-{j:04d}") for n in names for j in range(stages)]
    await in_batches([lambda p=p: setup.create(k.STAGES, stage(*p)) for p in pairs])
    await in_batches([lambda n=n: setup.create(k.FREIGHT, freight(n)) for n in names])

    finished: dict[str, asyncio.Event] = {}

    def on_finished(obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        if name in finished:
            finished[name].set()

    baseline = rss_mb()
    kube = k.Kube(connect())
    with tempfile.TemporaryDirectory() as work:
        controller = Controller(
            kube,
            registry=builtin_registry(),
            services=StepServices(),
            work_dir=Path(work),
            min_requeue=0.0,
            health_interval=3600.0,
            on_promotion_finished=on_finished,
        )
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(controller.run_informers()),
            asyncio.create_task(controller.lead()),
        ]
        try:
            await asyncio.wait_for(controller.wait_synced(), limit)
            synced = time.perf_counter() - started
            after_sync = rss_mb()
            rng = random.Random(36)
            reactions = []
            for run in range(runs):
                ns, stage_name = rng.choice(pairs)
                name = f"{stage_name}.bench-{run:05d}"
                finished[name] = asyncio.Event()
                before = time.perf_counter()
                await create_promotion(
                    setup, stage(ns, stage_name) | {"kind": "Stage"}, freight(ns), NoTasks(),
                    actor="bench", name=name,
                )  # fmt: skip
                await asyncio.wait_for(finished[name].wait(), limit)
                reactions.append(time.perf_counter() - before)
            reached = len(controller.served.projects())
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await kube.close()
            await setup.close()
    reactions.sort()
    return {
        "layout": f"{projects} x {stages}",
        "projects reached": reached,
        "baseline_mb": baseline,
        "after_sync_mb": after_sync,
        "end_mb": rss_mb(),
        "sync_s": synced,
        "p50_ms": statistics.median(reactions) * 1000,
        "p99_ms": reactions[min(len(reactions) - 1, int(len(reactions) * 0.99))] * 1000,
        "max_ms": reactions[-1] * 1000,
    }


def run_layout(projects: int, stages: int, runs: int, limit: float) -> dict[str, Any]:
    """One layout in a fresh process of this script, so its memory is its own."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--layout",
            f"{projects}x{stages}",
            "--runs",
            str(runs),
            "--limit",
            str(limit),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--stages", type=int, default=50, help="Stages per project")
    parser.add_argument("--runs", type=int, default=200, help="Promotions timed per layout")
    parser.add_argument("--limit", type=float, default=300.0, help="give up after this long (s)")
    parser.add_argument("--layout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.layout:
        projects, stages = (int(x) for x in args.layout.split("x"))
        with apiserver_process() as (url, _cpu, _signal):
            result = asyncio.run(layout_run(url, projects, stages, args.runs, args.limit))
        print(json.dumps(result))
        return
    rows = [
        run_layout(args.projects, args.stages, args.runs, args.limit),
        run_layout(1, args.projects * args.stages, args.runs, args.limit),
    ]
    print(
        f"{args.projects * args.stages} Stages, one compose-output step each; {args.runs} "
        "Promotions timed one after another per layout (the API server emulator in a child "
        "process)"
    )
    header = (
        f"{'layout':<14}{'baseline MB':>12}{'after sync MB':>15}{'end MB':>9}{'sync s':>8}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['layout']:<14}{r['baseline_mb']:>12.1f}{r['after_sync_mb']:>15.1f}"
            f"{r['end_mb']:>9.1f}{r['sync_s']:>8.2f}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}"
            f"{r['max_ms']:>9.1f}"
        )


if __name__ == "__main__":
    limits.bound()
    main()
