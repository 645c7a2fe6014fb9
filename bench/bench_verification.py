"""Verification reaction time: AnalysisRun Successful -> Freight verified and the downstream
auto-Promotion created, p50/p99 over N runs on the embedded API server emulator.

Each run: a new Freight is promoted into ``dev`` (verification: one AnalysisTemplate), the
AnalysisRun is created and left Running; then the benchmark marks it Successful, as Argo
Rollouts would, and times how long until (a) ``Freight.status.verifiedIn.dev`` is set and (b) the
auto-Promotion into ``staging`` exists. Both are observed through a watch, not polling.
Target: p99 under 100 ms.

Every wait is bounded (``--timeout`` seconds): a run whose AnalysisRun or Promotion never comes
ends the bench with what it was waiting for (it used to wait forever when the Stages' only step
became invalid: ``compose-output`` needs a config).

Run: .venv/bin/python bench/bench_verification.py [--runs 100] [--timeout 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.controller import kube as k
from bench import limits
from tests.support.controller import running_controller
from tests.support.kube import running_apiserver

NS = "bench"
TEMPLATE = {
    "metadata": {"name": "smoke", "namespace": NS},
    "spec": {
        "metrics": [{"name": "smoke", "provider": {"web": {"url": "http://example.invalid"}}}]
    },
}


def stage(name: str, sources: dict[str, Any], auto: bool, verify: bool) -> dict[str, Any]:
    annotations = {"longshoreman.dev/auto-promote": "true"} if auto else {}
    spec: dict[str, Any] = {
        "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"}, "sources": sources}],
        "promotionTemplate": {
            "spec": {"steps": [{"uses": "compose-output", "config": {"stage": name}}]}
        },
    }
    if verify:
        spec["verification"] = {"analysisTemplates": [{"name": "smoke"}]}
    return {"metadata": {"name": name, "namespace": NS, "annotations": annotations}, "spec": spec}


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def main(runs: int, within: float) -> None:
    async with running_apiserver(namespaces=[NS]) as server:
        kube = k.Kube(server.api_client())
        await kube.create(k.ANALYSIS_TEMPLATES, TEMPLATE)
        await kube.create(k.STAGES, stage("dev", {"direct": True}, auto=False, verify=True))
        # staging only receives the auto-Promotions (no verification of its own, so that one
        # queued there never holds up the next).
        await kube.create(k.STAGES, stage("staging", {"stages": ["dev"]}, auto=True, verify=False))
        verified_at: dict[str, float] = {}
        promoted_at: dict[str, float] = {}
        runs_seen: dict[str, str] = {}
        changed = asyncio.Event()

        async def until(predicate: Any, what: str) -> None:
            limits.doing(f"waiting for {what}")
            try:
                async with asyncio.timeout(within):
                    while not predicate():
                        changed.clear()
                        await changed.wait()
            except TimeoutError:
                raise SystemExit(
                    f"bench_verification: gave up after {within:g} s waiting for {what}"
                ) from None

        watcher = k.Kube(server.api_client())

        async def watch(rt: k.ResourceType, on: Any) -> None:
            _, rv = await watcher.list(rt, NS)
            while True:
                async for kind, obj in watcher.watch(
                    rt, NS, resource_version=rv, timeout_seconds=600
                ):
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if kind != "BOOKMARK":
                        on(kind, obj)

        def on_freight(kind: str, obj: dict[str, Any]) -> None:
            if "dev" in ((obj.get("status") or {}).get("verifiedIn") or {}):
                verified_at.setdefault(obj["metadata"]["name"], time.perf_counter())
                changed.set()

        def on_promotion(kind: str, obj: dict[str, Any]) -> None:
            if obj["spec"]["stage"] == "staging":
                promoted_at.setdefault(obj["spec"]["freight"], time.perf_counter())
                changed.set()

        def on_run(kind: str, obj: dict[str, Any]) -> None:
            labels = obj["metadata"].get("labels") or {}
            if labels.get("longshoreman.dev/stage") == "dev":
                runs_seen[labels["longshoreman.dev/freight"]] = obj["metadata"]["name"]
                changed.set()

        tasks = [
            asyncio.create_task(watch(k.FREIGHT, on_freight)),
            asyncio.create_task(watch(k.PROMOTIONS, on_promotion)),
            asyncio.create_task(watch(k.ANALYSIS_RUNS, on_run)),
        ]
        to_verified: list[float] = []
        to_promoted: list[float] = []
        with tempfile.TemporaryDirectory() as work:
            async with running_controller(server, Path(work), min_requeue=60.0):
                for i in range(runs):
                    name = f"f{i:04d}" + "0" * 35
                    await kube.create(
                        k.FREIGHT,
                        {
                            "metadata": {"name": name, "namespace": NS},
                            "origin": {"kind": "Warehouse", "name": "app"},
                        },
                    )
                    await kube.create(
                        k.PROMOTIONS,
                        {
                            "metadata": {"name": f"p{i}", "namespace": NS},
                            "spec": {"stage": "dev", "freight": name},
                        },
                    )
                    await until(
                        lambda name=name: name in runs_seen, f"the AnalysisRun of Promotion p{i}"
                    )
                    await asyncio.sleep(0.01)  # let the controller settle on the Running run
                    start = time.perf_counter()
                    await kube.patch(
                        k.ANALYSIS_RUNS,
                        NS,
                        runs_seen[name],
                        {"status": {"phase": "Successful", "message": "ok"}},
                    )
                    await until(
                        lambda name=name: name in promoted_at and name in verified_at,
                        f"Freight {name} verified in dev and promoted to staging",
                    )
                    to_verified.append((verified_at[name] - start) * 1e3)
                    to_promoted.append((promoted_at[name] - start) * 1e3)
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await watcher.close()
        await kube.close()
    print(f"runs: {runs}")
    print(f"{'AnalysisRun Successful ->':<34} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for label, values in (
        ("Freight verifiedIn.dev", to_verified),
        ("staging auto-Promotion created", to_promoted),
    ):
        p50, p99 = statistics.median(values), pct(values, 99)
        print(f"{label:<34} {p50:>8.1f} {p99:>8.1f} {max(values):>8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=30.0, help="bound on each wait (s)")
    args = parser.parse_args()
    limits.bound()
    asyncio.run(main(args.runs, args.timeout))
