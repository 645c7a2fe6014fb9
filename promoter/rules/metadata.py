"""Stage and Freight metadata: Kargo's ``set-metadata`` step and its expression functions.

Kargo keeps free-form values in ``status.metadata`` of Stages and Freight: the ``set-metadata``
step merges values in (each key set, the others kept), and ``stageMetadata(name)`` /
``freightMetadata(name[, key])`` read them back. The objects live wherever the caller keeps
them, behind the :class:`MetadataStore` port: the controller implements it over the Kubernetes
API (reads from its informer caches), the local runner in memory over the loaded manifests
(:class:`InMemoryMetadata`). Everything here that decides is pure.

A ``null`` value removes its key (in Kubernetes a JSON merge patch cannot store a null in a map),
so both stores drop nulls from maps the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError
from promoter.steps.base import Config

STAGE = "Stage"
FREIGHT = "Freight"
KINDS = (STAGE, FREIGHT)
# Per update, as compact JSON: status lives in etcd next to everything else the object holds
# (1.5 MiB per object), so one step must not be able to fill it.
MAX_VALUES_BYTES = 64 * 1024


class MetadataStore(Protocol):
    """Reads and merges ``status.metadata`` of Stages and Freight (``kind`` is one of KINDS)."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The object's metadata ({} when it has none), or None when there is no such object.

        Synchronous: expression functions call it, so it reads a cache, never the network.
        """
        ...

    def freight_status(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Freight's whole ``status`` ({} when it has none), or None when there is no such
        Freight (``freightStatus()``). Synchronous, from a cache, as :meth:`get`."""
        ...

    async def merge(self, kind: str, namespace: str, name: str, values: Mapping[str, Any]) -> None:
        """Set ``values``' keys in the object's metadata, keeping the others.

        Raises :class:`MetadataObjectMissing` when the object does not exist, and a StepError
        for other failures (non-terminal when retrying may help).
        """
        ...


class MetadataObjectMissing(StepError):
    """The Stage or Freight to update does not exist.

    Not terminal: an object created a moment ago may not have reached a cache yet, and
    ``retry.errorThreshold`` lets a step wait for it (the default threshold of 1 fails at once).
    """

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(f"{kind} {name!r} not found in namespace {namespace!r}")


@dataclass(frozen=True, slots=True)
class MetadataUpdate:
    kind: str
    name: str
    values: dict[str, Any]


def metadata_of(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """``status.metadata`` of a Stage or Freight object ({} when absent)."""
    status = (obj or {}).get("status")
    found = status.get("metadata") if isinstance(status, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def without_nulls(value: Any) -> Any:
    """``value`` with null map entries removed, at every depth."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def merged(old: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Kargo's merge: each key of ``values`` replaces the old value whole; null removes it."""
    out = dict(old)
    for key, value in values.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = without_nulls(value)
    return out


def _json_problem(value: Any, path: str) -> str | None:
    """Where ``value`` is not plain JSON, or None when it is."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} is {value}, which JSON cannot hold"
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a non-string key {key!r}"
            problem = _json_problem(item, f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _json_problem(item, f"{path}[{i}]")
            if problem:
                return problem
        return None
    return f"{path} is a {type(value).__name__}, not a JSON value"


def parse_updates(config: Mapping[str, Any], kind: str = "set-metadata") -> list[MetadataUpdate]:
    """The step's ``updates``, validated as a whole before anything is written."""
    updates = []
    for item in Config(kind, config).items("updates", required=True):
        object_kind = item.str("kind")
        if object_kind not in KINDS:
            raise StepError(
                f"{kind}: {item.prefix}.kind must be Stage or Freight, got {object_kind!r}",
                terminal=True,
            )
        name = item.str("name", "")
        if not name:
            raise StepError(f"{kind}: {item.prefix}.name is required", terminal=True)
        values = item.map("values", required=True)
        problem = _json_problem(values, f"{item.prefix}.values")
        if problem:
            raise StepError(f"{kind}: {problem}", terminal=True)
        size = len(json.dumps(values, separators=(",", ":")).encode())
        if size > MAX_VALUES_BYTES:
            raise StepError(
                f"{kind}: {item.prefix}.values is {size} bytes as JSON; the limit is "
                f"{MAX_VALUES_BYTES} bytes per update",
                terminal=True,
            )
        updates.append(MetadataUpdate(object_kind, name, values))
    if not updates:
        raise ConfigRefused(f"{kind}: config.updates must list at least one update")
    return updates


def metadata_functions(store: MetadataStore, namespace: str) -> dict[str, Callable[..., Any]]:
    """``stageMetadata(name)`` and ``freightMetadata(name[, key])`` over ``store``.

    A missing object is an error naming it; an object without metadata gives an empty map, so
    ``?.`` and ``??`` supply defaults for keys that were never set.
    """

    def lookup(function: str, kind: str, name: Any) -> Mapping[str, Any]:
        if not isinstance(name, str) or not name:
            raise ExpressionError(reason=f"{function}(): the {kind} name must be a string")
        found = store.get(kind, namespace, name)
        if found is None:
            raise ExpressionError(
                reason=f"{function}(): {kind} {name!r} not found in namespace {namespace!r}"
            )
        return found

    def stage_metadata(name: Any) -> dict[str, Any]:
        return dict(lookup("stageMetadata", STAGE, name))

    def freight_metadata(name: Any, key: Any = None) -> Any:
        found = lookup("freightMetadata", FREIGHT, name)
        if key is None:
            return dict(found)
        if not isinstance(key, str):
            raise ExpressionError(reason="freightMetadata(): the key must be a string")
        return found.get(key)

    def freight_status(*args: Any) -> dict[str, Any] | None:
        # Kargo's freightStatus(): the Freight's status as JSON, nil when there is no such
        # Freight (pkg/expressions/function, Test_freightStatus).
        if len(args) != 1:
            raise ExpressionError(reason=f"freightStatus(): expected 1 argument, got {len(args)}")
        name = args[0]
        if not isinstance(name, str):
            raise ExpressionError(reason="freightStatus(): first argument must be string")
        if not name:
            raise ExpressionError(reason="freightStatus(): freight ref name must not be empty")
        found = store.freight_status(namespace, name)
        return None if found is None else json.loads(json.dumps(found, default=str))

    return {
        "stageMetadata": stage_metadata,
        "freightMetadata": freight_metadata,
        "freightStatus": freight_status,
    }


class InMemoryMetadata:
    """A :class:`MetadataStore` over objects held in memory (the local runner's manifests).

    Writes stay in this store; the objects it was built from are not changed.
    """

    def __init__(self, objects: Iterable[Mapping[str, Any]], default_namespace: str) -> None:
        self._data: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._status: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in objects:
            kind = obj.get("kind")
            meta = obj.get("metadata") or {}
            if kind in KINDS and meta.get("name"):
                namespace = meta.get("namespace") or default_namespace
                self._data[(str(kind), namespace, str(meta["name"]))] = metadata_of(obj)
                if kind == FREIGHT:
                    status = obj.get("status")
                    self._status[(namespace, str(meta["name"]))] = (
                        dict(status) if isinstance(status, Mapping) else {}
                    )

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._data.get((kind, namespace, name))

    def freight_status(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        status = self._status.get((namespace, name))
        if status is None:
            return None
        metadata = self._data.get((FREIGHT, namespace, name)) or {}
        return {**status, **({"metadata": metadata} if metadata else {})}

    async def merge(self, kind: str, namespace: str, name: str, values: Mapping[str, Any]) -> None:
        key = (kind, namespace, name)
        if key not in self._data:
            raise MetadataObjectMissing(kind, namespace, name)
        self._data[key] = merged(self._data[key], values)
