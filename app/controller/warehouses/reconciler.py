"""The Warehouse reconciler: its own informer, a schedule per Warehouse, one status write each.

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

Unlike Kargo we write the status once per reconcile (not an intermediate "Reconciling" status
first): one write, and the conditions say what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from app.controller import kube as k
from app.controller.informer import Informer, ObjectKey, object_key
from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.discover import Discoverer
from app.controller.warehouses.gitsource import GitError, GitSource
from app.controller.warehouses.registry import (
    Credentials,
    OCIClient,
    RateLimited,
    RegistryError,
    TokenSource,
)
from promoter import annotations as ann
from promoter.expressions import ExpressionError, ExpressionSyntaxError, evaluate_expression
from promoter.warehouses import status as st
from promoter.warehouses.freight import FreightBuildError, build_freight, freight_alias
from promoter.warehouses.spec import SpecError, WarehouseSpec, parse_spec

__all__ = ["WarehouseController", "request_refresh", "start_warehouse_controller"]

log = logging.getLogger(__name__)

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
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.kube = kube
        self.discoverer = discoverer
        self.min_interval = min_interval
        self.now = now
        self.rand = rand
        self.informer = Informer(kube, k.WAREHOUSES, namespace=namespace, on_event=self._on_event)
        self._gate = asyncio.Semaphore(max_concurrent)
        self._due: dict[ObjectKey, float] = {}
        self._running: set[ObjectKey] = set()
        self._again: set[ObjectKey] = set()
        self._failures: dict[ObjectKey, int] = {}
        self._wake = asyncio.Event()
        self.reconciles = 0

    # -------------------------------------------------------------- scheduling

    def _on_event(self, kind: str, obj: k.JsonObject, old: k.JsonObject | None) -> None:
        key = object_key(obj)
        if kind == "DELETED":
            self._due.pop(key, None)
            self._failures.pop(key, None)
            return
        meta, old_meta = obj.get("metadata") or {}, (old or {}).get("metadata") or {}
        if (
            old is None
            or meta.get("generation") != old_meta.get("generation")
            or ann.refresh_token(obj) != ann.refresh_token(old)
        ):
            self.schedule(key, 0.0)
        elif key not in self._due and key not in self._running:
            # A status write of ours, or a replica's: keep polling on the interval.
            self._schedule_poll(key, obj)

    def schedule(self, key: ObjectKey, delay: float) -> None:
        """Reconcile ``key`` in ``delay`` seconds (sooner wins over later)."""
        if key in self._running and delay <= 0:
            self._again.add(key)
            return
        due = time.monotonic() + delay
        if key not in self._due or due < self._due[key]:
            self._due[key] = due
            self._wake.set()

    def refresh(self, namespace: str, name: str) -> None:
        """Discover now (an in-process webhook receiver's shortcut)."""
        self.schedule((namespace, name), 0.0)

    # ------------------------------------------------------ the receivers' port

    def all_warehouses(self) -> list[k.JsonObject]:
        """Every watched Warehouse, from the informer (warm on every replica)."""
        return self.informer.items()

    async def refresh_warehouse(self, namespace: str, name: str) -> None:
        """Ask for a discovery through the Warehouse's refresh annotation, so the leader acts
        whichever replica received the webhook."""
        await request_refresh(self.kube, namespace, name, self.now())

    def _schedule_poll(self, key: ObjectKey, obj: k.JsonObject) -> None:
        try:
            spec = parse_spec(obj.get("spec") or {})
        except SpecError:
            return
        delay = st.next_discovery_in(obj, spec, self.now(), self.min_interval)
        self.schedule(key, delay + self.rand() * 0.1 * spec.interval)

    def synced(self) -> bool:
        return self.informer.synced.is_set()

    async def run_informer(self) -> None:
        await self.informer.run()

    async def lead(self) -> None:
        """Run due reconciles until cancelled (the leader only)."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            await self.informer.synced.wait()
            while True:
                self._wake.clear()
                now = time.monotonic()
                for key, due in sorted(self._due.items(), key=lambda kv: kv[1]):
                    if due <= now and key not in self._running:
                        del self._due[key]
                        self._running.add(key)
                        task = asyncio.create_task(self._run(key))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                upcoming = [d for key, d in self._due.items() if key not in self._running]
                timeout = max(min(upcoming) - time.monotonic(), 0.0) if upcoming else None
                # asyncio.timeout, not wait_for, which in Python 3.11 can swallow a
                # cancellation that arrives as the event is set (see app.controller.workqueue).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
        finally:
            # A discovery cut short (the lease lost) is due again at once for the next leader,
            # as the Promotion work queue does: its schedule entry was taken when it started.
            interrupted = set(self._running)
            for task in tasks:
                task.cancel()
            for key in interrupted:
                self._running.discard(key)
                self._again.discard(key)
                self.schedule(key, 0.0)
            for task in list(tasks):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _run(self, key: ObjectKey) -> None:
        try:
            async with self._gate:
                delay = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Warehouse %s/%s: reconcile failed", key[0], key[1])
            delay = self._backoff(key, 1e9)
        finally:
            self._running.discard(key)
        if key in self._again:
            self._again.discard(key)
            delay = 0.0
        if delay is not None:
            self.schedule(key, delay)
        self._wake.set()

    def _backoff(self, key: ObjectKey, interval: float) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(
            _BACKOFF_BASE * 2.0 ** min(failures, 30), _BACKOFF_CAP, max(interval, _BACKOFF_BASE)
        )
        return delay * (0.5 + 0.5 * self.rand())

    # -------------------------------------------------------------- reconcile

    async def reconcile(self, key: ObjectKey) -> float | None:
        """One pass over the Warehouse; seconds until the next one (None: no next)."""
        obj = self.informer.get(*key)
        if obj is None:
            return None
        self.reconciles += 1
        namespace, name = str(key[0] or ""), key[1]
        meta = obj.get("metadata") or {}
        generation = int(meta.get("generation") or 0)
        now = self.now()
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
        delay: float | None = None
        if st.should_discover(obj, spec, refresh, now):
            same_generation = int(status.get("observedGeneration") or 0) == generation
            last = status.get("discoveredArtifacts") if same_generation else None
            try:
                status["discoveredArtifacts"] = await self.discoverer.discover(spec, last, now)
                self._failures.pop(key, None)
            except (RegistryError, GitError, ValueError) as err:
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
                delay = self._backoff(key, spec.interval)
                if isinstance(err, RateLimited):
                    delay = max(delay, float(err.retry_after))
                return delay
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
        written = {**obj, "status": status}
        delay = st.next_discovery_in(written, spec, self.now(), self.min_interval)
        return delay + self.rand() * 0.1 * spec.interval

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


async def start_warehouse_controller(
    kube: k.Kube,
    work_dir: Path,
    stack: contextlib.AsyncExitStack,
    *,
    namespace: str | None = None,
    credentials: Credentials | None = None,
    token_source: TokenSource | None = None,
) -> WarehouseController:
    """The controller with its HTTP session and git cache, closed with ``stack``; registry
    ``credentials`` are the operator's (the one docker config.json the oci steps read too)."""
    session = await stack.enter_async_context(
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), trust_env=False)
    )
    oci = OCIClient(session, token_source=token_source)
    if credentials is not None:
        oci.credentials = credentials
    discoverer = Discoverer(oci, ChartClient(session, oci), GitSource(work_dir / "warehouses"))
    return WarehouseController(kube, discoverer, namespace=namespace)
