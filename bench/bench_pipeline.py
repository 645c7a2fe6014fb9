"""From image push to verified in prod: the whole pipeline as one measured path.

The world of :mod:`tests.support.delivery`: Debian's docker-registry, a Warehouse on it,
Stages ``test`` -> ``uat`` -> ``prod`` in a line, each auto-promoting with git-clone /
yaml-update / git-commit / git-push (a local bare repository) / argocd-update and verified by an
AnalysisRun; the whole server (``create_app``, default settings: requeue floor, health-check
interval and Warehouse interval as shipped) in this process; stand-ins for Argo CD and Argo
Rollouts that finish each sync and each AnalysisRun ``--sync-seconds`` / ``--analysis-seconds``
after it started (default 0), reacting to watch events as the real ones do.

Each run pushes a new tag, sends Harbor's ``PUSH_ARTIFACT`` webhook and times until a watch of
ours sees the Freight verified in ``prod``. Every instant is when a change first shows in a watch
of ours (the same for both servers), except the webhook (when it was sent) and the steps (when
the engine called them, through a timing wrapper around the step registry). The total splits
into hops that add up to it exactly, per Stage:

- webhook -> Freight (test only), Freight -> Promotion created (test), verified -> next Stage's
  Promotion created (uat, prod): Warehouse discovery, Freight flow and auto-promotion;
- Promotion created -> first step: the Stage's reconcile picking it up;
- git: the git-clone, git-commit and git-push steps' own time (git processes, mostly);
- steps, ours: the rest until the sync is requested (yaml-update, a status write per step, the
  argocd-update step's Application patch);
- Argo CD stand-in: sync requested -> sync done (its reaction, its writes, ``--sync-seconds``);
- sync done -> Succeeded;
- Succeeded -> AnalysisRun created;
- Rollouts stand-in: AnalysisRun created -> done (``--analysis-seconds``);
- AnalysisRun done -> verified (the Freight's ``verifiedIn``).

Longshoreman's own share is the total minus git minus the stand-ins. Also reported: the server's
API writes per pipeline run (from its /metrics), the CPU of this process (server, stand-ins and
our watches; the emulator too in the default mode), of git's processes and, with
``--real-apiserver``, of kube-apiserver and etcd, per pipeline run.

Targets (issue 30): own share p50 < 300 ms and p99 < 1 s on a real kube-apiserver on 2 cores.
Every wait is bounded (``--timeout`` per run): a pipeline that stops moving ends the run with
what each Stage last showed, not a hang.

Run: .venv/bin/python bench/bench_pipeline.py [--runs 20] [--real-apiserver]
     [--sync-seconds 0] [--analysis-seconds 0] [--timeout 60]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import limits
from bench.realserver import cpu_readers, machine_cpu_seconds, real_apiserver
from promoter.steps.base import StepContext, StepResult
from promoter.steps.registry import StepRegistry, builtin_registry
from tests.support.delivery import NAMESPACES, STAGES, Delivery, running_delivery
from tests.support.kube import running_apiserver
from tests.support.registry import REGISTRY_BINARY, running_registry

GIT_STEPS = ("git-clone", "git-commit", "git-push")
TIMED_STEPS = ("git-clone", "yaml-update", "git-commit", "git-push", "argocd-update")
OWN_P50_MS, OWN_P99_MS = 300.0, 1000.0

CpuReaders = dict[str, Callable[[], float]]


class TimedStep:
    """A step that notes when the engine called it and when it returned (instrumentation
    only: it calls straight through and forwards everything else the engine asks about)."""

    def __init__(self, kind: str, step: Any, calls: list[tuple[str, str, float, float]]) -> None:
        self._kind, self._step, self._calls = kind, step, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._step, name)

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        started = time.perf_counter()
        try:
            result: StepResult = await self._step.run(ctx, config)
            return result
        finally:
            self._calls.append((ctx.promotion, self._kind, started, time.perf_counter()))


def timed_registry(calls: list[tuple[str, str, float, float]]) -> StepRegistry:
    registry = builtin_registry()
    for kind in TIMED_STEPS:
        registry.register(kind, TimedStep(kind, registry[kind], calls))
    return registry


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@contextlib.asynccontextmanager
async def server_under_test(real: bool) -> AsyncIterator[tuple[Any, CpuReaders]]:
    if real:
        async with real_apiserver(namespaces=NAMESPACES) as server:
            yield server, cpu_readers(server)
    else:
        async with running_apiserver(namespaces=NAMESPACES) as server:
            yield server, {}


HOPS = (
    "webhook -> Freight",
    "Freight -> Promotion created",
    "Promotion created -> first step",
    "git (clone, commit, push)",
    "steps, ours (yaml-update, writes, argocd-update)",
    "Argo CD stand-in (sync)",
    "sync done -> Succeeded",
    "Succeeded -> AnalysisRun created",
    "Rollouts stand-in (analysis)",
    "AnalysisRun done -> verified",
    "verified -> next Stage's Promotion",
)
STAND_INS = ("Argo CD stand-in (sync)", "Rollouts stand-in (analysis)")
GIT = "git (clone, commit, push)"


def hops_of(
    world: Delivery, freight: str, sent: float, calls: list[tuple[str, str, float, float]]
) -> dict[str, float]:
    """One run's hops in seconds (summed over the Stages); they add up to the total."""
    at = world.timeline.at
    hops = dict.fromkeys(HOPS, 0.0)
    hops["webhook -> Freight"] = at[(freight, "created")] - sent
    previous = at[(freight, "created")]
    for i, stage in enumerate(STAGES):
        promotion = at[(freight, "promotion", stage)]
        hop = "Freight -> Promotion created" if i == 0 else "verified -> next Stage's Promotion"
        hops[hop] += promotion - previous
        name = next(
            n
            for n, p in world.promotions.items()
            if p["spec"]["freight"] == freight and p["spec"]["stage"] == stage
        )
        mine = [c for c in calls if c[0] == name]
        first_step = min(c[2] for c in mine)
        git = sum(c[3] - c[2] for c in mine if c[1] in GIT_STEPS)
        sync = at[(freight, "sync", stage)]
        hops["Promotion created -> first step"] += first_step - promotion
        hops[GIT] += git
        hops["steps, ours (yaml-update, writes, argocd-update)"] += sync - first_step - git
        done = at[(freight, "sync done", stage)]
        hops["Argo CD stand-in (sync)"] += done - sync
        succeeded = at[(freight, "promotion succeeded", stage)]
        hops["sync done -> Succeeded"] += succeeded - done
        analysis = at[(freight, "analysis", stage)]
        hops["Succeeded -> AnalysisRun created"] += analysis - succeeded
        analysed = at[(freight, "analysis done", stage)]
        hops["Rollouts stand-in (analysis)"] += analysed - analysis
        verified = at[(freight, "verified", stage)]
        hops["AnalysisRun done -> verified"] += verified - analysed
        previous = verified
    hops["total"] = previous - sent
    # Inside "steps, ours": each step's own time and the gaps between steps (the status write
    # recording a step, the next reconcile pass), per Stage on average.
    for stage in STAGES:
        name = next(
            n
            for n, p in world.promotions.items()
            if p["spec"]["freight"] == freight and p["spec"]["stage"] == stage
        )
        mine = sorted((c for c in calls if c[0] == name), key=lambda c: c[2])
        first: dict[str, tuple[float, float]] = {}
        for _, kind, start, end in mine:
            first.setdefault(kind, (start, end))
        order = [kind for kind in TIMED_STEPS if kind in first]
        for kind in order:
            detail = f"  {kind} (first call)"
            hops[detail] = hops.get(detail, 0.0) + (first[kind][1] - first[kind][0]) / len(STAGES)
        for before, after in itertools.pairwise(order):
            detail = f"  gap {before} -> {after}"
            gap = first[after][0] - first[before][1]
            hops[detail] = hops.get(detail, 0.0) + gap / len(STAGES)
        detail = "  argocd-update start -> sync seen"
        sync_gap = at[(freight, "sync", stage)] - first["argocd-update"][0]
        hops[detail] = hops.get(detail, 0.0) + sync_gap / len(STAGES)
    hops["own share"] = hops["total"] - hops[GIT] - sum(hops[h] for h in STAND_INS)
    return hops


async def main(args: argparse.Namespace) -> dict[str, Any]:
    if shutil.which(REGISTRY_BINARY) is None:
        raise SystemExit(f"{REGISTRY_BINARY} is not installed: apt-get install docker-registry")
    calls: list[tuple[str, str, float, float]] = []
    samples: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as scratch:
        work = Path(scratch)
        async with (
            server_under_test(args.real_apiserver) as (server, server_cpu),
            running_registry(work) as registry,
            running_delivery(
                server.api_client,
                server.kubeconfig_path,
                registry,
                work,
                sync_seconds=args.sync_seconds,
                analysis_seconds=args.analysis_seconds,
                step_registry=timed_registry(calls),
            ) as world,
        ):
            # Warm-up (not measured): the first Freight walks the whole line once, so caches,
            # connections and the git repository are as they are on a running system.
            for w in range(args.warmup):
                limits.doing(f"waiting for warm-up run {w} to be verified in prod")
                await world.release(f"1.0.{w}")
                await world.verified_in_prod(f"1.0.{w}", args.timeout)
            await asyncio.sleep(args.pause)
            writes_before = await world.server_writes()
            cpu_started = {name: read() for name, read in server_cpu.items()}
            own_started, machine_started = time.process_time(), machine_cpu_seconds()
            children_started = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            for i in range(args.warmup, args.warmup + args.runs):
                tag = f"1.0.{i}"
                limits.doing(f"waiting for {tag} to be verified in prod")
                sent = await world.release(tag)
                freight = await world.verified_in_prod(tag, args.timeout)
                samples.append(hops_of(world, freight, sent, calls))
                # Let the last Stage's status writes land before the next push.
                await asyncio.sleep(args.pause)
            elapsed = time.perf_counter() - started
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_used = {
                "this process (server, stand-ins, watches"
                + ("" if args.real_apiserver else ", emulator")
                + ")": time.process_time() - own_started,
                "git processes": (children.ru_utime + children.ru_stime)
                - (children_started.ru_utime + children_started.ru_stime),
                **{name: read() - cpu_started[name] for name, read in server_cpu.items()},
            }
            others = machine_cpu_seconds() - machine_started - sum(cpu_used.values())
            writes_after = await world.server_writes()
    writes = {
        r: writes_after.get(r, 0.0) - writes_before.get(r, 0.0)
        for r in writes_after
        if writes_after.get(r, 0.0) != writes_before.get(r, 0.0)
    }
    return {
        "samples": samples,
        "writes": writes,
        "cpu": cpu_used,
        "others": max(0.0, others) / elapsed,
        "elapsed": elapsed,
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> bool:
    samples: list[dict[str, float]] = result["samples"]
    runs = len(samples)
    server = "kube-apiserver v1.20 + etcd" if args.real_apiserver else "the API server emulator"
    print(
        f"{server}: image push -> verified in prod through {len(STAGES)} Stages, {runs} runs "
        f"(stand-ins: sync {args.sync_seconds:g} s, analysis {args.analysis_seconds:g} s), "
        "milliseconds per pipeline run (hops summed over the Stages)"
    )
    print(f"{'hop':<52}{'p50':>9}{'p99':>9}{'max':>9}{'mean':>9}")
    for hop in (*HOPS, "total", "own share"):
        values = [s[hop] * 1000 for s in samples]
        if hop == "total":
            print("-" * 88)
        print(
            f"{hop:<52}{pct(values, 50):>9.1f}{pct(values, 99):>9.1f}{max(values):>9.1f}"
            f"{statistics.mean(values):>9.1f}"
        )
    details = [h for h in samples[0] if h.startswith("  ")]
    print("inside the steps, per Stage (mean of the three):")
    for hop in details:
        values = [s.get(hop, 0.0) * 1000 for s in samples]
        print(
            f"{hop:<52}{pct(values, 50):>9.1f}{pct(values, 99):>9.1f}{max(values):>9.1f}"
            f"{statistics.mean(values):>9.1f}"
        )
    own = [s["own share"] * 1000 for s in samples]
    p50, p99 = pct(own, 50), pct(own, 99)
    met = p50 < OWN_P50_MS and p99 < OWN_P99_MS
    print(
        f"target: own share p50 < {OWN_P50_MS:.0f} ms and p99 < {OWN_P99_MS:.0f} ms -> "
        f"{'met' if met else 'MISSED'} (p50 {p50:.1f} ms, p99 {p99:.1f} ms)"
    )
    writes = result["writes"]
    by_kind = ", ".join(f"{r} {c / runs:.1f}" for r, c in sorted(writes.items()))
    print(f"server's API writes per pipeline run: {sum(writes.values()) / runs:.1f} ({by_kind})")
    for name, used in result["cpu"].items():
        print(f"{name + ' CPU per pipeline run':<70}{used / runs * 1000:>8.1f} ms")
    others = result["others"]
    print(f"other processes: {others:.0%} of a core during the runs ({os.cpu_count()} cores)")
    return met


if __name__ == "__main__":
    limits.bound()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs first")
    parser.add_argument("--sync-seconds", type=float, default=0.0)
    parser.add_argument("--analysis-seconds", type=float, default=0.0)
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one run may take before the benchmark stops with what it saw",
    )
    parser.add_argument(
        "--pause", type=float, default=0.2, help="seconds between runs (not measured)"
    )
    parser.add_argument(
        "--real-apiserver",
        action="store_true",
        help="run against kube-apiserver v1.20 + etcd on 127.0.0.1 (scripts/build-kube-apiserver.sh"
        " builds it) instead of the emulator",
    )
    args = parser.parse_args()
    try:
        outcome = asyncio.run(main(args))
    except TimeoutError as e:
        print(f"bench_pipeline: {e}", file=sys.stderr)
        sys.exit(1)
    report(outcome, args)
