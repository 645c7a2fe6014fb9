"""Slack integration latency, over real HTTP on 127.0.0.1 against the fake Slack Web API.

1. Slash-command ack latency: signed ``/promote`` requests (a mix of ``status``, promotions,
   malformed text and ``help``) sent open-loop at a fixed rate; time from sending to the HTTP
   answer. Target: p99 < 50 ms at 50 requests/s.
2. Promotion status change -> ``chat.update`` carrying it: Promotions in a subscribed Stage change
   status several times a second each; time from the controller's listener call to the fake
   Slack receiving the update that shows that change (or a later one). With the default
   coalescing (one update per message per second) the target is p99 < 1.5 s.

Run: .venv/bin/python bench/bench_slack.py [--seconds 30] [--rate 50] [--update-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from promoter.resources import annotations as ann

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench import limits
from slack.app import setup_slack
from slack.settings import SlackSettings
from tests.support.promotions import FakePromotions
from tests.support.slack import (
    SIGNING_SECRET,
    TOKEN,
    FakeSlack,
    running_fake_slack,
    signed_headers,
    slash_command,
)

COMMANDS = ("status test", "frozen-tauntaun to test", "deploy please", "help", "status")
TICK = re.compile(r"tick (\d+)")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def report(name: str, values: list[float], unit: float = 1000.0, label: str = "ms") -> None:
    if not values:
        print(f"{name}: no samples")
        return
    print(
        f"{name}: n={len(values)} p50={percentile(values, 50) * unit:.1f}{label} "
        f"p90={percentile(values, 90) * unit:.1f}{label} "
        f"p99={percentile(values, 99) * unit:.1f}{label} max={max(values) * unit:.1f}{label} "
        f"mean={statistics.fmean(values) * unit:.1f}{label}"
    )


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/slack/events"


def world(slack: FakeSlack, update_interval: float) -> tuple[web.Application, FakePromotions]:
    service = FakePromotions("bench")
    service.add_stage("test")
    service.add_stage("prod", {ann.SLACK_CHANNEL: "C0PROD"})
    service.add_freight("7c9e6b1f3a4d", "frozen-tauntaun")
    settings = SlackSettings(
        bot_token=TOKEN,
        signing_secret=SIGNING_SECRET,
        api_url=slack.url,
        namespace="bench",
        update_interval=update_interval,
    )
    app = web.Application()
    integration = setup_slack(app, settings, service)
    service.listeners.append(integration.on_promotion)
    return app, service


async def bench_acks(seconds: float, rate: float) -> list[float]:
    async with running_fake_slack() as slack:
        app, _ = world(slack, 1.0)
        runner, url = await serve(app)
        latencies: list[float] = []
        errors = 0
        try:
            async with aiohttp.ClientSession() as session:

                async def one(i: int) -> None:
                    nonlocal errors
                    text = COMMANDS[i % len(COMMANDS)]
                    body = slash_command(text, response_url=slack.response_url(f"r{i % 100}"))
                    headers = signed_headers(body)
                    start = time.perf_counter()
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        if response.status != 200:
                            errors += 1
                    latencies.append(time.perf_counter() - start)

                tasks = []
                t0 = time.perf_counter()
                total = int(seconds * rate)
                for i in range(total):
                    # Open loop: send on schedule whether or not earlier requests answered.
                    delay = t0 + i / rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    tasks.append(asyncio.create_task(one(i)))
                await asyncio.gather(*tasks)
        finally:
            await runner.cleanup()
        if errors:
            print(f"  {errors} request(s) did not answer 200")
        return latencies


async def bench_updates(seconds: float, promotions: int, update_interval: float) -> None:
    async with running_fake_slack() as slack:
        app, service = world(slack, update_interval)
        runner, _ = await serve(app)
        changed_at: dict[tuple[str, int], float] = {}
        try:
            names = []
            for _ in range(promotions):
                ref = await service.promote("bench", "prod", "7c9e6b1f3a4d", actor="bench")
                names.append(ref.name)
            await asyncio.sleep(0.5)  # every message posted
            tick = 0
            deadline = time.monotonic() + seconds

            async def churn(name: str) -> None:
                nonlocal tick
                while time.monotonic() < deadline:
                    await asyncio.sleep(random.uniform(0.05, 0.4))
                    tick += 1
                    changed_at[(name, tick)] = time.monotonic()
                    service.set_status(
                        name,
                        phase="Running",
                        stepExecutionMetadata=[{"status": "Running", "message": f"tick {tick}"}],
                    )

            await asyncio.gather(*(churn(n) for n in names))
            await asyncio.sleep(update_interval + 1.0)  # the last changes go out
        finally:
            await runner.cleanup()

        ts_of = {m.ts: m for m in slack.messages if m.thread_ts is None}
        name_of_ts = {}
        for ts, message in ts_of.items():
            found = re.search(r"Promotion (\S+):", message.versions[0]["text"])
            if found:
                name_of_ts[ts] = found.group(1)
        shown: dict[str, list[tuple[float, int]]] = {}
        for call in slack.calls_to("chat.update"):
            name = name_of_ts.get(str(call.args.get("ts")))
            ticks = [int(t) for t in TICK.findall(json.dumps(call.args.get("blocks")))]
            if name and ticks:
                shown.setdefault(name, []).append((call.at, max(ticks)))
        latencies = []
        missed = 0
        for (name, t), at in changed_at.items():
            later = [when for when, seen in shown.get(name, []) if seen >= t and when >= at]
            if later:
                latencies.append(min(later) - at)
            else:
                missed += 1
        updates = len(slack.calls_to("chat.update"))
        print(
            f"  {len(changed_at)} status changes over {promotions} Promotions -> {updates} "
            f"chat.update calls ({len(changed_at) / max(updates, 1):.1f} changes per update); "
            f"{missed} change(s) never shown"
        )
        report(f"status change -> chat.update (interval {update_interval:g}s)", latencies)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="ack benchmark duration")
    parser.add_argument("--rate", type=float, default=50.0, help="slash commands per second")
    parser.add_argument("--update-seconds", type=float, default=10.0)
    parser.add_argument("--promotions", type=int, default=20)
    parser.add_argument("--update-interval", type=float, default=1.0)
    args = parser.parse_args()
    print(f"slash-command acks: {args.rate:g} req/s for {args.seconds:g}s")
    acks = await bench_acks(args.seconds, args.rate)
    report("  ack latency", acks)
    print(f"live messages: {args.promotions} Promotions changing for {args.update_seconds:g}s")
    await bench_updates(args.update_seconds, args.promotions, args.update_interval)


if __name__ == "__main__":
    limits.bound()
    asyncio.run(main())
