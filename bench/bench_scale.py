"""Scale: many Stages, each with a queue of Promotions, drained by one controller.

500 Stages x 4 queued Promotions x 3 ``compose-output`` steps (2000 Promotions) are created
first (through the builder, as the CLI, chat commands and auto-promotion create them; each with
its own Freight); then the controller starts (in this process) and the clock runs until every
Promotion is terminal. Reported: wall time, Promotions per second, CPU seconds of the controller
and of the API server, Kubernetes API requests per Promotion split into reads and writes
(counted with ``Kube(on_request=...)``, informer lists and watches included), and this
process's peak RSS. The writes made when creating the Promotions (the object, and the
PromotionCreated Event its creator emits) are counted apart: they are not the controller's.
The API server emulator runs in a child process (``bench_scale.py --serve-apiserver``) so
neither its CPU nor its memory counts as ours.

``--real-apiserver`` runs the same workload against a real kube-apiserver v1.20 with etcd
(``bench/realserver.py``: the binary of ``scripts/build-kube-apiserver.sh``, our CRDs installed
with kubectl), and reports the CPU of kube-apiserver and of etcd instead of the emulator's. The
default size stays 500 Stages, so both modes run one workload: on 2 cores that takes about a
minute in all (~12 s to start the servers, install the CRDs and let kube-apiserver settle, ~6 s
to populate, 25-70 s to drain at 30-85 Promotions/s, depending on what else loads the machine);
``--stages 100`` takes about 20 s.

Targets: >= 200 Promotions/s against the emulator, >= 100/s against kube-apiserver + etcd (three
processes on 2 cores); at most 3 writes per Promotion plus one per step; RSS < 250 MB.

Run: .venv/bin/python bench/bench_scale.py [--stages 500] [--per-stage 4] [--steps 3]
     [--real-apiserver]  against kube-apiserver + etcd (about a minute at the default size)
     [--shared-freight]  one Freight promoted everywhere (its status grows with every Stage)
     [--bare]            Promotions with only stage + freight, as kubectl creates them
     [--profile FILE]    cProfile of the controller run (view with `python -m pstats FILE`)
     [--profile-apiserver FILE]  cProfile of the API server while the controller drains
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes.aio import client as aio_client

from app.apiserver import create_apiserver_app, serve_apiserver
from app.controller import kube as k
from app.controller.creation import create_promotion
from app.controller.reconciler import Controller
from bench import limits
from bench.realserver import cpu_readers, cpu_seconds, machine_cpu_seconds, real_apiserver
from promoter.resources.model import TaskRef, TaskSpec
from promoter.steps.base import StepServices
from promoter.steps.registry import builtin_registry
from tests.support.telemetry import RecordingTelemetry

ROOT = Path(__file__).resolve().parent.parent
NS = "scale"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CRD_DIRS = [ROOT / "deploy" / "crds", ROOT / "deploy" / "third-party-crds"]


# ---- the API server, in its own process ---------------------------------------------------------


async def serve_apiserver_forever(profile: str | None) -> None:
    app = create_apiserver_app(crd_dirs=CRD_DIRS, namespaces=("default", NS))
    async with serve_apiserver(app) as url:
        print(url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # SIGUSR1/SIGUSR2 start and stop the profile: it covers the drain, not the set-up.
        profiler = cProfile.Profile()
        if profile:
            loop.add_signal_handler(signal.SIGUSR1, profiler.enable)
            loop.add_signal_handler(signal.SIGUSR2, profiler.disable)
        await stop.wait()
        if profile:
            profiler.disable()
            profiler.dump_stats(profile)


@contextlib.contextmanager
def apiserver_process(profile: str | None = None) -> Any:
    """The emulator in a child process; yields (its URL, a function giving its CPU seconds,
    a function to signal it)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-apiserver",
            *(["--profile-apiserver", profile] if profile else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )

    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the API server did not start (said {url!r})")
        yield url, lambda: cpu_seconds(proc.pid), proc.send_signal
    finally:
        proc.terminate()
        proc.wait(10)


# ---- the benchmark -------------------------------------------------------------------------------


def stage(name: str, steps: int) -> dict[str, Any]:
    chain: list[dict[str, Any]] = [{"uses": "compose-output", "as": "s0", "config": {"n": 0}}]
    for i in range(1, steps):
        chain.append(
            {
                "uses": "compose-output",
                "as": f"s{i}",
                "config": {"n": f"${{{{ outputs.s{i - 1}.n + 1 }}}}", "stage": "${{ ctx.stage }}"},
            }
        )
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"}, "sources": {}}],
            "promotionTemplate": {"spec": {"steps": chain}},
        },
    }


async def in_batches(calls: list[Any], size: int = 50) -> None:
    for start in range(0, len(calls), size):
        await asyncio.gather(*(call() for call in calls[start : start + size]))


def freight(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "alias": name,
        "origin": {"kind": "Warehouse", "name": "app"},
    }


async def populate(
    kube: k.Kube, stages: int, per_stage: int, steps: int, shared_freight: bool, bare: bool
) -> list[str]:
    names = [f"stage-{i:04d}" for i in range(stages)]
    await in_batches([lambda n=n: kube.create(k.STAGES, stage(n, steps)) for n in names])
    promotions = [f"{n}-p{j}" for j in range(per_stage) for n in names]
    # Each Promotion brings its own Freight (a new build), unless --shared-freight: then one
    # Freight goes everywhere, and its status.verifiedIn grows by one entry per Stage.
    freights = ["f0"] if shared_freight else [f"f-{p}" for p in promotions]
    await in_batches([lambda f=f: kube.create(k.FREIGHT, freight(f)) for f in freights])
    stage_objects = {n: {**stage(n, steps), "kind": "Stage"} for n in names}

    async def promote(name: str) -> None:
        stage_name = name.rsplit("-", 1)[0]
        freight_name = "f0" if shared_freight else f"f-{name}"
        if bare:
            # As kubectl would: the controller inflates the steps and records them (one write)
            # and announces the Promotion (an Event: nobody else did).
            spec = {"stage": stage_name, "freight": freight_name}
            await kube.create(
                k.PROMOTIONS, {"metadata": {"name": name, "namespace": NS}, "spec": spec}
            )
            return
        # As the CLI, chat commands and auto-promotion do: through the one builder, whose
        # caller announces the Promotion (the PromotionCreated Event).
        await create_promotion(
            kube, stage_objects[stage_name], freight(freight_name), NoTasks(), actor="bench",
            name=name,
        )  # fmt: skip

    await in_batches([lambda p=p: promote(p) for p in promotions])
    return promotions


class NoTasks:
    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return None


async def run(
    connect: Callable[[], aio_client.ApiClient],
    server_cpu: Mapping[str, Callable[[], float]],
    signal_apiserver: Callable[[int], None] | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Populate, then drain with one controller; ``connect`` gives a client of the server under
    test and ``server_cpu`` a CPU-seconds reader per server process."""
    created: Counter[tuple[str, str]] = Counter()

    def count_setup(method: str, plural: str, status: int | None) -> None:
        if plural in ("promotions", "events"):
            created[(method, plural)] += 1

    setup = k.Kube(connect(), on_request=count_setup)
    names = await populate(
        setup, args.stages, args.per_stage, args.steps, args.shared_freight, args.bare
    )
    await setup.close()

    requests: Counter[tuple[str, str]] = Counter()
    # Requests the server refused (a 409 on a stale resourceVersion, say, which the controller
    # then retries): they cost the server work, but are not the controller's design. Status None
    # is a request without an answer: mostly the last Stage and Freight writes, cancelled when
    # the clock stops at the last Promotion's end; those count as writes, as they always did.
    refused: Counter[tuple[str, str, int | None]] = Counter()

    def count(method: str, plural: str, status: int | None) -> None:
        requests[(method, plural)] += 1
        if status is None or not 200 <= status < 300:
            refused[(method, plural, status)] += 1

    finished: Counter[str] = Counter()
    done = asyncio.Event()

    def on_finished(obj: Mapping[str, Any]) -> None:
        finished[str((obj.get("status") or {}).get("phase"))] += 1
        if sum(finished.values()) >= len(names):
            done.set()

    kube = k.Kube(connect(), on_request=count)
    with tempfile.TemporaryDirectory() as work:
        counted = RecordingTelemetry()
        controller = Controller(
            kube,
            registry=builtin_registry(),
            services=StepServices(),
            work_dir=Path(work),
            max_concurrent=args.concurrency,
            min_requeue=0.0,
            health_interval=3600.0,
            on_promotion_finished=on_finished,
            on_reconcile=counted.on_reconcile,
        )
        profiler = cProfile.Profile() if args.profile else None
        started = time.perf_counter()
        cpu_started = time.process_time()
        servers_started = {name: read() for name, read in server_cpu.items()}
        machine_started = machine_cpu_seconds()
        if profiler:
            profiler.enable()
        if args.profile_apiserver and signal_apiserver:
            signal_apiserver(signal.SIGUSR1)
        tasks = [
            asyncio.create_task(controller.run_informers()),
            asyncio.create_task(controller.lead()),
        ]
        try:
            await asyncio.wait_for(done.wait(), args.limit)
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            servers_used = {
                name: read() - servers_started[name] for name, read in server_cpu.items()
            }
            machine = machine_cpu_seconds() - machine_started
        finally:
            if args.profile_apiserver and signal_apiserver:
                signal_apiserver(signal.SIGUSR2)
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.profile)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await kube.close()
    return {
        "promotions": len(names),
        "wall": wall,
        "finished": dict(finished),
        "requests": requests,
        "refused": refused,
        "created": created,
        "reconciles": counted.reconciles,
        "cpu": cpu,
        "server_cpu": servers_used,
        "others_cpu": machine - cpu - sum(servers_used.values()),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    n = result["promotions"]
    requests: Counter[tuple[str, str]] = result["requests"]
    reads = sum(c for (m, _), c in requests.items() if m not in WRITES)
    writes = sum(c for (m, _), c in requests.items() if m in WRITES)
    refused: Counter[tuple[str, str, int | None]] = result["refused"]
    refused_writes = sum(c for (m, _, st), c in refused.items() if m in WRITES and st is not None)
    accepted = (writes - refused_writes) / n
    budget = 3 + args.steps
    rate = n / result["wall"]
    target = 100 if args.real_apiserver else 200
    server = "kube-apiserver v1.20 + etcd" if args.real_apiserver else "the API server emulator"
    print(
        f"{server}: "
        f"{args.stages} Stages x {args.per_stage} Promotions x {args.steps} compose-output steps "
        f"(concurrency {args.concurrency}, "
        f"{'one shared Freight' if args.shared_freight else 'one Freight per Promotion'}, "
        f"{'bare' if args.bare else 'built'} Promotions)"
    )
    print(f"{'Promotions':<28}{n:>10}   {result['finished']}")
    print(f"{'wall time (s)':<28}{result['wall']:>10.2f}")
    print(
        f"{'Promotions/s':<28}{rate:>10.1f}   target >= {target}: "
        f"{'met' if rate >= target else 'MISSED'}"
    )
    print(f"{'reconciles':<28}{result['reconciles']:>10}")
    wall = result["wall"]
    cpu = {"controller": result["cpu"], **result["server_cpu"]}
    for name, used in cpu.items():
        share = f"{used / wall:.0%} of a core, {used / n * 1000:.1f} ms/Promotion"
        print(f"{name + ' CPU (s)':<28}{used:>10.2f}   {share}")
    # Everything else on the machine meanwhile (other sessions' test suites, say): on 2 shared
    # cores it explains most of the spread between runs. Clamped at 0: the machine's counters
    # and ours are read at slightly different instants.
    others = max(0.0, result["others_cpu"])
    print(
        f"{'other processes CPU (s)':<28}{others:>10.2f}   {others / wall:.0%} of a core, "
        f"of {os.cpu_count()} cores"
    )
    print(f"{'API reads per Promotion':<28}{reads / n:>10.2f}")
    print(
        f"{'API writes per Promotion':<28}{accepted:>10.2f}   target <= {budget}: "
        f"{'met' if accepted <= budget else 'MISSED'} "
        f"(not counting {refused_writes} the server refused)"
    )
    rss = result["rss_mb"]
    print(f"{'peak RSS (MB)':<28}{rss:>10.1f}   target < 250: {'met' if rss < 250 else 'MISSED'}")
    print("requests by kind:")
    for (method, plural), c in sorted(requests.items(), key=lambda item: -item[1]):
        print(f"  {method:<7}{plural:<22}{c:>8}{c / n:>8.2f}/Promotion")
    for (method, plural, status), c in sorted(refused.items(), key=lambda item: -item[1]):
        answer = status or "no answer (cancelled at the end, or the connection failed)"
        print(f"  of which {method} {plural} -> {answer}: {c}")
    print("writes when the Promotions were created (not the controller's):")
    for (method, plural), c in sorted(result["created"].items(), key=lambda item: -item[1]):
        print(f"  {method:<7}{plural:<22}{c:>8}{c / n:>8.2f}/Promotion")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", type=int, default=500)
    parser.add_argument("--per-stage", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="max concurrent reconciles")
    parser.add_argument("--limit", type=float, default=300.0, help="give up after this long (s)")
    parser.add_argument(
        "--shared-freight", action="store_true", help="one Freight for every Promotion"
    )
    parser.add_argument(
        "--bare", action="store_true", help="create Promotions kubectl-style (stage + freight)"
    )
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the controller")
    parser.add_argument(
        "--profile-apiserver", metavar="FILE", help="write a cProfile of the API server's drain"
    )
    parser.add_argument(
        "--real-apiserver",
        action="store_true",
        help="run against kube-apiserver v1.20 + etcd on 127.0.0.1 (scripts/build-kube-apiserver.sh"
        " builds it) instead of the emulator; about a minute at the default size on 2 cores "
        "(--stages 100: about 20 s)",
    )
    parser.add_argument("--serve-apiserver", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_apiserver:
        asyncio.run(serve_apiserver_forever(args.profile_apiserver))
        return
    if args.real_apiserver and args.profile_apiserver:
        parser.error("--profile-apiserver profiles the emulator; use Go's pprof for kube-apiserver")
    if args.real_apiserver:
        result = asyncio.run(run_on_real_apiserver(args))
    else:
        with apiserver_process(args.profile_apiserver) as (url, apiserver_cpu, signal_apiserver):

            def connect() -> aio_client.ApiClient:
                return aio_client.ApiClient(aio_client.Configuration(host=url))

            result = asyncio.run(
                run(connect, {"API server": apiserver_cpu}, signal_apiserver, args)
            )
    report(result, args)


async def run_on_real_apiserver(args: argparse.Namespace) -> dict[str, Any]:
    async with real_apiserver(namespaces=[NS]) as real:
        return await run(real.api_client, cpu_readers(real), None, args)


if __name__ == "__main__":
    limits.bound()
    main()
