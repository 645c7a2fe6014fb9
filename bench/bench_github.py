"""GitHub integration latency and API cost, over real HTTP on 127.0.0.1 against the fake GitHub.

1. Webhook ack latency: signed deliveries (closed PRs, comments with and without commands,
   unknown events, 5 % replays of an earlier delivery id) sent open-loop at a fixed rate; time
   from sending to the HTTP answer. Every accepted delivery must be handled exactly once and no
   replay handled again. Target: p99 < 20 ms at 200 deliveries/s.
2. PR merged webhook -> waiting step Succeeded and the next step started: Promotions wait in
   ``git-wait-for-pr`` (poll 30 s) under the real controller and the Kubernetes API emulator; the
   PR is merged in the fake and its signed ``closed`` webhook posted; time until the controller's
   listener sees ``wait-for-pr`` Succeeded with the next step started. Target: p99 < 200 ms.
   Run twice: each Promotion with its own Freight, and all of them promoting one shared Freight
   (each finished Promotion then writes that Freight's ``verifiedIn``, which must not wake the
   Promotions still waiting). Also reported: Stage reconciles per webhook (1-2 when only the
   woken Stage runs; about one per waiting Stage when Freight writes fan out).
3. GitHub API requests per PR-based Promotion (open a PR, poll it while open, merge seen), with
   and without the per-installation ETag cache, counting requests sent and requests billed
   against the rate limit (a 304 to a conditional request is not).

Run: .venv/bin/python bench/bench_github.py [--seconds 30] [--rate 200] [--promotions 40]
     [--polls 10] [--only ack|wake|api ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from bench import limits
from handlers.client import GitHubClient, RetryPolicy
from handlers.pull_requests import GitHubPullRequests
from handlers.webhook import WEBHOOK_PATH, setup_github
from promoter.steps.base import StepServices
from promoter.steps.github import STEPS as GITHUB_STEPS
from tests.support.controller import registry_with, running_controller
from tests.support.github import (
    FakeGitHub,
    fixture,
    running_fake_github,
    webhook_request,
)
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.kube import running_apiserver
from tests.support.promotions import FakePromotions
from tests.support.steps import make_context
from tests.support.telemetry import RecordingTelemetry

SECRET = "bench-secret"
NS = "bench"
GITOPS_URL = "https://github.com/example/gitops.git"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> Any:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def branch_pr(git: RemoteRepo, branch: str) -> None:
    main = git.head("main")
    assert main is not None
    git.git("update-ref", f"refs/heads/{branch}", main)
    git.commit_files(branch, {f"{branch}.txt": branch}, f"change {branch}")


# ---- 1. ack latency ------------------------------------------------------------------------------


def send_load(
    url: str, bodies: list[tuple[str, bytes]], weights: list[float], seconds: float, rate: float
) -> dict[str, Any]:
    """The load generator, in a process of its own: its clock must not wait on our loop or our
    interpreter lock, as GitHub's does not."""

    async def run() -> dict[str, Any]:
        latencies: list[float] = []
        statuses: Counter[int] = Counter()
        accepted: list[str] = []
        sent_ids: list[str] = []
        rng = random.Random(5)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def send(event: str, body: bytes, delivery: str) -> None:
                headers, _ = webhook_request(event, body, SECRET, delivery=delivery)
                started = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    latencies.append(time.perf_counter() - started)
                    statuses[response.status] += 1
                    if response.status == 202:
                        accepted.append(delivery)

            total = int(seconds * rate)
            tasks = []
            start = time.perf_counter()
            for i in range(total):
                await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
                event, body = rng.choices(bodies, weights)[0]
                if sent_ids and rng.random() < 0.05:
                    delivery = rng.choice(sent_ids)  # GitHub redelivering
                else:
                    delivery = str(uuid.uuid4())
                    sent_ids.append(delivery)
                tasks.append(asyncio.create_task(send(event, body, delivery)))
            await asyncio.gather(*tasks)
            elapsed = time.perf_counter() - start
        return {
            "latencies": latencies,
            "statuses": statuses,
            "accepted": accepted,
            "elapsed": elapsed,
            "total": total,
        }

    return asyncio.run(run())


async def bench_ack(seconds: float, rate: float, tmp: Path) -> None:
    async with running_fake_github() as fake:
        fake.add_repo("Codertocat/Hello-World", make_remote(tmp, {"README.md": "hi\n"}))
        fake.set_permission("Codertocat/Hello-World", "Codertocat", "write")
        issue = fake.add_issue("Codertocat/Hello-World")
        app = web.Application()
        telemetry = RecordingTelemetry()
        integration = setup_github(
            app, fake.settings(SECRET), FakePromotions(), telemetry=telemetry
        )
        pr_closed = fixture("pull_request.closed.with-organization")
        comment = fixture("issue_comment.created.with-installation")
        comment["issue"]["number"] = issue
        status_comment = copy.deepcopy(comment)
        status_comment["comment"]["body"] = "/status"
        status_comment["comment"]["id"] = fake.add_comment("Codertocat/Hello-World", issue, "x")[
            "id"
        ]
        kinds = [
            ("pull_request", pr_closed, 0.45),
            ("issue_comment", comment, 0.35),  # no command: parsed and dropped
            ("issue_comment", status_comment, 0.05),  # a command: GitHub calls in the background
            ("check_suite", fixture("check_suite.requested"), 0.15),  # no handler
        ]
        bodies = [
            (event, webhook_request(event, payload, SECRET)[1]) for event, payload, _ in kinds
        ]
        weights = [w for _, _, w in kinds]
        spawn = multiprocessing.get_context("spawn")
        async with serve(app) as url:
            with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                result = await asyncio.get_running_loop().run_in_executor(
                    pool, send_load, url + WEBHOOK_PATH, bodies, weights, seconds, rate
                )
            await asyncio.wait_for(integration.queue.join(), 60)
        latencies = result["latencies"]
        handled = Counter(telemetry.handled())
        twice = [d for d, n in handled.items() if n > 1]
        lost = [d for d in result["accepted"] if d not in handled]
        total, elapsed = result["total"], result["elapsed"]
        print(
            f"ack: {total} deliveries in {elapsed:.1f}s ({total / elapsed:.0f}/s): "
            f"p50 {ms(statistics.median(latencies))}, p99 {ms(pct(latencies, 0.99))}, "
            f"max {ms(max(latencies))} (target p99 < 20 ms)"
        )
        print(
            f"     answers {dict(sorted(result['statuses'].items()))}; handled {len(handled)}, "
            f"lost {len(lost)}, handled twice {len(twice)}, failed handlers "
            f"{telemetry.failed()}"
        )


# ---- 2. merged webhook -> waiting step Succeeded -------------------------------------------------


def freight_name(i: int, shared: bool) -> str:
    return "f" * 40 if shared else f"{i:040x}"


async def bench_wake(promotions: int, tmp: Path, shared_freight: bool = False) -> None:
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_apiserver(namespaces=[NS]))
        fake = await stack.enter_async_context(running_fake_github())
        kube = k.Kube(server.api_client())
        git = make_remote(tmp, {"a.txt": "a"}, name="wake")
        fake.add_repo("example/gitops", git)
        settings = fake.settings(SECRET, LONGSHOREMAN_GITHUB_PROJECT=NS)
        client = GitHubClient(settings, policy=RetryPolicy(backoff=0.01))
        await client.start()
        stack.push_async_callback(client.close)
        for i in range(promotions):
            # shared_freight: every Stage promotes the same Freight, whose status each finished
            # Promotion updates (verifiedIn) while the others still wait on their PRs.
            if i == 0 or not shared_freight:
                freight = {"metadata": {"name": freight_name(i, shared_freight), "namespace": NS}}
                freight |= {"origin": {"kind": "Warehouse", "name": "w"}}
                await kube.create(k.FREIGHT, freight)
            branch_pr(git, f"b{i}")
            await fake.open_pull("example/gitops", f"b{i}", "main")
            steps = [
                {
                    "uses": "git-wait-for-pr",
                    "as": "wait-for-pr",
                    "config": {"repoURL": GITOPS_URL, "prNumber": i + 1},
                },
                {"uses": "compose-output", "as": "next", "config": {"done": True}},
            ]
            await kube.create(
                k.STAGES,
                {
                    "metadata": {"name": f"s{i}", "namespace": NS},
                    "spec": {
                        "requestedFreight": [
                            {
                                "origin": {"kind": "Warehouse", "name": "w"},
                                "sources": {"direct": True},
                            }
                        ],
                        "promotionTemplate": {"spec": {"steps": steps}},
                    },
                },
            )
        services = StepServices(extra={"github": GitHubPullRequests(client)})
        counted = RecordingTelemetry()
        controller = await stack.enter_async_context(
            running_controller(
                server,
                tmp / "work",
                registry=registry_with(**GITHUB_STEPS),
                services=services,
                # The test harness's 0.2 s health sweep would reconcile every Stage 5 times a
                # second; the server's default is 30 s.
                health_interval=30.0,
                on_reconcile=counted.on_reconcile,
            )
        )
        waiting: dict[str, asyncio.Event] = {}
        finished: dict[str, float] = {}

        def listener(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            stage = (obj.get("spec") or {}).get("stage", "")
            executions = (obj.get("status") or {}).get("stepExecutionMetadata") or []
            statuses = [e.get("status") for e in executions]
            if statuses[:1] == ["Running"] and stage in waiting:
                waiting[stage].set()
            if len(statuses) >= 2 and statuses[0] == "Succeeded" and stage not in finished:
                finished[stage] = time.perf_counter()

        controller.listeners.append(listener)
        web_app = web.Application()
        service = ClusterPromotions(kube, controller)
        setup_github(web_app, settings, service, listeners=controller.listeners, client=client)
        latencies: list[float] = []
        reconciles = 0
        async with serve(web_app) as url, aiohttp.ClientSession() as session:
            for i in range(promotions):
                waiting[f"s{i}"] = asyncio.Event()
                await service.promote(NS, f"s{i}", freight_name(i, shared_freight), actor="bench")
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in waiting.values())), 60)
            await asyncio.sleep(0.5)  # let the start-up reconciles settle
            reconciles = counted.reconciles
            for i in range(promotions):
                await fake.merge("example/gitops", i + 1)
                headers, body = webhook_request(
                    "pull_request", fake.pr_payload("example/gitops", i + 1, "closed"), SECRET
                )
                sent = time.perf_counter()
                async with session.post(url + WEBHOOK_PATH, data=body, headers=headers) as r:
                    assert r.status == 202
                for _ in range(2000):
                    if f"s{i}" in finished:
                        break
                    await asyncio.sleep(0.001)
                latencies.append(finished.get(f"s{i}", float("inf")) - sent)
            await asyncio.sleep(0.5)  # the last Promotion's verification and Stage write
            reconciles = counted.reconciles - reconciles
        label = "one shared Freight" if shared_freight else "a Freight per Promotion"
        p99 = pct(latencies, 0.99)
        print(
            f"wake ({label}): {promotions} merged-PR webhooks -> wait-for-pr Succeeded, next step "
            f"started: p50 {ms(statistics.median(latencies))}, p99 {ms(p99)}, "
            f"max {ms(max(latencies))}; {reconciles / promotions:.1f} Stage reconciles per "
            f"webhook (target p99 < 200 ms: {'met' if p99 < 0.2 else 'MISSED'})"
        )


# ---- 3. API requests per PR-based Promotion ------------------------------------------------------


async def api_cost(fake: FakeGitHub, git: RemoteRepo, tmp: Path, etag: bool, polls: int) -> str:
    telemetry = RecordingTelemetry()
    client = GitHubClient(fake.settings(SECRET), etag_cache=etag, telemetry=telemetry)
    await client.start()
    try:
        port = GitHubPullRequests(client)
        branch = f"p-{'etag' if etag else 'plain'}"
        branch_pr(git, branch)
        ctx = make_context(tmp, extra_services={"github": port})
        await client.installation_for("example/gitops")  # warm: shared by every Promotion
        await client.token(1)
        telemetry.reset()
        opened = await GITHUB_STEPS["git-open-pr"].run(
            ctx, {"repoURL": GITOPS_URL, "sourceBranch": branch, "targetBranch": "main"}
        )
        number = opened.output["pr"]["id"]
        wait = {"repoURL": GITOPS_URL, "prNumber": number}
        for _ in range(polls):
            await GITHUB_STEPS["git-wait-for-pr"].run(ctx, wait)
        await fake.merge("example/gitops", number)
        done = await GITHUB_STEPS["git-wait-for-pr"].run(ctx, wait)
        assert done.output.get("commit"), done
        # A 304 to a conditional request does not count against the rate limit.
        requests, not_modified = telemetry.requests("github"), telemetry.answered("github", "304")
        return (
            f"{'with' if etag else 'without'} ETag cache: {requests} requests, "
            f"{requests - not_modified} billed ({not_modified} answered 304)"
        )
    finally:
        await client.close()


async def bench_api(tmp: Path, polls: int) -> None:
    async with running_fake_github() as fake:
        git = make_remote(tmp, {"a.txt": "a"}, name="cost")
        fake.add_repo("example/gitops", git)
        print(f"api: one PR-based Promotion (open, {polls} polls while open, merged):")
        for etag in (True, False):
            print("     " + await api_cost(fake, git, tmp, etag, polls))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="ack benchmark duration")
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second")
    parser.add_argument("--promotions", type=int, default=40, help="wake benchmark samples")
    parser.add_argument("--polls", type=int, default=10, help="polls of an open PR")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("ack", "wake", "api"),
        default=("ack", "wake", "api"),
        help="run only these parts",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-github-") as scratch:
        tmp = Path(scratch)
        if "ack" in args.only:
            await bench_ack(args.seconds, args.rate, tmp / "ack")
        if "wake" in args.only:
            await bench_wake(args.promotions, tmp / "wake", shared_freight=False)
            await bench_wake(args.promotions, tmp / "wake-shared", shared_freight=True)
        if "api" in args.only:
            await bench_api(tmp / "api", args.polls)


if __name__ == "__main__":
    limits.bound()
    asyncio.run(main())
