"""``python -m app serve``: the server process (reconciler + HTTP endpoints).

``--demo`` runs the scripted demo on the embedded cluster: it creates a Promotion of the example
Freight into the example Stage (through the one builder), shows it progress to completion, and
exits (``--keep-running`` keeps serving afterwards, e.g. to look around with kubectl).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from aiohttp import web

from app.controller import kube as k
from app.controller.creation import create_promotion
from app.logs import configure_logging
from app.server import SERVER, create_app, wait_started
from app.settings import Settings, SettingsError
from promoter.resources.model import Phase, name_of
from promoter.resources.stages import phase_of


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app", description="Longshoreman server.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the reconciler and the HTTP endpoints")
    serve.add_argument("--host", help="listen address (env LONGSHOREMAN_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (env LONGSHOREMAN_PORT, default 8080)")
    serve.add_argument(
        "--embedded-kubeconfig",
        type=Path,
        metavar="PATH",
        help=(
            "where to write the embedded cluster's kubeconfig "
            "(env LONGSHOREMAN_EMBEDDED_KUBECONFIG)"
        ),
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        help="embedded cluster only: promote the example Freight, show it complete, and exit",
    )
    serve.add_argument(
        "--keep-running", action="store_true", help="with --demo: keep serving afterwards"
    )
    return parser


async def serve(settings: Settings, *, demo: bool, keep_running: bool, out: TextIO) -> int:
    demo_dir: tempfile.TemporaryDirectory[str] | None = None
    if demo:
        if not settings.embedded:
            print(
                "error: --demo runs on the embedded cluster; unset KUBECONFIG/IN_CLUSTER",
                file=sys.stderr,
            )
            return 2
        from promoter.local.demo import make_remote

        demo_dir = tempfile.TemporaryDirectory(prefix="longshoreman-demo-")
        root = Path(demo_dir.name)
        _, gitconfig, _ = make_remote(root)
        # The example Warehouse subscribes to a public registry: the demo promotes the Freight
        # it ships and asks no registry, so nothing leaves the machine.
        settings = settings.with_overrides(
            git_config=gitconfig, work_dir=root / "work", warehouse_discovery=False
        )
    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        front_ends = "".join(
            f", {path}"
            for path, on in (
                ("/github/webhook", settings.github is not None),
                ("/slack/events", settings.slack is not None),
            )
            if on
        )
        logging.getLogger("longshoreman").info(
            "serving /healthz, /readyz, /metrics, /ui/%s on http://%s:%s", front_ends, host, port
        )
        state = await wait_started(app)
        if demo:
            code = await run_demo(app, out)
            if not keep_running:
                return code
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        logging.getLogger("longshoreman").info("shutting down (%s)", state.settings.identity)
        return 0
    finally:
        await runner.cleanup()
        if demo_dir is not None:
            demo_dir.cleanup()


async def run_demo(app: web.Application, out: TextIO, limit: float = 120.0) -> int:
    state = app[SERVER]
    controller = state.controller
    assert controller is not None and state.kube is not None
    async with asyncio.timeout(30):
        await controller.wait_synced()
    stage = controller.stages.get("kargo-demo", "test")
    freight = controller.freight_refs.find("kargo-demo", "frozen-tauntaun")
    if stage is None or freight is None:
        print("error: the example Stage or Freight is missing from the cluster", file=out)
        return 1
    created = await create_promotion(
        state.kube, stage, freight, controller.task_source, actor="demo"
    )
    name = name_of(created)
    print(f"Created Promotion kargo-demo/{name} (Freight frozen-tauntaun -> Stage test)", file=out)
    shown: dict[int, str] = {}
    deadline = state.clock.monotonic() + limit
    while state.clock.monotonic() < deadline:
        obj = controller.promotions.get("kargo-demo", name) or created
        status = obj.get("status") or {}
        for i, step in enumerate(status.get("stepExecutionMetadata") or []):
            line = f"  {step.get('alias')}: {step.get('status')}"
            if shown.get(i) != line and step.get("status") != "Running":
                shown[i] = line
                print(line, file=out, flush=True)
        if phase_of(obj).terminal:
            print(
                f"Promotion {name}: {status.get('phase')} - {status.get('message', '')}", file=out
            )
            # The Stage's status is written right after the Promotion's final status.
            stage_now: dict[str, Any] = {}
            for _ in range(100):
                stage_now = await state.kube.get(k.STAGES, "kargo-demo", "test")
                last = ((stage_now.get("status") or {}).get("lastPromotion") or {}).get("name")
                if last == name:
                    break
                await asyncio.sleep(0.05)
            history = (stage_now.get("status") or {}).get("freightHistory") or []
            if history:
                items = history[0].get("items") or {}
                current = ", ".join(str(v.get("name", ""))[:12] for v in items.values())
                print(f"Stage test now holds Freight {current}", file=out)
            return 0 if phase_of(obj) is Phase.SUCCEEDED else 1
        await asyncio.sleep(0.05)
    print(f"Promotion {name} did not finish within {limit:.0f}s", file=out)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env().with_overrides(
            host=args.host, port=args.port, embedded_kubeconfig=args.embedded_kubeconfig
        )
    except SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level, settings.secrets())
    for old, new in settings.renamed:
        logging.getLogger("longshoreman").warning(
            "%s is deprecated and still read for now: rename it to %s", old, new
        )
    try:
        return asyncio.run(
            serve(settings, demo=args.demo, keep_running=args.keep_running, out=sys.stdout)
        )
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
