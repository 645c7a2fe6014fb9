"""The Warehouse reconciler: its own informer and work queue, one status write per reconcile.

Kargo's ``pkg/controller/warehouses`` reconciles a Warehouse when its generation changes, when
its refresh annotation changes (``kargo.akuity.io/refresh``, or ours), and again after
``spec.interval``. This runs the same on the leader, with the decisions in
:mod:`promoter.warehouses.status`:

* an informer on Warehouses schedules one *now* on creation, a spec change or a new refresh
  token (webhooks refresh by writing that annotation, so any replica can receive them);
* otherwise each Warehouse is polled ``interval`` after its last discovery, with up to 10% of
  jitter so Warehouses created together do not poll together;
* a failed discovery is written to the conditions and retried with capped exponential backoff
  (never later than the interval), and a registry's ``429 Retry-After`` is honoured;
* a Warehouse is reconciled by one task at a time; different Warehouses run in parallel, at
  most ``max_concurrent`` at once.

The scheduling is the :class:`~app.controller.workqueue.WorkQueue` the Promotion controller
runs on too, keyed by Warehouse: an event while a Warehouse is being reconciled makes it run
once more, a reconcile returns its next poll (or :class:`~app.controller.workqueue.RetryLater`
after a failed discovery), and a discovery cut short by a lost lease is due again for the next
leader. Time comes from the injected :class:`~promoter.clock.Clock`.

Unlike Kargo we write the status once per reconcile (not an intermediate "Reconciling" status
first): one write, and the conditions say what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp

from app.controller import kube as k
from app.controller.informer import Backoff, Informer, ObjectKey, object_key
from app.controller.shards import ShardLabels
from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.discover import Discoverer
from app.controller.warehouses.gitsource import GitError, GitSource
from app.controller.warehouses.registry import OCIClient, RateLimited, RegistryError
from app.controller.workqueue import RetryLater, WorkQueue
from promoter.clock import SYSTEM, Clock
from promoter.control.shards import NO_SHARD, Shard
from promoter.expressions import ExpressionError, ExpressionSyntaxError, evaluate_expression
from promoter.ports.credentials import NO_CREDENTIALS, Credentials
from promoter.resources import annotations as ann
from promoter.warehouses import status as st
from promoter.warehouses.freight import FreightBuildError, build_freight, freight_alias
from promoter.warehouses.generic import NO_SUBSCRIBERS, SubscriberError, Subscribers
from promoter.warehouses.spec import SpecError, WarehouseSpec, parse_spec

__all__ = ["WarehouseController", "request_refresh", "start_warehouse_controller"]

log = logging.getLogger(__name__)

# A failed discovery is retried after 5 s, 10 s, 20 s, ... up to 5 minutes or the Warehouse's
# interval, whichever is shorter, shortened by up to half (so Warehouses failing together spread).
_BACKOFF_BASE = 5.0
_BACKOFF_CAP = 300.0


class WarehouseController:
    """Discovers artifacts for every Warehouse it watches and creates their Freight."""

    def __init__(
        self,
        kube: k.Kube,
        discoverer: Discoverer,
        *,
        namespace: str | None = None,
        max_concurrent: int = 4,
        min_interval: float = 0.0,
        clock: Clock = SYSTEM,
        rand: Callable[[], float] = random.random,
        on_reconcile: Callable[[float], None] | None = None,
        serves: Callable[[str], bool] = lambda namespace: True,
        shard: Shard = NO_SHARD,
    ) -> None:
        self.kube = kube
        self.discoverer = discoverer
        # Only the served projects' Warehouses discover (app.controller.projects).
        self.serves = serves
        # Only this shard's Warehouses are cached and discovered (promoter.control.shards), and
        # their spec.shard is mirrored into the shard label here.
        self.shard = shard
        self.labels = ShardLabels(kube, shard, stage=_no_stage)
        self.max_concurrent = max_concurrent
        self.min_interval = min_interval
        self.clock = clock
        self.rand = rand
        # Called with the seconds each Warehouse reconcile took (the reconcile latency metric).
        self.on_reconcile = on_reconcile
        self.informer = Informer(
            kube,
            k.WAREHOUSES,
            namespace=namespace,
            label_selector=shard.cache_selector(),
            on_event=self._on_event,
        )
        self.queue = WorkQueue(
            clock=clock,
            backoff=lambda: Backoff(base=_BACKOFF_BASE, cap=_BACKOFF_CAP, rand=rand),
        )

    # -------------------------------------------------------------- scheduling

    def _on_event(self, kind: str, obj: k.JsonObject, old: k.JsonObject | None) -> None:
        key = object_key(obj)
        if kind == "DELETED" or not self.shard.responsible_for(obj):
            self.queue.forget(key)
            return
        self.labels.observe("Warehouse", obj)
        meta, old_meta = obj.get("metadata") or {}, (old or {}).get("metadata") or {}
        if (
            old is None
            or meta.get("generation") != old_meta.get("generation")
            or ann.refresh_token(obj) != ann.refresh_token(old)
        ):
            self.queue.add(key)
        elif key not in self.queue:
            # A status write of ours, or a replica's: keep polling on the interval.
            self._schedule_poll(key, obj)

    # ------------------------------------------------------ the receivers' port

    def enqueue_namespace(self, namespace: str) -> None:
        """A namespace became served: discover for its Warehouses now."""
        for obj in self.informer.items(namespace):
            self.queue.add(object_key(obj))

    def all_warehouses(self) -> list[k.JsonObject]:
        """Every watched Warehouse, from the informer (warm on every replica)."""
        return self.informer.items()

    async def refresh_warehouse(self, namespace: str, name: str) -> None:
        """Ask for a discovery through the Warehouse's refresh annotation, so the leader acts
        whichever replica received the webhook."""
        await request_refresh(self.kube, namespace, name, self.clock.now())

    def _schedule_poll(self, key: ObjectKey, obj: k.JsonObject) -> None:
        try:
            spec = parse_spec(obj.get("spec") or {})
        except SpecError:
            return
        self.queue.add(key, after=self._poll_in(obj, spec))

    def _poll_in(self, obj: k.JsonObject, spec: WarehouseSpec) -> float:
        """Seconds to the Warehouse's next poll, with up to 10% of its interval as jitter."""
        delay = st.next_discovery_in(obj, spec, self.clock.now(), self.min_interval)
        return delay + self.rand() * 0.1 * spec.interval

    def synced(self) -> bool:
        return self.informer.synced.is_set()

    async def run_informer(self) -> None:
        await self.informer.run()

    async def lead(self) -> None:
        """Run due reconciles until cancelled (the leader only)."""
        await self.informer.synced.wait()
        async with asyncio.TaskGroup() as group:
            group.create_task(self.queue.run(self._reconcile_key, concurrency=self.max_concurrent))
            group.create_task(self.labels.run())

    async def _reconcile_key(self, key: Hashable, wake: bool) -> float | RetryLater | None:
        started = time.perf_counter()
        try:
            return await self.reconcile(cast(ObjectKey, key))
        finally:
            if self.on_reconcile is not None:
                self.on_reconcile(time.perf_counter() - started)

    # -------------------------------------------------------------- reconcile

    async def reconcile(self, key: ObjectKey) -> float | RetryLater | None:
        """One pass over the Warehouse: seconds until the next one (None: no next), or
        :class:`RetryLater` after a failed discovery (the work queue picks the backoff)."""
        obj = self.informer.get(*key)
        if obj is None:
            return None
        namespace, name = str(key[0] or ""), key[1]
        if not self.serves(namespace):
            return None  # enqueue_namespace() brings it back if its project becomes served
        meta = obj.get("metadata") or {}
        generation = int(meta.get("generation") or 0)
        now = self.clock.now()
        status: dict[str, Any] = dict(obj.get("status") or {})
        refresh = ann.refresh_token(obj)
        if refresh is not None:
            status["lastHandledRefresh"] = refresh
        try:
            spec = parse_spec(obj.get("spec") or {})
        except SpecError as err:
            st.set_conditions(
                status,
                generation,
                now,
                ("Ready", "False", "InvalidSpec", str(err)),
                ("Healthy", "False", "InvalidSpec", str(err)),
                delete=("Reconciling",),
            )
            status["observedGeneration"] = generation
            await self._write(obj, status)
            return None
        if st.should_discover(obj, spec, refresh, now):
            same_generation = int(status.get("observedGeneration") or 0) == generation
            last = status.get("discoveredArtifacts") if same_generation else None
            try:
                status["discoveredArtifacts"] = await self.discoverer.discover(
                    spec, last, now, project=namespace
                )
            except (RegistryError, GitError, SubscriberError, ValueError) as err:
                message = str(err)
                st.set_conditions(
                    status,
                    generation,
                    now,
                    (
                        "Healthy",
                        "False",
                        "DiscoveryFailed",
                        f"Unable to discover artifacts: {message}",
                    ),
                    ("Ready", "False", "DiscoveryFailure", f"Artifact discovery failed: {message}"),
                    delete=("Reconciling",),
                )
                log.warning("Warehouse %s/%s: discovery failed: %s", namespace, name, message)
                await self._write(obj, status)
                retry_after = float(err.retry_after) if isinstance(err, RateLimited) else 0.0
                return RetryLater(cap=spec.interval, not_before=retry_after)
        status["observedGeneration"] = generation
        discovered = status.get("discoveredArtifacts") or {}
        missing = st.missing_artifacts(discovered)
        if missing is not None:
            st.set_conditions(
                status,
                generation,
                now,
                ("Healthy", "False", missing.healthy, missing.message),
                ("Ready", "False", missing.ready, missing.message),
                delete=("Reconciling",),
            )
        else:
            ok = await self._make_freight(obj, spec, status, discovered, generation, now)
            if ok:
                count = len(spec.subscriptions)
                st.set_conditions(
                    status,
                    generation,
                    now,
                    ("Healthy", "True", "ReconciliationSucceeded", ""),
                    (
                        "Ready",
                        "True",
                        "ArtifactsDiscovered",
                        f"Successfully discovered artifacts from {count} subscriptions",
                    ),
                    delete=("Reconciling",),
                )
        await self._write(obj, status)
        return self._poll_in({**obj, "status": status}, spec)

    async def _make_freight(
        self,
        obj: k.JsonObject,
        spec: WarehouseSpec,
        status: dict[str, Any],
        discovered: dict[str, Any],
        generation: int,
        now: datetime,
    ) -> bool:
        """Automatic policy: create the newest artifacts' Freight. False: conditions set."""
        if not spec.automatic:
            return True
        if spec.freight_creation_expression:
            try:
                value = evaluate_expression(
                    spec.freight_creation_expression,
                    {},
                    st.criteria_functions(discovered),
                    where="spec.freightCreationCriteria.expression",
                )
            except (ExpressionError, ExpressionSyntaxError) as err:
                message = f"Evaluation of Freight creation criteria failed: {err}"
                st.set_conditions(
                    status,
                    generation,
                    now,
                    ("Healthy", "False", "CriteriaEvaluationFailed", message),
                    ("Ready", "False", "CriteriaEvaluationFailed", message),
                    delete=("Reconciling",),
                )
                return False
            satisfied = value is True or str(value).lower() in ("true", "1", "t")
            if not satisfied:
                st.set_conditions(
                    status,
                    generation,
                    now,
                    (
                        "FreightCreationCriteriaSatisfied",
                        "False",
                        "CriteriaNotSatisfied",
                        "Freight creation criteria were not satisfied",
                    ),
                    delete=("FreightCreated",),
                )
                return True
            st.set_conditions(
                status,
                generation,
                now,
                (
                    "FreightCreationCriteriaSatisfied",
                    "True",
                    "CriteriaSatisfied",
                    "Freight creation criteria satisfied",
                ),
            )
        try:
            freight = build_freight(obj, discovered)
        except FreightBuildError as err:
            message = f"Error building Freight from latest artifacts: {err}"
            st.set_conditions(
                status,
                generation,
                now,
                ("Healthy", "False", "FreightBuildFailure", message),
                ("Ready", "False", "FreightBuildFailure", message),
            )
            return False
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        name = freight["metadata"]["name"]
        created = False
        if status.get("lastFreightID") != name:
            created = await self._create(namespace, freight)
        if created:
            st.set_conditions(
                status,
                generation,
                now,
                (
                    "FreightCreated",
                    "True",
                    "NewFreight",
                    "No Freight composed of the newest artifacts already existed",
                ),
            )
            log.info(
                "Warehouse %s/%s: created Freight %s",
                namespace,
                (obj.get("metadata") or {}).get("name"),
                name,
            )
        else:
            st.set_conditions(
                status,
                generation,
                now,
                (
                    "FreightCreated",
                    "False",
                    "AlreadyExists",
                    "Freight composed of the newest artifacts already exists",
                ),
            )
        status["lastFreightID"] = name
        return True

    async def _create(self, namespace: str, freight: dict[str, Any]) -> bool:
        """Create the Freight with an alias no other Freight of the namespace has."""
        try:
            existing, _ = await self.kube.list(k.FREIGHT, namespace)
        except k.KubeError:
            existing = []
        taken = [str(f.get("alias") or "") for f in existing]
        if any(
            (f.get("metadata") or {}).get("name") == freight["metadata"]["name"] for f in existing
        ):
            return False
        alias = freight_alias(freight["metadata"]["name"], taken)
        freight["alias"] = alias
        freight["metadata"]["labels"] = {"kargo.akuity.io/alias": alias}
        # Orders Freight made within one second (creationTimestamp has whole seconds).
        stamp = self.clock.now().astimezone(UTC).isoformat(timespec="microseconds")
        freight["metadata"].setdefault("annotations", {})[ann.FREIGHT_CREATED] = stamp
        try:
            await self.kube.create(k.FREIGHT, freight)
        except k.Conflict:
            return False  # same artifacts, same name: made already (by us or a replica)
        return True

    async def _write(self, obj: k.JsonObject, status: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        try:
            written = await self.kube.patch_status(
                k.WAREHOUSES,
                meta.get("namespace"),
                str(meta.get("name")),
                status,
                resource_version=None,
            )
        except k.NotFound:
            return
        self.informer.observe(written)


async def request_refresh(kube: k.Kube, namespace: str, name: str, now: datetime) -> None:
    """Write a new refresh token on the Warehouse (gone already: nothing to refresh)."""
    token = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patch = {"metadata": {"annotations": {ann.REFRESH_ANNOTATIONS[0]: token}}}
    with contextlib.suppress(k.NotFound):
        await kube.patch(k.WAREHOUSES, namespace, name, patch)


async def _no_stage(namespace: str, name: str) -> None:
    return None  # Warehouses take their shard from their own spec, never from a Stage


async def start_warehouse_controller(
    kube: k.Kube,
    work_dir: Path,
    stack: contextlib.AsyncExitStack,
    *,
    namespace: str | None = None,
    credentials: Credentials = NO_CREDENTIALS,
    git_config: Path | None = None,
    clock: Clock = SYSTEM,
    on_reconcile: Callable[[float], None] | None = None,
    serves: Callable[[str], bool] = lambda namespace: True,
    shard: Shard = NO_SHARD,
    subscribers: Callable[[aiohttp.ClientSession], Subscribers] = lambda session: NO_SUBSCRIBERS,
) -> WarehouseController:
    """The controller with its HTTP session and git cache, closed with ``stack``; every
    subscription reads with what ``credentials`` (the one port the steps ask too) finds for
    its Warehouse's project; git also with the operator's ``git_config``; generic
    subscriptions ask the ``subscribers`` made with that session."""
    session = await stack.enter_async_context(
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), trust_env=False)
    )
    oci = OCIClient(session, clock=clock)
    git = GitSource(work_dir / "warehouses", git_config=git_config)
    discoverer = Discoverer(
        oci, ChartClient(session, oci), git, credentials, subscribers=subscribers(session)
    )
    return WarehouseController(
        kube,
        discoverer,
        namespace=namespace,
        clock=clock,
        on_reconcile=on_reconcile,
        serves=serves,
        shard=shard,
    )
