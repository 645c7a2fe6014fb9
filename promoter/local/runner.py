"""The local runner: promote a Freight into a Stage from manifests on disk, without a cluster.

It goes through the same builder and engine as the controller: load manifests, inflate the
Stage's template into a Promotion, then call :func:`promoter.engine.engine.advance` until the
Promotion is
terminal, sleeping through steps that report Running.

:func:`run_local` is the command line's way in: :func:`run_promotion` under ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from promoter.clock import SYSTEM, Clock
from promoter.engine import engine
from promoter.engine.builder import build_promotion
from promoter.engine.runtime import runtime_for
from promoter.ports.clusterdata import InMemoryData
from promoter.resources.manifests import ManifestSet
from promoter.resources.model import Promotion, Var
from promoter.rules.freight_alias import InMemoryFreightAliases
from promoter.rules.metadata import InMemoryMetadata
from promoter.steps.base import StepServices
from promoter.steps.freight_alias import PORT_KEY as ALIAS_PORT
from promoter.steps.metadata import PORT_KEY as METADATA_PORT
from promoter.steps.registry import StepRegistry, builtin_registry


def local_actor() -> str:
    try:
        return f"local:{getpass.getuser()}"
    except Exception:  # no passwd entry in some containers
        return "local:unknown"


@dataclass
class RunOptions:
    stage: str
    freight: str
    namespace: str | None = None
    vars: Sequence[Var] = ()
    work_dir: Path | None = None
    services: StepServices = field(default_factory=StepServices)
    actor: str = field(default_factory=local_actor)
    # Longest single wait for a Running step before checking again (seconds).
    max_sleep: float = 30.0


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A Promotion built from the manifests, with what its Runtime is made of."""

    promotion: Promotion
    manifests: ManifestSet
    stage_obj: Mapping[str, Any]
    freight: Mapping[str, Any]
    namespace: str


def _prepare(manifests: ManifestSet, options: RunOptions, clock: Clock) -> _Prepared:
    """Build the Promotion; raises InvalidInput before anything runs."""
    stage, stage_loaded = manifests.stage(options.stage, options.namespace)
    namespace = options.namespace or stage.namespace
    freight = manifests.freight(options.freight, namespace).obj
    promotion = build_promotion(
        stage, freight, manifests, actor=options.actor, extra_vars=options.vars, now=clock.now()
    )
    return _Prepared(promotion, manifests, stage_loaded.obj, freight, namespace)


def _warehouse(manifests: ManifestSet, namespace: str, name: str) -> Mapping[str, Any] | None:
    """A Warehouse from the manifests, as the controller finds one in the cluster."""
    found = manifests.find("Warehouse", name, namespace)
    return found.obj if found is not None else None


async def _execute(
    prepared: _Prepared,
    options: RunOptions,
    registry: StepRegistry,
    observer: Callable[[Promotion, int], None] | None,
    on_wait: Callable[[Promotion, float], None] | None,
    clock: Clock,
) -> Promotion:
    promotion, manifests, namespace = prepared.promotion, prepared.manifests, prepared.namespace
    # set-metadata, set-freight-alias and stageMetadata()/freightMetadata() work on the loaded
    # Stages and Freight; what the steps write lives as long as this run (the manifest files are
    # not changed).
    services = replace(
        options.services,
        # secret(), configMap() and their shared forms read the Secrets and ConfigMaps loaded.
        cluster_data=options.services.cluster_data
        or InMemoryData((o.obj for o in manifests), promotion.namespace),
        extra={
            METADATA_PORT: InMemoryMetadata((o.obj for o in manifests), promotion.namespace),
            ALIAS_PORT: InMemoryFreightAliases((o.obj for o in manifests), promotion.namespace),
            **options.services.extra,
        },
    )

    with contextlib.ExitStack() as stack:
        if options.work_dir is None:
            work_root = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="longshoreman-"))
            )
        else:
            work_root = options.work_dir
        work_dir = work_root / promotion.name
        work_dir.mkdir(parents=True, exist_ok=True)
        runtime = runtime_for(
            promotion,
            stage=prepared.stage_obj,
            freight=prepared.freight,
            warehouse=partial(_warehouse, manifests, namespace),
            registry=registry,
            services=services,
            work_dir=work_dir,
            clock=clock.now,
            observer=observer,
        )
        try:
            force = False
            while True:
                outcome = await engine.advance(promotion, runtime, force=force)
                promotion = outcome.promotion
                if promotion.status.phase.terminal or outcome.requeue_after is None:
                    return promotion
                delay = min(outcome.requeue_after, options.max_sleep)
                if on_wait:
                    on_wait(promotion, delay)
                await services.io.sleep(delay)
                # Once the step's own pacing has passed, enter it again even if the clock is a
                # hair short of nextAttemptAt (status times are stored with second precision).
                force = delay >= outcome.requeue_after
        except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C: asyncio.run cancels us
            return engine.abort(promotion, options.actor, runtime.clock())


async def run_promotion(
    manifests: ManifestSet,
    options: RunOptions,
    *,
    registry: StepRegistry | None = None,
    observer: Callable[[Promotion, int], None] | None = None,
    on_wait: Callable[[Promotion, float], None] | None = None,
    clock: Clock = SYSTEM,
) -> Promotion:
    """Build and run a Promotion to a terminal phase on the running loop. Raises InvalidInput
    before anything runs. ``clock`` names the Promotion, stamps the steps and answers ``now()``
    in expressions."""
    registry = registry if registry is not None else builtin_registry()
    prepared = _prepare(manifests, options, clock)
    return await _execute(prepared, options, registry, observer, on_wait, clock)


def run_local(
    manifests: ManifestSet,
    options: RunOptions,
    *,
    registry: StepRegistry | None = None,
    observer: Callable[[Promotion, int], None] | None = None,
    on_wait: Callable[[Promotion, float], None] | None = None,
    clock: Clock = SYSTEM,
) -> Promotion:
    """:func:`run_promotion` for a caller without an event loop (the command line)."""
    return asyncio.run(
        run_promotion(
            manifests, options, registry=registry, observer=observer, on_wait=on_wait, clock=clock
        )
    )
