"""List+watch caches of Kubernetes objects (client-go's reflector and indexer, in small).

An ``Informer`` lists one resource type, then watches from the list's resourceVersion and
keeps ``store`` current. Callers learn about changes through ``on_event`` (synchronously, after
the store is updated: enqueue work there, do no I/O) and look things up through ``get``,
``items`` and secondary indexes (``add_index``/``by_index``). The first list reports every
object as ADDED, so a controller enqueues all existing work on start-up.

Nothing is lost across reconnects: a watch that ends is resumed from the last resourceVersion
seen (bookmarks included); a watch whose resourceVersion has expired (410 Gone) triggers a
relist whose differences from the store are delivered as synthetic ADDED/MODIFIED/DELETED
events. Other failures back off exponentially with jitter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from app.controller.kube import Gone, JsonObject, Kube, KubeError, ResourceType, TemporaryError
from promoter.clock import SYSTEM
from promoter.resources.freight_refs import aliases_of, find_freight

logger = logging.getLogger(__name__)

ObjectKey = tuple[str | None, str]
OnEvent = Callable[[str, JsonObject, JsonObject | None], None]
IndexFunc = Callable[[JsonObject], Iterable[str]]

# client-go's reflector treats a watch that ends within a second without a single event as a
# failure ("very short watch"): a server that keeps closing streams at once would otherwise
# make us reconnect in a tight loop.
_SHORT_WATCH_SECONDS = 1.0


class Backoff:
    """Capped exponential backoff with jitter.

    The n-th consecutive failure waits ``min(cap, base * factor**n)`` shortened by up to
    ``jitter`` of itself (so delays never exceed ``cap`` yet replicas spread out).
    ``Backoff.deterministic(...)`` drops the jitter for tests.
    """

    def __init__(
        self,
        base: float = 0.5,
        cap: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.5,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if base <= 0 or cap < base or factor < 1 or not 0 <= jitter <= 1:
            raise ValueError("Backoff needs 0 < base <= cap, factor >= 1, 0 <= jitter <= 1")
        self.base = base
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.rand = rand
        self.failures = 0

    @classmethod
    def deterministic(cls, base: float = 0.5, cap: float = 30.0, factor: float = 2.0) -> Backoff:
        return cls(base, cap, factor=factor, jitter=0.0)

    def next_delay(self, cap: float | None = None) -> float:
        """The wait before the next attempt; counts one more consecutive failure.

        ``cap`` lowers the ceiling for this attempt (a Warehouse retries no later than its
        polling interval), never below ``base`` nor above the backoff's own ``cap``.
        """
        ceiling = self.cap if cap is None else min(self.cap, max(cap, self.base))
        exponent = min(self.failures, 64)  # past the cap anyway; avoids float overflow
        delay = min(ceiling, self.base * self.factor**exponent)
        self.failures += 1
        return delay * (1.0 - self.jitter * self.rand())

    def reset(self) -> None:
        self.failures = 0


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") or None, str(metadata.get("name"))


def _resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def diff_snapshot(
    old: Mapping[ObjectKey, JsonObject], new: Mapping[ObjectKey, JsonObject]
) -> list[tuple[str, JsonObject, JsonObject | None]]:
    """Events that turn ``old`` into ``new``: (type, object, previous object)."""
    events: list[tuple[str, JsonObject, JsonObject | None]] = []
    for key, obj in new.items():
        previous = old.get(key)
        if previous is None:
            events.append(("ADDED", obj, None))
        elif _resource_version(previous) != _resource_version(obj):
            events.append(("MODIFIED", obj, previous))
    for key, previous in old.items():
        if key not in new:
            # The final state is unknown (client-go's DeletedFinalStateUnknown): the last one
            # we saw is the best we have.
            events.append(("DELETED", previous, previous))
    return events


class Informer:
    """A list+watch cache of one resource type (optionally one namespace)."""

    def __init__(
        self,
        kube: Kube,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        on_event: OnEvent | None = None,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = SYSTEM.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self.rt = rt
        self.namespace = namespace
        self.label_selector = label_selector
        self.on_event = on_event
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.sleep = sleep
        self.synced = asyncio.Event()
        self.resource_version = ""
        self._store: dict[ObjectKey, JsonObject] = {}
        self.store: Mapping[ObjectKey, JsonObject] = MappingProxyType(self._store)
        self._index_funcs: dict[str, IndexFunc] = {}
        # index name -> index key -> object keys, and the reverse for cheap removal.
        self._indexes: dict[str, dict[str, set[ObjectKey]]] = {}
        self._indexed_under: dict[str, dict[ObjectKey, tuple[str, ...]]] = {}

    # ------------------------------------------------------------------- lookups

    def get(self, namespace: str | None, name: str) -> JsonObject | None:
        return self._store.get((namespace or None, name))

    def items(self, namespace: str | None = None) -> list[JsonObject]:
        return [
            obj
            for (obj_namespace, _), obj in sorted(self._store.items(), key=_sort_key)
            if namespace is None or obj_namespace == namespace
        ]

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Maintain ``by_index(name, key)`` for the keys ``fn(obj)`` returns."""
        if name in self._index_funcs:
            raise ValueError(f"index {name!r} already exists")
        self._index_funcs[name] = fn
        self._indexes[name] = {}
        self._indexed_under[name] = {}
        for key, obj in self._store.items():
            self._index_one(name, key, obj)

    def by_index(self, name: str, key: str) -> list[JsonObject]:
        keys = self._indexes[name].get(key, ())
        return [self._store[k] for k in sorted(keys, key=_key_order)]

    def observe(self, obj: JsonObject) -> bool:
        """Put an object we just wrote into the cache before its watch event arrives.

        Callers that act on the cache right after a write would otherwise act on the copy from
        before it. Nothing is notified: ``on_event`` still fires once, for the watch event.
        Ignored (False) when the watch has already reached that version (so a write cannot
        resurrect an object deleted since) or the cache holds a newer copy.
        """
        version = _as_int(_resource_version(obj))
        seen = _as_int(self.resource_version)
        if version is None or seen is None or version <= seen:
            return False
        cached = self._store.get(object_key(obj))
        cached_version = _as_int(_resource_version(cached)) if cached is not None else None
        if cached is not None and (cached_version is None or cached_version >= version):
            return False
        self._put(obj)
        return True

    # ----------------------------------------------------------- store changes

    def _index_one(self, name: str, key: ObjectKey, obj: JsonObject) -> None:
        try:
            values = tuple(dict.fromkeys(self._index_funcs[name](obj)))
        except Exception:
            # One malformed object must not take the whole cache down.
            logger.exception("index %s failed for %s %s", name, self.rt.kind, key)
            values = ()
        self._indexed_under[name][key] = values
        for value in values:
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex_one(self, name: str, key: ObjectKey) -> None:
        index = self._indexes[name]
        for value in self._indexed_under[name].pop(key, ()):
            members = index.get(value)
            if members is not None:
                members.discard(key)
                if not members:
                    del index[value]

    def _put(self, obj: JsonObject) -> JsonObject | None:
        key = object_key(obj)
        previous = self._store.get(key)
        self._store[key] = obj
        for name in self._index_funcs:
            self._unindex_one(name, key)
            self._index_one(name, key, obj)
        return previous

    def _remove(self, key: ObjectKey) -> JsonObject | None:
        previous = self._store.pop(key, None)
        for name in self._index_funcs:
            self._unindex_one(name, key)
        return previous

    def _notify(self, kind: str, obj: JsonObject, old: JsonObject | None) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(kind, obj, old)
        except Exception:
            # A handler bug must not stop the cache (and every other handler) from updating.
            logger.exception("on_event failed for %s %s", kind, object_key(obj))

    def _apply(self, kind: str, obj: JsonObject) -> None:
        if kind == "DELETED":
            previous = self._remove(object_key(obj))
            self._notify("DELETED", obj, previous)
        else:
            previous = self._put(obj)
            self._notify(kind, obj, previous)

    # ---------------------------------------------------------------- list/watch

    async def _list(self) -> None:
        items, resource_version = await self.kube.list(
            self.rt, self.namespace, label_selector=self.label_selector
        )
        fresh = {object_key(obj): obj for obj in items}
        changes = diff_snapshot(self._store, fresh)
        for kind, obj, _ in changes:
            if kind == "DELETED":
                self._remove(object_key(obj))
            else:
                self._put(obj)
        self.resource_version = resource_version
        # Update the whole store first, then notify: handlers that look at other objects see
        # the list's consistent snapshot rather than a half-applied one.
        for kind, obj, previous in changes:
            self._notify(kind, obj, previous)
        self.synced.set()

    async def _watch(self) -> bool:
        """Follow the watch until the server ends it; True if the stream was healthy."""
        started = self.clock()
        received = 0
        stream = self.kube.watch(
            self.rt,
            self.namespace,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout,
            label_selector=self.label_selector,
        )
        async with contextlib.aclosing(stream):
            async for kind, obj in stream:
                received += 1
                version = _resource_version(obj)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._apply(kind, obj)
                elif kind != "BOOKMARK":
                    logger.warning("ignoring watch event of type %s", kind)
                    continue
                if version:
                    self.resource_version = version
        return received > 0 or self.clock() - started >= _SHORT_WATCH_SECONDS

    async def run(self) -> None:
        """List, then watch forever; returns only by cancellation."""
        need_list = True
        while True:
            just_listed = False
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    just_listed = True
                    self.backoff.reset()
                if await self._watch():
                    self.backoff.reset()
                    continue
                delay = self.backoff.next_delay()
                logger.info("watch of %s ended at once; retrying in %.2fs", self.rt.plural, delay)
            except Gone:
                logger.info(
                    "resourceVersion %s of %s expired; relisting",
                    self.resource_version,
                    self.rt.plural,
                )
                need_list = True
                if not just_listed:
                    continue
                # Expired straight after a fresh list: something is off on the server side,
                # so relisting at once would only loop.
                delay = self.backoff.next_delay()
            except KubeError as exc:
                delay = self.backoff.next_delay()
                if isinstance(exc, TemporaryError) and exc.retry_after is not None:
                    delay = max(delay, exc.retry_after)
                logger.warning(
                    "%s of %s failed (%s); retrying in %.2fs",
                    "list" if need_list else "watch",
                    self.rt.plural,
                    exc,
                    delay,
                )
            await self.sleep(delay)


class FreightRefs:
    """Freight by name or alias over a Freight informer: Kargo's rule
    (:func:`promoter.resources.freight_refs.find_freight`) with an index on the alias, so a
    Promotion naming its Freight by alias costs a lookup, not a scan of every Freight."""

    INDEX = "alias"

    def __init__(self, freight: Informer) -> None:
        self.freight = freight
        freight.add_index(self.INDEX, _alias_keys)

    def find(self, namespace: str, ref: str) -> Mapping[str, Any] | None:
        return find_freight(ref, _NamespaceFreight(self.freight, namespace))


class _NamespaceFreight:
    """One namespace of a :class:`FreightRefs` informer, as a ``FreightLookup``."""

    def __init__(self, freight: Informer, namespace: str) -> None:
        self.freight = freight
        self.namespace = namespace

    def named(self, name: str) -> JsonObject | None:
        return self.freight.get(self.namespace, name)

    def aliased(self, alias: str) -> list[JsonObject]:
        return self.freight.by_index(FreightRefs.INDEX, f"{self.namespace}/{alias}")


def _alias_keys(obj: JsonObject) -> list[str]:
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    return [f"{namespace}/{alias}" for alias in aliases_of(obj)]


def _as_int(resource_version: str) -> int | None:
    # resourceVersions are opaque strings by contract, but etcd's (and the emulator's) are
    # revision numbers; only those can be ordered.
    return int(resource_version) if resource_version.isdigit() else None


def _sort_key(item: tuple[ObjectKey, JsonObject]) -> tuple[str, str]:
    return _key_order(item[0])


def _key_order(key: ObjectKey) -> tuple[str, str]:
    return key[0] or "", key[1]


class NamespacedInformers:
    """One :class:`Informer` per namespace, for a set of namespaces that can grow: what the
    controller watches of a kind it does not own (Argo CD Applications) when it serves one
    namespace, so it lists and watches nothing outside the namespaces it needs.

    Reads as one Informer does (``get``, ``items``, ``observe``, ``on_event``, ``synced``:
    set once the namespaces known at start have synced); :meth:`add` starts one more.
    """

    def __init__(self, kube: Kube, rt: ResourceType, namespaces: Iterable[str]) -> None:
        self.kube = kube
        self.rt = rt
        self.on_event: OnEvent | None = None
        self.synced = asyncio.Event()
        self._informers: dict[str, Informer] = {}
        self._added = asyncio.Event()
        for namespace in namespaces:
            self.add(namespace)

    @property
    def namespaces(self) -> list[str]:
        return sorted(self._informers)

    def add(self, namespace: str) -> None:
        if namespace and namespace not in self._informers:
            self._informers[namespace] = Informer(
                self.kube, self.rt, namespace=namespace, on_event=self._relay
            )
            self._added.set()

    def _relay(self, kind: str, obj: JsonObject, old: JsonObject | None) -> None:
        if self.on_event is not None:
            self.on_event(kind, obj, old)

    def get(self, namespace: str | None, name: str) -> JsonObject | None:
        informer = self._informers.get(namespace or "")
        return informer.get(namespace, name) if informer is not None else None

    def items(self, namespace: str | None = None) -> list[JsonObject]:
        if namespace is not None:
            informer = self._informers.get(namespace)
            return informer.items() if informer is not None else []
        return [obj for ns in sorted(self._informers) for obj in self._informers[ns].items()]

    def observe(self, obj: JsonObject) -> bool:
        informer = self._informers.get(str((obj.get("metadata") or {}).get("namespace") or ""))
        return informer.observe(obj) if informer is not None else False

    async def run(self) -> None:
        """Run every namespace's informer, and each one added later; returns only by
        cancellation."""
        initial = list(self._informers.values())

        async def synced() -> None:
            await asyncio.gather(*(i.synced.wait() for i in initial))
            self.synced.set()

        running: set[str] = set()
        async with asyncio.TaskGroup() as group:
            group.create_task(synced())
            while True:
                self._added.clear()
                for namespace, informer in list(self._informers.items()):
                    if namespace not in running:
                        running.add(namespace)
                        group.create_task(informer.run())
                await self._added.wait()
