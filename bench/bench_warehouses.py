"""Warehouse discovery: webhook -> Freight, many Warehouses polling, a repository of 5,000 tags.

Everything runs on 127.0.0.1 against real parts: Debian's docker-registry (the CNCF
distribution server, ``tests/support/registry.py``; images pushed through its API), the
Kubernetes API server emulator in this process, the real Warehouse reconciler with the real OCI
client, and the registry receivers' aiohttp app. Three measurements:

* ``webhook``: a tag is pushed (not timed), then a Harbor ``PUSH_ARTIFACT`` webhook is sent;
  timed from sending it until a Freight watch sees the new tag's Freight (ack, refresh
  annotation, the informer's event, discovery against the registry, Freight create, watch
  event back). Target: p99 < 500 ms.
* ``polling``: N Warehouses (1,000) over a few repositories of one registry, each reconciled
  once per 5-minute interval on a virtual clock with nothing pushed meanwhile: registry
  requests per discovery (conditional: ``If-None-Match`` on tags/list; with ``cacheByTag`` the
  304 is all) and this process's CPU per round, scaled to an hour (12 rounds) as a share of one
  core. Rounds include the status write, and the emulator runs in this process, so its CPU is
  counted too: an upper bound for the controller. Target: < 5% of one core.
* ``tags``: discovery of one repository holding 5,000 tags (SemVer, the default
  ``discoveryLimit`` of 20; 5 pages of tags/list, then the newest tags' manifests): wall time
  and the Python heap's peak (tracemalloc) for one cold discovery. Target: < 2 s, < 50 MB.

Run: .venv/bin/python bench/bench_warehouses.py [--runs 50] [--warehouses 1000] [--tags 5000]
     [--only webhook|polling|tags]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
from aiohttp import web

from app.controller import kube as k
from app.controller.informer import Informer
from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.discover import Discoverer
from app.controller.warehouses.gitsource import GitSource
from app.controller.warehouses.reconciler import WarehouseController
from app.controller.warehouses.registry import OCIClient
from app.receivers.routes import setup_receivers
from app.receivers.settings import ReceiverSettings
from bench import limits
from promoter.warehouses.spec import parse_spec
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.fixtures import webhook_body
from tests.support.kube import running_apiserver
from tests.support.registry import OCI_MANIFEST, Registry, running_registry, serving

NS = "bench"
HARBOR_AUTH = "Bearer bench-harbor-secret-0123456789"
WEBHOOK_P99_MS = 500.0
POLLING_CORE_SHARE = 0.05
TAGS_SECONDS, TAGS_MB = 2.0, 50.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def warehouse(name: str, repo: str, *, interval: str = "5m", **image: Any) -> dict[str, Any]:
    return objects.warehouse(
        name,
        namespace=NS,
        interval=interval,
        subscriptions=[{"image": {"repoURL": repo, **image}}],
    )


def discoverer(session: aiohttp.ClientSession, work: Path) -> Discoverer:
    oci = OCIClient(session)
    return Discoverer(oci, ChartClient(session, oci), GitSource(work / "git-cache"))


async def until(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def running(*coros: Awaitable[None]) -> list[asyncio.Task[None]]:
    return [asyncio.ensure_future(c) for c in coros]


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ---------------------------------------------------------------- webhook -> Freight


async def bench_webhook(runs: int, work: Path) -> dict[str, Any]:
    async with (
        running_apiserver(namespaces=[NS], bookmark_interval=0.2) as api,
        running_registry(work) as registry,
        aiohttp.ClientSession() as session,
        contextlib.AsyncExitStack() as stack,
    ):
        kube = k.Kube(api.api_client())
        controller = WarehouseController(kube, discoverer(session, work))
        seen: dict[str, float] = {}

        def on_freight(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            for image in obj.get("images") or ():
                seen.setdefault(str(image.get("tag")), time.perf_counter())

        freight = Informer(kube, k.FREIGHT, namespace=NS, on_event=on_freight)
        app = web.Application()
        settings = ReceiverSettings.from_env({"LONGSHOREMAN_HARBOR_WEBHOOK_AUTH": HARBOR_AUTH})
        setup_receivers(app, settings, lambda: controller)
        url = await stack.enter_async_context(serving(app))
        tasks = await running(controller.run_informer(), controller.lead(), freight.run())
        try:
            repo = registry.repo("acme/app")
            await registry.push_image("acme/app", "1.0.0")
            await kube.create(k.WAREHOUSES, warehouse("app", repo, interval="1h"))
            await until(lambda: "1.0.0" in seen, "the first Freight")
            totals, acks = [], []
            for i in range(1, runs + 1):
                tag = f"1.0.{i}"
                await registry.push_image("acme/app", tag)
                event = webhook_body("harbor.push_artifact")
                resource = event["event_data"]["resources"][0]
                resource.update(resource_url=f"{repo}:{tag}", tag=tag)
                body = json.dumps(event).encode()
                start = time.perf_counter()
                async with session.post(
                    f"{url}/webhooks/harbor",
                    data=body,
                    headers={"Authorization": HARBOR_AUTH, "Content-Type": "application/json"},
                ) as response:
                    assert response.status == 202, await response.text()
                acks.append((time.perf_counter() - start) * 1000)
                await until(lambda tag=tag: tag in seen, f"Freight of {tag}")  # type: ignore[misc]
                totals.append((seen[tag] - start) * 1000)
        finally:
            await stop(tasks)
            await kube.close()
    return {
        "runs": runs,
        "ack_p50_ms": statistics.median(acks),
        "ack_p99_ms": percentile(acks, 0.99),
        "p50_ms": statistics.median(totals),
        "p99_ms": percentile(totals, 0.99),
        "max_ms": max(totals),
    }


# ---------------------------------------------------------------- 1,000 Warehouses polling


async def bench_polling(count: int, repos: int, rounds: int, work: Path) -> dict[str, Any]:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    results: dict[str, Any] = {"warehouses": count, "repositories": repos, "rounds": rounds}
    async with (
        running_apiserver(namespaces=[NS], bookmark_interval=1.0) as api,
        running_registry(work) as registry,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=32)) as session,
    ):
        for r in range(repos):
            for tag in ("1.0.0", "1.1.0", "1.2.0"):
                await registry.push_image(f"team{r}/app", tag)
        for cache_by_tag in (False, True):
            kube = k.Kube(api.api_client())
            d = discoverer(session, work)
            controller = WarehouseController(kube, d, clock=clock, rand=lambda: 0.0)
            prefix = "c" if cache_by_tag else "p"
            extra = {"cacheByTag": True} if cache_by_tag else {}
            for i in range(count):
                repo = registry.repo(f"team{i % repos}/app")
                await kube.create(k.WAREHOUSES, warehouse(f"{prefix}{i}", repo, **extra))
            task = asyncio.ensure_future(controller.run_informer())
            await controller.informer.synced.wait()
            keys = [(NS, f"{prefix}{i}") for i in range(count)]
            gate = asyncio.Semaphore(16)

            async def one(
                key: tuple[str, str],
                controller: WarehouseController = controller,
                gate: asyncio.Semaphore = gate,
            ) -> None:
                async with gate:
                    await controller.reconcile(key)

            await asyncio.gather(*(one(key) for key in keys))  # first discovery: warm caches
            cpu, requests = [], []
            for _ in range(rounds):
                clock.advance(5 * 60 + 1)
                before_cpu, before_requests = time.process_time(), d.oci.requests
                await asyncio.gather(*(one(key) for key in keys))
                cpu.append(time.process_time() - before_cpu)
                requests.append((d.oci.requests - before_requests) / count)
            label = "cacheByTag" if cache_by_tag else "default"
            per_round = statistics.median(cpu)
            results[label] = {
                "requests_per_discovery": statistics.median(requests),
                "cpu_per_round_s": per_round,
                "cpu_per_hour_s": per_round * 12,
                "core_share": per_round * 12 / 3600,
            }
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()
    return results


# ---------------------------------------------------------------- 5,000 tags


async def push_many_tags(registry: Registry, name: str, count: int) -> None:
    """One image, then its manifest under ``count`` semver tags (the blobs are shared)."""
    await registry.push_image(name, "0.0.0")
    async with registry.session.get(
        f"http://{registry.host}/v2/{name}/manifests/0.0.0", headers={"Accept": OCI_MANIFEST}
    ) as response:
        manifest = await response.json(content_type=None)
    gate = asyncio.Semaphore(16)

    async def put(tag: str) -> None:
        async with gate:
            await registry.push_manifest(name, tag, manifest, OCI_MANIFEST)

    tags = [f"{i // 100}.{(i // 10) % 10}.{i % 10}" for i in range(1, count)]
    await asyncio.gather(*(put(tag) for tag in tags))


async def bench_tags(count: int, work: Path) -> dict[str, Any]:
    async with running_registry(work) as registry, aiohttp.ClientSession() as session:
        await push_many_tags(registry, "acme/big", count)
        spec = parse_spec({"subscriptions": [{"image": {"repoURL": registry.repo("acme/big")}}]})
        times, peaks = [], []
        found: dict[str, Any] = {}
        for _ in range(3):
            d = discoverer(session, work)  # cold: no conditional or digest caches
            tracemalloc.start()
            start = time.perf_counter()
            found = await d.discover(spec, None, datetime.now(UTC))
            times.append(time.perf_counter() - start)
            peaks.append(tracemalloc.get_traced_memory()[1] / 1e6)
            tracemalloc.stop()
            requests = d.oci.requests
    references = found["images"][0]["references"]
    return {
        "tags": count,
        "seconds": statistics.median(times),
        "peak_mb": statistics.median(peaks),
        "requests": requests,
        "newest": references[0]["tag"],
        "listed": len(references),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warehouses", type=int, default=1000)
    parser.add_argument("--repositories", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tags", type=int, default=5000)
    parser.add_argument("--only", choices=("webhook", "polling", "tags"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-warehouses-") as scratch:
        work = Path(scratch)
        if args.only in (None, "webhook"):
            (work / "w").mkdir()
            w = asyncio.run(bench_webhook(args.runs, work / "w"))
            ok = "ok" if w["p99_ms"] < WEBHOOK_P99_MS else "MISSED"
            print(
                f"webhook -> Freight ({w['runs']} runs): p50 {w['p50_ms']:.1f} ms, "
                f"p99 {w['p99_ms']:.1f} ms, max {w['max_ms']:.1f} ms "
                f"[target p99 < {WEBHOOK_P99_MS:.0f} ms: {ok}]; webhook answered in "
                f"p50 {w['ack_p50_ms']:.1f} ms, p99 {w['ack_p99_ms']:.1f} ms"
            )
        if args.only in (None, "polling"):
            (work / "p").mkdir()
            polling = bench_polling(args.warehouses, args.repositories, args.rounds, work / "p")
            p = asyncio.run(polling)
            for label in ("default", "cacheByTag"):
                r = p[label]
                ok = "ok" if r["core_share"] < POLLING_CORE_SHARE else "MISSED"
                print(
                    f"polling {p['warehouses']} Warehouses / {p['repositories']} repositories, "
                    f"5m interval, {label}: {r['requests_per_discovery']:.2f} registry requests "
                    f"per discovery, CPU {r['cpu_per_round_s']:.2f} s per round = "
                    f"{r['cpu_per_hour_s']:.1f} s per hour = {r['core_share'] * 100:.2f}% of one "
                    f"core [target < {POLLING_CORE_SHARE * 100:.0f}%: {ok}]"
                )
        if args.only in (None, "tags"):
            (work / "t").mkdir()
            t = asyncio.run(bench_tags(args.tags, work / "t"))
            ok = "ok" if t["seconds"] < TAGS_SECONDS and t["peak_mb"] < TAGS_MB else "MISSED"
            print(
                f"discovery of {t['tags']} tags: {t['seconds'] * 1000:.0f} ms, peak heap "
                f"{t['peak_mb']:.1f} MB, {t['requests']} registry requests, newest "
                f"{t['newest']}, {t['listed']} listed [target < {TAGS_SECONDS:.0f} s, "
                f"< {TAGS_MB:.0f} MB: {ok}]"
            )


if __name__ == "__main__":
    limits.bound()
    main()
