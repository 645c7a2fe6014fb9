"""Reaction latency: Argo CD finishes a sync -> the waiting Promotion is Succeeded.

One Stage whose Promotions have a single ``argocd-update`` step; the fake Argo CD application
controller (``tests/support/argocd.py``) writes the Application over HTTP as Argo CD would. Each
run creates a Promotion, lets the controller start the sync, lets the fake mark the operation
Running (the Promotion then waits), and then times from the fake sending its final write
(operation Succeeded) until a watch of our own sees the Promotion Succeeded.

The controller runs in this process with a requeue floor of an hour: only the Application's
watch event can wake the Promotion in time. By default the API server is the emulator, in this
process too; ``--real-apiserver`` runs the same against kube-apiserver v1.20 + etcd on 127.0.0.1
(``bench/realserver.py``) and also reports their CPU per run.

Every instant is taken on the client's side of the wire, so both servers are timed the same way
(a real kube-apiserver has no hook that could say when a request arrived; the emulator's fault
hook timed arrivals until the real mode came): writes are stamped when the client hands them to
aiohttp (``StampingApiClient``), events when an informer's callback runs. The time is split into:

- app watch:  the fake sends its Application PATCH -> the controller's informer callback has the
  event (the request over loopback, admission, storage, and the watch event back);
- queue:      that callback -> the Stage's reconcile starts;
- reconcile:  reconcile start -> the controller sends the Promotion's final status PATCH
  (includes the step's GET of the Application);
- status watch: that PATCH sent -> the callback of our own Promotion informer sees Succeeded.

Target: p99 of the total under 100 ms (on 2 cores also running kube-apiserver and etcd).

Run: .venv/bin/python bench/bench_reaction.py [--runs 100] [--real-apiserver]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes.aio import client as aio_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.controller import kube as k
from app.controller.informer import Informer
from app.controller.reconciler import Controller
from bench import limits
from bench.realserver import cpu_readers, machine_cpu_seconds, real_apiserver
from promoter.steps.base import StepServices
from promoter.steps.registry import builtin_registry
from tests.support.argocd import FakeArgoCDController, KubernetesApps, make_app
from tests.support.kube import running_apiserver
from tests.support.telemetry import RecordingTelemetry

NS = "bench"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
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

    Instrumentation only: the Application callback and the override call straight through.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app_event_at: float | None = None
        self.reconcile_at: float | None = None
        route = self.router.on_application

        def on_application(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            if self.app_event_at is None:
                self.app_event_at = time.perf_counter()
            route(kind, obj, old)

        self.caches.applications.on_event = on_application

    async def reconcile_stage(
        self, namespace: str, stage_name: str, *, wake: bool = False
    ) -> float | None:
        if self.reconcile_at is None and self.app_event_at is not None:
            self.reconcile_at = time.perf_counter()
        return await super().reconcile_stage(namespace, stage_name, wake=wake)


class StampingApiClient(aio_client.ApiClient):
    """An ApiClient that notes, under ``name``, when it sends a PATCH whose path matches.

    Instrumentation only: ``call_api`` is where every request of ``Kube`` and of the generated
    APIs goes out, so the stamp is taken just before aiohttp writes the request. The last
    matching PATCH wins.
    """

    def __init__(
        self,
        configuration: aio_client.Configuration,
        sent: dict[str, float],
        name: str,
        path: str,
    ) -> None:
        super().__init__(configuration=configuration)
        self.sent, self.name, self.path = sent, name, re.compile(path)

    async def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method == "PATCH" and self.path.search(url.split("?", 1)[0]):
            self.sent[self.name] = time.perf_counter()
        return await super().call_api(method, url, *args, **kwargs)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def phase_of(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


CpuReaders = dict[str, Callable[[], float]]


@contextlib.asynccontextmanager
async def server_under_test(real: bool) -> AsyncIterator[tuple[Any, CpuReaders]]:
    """The API server (something with ``configuration()`` and ``api_client()``) and a CPU
    reader per server process; none for the emulator, which runs in this process."""
    if real:
        async with real_apiserver(namespaces=[NS, "argocd"]) as server:
            yield server, cpu_readers(server)
    else:
        async with running_apiserver(namespaces=[NS, "argocd"]) as server:
            yield server, {}


async def main(runs: int, real: bool) -> dict[str, Any]:
    sent: dict[str, float] = {}
    samples: dict[str, list[float]] = {p: [] for p in PHASES}
    writes: Counter[str] = Counter()

    def count(method: str, plural: str, status: int | None) -> None:
        if method in WRITES:
            writes[plural] += 1

    async with server_under_test(real) as (server, server_cpu):
        kube = k.Kube(server.api_client())
        await kube.create(k.FREIGHT, dict(FREIGHT))
        await kube.create(k.STAGES, dict(STAGE))
        # Each client stamps only its own write: the controller's PATCHes of the Application
        # (starting a sync) must not pass for the fake's.
        fake_client = StampingApiClient(
            server.configuration(), sent, "app write", r"/applications/web$"
        )
        apps = KubernetesApps(fake_client)
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
                    # Woken by a watch event, or every 50 ms for what the controller saw
                    # without writing (a predicate may read the controller's own stamps).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), 0.05)

        with tempfile.TemporaryDirectory() as work:
            controller_client = StampingApiClient(
                server.configuration(), sent, "status write", r"/promotions/[^/]+/status$"
            )
            counted = RecordingTelemetry()
            controller = TimedController(
                k.Kube(controller_client, on_request=count),
                registry=builtin_registry(),
                services=StepServices(),
                work_dir=Path(work),
                min_requeue=3600.0,
                health_interval=3600.0,
                on_reconcile=counted.on_reconcile,
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
                # CPU and the controller's writes cover the runs, idle waits included.
                cpu_started = {name: read() for name, read in server_cpu.items()}
                own_started, machine_started = time.process_time(), machine_cpu_seconds()
                runs_started = time.perf_counter()
                writes.clear()
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
                    controller.app_event_at = None
                    await argocd.process()  # the sync starts: operation Running

                    def waiting(name: str = name) -> bool:
                        # The step waits on the sync, and the controller has seen it Running
                        # (that only changes the step's message, which is not written again
                        # until its retry: promoter/engine/recording.py).
                        obj = promotions.get(NS, name) or {}
                        message = str((obj.get("status") or {}).get("message") or "")
                        return "sync" in message and controller.app_event_at is not None

                    await until(waiting)
                    # The status write's own watch event causes one more (no-op) reconcile;
                    # start the clock only once the controller is idle again.
                    for _ in range(100):  # polled: the work queue has no "idle" event
                        before = counted.reconciles
                        await asyncio.sleep(0.02)
                        if counted.reconciles == before and not controller.queue.active:
                            break
                    controller.app_event_at = controller.reconcile_at = None
                    sent.clear()
                    await argocd.process()  # the sync finishes: operation Succeeded
                    await until(lambda name=name: name in observed)
                    app_write, status_write = sent.get("app write"), sent.get("status write")
                    app_event, reconcile = controller.app_event_at, controller.reconcile_at
                    assert app_write and status_write and app_event and reconcile
                    samples["app watch"].append(app_event - app_write)
                    samples["queue"].append(reconcile - app_event)
                    samples["reconcile"].append(status_write - reconcile)
                    samples["status watch"].append(observed[name] - status_write)
                    samples["total"].append(observed[name] - app_write)
                cpu_used = {
                    "this process": time.process_time() - own_started,
                    **{name: read() - cpu_started[name] for name, read in server_cpu.items()},
                }
                others = machine_cpu_seconds() - machine_started - sum(cpu_used.values())
                elapsed = time.perf_counter() - runs_started
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                await fake_client.close()
                await controller_client.close()
    return {
        "samples": samples,
        "cpu": cpu_used,
        "others_cpu": others,
        "elapsed": elapsed,
        "writes": dict(writes),
    }


def report(result: dict[str, Any], real: bool) -> None:
    samples: dict[str, list[float]] = result["samples"]
    runs = len(samples["total"])
    server = "kube-apiserver v1.20 + etcd" if real else "the API server emulator (in process)"
    print(f"{server}: Application Succeeded -> Promotion Succeeded, {runs} runs (milliseconds)")
    print(f"{'phase':<14}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'mean':>8}")
    for phase in PHASES:
        values = [v * 1000 for v in samples[phase]]
        print(
            f"{phase:<14}{pct(values, 50):>8.2f}{pct(values, 90):>8.2f}{pct(values, 99):>8.2f}"
            f"{max(values):>8.2f}{statistics.mean(values):>8.2f}"
        )
    p99 = pct(samples["total"], 99) * 1000
    print(f"target: p99 total < 100 ms -> {'met' if p99 < 100 else 'MISSED'} ({p99:.1f} ms)")
    # Per run, not per timed reaction: a run is a whole Promotion (start the sync, wait, finish).
    writes = result["writes"]
    by_kind = ", ".join(f"{plural} {c / runs:.2f}" for plural, c in sorted(writes.items()))
    print(f"controller writes per Promotion: {sum(writes.values()) / runs:.2f} ({by_kind})")
    # "this process" is the controller, the fake Argo CD, our watch (and the emulator, in the
    # default mode).
    for name, used in result["cpu"].items():
        print(f"{name + ' CPU per Promotion':<34}{used / runs * 1000:>7.1f} ms ({used:.2f} s)")
    # The rest of the machine meanwhile: on 2 shared cores it explains most of the spread.
    # Clamped: the machine's counters and ours are read at slightly different instants.
    share = max(0.0, result["others_cpu"]) / result["elapsed"]
    print(f"other processes: {share:.0%} of a core during the runs ({os.cpu_count()} cores)")


if __name__ == "__main__":
    limits.bound()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument(
        "--real-apiserver",
        action="store_true",
        help="run against kube-apiserver v1.20 + etcd on 127.0.0.1 (scripts/build-kube-apiserver.sh"
        " builds it) instead of the emulator",
    )
    args = parser.parse_args()
    report(asyncio.run(main(args.runs, args.real_apiserver)), args.real_apiserver)
