"""Run the real reconciler against the API server emulator, for end-to-end tests.

``running_cluster`` starts what every controller test starts from (:class:`Cluster`: the
emulator, a client to it, a work directory; the tests' ``Env`` extends it with their fakes), and
``running_controller`` wires a :class:`app.controller.reconciler.Controller` to it exactly as
the server does (informers + leader work loop) and tears it down cleanly.
``Gate`` is a step kind for tests: it reports Running until the test opens its gate, which
makes queueing and timing observable without sleeping on real external systems.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from app.controller import kube as k
from app.controller.reconciler import Controller
from app.embedded import seed
from promoter.clock import SYSTEM, Clock
from promoter.control.garbage import Retention
from promoter.control.projects import ProjectSelection
from promoter.rules.limits import DEFAULT_LIMITS, Limits
from promoter.steps.base import StepContext, StepResult, StepServices, StepStatus
from promoter.steps.registry import StepRegistry, builtin_registry
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.waiting import eventually

TERMINAL = ("Succeeded", "Failed", "Errored", "Aborted")


class Gate:
    """``uses: gate`` with ``config.name``: Running until ``open(name)``; records entries."""

    def __init__(self) -> None:
        self.opened: set[str] = set()
        self.entered: list[tuple[str, str]] = []  # (promotion, gate name), in order

    def open(self, name: str) -> None:
        self.opened.add(name)

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        name = str(config.get("name"))
        self.entered.append((ctx.promotion, name))
        if name in self.opened:
            return StepResult(StepStatus.SUCCEEDED, output={"gate": name})
        return StepResult(StepStatus.RUNNING, message=f"gate {name} closed", retry_after=0.05)


@dataclass
class Cluster:
    """The API server emulator, a client to it and the controller's work directory."""

    server: RunningApiServer
    kube: k.Kube
    work: Path


@contextlib.asynccontextmanager
async def running_cluster(
    tmp_path: Path,
    namespaces: Sequence[str],
    *,
    seed_from: Sequence[Path] = (),
    clock: Callable[[], datetime] | None = None,
) -> AsyncIterator[Cluster]:
    """An emulator with ``namespaces``, seeded from the manifests at ``seed_from``; ``clock``
    is the emulator's (its creationTimestamps), the real time when not given."""
    async with running_apiserver(namespaces=list(namespaces), clock=clock) as server:
        kube = k.Kube(server.api_client())
        if seed_from:
            await seed(kube, list(seed_from))
        yield Cluster(server, kube, tmp_path / "work")


def registry_with(**extra: Any) -> StepRegistry:
    registry = builtin_registry()
    for kind, step in extra.items():
        registry.register(kind, step)
    return registry


@contextlib.asynccontextmanager
async def running_controller(
    server: RunningApiServer,
    work_dir: Path,
    *,
    registry: StepRegistry | None = None,
    services: StepServices | None = None,
    min_requeue: float = 0.0,
    health_interval: float = 0.2,
    max_concurrent: int = 16,
    on_request: Callable[[str, str, int | None], None] | None = None,
    on_reconcile: Callable[[float], None] | None = None,
    clock: Clock = SYSTEM,
    retention: Retention | None = None,
    gc_interval: float = 3600.0,
    on_garbage_collected: Callable[[str], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    projects: ProjectSelection | None = None,
    namespace: str | None = None,
) -> AsyncIterator[Controller]:
    kube = k.Kube(server.api_client(), on_request=on_request)
    controller = Controller(
        kube,
        projects=projects,
        namespace=namespace,
        registry=registry or builtin_registry(),
        services=services or StepServices(),
        work_dir=work_dir,
        max_concurrent=max_concurrent,
        min_requeue=min_requeue,
        health_interval=health_interval,
        on_reconcile=on_reconcile,
        clock=clock,
        retention=retention,
        gc_interval=gc_interval,
        on_garbage_collected=on_garbage_collected,
        limits=limits,
    )
    informers = asyncio.create_task(controller.run_informers())
    leader = asyncio.create_task(controller.lead())
    try:
        await asyncio.wait_for(controller.wait_synced(), 10)
        yield controller
    finally:
        for task in (leader, informers):
            task.cancel()
        for task in (leader, informers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def wait_for_object(
    kube: k.Kube,
    rt: k.ResourceType,
    namespace: str | None,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    within: float = 20.0,
) -> dict[str, Any]:
    """Poll the API server until ``predicate(object)`` holds; the last object on timeout."""
    deadline = time.monotonic() + within
    obj: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(k.NotFound):
            obj = await kube.get(rt, namespace, name)
            if predicate(obj):
                return obj
        await asyncio.sleep(0.02)
    raise AssertionError(f"{rt.kind} {namespace}/{name} did not get there in {within}s: {obj}")


async def freight_cached(controller: Controller, namespace: str, *names: str) -> None:
    """Wait until the controller's informer holds these Freight (what chat commands read)."""

    async def held() -> bool | None:
        return all(controller.freight.get(namespace, n) is not None for n in names) or None

    await eventually(held, "the Freight in the informer")


async def wait_terminal(
    kube: k.Kube, namespace: str, name: str, within: float = 20.0
) -> dict[str, Any]:
    return await wait_for_object(
        kube,
        k.PROMOTIONS,
        namespace,
        name,
        lambda o: (o.get("status") or {}).get("phase") in TERMINAL,
        within=within,
    )


async def finished_promotion_of(kube: k.Kube, namespace: str, freight: str) -> dict[str, Any]:
    """The first Promotion of ``freight`` to appear in ``namespace``, once it has finished."""

    async def find() -> dict[str, Any] | None:
        items, _ = await kube.list(k.PROMOTIONS, namespace)
        return next((p for p in items if p["spec"]["freight"] == freight), None)

    found = await eventually(find, f"a Promotion of {freight}")
    return await wait_terminal(kube, namespace, found["metadata"]["name"])
