"""Reaction latency: Argo CD finishes a sync -> the waiting Promotion is Succeeded.

One Stage whose Promotions have a single ``argocd-update`` step; the fake Argo CD application
controller (``tests/support/argocd.py``) writes the Application over HTTP as Argo CD would. Each
run creates a Promotion, lets the controller start the sync, lets the fake mark the operation
Running (the Promotion then waits), and then times from the fake's final write (operation
Succeeded) reaching the API server until a watch of our own sees the Promotion Succeeded.

The controller runs in this process against the API server emulator on 127.0.0.1, with a
requeue floor of an hour: only the Application's watch event can wake the Promotion in time.
The time is split into:

- app watch:  the Application write reaches the API server -> the controller's informer has it;
- queue:      that event -> the Stage's reconcile starts;
- reconcile:  reconcile start -> the Promotion's final status write reaches the API server;
- status watch: that write -> our watch sees the Promotion Succeeded.

Target: p99 of the total under 100 ms.

Run: .venv/bin/python bench/bench_reaction.py [--runs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import kube as k
from app.apiserver import RequestInfo
from app.informer import Informer
from app.reconciler import Controller
from promoter.steps.base import StepServices
from promoter.steps.registry import builtin_registry
from tests.support.argocd import FakeArgoCDController, KubernetesApps, make_app
from tests.support.kube import running_apiserver

NS = "bench"
FREIGHT = {
    "metadata": {"name": "f0", "namespace": NS},
    "alias": "f0",
    "origin": {"kind": "Warehouse", "name": "app"},
}
STAGE = {
    "metadata": {"name": "prod", "namespace": NS},
    "spec": {
        "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"}, "sources": {}}],
        "promotionTemplate": {
            "spec": {"steps": [{"uses": "argocd-update", "config": {"apps": [{"name": "web"}]}}]}
        },
    },
}
PHASES = ("app watch", "queue", "reconcile", "status watch", "total")


class TimedController(Controller):
    """The real controller, noting when an Application event arrives and a reconcile starts.

    Instrumentation only: both overrides call straight through.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app_event_at: float | None = None
        self.reconcile_at: float | None = None

    def _on_application(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self.app_event_at is None:
            self.app_event_at = time.perf_counter()
        super()._on_application(kind, obj, old)

    async def reconcile_stage(
        self, namespace: str, stage_name: str, *, wake: bool = False
    ) -> float | None:
        if self.reconcile_at is None and self.app_event_at is not None:
            self.reconcile_at = time.perf_counter()
        return await super().reconcile_stage(namespace, stage_name, wake=wake)


class Arrivals:
    """An emulator fault hook that injects nothing and timestamps the writes we care about."""

    def __init__(self) -> None:
        self.app_write: float | None = None
        self.status_write: float | None = None

    def reset(self) -> None:
        self.app_write = self.status_write = None

    def __call__(self, request: RequestInfo) -> None:
        if request.method == "PATCH":
            if re.search(r"/applications/web$", request.path):
                self.app_write = time.perf_counter()
            elif request.path.endswith("/status") and "/promotions/" in request.path:
                self.status_write = time.perf_counter()
        return None


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def phase_of(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


async def main(runs: int) -> dict[str, list[float]]:
    arrivals = Arrivals()
    samples: dict[str, list[float]] = {p: [] for p in PHASES}
    async with running_apiserver(namespaces=[NS, "argocd"]) as server:
        server.faults.hook = arrivals
        kube = k.Kube(server.api_client())
        await kube.create(k.FREIGHT, dict(FREIGHT))
        await kube.create(k.STAGES, dict(STAGE))
        apps = KubernetesApps(server.api_client())
        await apps.put(make_app("web", authorized=f"{NS}:prod"))
        argocd = FakeArgoCDController(apps)

        # Our own view of the cluster, through the same informer code the controller uses.
        changed = asyncio.Event()
        observed: dict[str, float] = {}

        def on_promotion(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            name = obj["metadata"]["name"]
            if phase_of(obj) == "Succeeded" and name not in observed:
                observed[name] = time.perf_counter()
            changed.set()

        watcher = k.Kube(server.api_client())
        promotions = Informer(watcher, k.PROMOTIONS, namespace=NS, on_event=on_promotion)
        applications = Informer(
            watcher, k.APPLICATIONS, namespace="argocd", on_event=lambda *_: changed.set()
        )

        async def until(predicate: Any, within: float = 10.0) -> None:
            async with asyncio.timeout(within):
                while not predicate():
                    changed.clear()
                    await changed.wait()

        with tempfile.TemporaryDirectory() as work:
            controller = TimedController(
                k.Kube(server.api_client()),
                registry=builtin_registry(),
                services=StepServices(),
                work_dir=Path(work),
                min_requeue=3600.0,
                health_interval=3600.0,
            )
            tasks = [
                asyncio.create_task(controller.run_informers()),
                asyncio.create_task(controller.lead()),
                asyncio.create_task(promotions.run()),
                asyncio.create_task(applications.run()),
            ]
            try:
                await controller.wait_synced()
                await promotions.synced.wait()
                await applications.synced.wait()
                for i in range(runs):
                    name = f"p{i:04d}"
                    await kube.create(
                        k.PROMOTIONS,
                        {
                            "metadata": {"name": name, "namespace": NS},
                            "spec": {"stage": "prod", "freight": "f0"},
                        },
                    )

                    def requested() -> bool:
                        app = applications.get("argocd", "web") or {}
                        return bool(app.get("operation"))

                    await until(requested)
                    await argocd.process()  # the sync starts: operation Running

                    def waiting(name: str = name) -> bool:
                        obj = promotions.get(NS, name) or {}
                        message = str((obj.get("status") or {}).get("message") or "")
                        return "sync is Running" in message

                    await until(waiting)
                    # The status write's own watch event causes one more (no-op) reconcile;
                    # start the clock only once the controller is idle again.
                    for _ in range(100):  # polled: the work queue has no "idle" event
                        before = controller.reconciles
                        await asyncio.sleep(0.02)
                        if controller.reconciles == before and not controller.queue.active:
                            break
                    controller.app_event_at = controller.reconcile_at = None
                    arrivals.reset()
                    await argocd.process()  # the sync finishes: operation Succeeded
                    await until(lambda name=name: name in observed)
                    app_write, status_write = arrivals.app_write, arrivals.status_write
                    app_event, reconcile = controller.app_event_at, controller.reconcile_at
                    assert app_write and status_write and app_event and reconcile
                    samples["app watch"].append(app_event - app_write)
                    samples["queue"].append(reconcile - app_event)
                    samples["reconcile"].append(status_write - reconcile)
                    samples["status watch"].append(observed[name] - status_write)
                    samples["total"].append(observed[name] - app_write)
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
    return samples


def report(samples: dict[str, list[float]]) -> None:
    runs = len(samples["total"])
    print(f"Application Succeeded -> Promotion Succeeded, {runs} runs (milliseconds)")
    print(f"{'phase':<14}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'mean':>8}")
    for phase in PHASES:
        values = [v * 1000 for v in samples[phase]]
        print(
            f"{phase:<14}{pct(values, 50):>8.2f}{pct(values, 90):>8.2f}{pct(values, 99):>8.2f}"
            f"{max(values):>8.2f}{statistics.mean(values):>8.2f}"
        )
    p99 = pct(samples["total"], 99) * 1000
    print(f"target: p99 total < 100 ms -> {'met' if p99 < 100 else 'MISSED'} ({p99:.1f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    report(asyncio.run(main(args.runs)))
