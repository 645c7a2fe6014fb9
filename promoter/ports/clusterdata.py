"""Kargo's ``secret()``, ``sharedSecret()``, ``configMap()`` and ``sharedConfigMap()``.

They read a Secret's or a ConfigMap's ``data`` by name (as a map of strings; ``{}`` when there is
no such object, as in Kargo) from the Promotion's namespace, or, for the ``shared`` ones, from
the shared-resources namespace (Kargo's ``SHARED_RESOURCES_NAMESPACE``). ``sharedSecret()`` only
reads Secrets labelled ``kargo.akuity.io/cred-type: generic``; anything else reads as ``{}``.

Expression functions are synchronous and Secrets are not worth watching (a watch would hold every
Secret of every project in memory), so the objects are fetched on demand through the
:class:`ClusterData` port: a function asked for an object not fetched yet raises
:class:`DataNeeded`, the engine fetches it (:meth:`DataCache.fetch`, one GET) and evaluates again
(:func:`evaluate_with_data`). A cache lives for one step, as Kargo's does, so one step sees one
answer per object and a later step sees a change.

Secret values never go into the Promotion's status on their own: these functions are not
recorded for replays (:mod:`promoter.engine.replay` notes the answers of the others), and the
values a
step read are redacted from its messages (:meth:`DataCache.redact`).
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from promoter.errors import LongshoremanError
from promoter.expressions import ExpressionError

SECRET = "Secret"
CONFIG_MAP = "ConfigMap"
# Kargo's chart installs its shared resources here; the operator may name another.
DEFAULT_SHARED_NAMESPACE = "kargo-shared-resources"
# Kargo: only Secrets with this label are readable through sharedSecret().
CREDENTIAL_TYPE_LABEL = "kargo.akuity.io/cred-type"
GENERIC = "generic"
# Distinct objects one step may read: a runaway expression must not fetch without end.
MAX_OBJECTS_PER_STEP = 32
# Values shorter than this are not redacted from messages: "1" or "true" would blank out text.
_MIN_REDACTED = 4


@dataclass(frozen=True, slots=True)
class DataObject:
    """A Secret's or ConfigMap's data (Secrets' values decoded to text) and labels."""

    data: Mapping[str, str]
    labels: Mapping[str, str] = field(default_factory=dict)


class ClusterData(Protocol):
    """Reads Secrets and ConfigMaps (``kind`` is SECRET or CONFIG_MAP) by name."""

    async def read(self, kind: str, namespace: str, name: str) -> DataObject | None:
        """The object, or None when there is none. Raises ExpressionError when it cannot say
        (forbidden, the API server unreachable): the message must not contain any value."""
        ...


class DataNeeded(LongshoremanError):
    """Raised by a function whose object was not fetched yet; the engine fetches it."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.key = (kind, namespace, name)
        super().__init__(f"{kind} {namespace}/{name} is needed")


def secret_object(obj: Mapping[str, Any]) -> DataObject:
    """A Kubernetes Secret (``data`` in base64, ``stringData`` as text) as a DataObject."""
    import base64

    data: dict[str, str] = {}
    for key, value in (obj.get("data") or {}).items():
        try:
            data[str(key)] = base64.b64decode(str(value), validate=True).decode(
                "utf-8", errors="replace"
            )
        except (binascii.Error, ValueError):
            continue  # not base64: the API server never stores that; skip rather than guess
    for key, value in (obj.get("stringData") or {}).items():
        data[str(key)] = str(value)
    return DataObject(data, _labels(obj))


def config_map_object(obj: Mapping[str, Any]) -> DataObject:
    data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    return DataObject(data, _labels(obj))


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


class DataCache:
    """What one step's expressions read: the functions, and the objects fetched for them."""

    def __init__(self, namespace: str, shared_namespace: str) -> None:
        self.namespace = namespace
        self.shared_namespace = shared_namespace
        self._objects: dict[tuple[str, str, str], DataObject | None] = {}

    def functions(self) -> dict[str, Callable[..., Any]]:
        def lookup(
            function: str, kind: str, namespace: str, args: tuple[Any, ...]
        ) -> DataObject | None:
            # Kargo's messages (pkg/expressions/function, Test_getSecret, Test_getConfigMap).
            if len(args) != 1:
                raise ExpressionError(reason=f"{function}(): expected 1 argument, got {len(args)}")
            name = args[0]
            if not isinstance(name, str):
                raise ExpressionError(reason=f"{function}(): argument must be string")
            if not namespace:
                raise ExpressionError(
                    reason=f"{function}(): no shared-resources namespace is configured"
                )
            key = (kind, namespace, name)
            if key not in self._objects:
                raise DataNeeded(*key)
            return self._objects[key]

        def secret(*args: Any) -> dict[str, str]:
            found = lookup("secret", SECRET, self.namespace, args)
            return dict(found.data) if found else {}

        def shared_secret(*args: Any) -> dict[str, str]:
            found = lookup("sharedSecret", SECRET, self.shared_namespace, args)
            if found is None or found.labels.get(CREDENTIAL_TYPE_LABEL) != GENERIC:
                return {}
            return dict(found.data)

        def config_map(*args: Any) -> dict[str, str]:
            found = lookup("configMap", CONFIG_MAP, self.namespace, args)
            return dict(found.data) if found else {}

        def shared_config_map(*args: Any) -> dict[str, str]:
            found = lookup("sharedConfigMap", CONFIG_MAP, self.shared_namespace, args)
            return dict(found.data) if found else {}

        return {
            "secret": secret,
            "sharedSecret": shared_secret,
            "configMap": config_map,
            "sharedConfigMap": shared_config_map,
        }

    async def fetch(self, source: ClusterData, need: DataNeeded) -> None:
        if len(self._objects) >= MAX_OBJECTS_PER_STEP:
            raise ExpressionError(
                reason=f"one step may read at most {MAX_OBJECTS_PER_STEP} Secrets and ConfigMaps"
            )
        kind, namespace, name = need.key
        self._objects[need.key] = await source.read(kind, namespace, name)

    def secret_values(self) -> list[str]:
        values = {
            value
            for (kind, _, _), found in self._objects.items()
            if kind == SECRET and found is not None
            for value in found.data.values()
            if len(value) >= _MIN_REDACTED
        }
        return sorted(values, key=len, reverse=True)

    def redact(self, text: str) -> str:
        """``text`` without any Secret value this step read."""
        for value in self.secret_values():
            text = text.replace(value, "***")
        return text


_T = TypeVar("_T")


async def evaluate_with_data(
    evaluate: Callable[[], _T], cache: DataCache, source: ClusterData | None
) -> _T:
    """``evaluate()``, fetching what it asks for (:class:`DataNeeded`) and evaluating again.

    Without a source, the functions are refused by name.
    """
    while True:
        try:
            return evaluate()
        except DataNeeded as need:
            if source is None:
                raise ExpressionError(
                    reason=f"{need.key[0]} {need.key[2]!r}: secret(), configMap() and their "
                    "shared forms are not available here"
                ) from None
            await cache.fetch(source, need)


class InMemoryData:
    """A :class:`ClusterData` over Secrets and ConfigMaps held in memory (the local runner's
    manifests)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]], default_namespace: str) -> None:
        self._objects: dict[tuple[str, str, str], DataObject] = {}
        for obj in objects:
            kind = obj.get("kind")
            meta = obj.get("metadata") or {}
            if kind not in (SECRET, CONFIG_MAP) or not meta.get("name"):
                continue
            namespace = meta.get("namespace") or default_namespace
            parsed = secret_object(obj) if kind == SECRET else config_map_object(obj)
            self._objects[(str(kind), str(namespace), str(meta["name"]))] = parsed

    async def read(self, kind: str, namespace: str, name: str) -> DataObject | None:
        return self._objects.get((kind, namespace, name))
