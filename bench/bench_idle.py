"""Idle: what an install whose Stages are all settled costs the API server, and memory over time.

The whole server (``create_app``, settings from the environment as an operator gives them, leader
election on) against the API server emulator in a child process (``--real-apiserver``:
kube-apiserver v1.20 + etcd). ``--stages`` Stages (1,000 by default), each takes one Freight by
one Promotion of one ``compose-output`` step; once every Promotion has finished and the Stages'
statuses have landed, the server is left alone for ``--idle`` seconds (600 by default) and
every request it makes is counted from its own ``/metrics`` (``longshoreman_kubernetes_requests_
total``). Reported: writes and requests per hour, by resource; the leader Lease's renewals
(client-go's election renews every ``RETRY_PERIOD``, 2 s: 1,800 an hour whatever the size, and
the only write an idle install must make) apart from the rest (target 0).

Then memory: the server's RSS (this process, the emulator runs apart) before and after
``--promotions`` more Promotions (5,000 by default; each with its own Freight, spread over the
Stages) with the garbage collector on (retention ``--keep`` per Stage and per Warehouse,
minimum ages 0, every ``--gc-interval`` seconds), measured once the collector has brought the
objects back down. Target: flat (within 10%), since the caches hold what the collector keeps.

Run: .venv/bin/python bench/bench_idle.py [--stages 1000] [--idle 600] [--promotions 5000]
     [--keep 2] [--gc-interval 5] [--real-apiserver]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
from aiohttp import web
from kubernetes.aio import client as aio_client

from app.apiserver.kubeconfig import write_kubeconfig
from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from bench import limits
from bench.bench_scale import NS, apiserver_process, in_batches
from bench.realserver import real_apiserver
from promoter.resources.stages import FREIGHT_HISTORY_LIMIT

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SAMPLE = re.compile(
    r'^longshoreman_kubernetes_requests_total\{code="([^"]*)",method="([^"]*)",'
    r'resource="([^"]*)"\} ([0-9.e+]+)$'
)
STEPS = [{"uses": "compose-output", "as": "out", "config": {"done": True}}]
# The memory phase's Stages take Freight from a Warehouse of their own: Kargo's Freight rule
# counts per Warehouse from the oldest Freight in use, which the idle Stages' would pin.
CHURN = "churn"


def stage(name: str, warehouse: str = "app") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "requestedFreight": [
                {"origin": {"kind": "Warehouse", "name": warehouse}, "sources": {"direct": True}}
            ],
            "promotionTemplate": {"spec": {"steps": STEPS}},
        },
    }


def freight(name: str, warehouse: str = "app") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "origin": {"kind": "Warehouse", "name": warehouse},
    }


def promotion(name: str, stage_name: str, freight_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"stage": stage_name, "freight": freight_name},
    }


def rss_mb() -> float:
    """This process's resident set now (not its peak), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def requests_so_far(http: aiohttp.ClientSession, url: str) -> Counter[tuple[str, str]]:
    """The server's Kubernetes requests so far, by (method, resource), from its /metrics."""
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            _code, method, resource, value = match.groups()
            counts[(method, resource)] += int(float(value))
    return counts


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def count_objects(kube: k.Kube) -> tuple[int, int, int]:
    """(Promotions, unfinished Promotions, Freight) in the namespace now."""
    promotions, _ = await kube.list(k.PROMOTIONS, NS)
    freights, _ = await kube.list(k.FREIGHT, NS)
    unfinished = sum(
        1
        for p in promotions
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed", "Errored", "Aborted")
    )
    return len(promotions), unfinished, len(freights)


async def until(probe: Callable[[], Any], what: str, limit: float) -> None:
    limits.doing(what)
    deadline = time.monotonic() + limit
    while not await probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_idle: gave up {what} after {limit:g} s")
        await asyncio.sleep(0.5)


async def run(
    connect: Callable[[], aio_client.ApiClient], kubeconfig: Path, args: argparse.Namespace
) -> dict[str, Any]:
    setup = k.Kube(connect())
    try:
        return await measure(setup, kubeconfig, args)
    finally:
        await setup.close()


async def measure(setup: k.Kube, kubeconfig: Path, args: argparse.Namespace) -> dict[str, Any]:
    names = [f"stage-{i:04d}" for i in range(args.stages)]
    await in_batches([lambda n=n: setup.create(k.STAGES, stage(n)) for n in names])
    await in_batches([lambda n=n: setup.create(k.FREIGHT, freight(f"f-{n}-0")) for n in names])
    await in_batches(
        [lambda n=n: setup.create(k.PROMOTIONS, promotion(f"{n}-0", n, f"f-{n}-0")) for n in names]
    )
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as work:
        settings = Settings.from_env(
            {
                "KUBECONFIG": str(kubeconfig),
                "WORK_DIR": work,
                "LEADER_ELECTION": "true",
                "LEASE_NAMESPACE": NS,
                "WAREHOUSE_DISCOVERY": "false",
                "LONGSHOREMAN_MAX_RETAINED_PROMOTIONS": str(args.keep),
                "LONGSHOREMAN_MIN_PROMOTION_DELETION_AGE": "0s",
                "LONGSHOREMAN_MAX_RETAINED_FREIGHT": str(args.keep),
                "LONGSHOREMAN_MIN_FREIGHT_DELETION_AGE": "0s",
                "LONGSHOREMAN_GC_INTERVAL": f"{args.gc_interval}s",
            }
        )
        app = create_app(settings)
        async with aiohttp.ClientSession() as http, serving(app) as url:
            await wait_started(app)

            async def settled() -> bool:
                total, unfinished, _ = await count_objects(setup)
                return total == len(names) and unfinished == 0

            await until(settled, "waiting for the first Promotions to finish", args.limit)
            # The Stages' statuses, verification records and Events land after the Promotions.
            await asyncio.sleep(args.settle)
            before = await requests_so_far(http, url)
            limits.doing(f"idling for {args.idle:g} s")
            await asyncio.sleep(args.idle)
            idle = await requests_so_far(http, url) - before
            report_idle(idle, args)

            churn = [f"churn-{i:04d}" for i in range(args.churn_stages)]
            await in_batches([lambda n=n: setup.create(k.STAGES, stage(n, CHURN)) for n in churn])

            async def rounds(first: int, count: int) -> int:
                """``count`` rounds: each churn Stage gets a new Freight and promotes it."""
                for j in range(first, first + count):
                    await in_batches(
                        [
                            lambda n=n, j=j: setup.create(k.FREIGHT, freight(f"f-{n}-{j}", CHURN))
                            for n in churn
                        ]
                    )
                    await in_batches(
                        [
                            lambda n=n, j=j: setup.create(
                                k.PROMOTIONS, promotion(f"{n}-{j}", n, f"f-{n}-{j}")
                            )
                            for n in churn
                        ]
                    )

                    async def drained() -> bool:
                        return (await count_objects(setup))[1] == 0

                    await until(drained, f"waiting for round {j} to finish", args.limit)
                return count * len(churn)

            # Each Stage's freightHistory keeps its last 10 Freight, which the collector never
            # takes: fill it first, so "before" already holds what the steady state holds.
            warmed = await rounds(0, FREIGHT_HISTORY_LIMIT)
            bound = len(names) + len(churn) * args.keep
            freight_bound = len(names) + len(churn) * (FREIGHT_HISTORY_LIMIT + 1) + args.keep

            async def collected() -> bool:
                promotions, _, freights = await count_objects(setup)
                return bool(promotions <= bound and freights <= freight_bound)

            await until(collected, "waiting for the collector after the warm-up", args.limit)
            await asyncio.sleep(args.settle)
            gc.collect()
            rss_before = rss_mb()
            objects_before = await count_objects(setup)
            per_stage = max(1, args.promotions // max(1, len(churn)))
            created = await rounds(FREIGHT_HISTORY_LIMIT, per_stage)
            rss_loaded = rss_mb()
            await until(collected, "waiting for the collector to catch up", args.limit)
            await asyncio.sleep(args.settle)
            gc.collect()
            rss_after = rss_mb()
            left = await count_objects(setup)
    return {
        "rss_before": rss_before,
        "rss_loaded": rss_loaded,
        "rss_after": rss_after,
        "warmed": warmed,
        "created": created,
        "before": objects_before,
        "left": left,
    }


def report_idle(idle: Counter[tuple[str, str]], args: argparse.Namespace) -> None:
    per_hour = 3600 / args.idle
    server = "kube-apiserver v1.20 + etcd" if args.real_apiserver else "the API server emulator"
    print(f"{server}: {args.stages} settled Stages, idle {args.idle:g} s, leader election on")
    lease = sum(c for (m, r), c in idle.items() if r == "leases" and m in WRITES)
    writes = sum(c for (m, r), c in idle.items() if r != "leases" and m in WRITES)
    requests = sum(idle.values())
    print(f"{'writes per hour (no Lease)':<34}{writes * per_hour:>10.0f}   target 0: "
          f"{'met' if writes == 0 else 'MISSED'}")  # fmt: skip
    print(f"{'Lease renewals per hour':<34}{lease * per_hour:>10.0f}")
    print(f"{'requests per hour (all)':<34}{requests * per_hour:>10.0f}")
    for (method, resource), c in sorted(idle.items(), key=lambda item: -item[1]):
        print(f"  {method:<7}{resource:<26}{c * per_hour:>10.0f}/h")


def report_memory(result: dict[str, Any], args: argparse.Namespace) -> None:
    before, after = result["rss_before"], result["rss_after"]
    flat = after <= before * 1.1
    print(
        f"memory: {args.churn_stages} more Stages, warmed with {result['warmed']} Promotions "
        f"(their freightHistory full); GC every {args.gc_interval:g} s, keeping {args.keep}"
    )
    print(
        f"RSS before {result['created']} more Promotions: {before:.1f} MB; with them done: "
        f"{result['rss_loaded']:.1f} MB; once collected: {after:.1f} MB -> target flat (within "
        f"10%): {'met' if flat else 'MISSED'}"
    )
    for when, (promotions, _, freights) in (
        ("before", result["before"]),
        ("after", result["left"]),
    ):
        print(f"objects {when}: {promotions} Promotions, {freights} Freight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=600.0, help="seconds left alone")
    parser.add_argument("--promotions", type=int, default=5000)
    parser.add_argument(
        "--churn-stages", type=int, default=100, help="Stages the memory phase uses"
    )
    parser.add_argument("--keep", type=int, default=2, help="retained per Stage and Warehouse")
    parser.add_argument("--gc-interval", type=float, default=5.0)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after a drain")
    parser.add_argument("--limit", type=float, default=900.0, help="give up a wait after (s)")
    parser.add_argument("--real-apiserver", action="store_true")
    args = parser.parse_args()
    if args.real_apiserver:

        async def on_real() -> dict[str, Any]:
            async with real_apiserver(namespaces=[NS]) as real:
                return await run(real.api_client, real.kubeconfig_path, args)

        result = asyncio.run(on_real())
    else:
        with apiserver_process() as (url, _cpu, _signal):
            with tempfile.TemporaryDirectory() as scratch:
                kubeconfig = write_kubeconfig(Path(scratch) / "kubeconfig", url)

                def connect() -> aio_client.ApiClient:
                    return aio_client.ApiClient(aio_client.Configuration(host=url))

                result = asyncio.run(run(connect, kubeconfig, args))
    report_memory(result, args)


if __name__ == "__main__":
    limits.bound()
    main()
