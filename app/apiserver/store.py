"""In-memory object store with kube-apiserver write semantics and a per-resource watch log.

Everything here is synchronous and runs on the event loop thread, so each operation is atomic,
exactly like a single etcd transaction. The HTTP layer (``server.py``) only parses requests and
renders results; all decisions about resourceVersion, generation, finalizers, status isolation,
pruning and conflicts are made here.

A committed object is never changed in place: every write builds a new one (copy-on-write), so
what ``present`` and the write results hand out may share structure with stored objects instead
of copying them (copies were most of the emulator's CPU). Callers serialize those, or copy them
before changing anything.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import copy
import json
import random
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from app.apiserver import errors
from app.apiserver.admission import Admission, AdmissionRequest
from app.apiserver.admission import Stage as AdmissionStage
from app.apiserver.errors import FieldCause, ResourceRef, StatusError
from app.apiserver.patching import (
    PatchError,
    json_patch,
    merge_patch_shared,
    strategic_merge_patch,
)
from app.apiserver.resources import (
    CRD_GROUP,
    CRD_PLURAL,
    ResourceRegistry,
    ResourceType,
    builtin_resource_types,
    crd_status,
    resource_type_from_crd,
)
from app.apiserver.schema import apply_defaults, prune, validate
from app.apiserver.selectors import (
    FieldRequirement,
    LabelRequirement,
    fields_match,
    labels_match,
)

JsonObject = dict[str, Any]
Clock = Callable[[], datetime]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
PatchType = Literal["json", "merge", "strategic", "apply"]
FieldValidation = Literal["Ignore", "Warn", "Strict"]

NAMESPACES = ("", "namespaces")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# names.SimpleNameGenerator: 5 characters from an alphabet without vowels or look-alikes.
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Target:
    """What a request addresses: a resource type at a version, and optionally one object."""

    resource: ResourceType
    version: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


@dataclass(frozen=True)
class StoredEvent:
    """One committed change, as the watch cache keeps it."""

    resource_version: int
    type: EventType
    obj: JsonObject
    old: JsonObject | None


@dataclass
class WriteResult:
    code: int
    body: JsonObject
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Filters:
    """Namespace, label and field restrictions of a list or watch."""

    namespace: str | None = None
    labels: tuple[LabelRequirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.namespace is not None:
            if (obj.get("metadata") or {}).get("namespace") != self.namespace:
                return False
        return labels_match(self.labels, obj) and fields_match(self.fields, obj)


class EventLog:
    """The retained window of events for one resource type.

    ``floor`` is the newest resourceVersion whose events may already be gone: a watch may
    resume from any version >= floor; older ones get 410 Expired, like the watch cache.
    """

    def __init__(self, floor: int, capacity: int) -> None:
        self.floor = floor
        self.capacity = max(1, capacity)
        self.events: list[StoredEvent] = []

    def append(self, event: StoredEvent) -> None:
        self.events.append(event)
        if len(self.events) > self.capacity:
            dropped = self.events[: len(self.events) - self.capacity]
            del self.events[: len(dropped)]
            self.floor = dropped[-1].resource_version

    def since(self, resource_version: int) -> list[StoredEvent]:
        if resource_version < self.floor:
            raise errors.expired(f"too old resource version: {resource_version} ({self.floor})")
        start = bisect.bisect_right(self.events, resource_version, key=lambda e: e.resource_version)
        return self.events[start:]


@dataclass(eq=False)
class Subscription:
    """A watcher's doorbell: rung on every commit and when watches are closed."""

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    abort: bool = False


class Store:
    """Objects, the global resourceVersion counter and the watch logs."""

    def __init__(
        self,
        *,
        event_window: int = 1000,
        clock: Clock | None = None,
        seed: int | None = None,
        require_namespaces: bool = True,
        initial_namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        strategic_merge_for_custom_resources: bool = False,
        group_aliases: Mapping[str, str] | None = None,
        admission: Admission | None = None,
    ) -> None:
        self.registry = ResourceRegistry(builtin_resource_types(), group_aliases=group_aliases)
        self.admission = admission
        self.resource_version = 1
        self.event_window = event_window
        self.require_namespaces = require_namespaces
        self.strategic_merge_for_custom_resources = strategic_merge_for_custom_resources
        self._clock: Clock = clock or (lambda: datetime.now(UTC))
        self._seed = seed
        self._random = random.Random(seed)
        self._objects: dict[tuple[str, str], dict[tuple[str, str], JsonObject]] = {}
        self._logs: dict[tuple[str, str], EventLog] = {}
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Callable[[], None]] = []
        # Which schema pruned each stored custom object: while that schema is still the one
        # in force, an update need not walk the parts it leaves unchanged.
        self._pruned_with: dict[tuple[tuple[str, str], str, str], Any] = {}
        self._sweeping: set[str] = set()
        for resource in self.registry:
            self._register(resource)
        for namespace in initial_namespaces:
            self.ensure_namespace(namespace)

    # ----------------------------------------------------------------- plumbing

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every committed change (persistence uses this)."""
        self._listeners.append(listener)

    def subscribe(self) -> Subscription:
        subscription = Subscription()
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def close_watches(self, *, abort: bool = False) -> int:
        """End every open watch; ``abort`` drops the connections instead of ending cleanly."""
        count = 0
        for subscription in list(self._subscriptions):
            subscription.closed = True
            subscription.abort = abort
            subscription.wake.set()
            count += 1
        return count

    def _register(self, resource: ResourceType) -> None:
        self.registry.add(resource)
        self._objects.setdefault(resource.key, {})
        if resource.key not in self._logs:
            self._logs[resource.key] = EventLog(self.resource_version, self.event_window)

    def _unregister(self, key: tuple[str, str]) -> None:
        self.registry.remove(key)
        self._objects.pop(key, None)
        self._logs.pop(key, None)

    def _now(self) -> str:
        return format_time(self._clock())

    def current_time(self) -> datetime:
        """The store's clock (what creationTimestamps are taken from, and ages measured by)."""
        return self._clock()

    def _uid(self) -> str:
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))

    def _next_rv(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def _commit(
        self,
        resource: ResourceType,
        kind: EventType,
        obj: JsonObject,
        old: JsonObject | None,
        *,
        pruned_with: Any = None,
    ) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        bucket = self._objects.setdefault(resource.key, {})
        if kind == "DELETED":
            bucket.pop(key, None)
            self._pruned_with.pop((resource.key, *key), None)
        else:
            bucket[key] = obj
            if pruned_with is not None:
                self._pruned_with[(resource.key, *key)] = pruned_with
        rv = int(meta["resourceVersion"])
        log = self._logs.get(resource.key)
        if log is not None:
            log.append(StoredEvent(rv, kind, obj, old))
        for subscription in self._subscriptions:
            subscription.wake.set()
        for listener in self._listeners:
            listener()

    @staticmethod
    def present(resource: ResourceType, version: str, obj: Mapping[str, Any]) -> JsonObject:
        """The object as served at ``version``, with that apiVersion.

        Conversion between versions is the CRD "None" strategy: only apiVersion changes. Only
        the top level is new: below it the result shares the stored object's structure, which
        must not be changed (see the module docstring).
        """
        return {**obj, "apiVersion": resource.api_version(version), "kind": resource.kind}

    def _find(self, target: Target) -> JsonObject | None:
        assert target.name is not None
        namespace = target.namespace if target.resource.namespaced else ""
        return self._objects.get(target.resource.key, {}).get((namespace or "", target.name))

    def _require(self, target: Target) -> JsonObject:
        current = self._find(target)
        if current is None:
            raise errors.not_found(target.resource.ref, target.name or "")
        return current

    # -------------------------------------------------------------------- reads

    def get(self, target: Target) -> JsonObject:
        return self.present(target.resource, target.version, self._require(target))

    def objects(self, resource: ResourceType, filters: Filters = Filters()) -> list[JsonObject]:
        """Stored objects of a type in key order (namespace, then name), filtered."""
        bucket = self._objects.get(resource.key, {})
        return [bucket[k] for k in sorted(bucket) if filters.matches(bucket[k])]

    def list_objects(
        self,
        target: Target,
        filters: Filters,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> JsonObject:
        resource = target.resource
        items = self.objects(resource, filters)
        list_rv = self.resource_version
        if continue_token:
            try:
                state = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start_after = (str(state["start"][0]), str(state["start"][1]))
                list_rv = int(state["rv"])
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise errors.bad_request(f"invalid continue token: {exc}") from exc
            items = [
                o
                for o in items
                if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start_after
            ]
        metadata: JsonObject = {"resourceVersion": str(list_rv)}
        if limit and limit > 0 and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            last = items[-1]["metadata"]
            token = {"rv": list_rv, "start": [last.get("namespace", ""), last["name"]]}
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            if not filters.labels and not filters.fields:
                metadata["remainingItemCount"] = remaining
        presented = []
        for item in items:
            shown = self.present(resource, target.version, item)
            if resource.builtin:
                # Items of built-in lists carry no TypeMeta on the wire; CR lists do.
                shown.pop("apiVersion", None)
                shown.pop("kind", None)
            presented.append(shown)
        return {
            "apiVersion": resource.api_version(target.version),
            "kind": resource.list_kind,
            "metadata": metadata,
            "items": presented,
        }

    # ------------------------------------------------------------------- watches

    def watch_start(
        self, target: Target, filters: Filters, resource_version: str | None
    ) -> tuple[list[StoredEvent], int]:
        """Initial events and the cursor a new watch continues from.

        Unset or "0" means "current state": synthetic ADDED events for every object that
        exists, then changes after that. A concrete version streams changes after it, or
        raises 410 Expired if the window no longer reaches back that far.
        """
        resource = target.resource
        if resource_version in (None, "", "0"):
            cursor = self.resource_version
            initial = [
                StoredEvent(int(o["metadata"]["resourceVersion"]), "ADDED", o, None)
                for o in self.objects(resource, filters)
            ]
            return initial, cursor
        try:
            cursor = int(str(resource_version))
        except ValueError as exc:
            raise errors.bad_request(
                f"resourceVersion: Invalid value: {resource_version!r}: must be an integer"
            ) from exc
        self.events_since(resource, cursor)
        return [], cursor

    def events_since(self, resource: ResourceType, cursor: int) -> list[StoredEvent]:
        log = self._logs.get(resource.key)
        if log is None:
            raise errors.expired(f"too old resource version: {cursor} ({self.resource_version})")
        return log.since(cursor)

    def has_type(self, resource: ResourceType) -> bool:
        return resource.key in self._logs

    def compact(self) -> int:
        """Forget every retained event, as etcd's compaction plus a fresh watch cache do: a
        watch resuming from any earlier resourceVersion then gets 410 Gone. Returns the
        current resourceVersion."""
        for log in self._logs.values():
            log.events.clear()
            log.floor = self.resource_version
        return self.resource_version

    # -------------------------------------------------------------------- writes

    def ensure_namespace(self, name: str) -> None:
        if (("", name)) in self._objects.get(NAMESPACES, {}):
            return
        resource = self.registry.get(*NAMESPACES)
        assert resource is not None
        self.create(
            Target(resource, "v1"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )

    def _decode(self, target: Target, body: Any, *, ours: bool = False) -> JsonObject:
        """A new object from a request body (copied: the caller keeps its own).

        ``ours``: ``body`` was built by the store from a stored object (a patch applied to
        it), so only the top level and metadata, whose own keys change from here on, are
        copied; the rest stays shared with the stored object, copy-on-write.
        """
        resource = target.resource
        if not isinstance(body, Mapping):
            raise errors.bad_request("the body of the request must be a JSON object")
        if ours and resource.custom:
            obj = dict(body)
            if isinstance(obj.get("metadata"), Mapping):
                obj["metadata"] = dict(obj["metadata"])
        else:
            obj = copy.deepcopy(dict(body))
        expected_api_version = resource.api_version(target.version)
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if resource.custom:
            # Unstructured decoding needs TypeMeta; typed built-ins default it from the URL.
            if not kind:
                raise errors.bad_request(f"Object 'Kind' is missing in '{json.dumps(body)}'")
            if not api_version:
                raise errors.bad_request(f"Object 'apiVersion' is missing in '{json.dumps(body)}'")
        if api_version and api_version != expected_api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({expected_api_version})"
            )
        if kind and kind != resource.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})"
            )
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        obj["apiVersion"] = resource.storage_api_version
        obj["kind"] = resource.kind
        return obj

    def _check_namespace(self, target: Target, obj: JsonObject) -> None:
        metadata = obj["metadata"]
        if target.resource.namespaced:
            given = metadata.get("namespace")
            if given and given != target.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            metadata["namespace"] = target.namespace
        else:
            metadata.pop("namespace", None)

    def _validate_name(self, resource: ResourceType, name: str) -> None:
        if resource.key == NAMESPACES:
            ok = len(name) <= 63 and bool(_LABEL_RE.match(name))
            rule = (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                "characters or '-', and must start and end with an alphanumeric character"
            )
        else:
            ok = len(name) <= 253 and bool(_SUBDOMAIN_RE.match(name))
            rule = (
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
        if not ok:
            raise errors.invalid(
                resource.ref,
                name,
                [
                    FieldCause(
                        "FieldValueInvalid", f"Invalid value: {name!r}: {rule}", "metadata.name"
                    )
                ],
            )

    def _namespace_admission(self, resource: ResourceType, namespace: str, name: str) -> None:
        if not resource.namespaced or not self.require_namespaces:
            return
        ns = self._objects.get(NAMESPACES, {}).get(("", namespace))
        namespaces_ref = ResourceRef("", "namespaces", "Namespace")
        if ns is None:
            raise errors.not_found(namespaces_ref, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                resource.ref,
                name,
                f"unable to create new content in namespace {namespace} because it is being "
                f"terminated",
            )

    def _apply_schema(
        self,
        target: Target,
        obj: JsonObject,
        validation: FieldValidation,
        current: JsonObject | None = None,
    ) -> tuple[JsonObject, list[str]]:
        resource = target.resource
        schema = resource.schemas.get(target.version)
        if resource.builtin or schema is None:
            return obj, []
        same_schema = current is not None and schema is self._pruned_with.get(
            (resource.key, current["metadata"].get("namespace", ""), current["metadata"]["name"])
        )
        pruned, dropped = prune(obj, schema, old=current if same_schema else None)
        warnings = [f'unknown field "{path}"' for path in dropped]
        if dropped and validation == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join(warnings))
        pruned = apply_defaults(pruned, schema)
        # On an update, what is still the stored object's own is not validated again.
        causes = (
            validate(pruned, schema) if current is None else validate(pruned, schema, old=current)
        )
        if causes:
            raise errors.invalid(resource.ref, pruned["metadata"].get("name", ""), causes)
        return pruned, warnings if validation == "Warn" else []

    def _prepare_builtin(
        self, resource: ResourceType, obj: JsonObject, old: JsonObject | None
    ) -> None:
        if resource.key == ("", "secrets"):
            string_data = obj.pop("stringData", None)
            if isinstance(string_data, Mapping):
                data = obj.setdefault("data", {})
                for key, value in string_data.items():
                    data[key] = base64.b64encode(str(value).encode()).decode()
            if old is None:
                obj.setdefault("type", "Opaque")
        elif resource.key == NAMESPACES:
            labels = obj["metadata"].setdefault("labels", {})
            # Since 1.21 the API server stamps this immutable label on every namespace.
            labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
            if old is None:
                obj["spec"] = {"finalizers": ["kubernetes"]}
                obj["status"] = {"phase": "Active"}
        elif resource.key == (CRD_GROUP, CRD_PLURAL):
            defined = resource_type_from_crd(obj)
            existing = self.registry.get(defined.group, defined.plural)
            if (existing is not None and existing.builtin) or self.registry.is_alias_group(
                defined.group
            ):
                raise errors.invalid(
                    resource.ref,
                    obj["metadata"]["name"],
                    [
                        FieldCause(
                            "FieldValueInvalid",
                            "Invalid value: the group/resource is served by the API server itself",
                            "spec.group",
                        )
                    ],
                )
            if old is None:
                obj["status"] = crd_status(defined, self._now())
            else:
                stored = list(old.get("status", {}).get("storedVersions") or [])
                status = crd_status(defined, self._now())
                status["storedVersions"] = sorted(set(stored) | {defined.storage_version})
                status["conditions"] = old.get("status", {}).get("conditions", status["conditions"])
                obj["status"] = status

    def _lookup(self, group: str, plural: str, namespace: str, name: str) -> JsonObject | None:
        resource = self.registry.get(group, plural)
        if resource is None:
            return None
        return self._objects.get(resource.key, {}).get((namespace, name))

    def _list(self, group: str, plural: str, namespace: str) -> list[JsonObject]:
        resource = self.registry.get(group, plural)
        return [] if resource is None else self.objects(resource, Filters(namespace=namespace))

    def _admit(
        self,
        stage: AdmissionStage,
        target: Target,
        obj: JsonObject,
        old: JsonObject | None,
        user: str,
    ) -> JsonObject:
        """Run admission's ``stage`` on a write of a custom resource's main endpoint."""
        resource = target.resource
        if self.admission is None or resource.builtin or target.subresource is not None:
            return obj
        response = self.admission(
            AdmissionRequest(
                stage=stage,
                operation="CREATE" if old is None else "UPDATE",
                group=resource.key[0],
                plural=resource.plural,
                kind=resource.kind,
                obj=obj,
                old=old,
                user=user,
                lookup=self._lookup,
                list=self._list,
            )
        )
        if response.causes:
            raise errors.invalid(resource.ref, obj["metadata"].get("name", ""), response.causes)
        return obj if response.obj is None else response.obj

    def create(
        self,
        target: Target,
        body: Any,
        *,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        user: str = "",
    ) -> WriteResult:
        resource = target.resource
        obj = self._decode(target, body)
        self._check_namespace(target, obj)
        metadata = obj["metadata"]
        if metadata.get("resourceVersion"):
            # etcd3 store.Create returns a plain error here, which surfaces as a 500.
            raise errors.internal_error(
                "resourceVersion should not be set on objects to be created"
            )
        name = metadata.get("name")
        if not name:
            prefix = metadata.get("generateName")
            if not prefix:
                raise errors.invalid(
                    resource.ref,
                    "",
                    [
                        FieldCause(
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                            "metadata.name",
                        )
                    ],
                )
            name = str(prefix)[:58] + "".join(
                self._random.choice(_GENERATE_ALPHABET) for _ in range(5)
            )
            metadata["name"] = name
        self._validate_name(resource, name)
        namespace = metadata.get("namespace", "")
        self._namespace_admission(resource, namespace, name)
        if self._objects.get(resource.key, {}).get((namespace, name)) is not None:
            raise errors.already_exists(resource.ref, name)
        for server_field in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ):
            metadata.pop(server_field, None)
        metadata["uid"] = self._uid()
        metadata["creationTimestamp"] = self._now()
        if resource.has_generation:
            metadata["generation"] = 1
        else:
            metadata.pop("generation", None)
        if resource.custom and resource.has_status(target.version):
            # With a status subresource, create ignores status (customresource
            # strategy PrepareForCreate).
            obj.pop("status", None)
        if resource.builtin:
            self._prepare_builtin(resource, obj, None)
        obj = self._admit("mutate", target, obj, None, user)
        obj, warnings = self._apply_schema(target, obj, field_validation)
        obj = self._admit("validate", target, obj, None, user)
        if dry_run:
            return WriteResult(201, self.present(resource, target.version, obj), warnings)
        metadata = obj["metadata"]
        metadata["resourceVersion"] = str(self._next_rv())
        self._commit(resource, "ADDED", obj, None, pruned_with=resource.schemas.get(target.version))
        if resource.key == (CRD_GROUP, CRD_PLURAL):
            self._register(resource_type_from_crd(obj))
        return WriteResult(201, self.present(resource, target.version, obj), warnings)

    def replace(
        self,
        target: Target,
        body: Any,
        *,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        user: str = "",
    ) -> WriteResult:
        current = self._require(target)
        obj = self._decode(target, body)
        return self._update(
            target,
            current,
            obj,
            unconditional_ok=False,
            dry_run=dry_run,
            field_validation=field_validation,
            user=user,
        )

    def patch(
        self,
        target: Target,
        patch_type: PatchType,
        patch: Any,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: FieldValidation = "Warn",
        user: str = "",
    ) -> WriteResult:
        """Apply a patch. The store takes ``patch`` over: parts of it may become part of the
        stored object (it is normally what was just decoded from the request)."""
        resource = target.resource
        current = self._find(target)
        if patch_type == "apply" and not field_manager:
            raise errors.invalid(
                ResourceRef("meta.k8s.io", "patchoptions", "PatchOptions"),
                "",
                [
                    FieldCause(
                        "FieldValueRequired",
                        "Required value: is required for apply patch",
                        "fieldManager",
                    )
                ],
            )
        if current is None:
            if patch_type == "apply" and target.subresource is None:
                # Server-side apply creates the object when it does not exist.
                body = dict(patch) if isinstance(patch, Mapping) else patch
                if isinstance(body, dict):
                    body.setdefault("metadata", {})
                    if isinstance(body["metadata"], dict):
                        body["metadata"].setdefault("name", target.name)
                return self.create(
                    target, body, dry_run=dry_run, field_validation=field_validation, user=user
                )
            raise errors.not_found(resource.ref, target.name or "")
        shown = self.present(resource, target.version, current)
        try:
            if patch_type == "json":
                patched = json_patch(shown, patch)
            elif patch_type == "merge":
                if not isinstance(patch, Mapping):
                    raise errors.bad_request("merge patch body must be a JSON object")
                patched = merge_patch_shared(shown, patch)
            elif patch_type == "strategic":
                if resource.custom and not self.strategic_merge_for_custom_resources:
                    raise errors.unsupported_media_type(
                        "application/strategic-merge-patch+json",
                        [
                            "application/json-patch+json",
                            "application/merge-patch+json",
                            "application/apply-patch+yaml",
                        ],
                    )
                if not isinstance(patch, Mapping):
                    raise errors.bad_request("strategic merge patch body must be a JSON object")
                patched = (
                    merge_patch_shared(shown, patch)
                    if resource.custom
                    else strategic_merge_patch(shown, patch)
                )
            else:
                if not isinstance(patch, Mapping):
                    raise errors.bad_request("apply patch body must be an object")
                # Simplified server-side apply: the applied configuration is merged in;
                # field ownership and removal of fields dropped from it are not modelled.
                patched = merge_patch_shared(shown, patch)
        except PatchError as exc:
            raise StatusError(422, "Invalid", str(exc)) from exc
        if not isinstance(patched, dict):
            raise errors.bad_request("patch produced something that is not an object")
        obj = self._decode(target, patched, ours=True)
        return self._update(
            target,
            current,
            obj,
            unconditional_ok=True,
            dry_run=dry_run,
            field_validation=field_validation,
            user=user,
        )

    def _update(
        self,
        target: Target,
        current: JsonObject,
        obj: JsonObject,
        *,
        unconditional_ok: bool,
        dry_run: bool,
        field_validation: FieldValidation,
        user: str = "",
    ) -> WriteResult:
        resource = target.resource
        name = target.name or ""
        metadata = obj["metadata"]
        current_meta = current["metadata"]
        if metadata.get("name") and metadata["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({metadata['name']}) does not match the name on the "
                f"URL ({name})"
            )
        metadata["name"] = name
        self._check_namespace(target, obj)
        given_rv = metadata.get("resourceVersion")
        if given_rv:
            if str(given_rv) != current_meta["resourceVersion"]:
                raise errors.conflict(resource.ref, name)
        elif not unconditional_ok and not resource.allow_unconditional_update:
            raise errors.invalid(
                resource.ref,
                name,
                [
                    FieldCause(
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                        "metadata.resourceVersion",
                    )
                ],
            )
        if metadata.get("uid") and metadata["uid"] != current_meta.get("uid"):
            raise errors.conflict(
                resource.ref,
                name,
                f"Precondition failed: UID in precondition: {metadata['uid']}, UID in object "
                f"meta: {current_meta.get('uid')}",
            )
        # Server-owned metadata always comes from the stored object.
        for owned in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "selfLink",
        ):
            if owned in current_meta:
                metadata[owned] = current_meta[owned]  # (never changed in place: shared)
            else:
                metadata.pop(owned, None)
        metadata["resourceVersion"] = current_meta["resourceVersion"]

        if target.subresource == "status":
            # The status endpoint changes status and nothing else. (Copy-on-write: metadata
            # changes below, the rest is shared with the stored object and left alone.)
            new = {**current, "metadata": dict(current["metadata"])}
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            obj = new
        elif resource.has_status(target.version):
            # The main endpoint cannot change status when /status exists.
            if "status" in current:
                # (Shared, not copied, for custom resources: nothing below changes it.)
                status = current["status"]
                obj["status"] = status if resource.custom else copy.deepcopy(status)
            else:
                obj.pop("status", None)

        if current_meta.get("deletionTimestamp"):
            added = [
                f
                for f in obj["metadata"].get("finalizers") or []
                if f not in (current_meta.get("finalizers") or [])
            ]
            if added:
                raise errors.invalid(
                    resource.ref,
                    name,
                    [
                        FieldCause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being "
                            "deleted, found new finalizers "
                            f"[]string{{{', '.join(json.dumps(a) for a in added)}}}",
                            "metadata.finalizers",
                        )
                    ],
                )
        if resource.builtin and target.subresource is None:
            self._prepare_builtin(resource, obj, current)
        obj = self._admit("mutate", target, obj, current, user)
        obj, warnings = self._apply_schema(target, obj, field_validation, current)
        obj = self._admit("validate", target, obj, current, user)

        if resource.has_generation and target.subresource is None:

            def content(o: JsonObject) -> JsonObject:
                ignored = {"metadata", "apiVersion", "kind"}
                if resource.has_status(target.version):
                    ignored.add("status")
                return {k: v for k, v in o.items() if k not in ignored}

            if content(obj) != content(current):
                obj["metadata"]["generation"] = int(current_meta.get("generation", 0)) + 1

        if obj == current:
            # etcd skips no-op writes: same resourceVersion, no watch event.
            return WriteResult(200, self.present(resource, target.version, current), warnings)
        if dry_run:
            return WriteResult(200, self.present(resource, target.version, obj), warnings)

        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        if current_meta.get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            # The last finalizer is gone: the object is deleted by this very update.
            self._commit(resource, "DELETED", obj, current)
            self._after_delete(resource, obj)
            return WriteResult(200, self.present(resource, target.version, obj), warnings)
        self._commit(
            resource, "MODIFIED", obj, current, pruned_with=resource.schemas.get(target.version)
        )
        if resource.key == (CRD_GROUP, CRD_PLURAL):
            self._register(resource_type_from_crd(obj))
        return WriteResult(200, self.present(resource, target.version, obj), warnings)

    def delete(
        self, target: Target, options: Mapping[str, Any] | None = None, *, dry_run: bool = False
    ) -> WriteResult:
        resource = target.resource
        current = self._require(target)
        name = target.name or ""
        preconditions = (options or {}).get("preconditions") or {}
        current_meta = current["metadata"]
        if preconditions.get("uid") and preconditions["uid"] != current_meta.get("uid"):
            raise errors.conflict(
                resource.ref,
                name,
                f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in "
                f"object meta: {current_meta.get('uid')}",
            )
        wanted_rv = preconditions.get("resourceVersion")
        if wanted_rv and wanted_rv != current_meta["resourceVersion"]:
            raise errors.conflict(
                resource.ref,
                name,
                f"Precondition failed: ResourceVersion in precondition: {wanted_rv}, "
                f"ResourceVersion in object meta: {current_meta['resourceVersion']}",
            )
        if dry_run:
            return WriteResult(200, self.present(resource, target.version, current))
        if resource.key == NAMESPACES:
            return WriteResult(
                200, self.present(resource, target.version, self._delete_namespace(current))
            )
        outcome = self._delete_object(resource, current)
        if outcome is None:
            return WriteResult(
                200,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {
                        "name": name,
                        **({"group": resource.group} if resource.group else {}),
                        # Like the real store: details.kind holds the resource (plural).
                        "kind": resource.plural,
                        "uid": current_meta.get("uid"),
                    },
                },
            )
        return WriteResult(200, self.present(resource, target.version, outcome))

    def _delete_object(self, resource: ResourceType, current: JsonObject) -> JsonObject | None:
        """Delete now (returns None) or mark for deletion while finalizers remain."""
        meta = current["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return current
            marked = copy.deepcopy(current)
            marked_meta = marked["metadata"]
            marked_meta["deletionTimestamp"] = self._now()
            marked_meta["deletionGracePeriodSeconds"] = 0
            if resource.has_generation and marked_meta.get("generation"):
                # genericregistry markAsDeleting bumps generation for non-graceful kinds.
                marked_meta["generation"] = int(marked_meta["generation"]) + 1
            marked_meta["resourceVersion"] = str(self._next_rv())
            self._commit(resource, "MODIFIED", marked, current)
            return marked
        gone = copy.deepcopy(current)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        self._commit(resource, "DELETED", gone, current)
        self._after_delete(resource, gone)
        return None

    def _after_delete(self, resource: ResourceType, gone: JsonObject) -> None:
        if resource.key == (CRD_GROUP, CRD_PLURAL):
            defined = resource_type_from_crd(gone)
            # The apiextensions finalizer deletes every instance before the CRD goes.
            for obj in list(self.objects(defined)):
                dropped = copy.deepcopy(obj)
                dropped["metadata"]["resourceVersion"] = str(self._next_rv())
                self._commit(defined, "DELETED", dropped, obj)
            # Open watches on the type notice it is gone and end (see server.py).
            self._unregister(defined.key)
            for subscription in self._subscriptions:
                subscription.wake.set()
        namespace = gone["metadata"].get("namespace")
        if namespace:
            self._sweep_namespace(namespace)

    def _delete_namespace(self, current: JsonObject) -> JsonObject:
        resource = self.registry.get(*NAMESPACES)
        assert resource is not None
        name = current["metadata"]["name"]
        shown = current
        if not current["metadata"].get("deletionTimestamp"):
            terminating = copy.deepcopy(current)
            terminating["metadata"]["deletionTimestamp"] = self._now()
            terminating["metadata"]["deletionGracePeriodSeconds"] = 0
            terminating.setdefault("status", {})["phase"] = "Terminating"
            terminating["metadata"]["resourceVersion"] = str(self._next_rv())
            self._commit(resource, "MODIFIED", terminating, current)
            shown = terminating
        self._sweep_namespace(name)
        return shown

    def _sweep_namespace(self, namespace: str) -> None:
        """The namespace controller: empty a terminating namespace, then remove it."""
        ns = self._objects.get(NAMESPACES, {}).get(("", namespace))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if namespace in self._sweeping:
            return
        self._sweeping.add(namespace)
        try:
            for resource in self.registry:
                if resource.namespaced and not resource.is_alias:
                    for obj in self.objects(resource, Filters(namespace=namespace)):
                        if not obj["metadata"].get("deletionTimestamp"):
                            self._delete_object(resource, obj)
        finally:
            self._sweeping.discard(namespace)
        remaining = any(
            self.objects(resource, Filters(namespace=namespace))
            for resource in self.registry
            if resource.namespaced and not resource.is_alias
        )
        ns = self._objects.get(NAMESPACES, {}).get(("", namespace))
        namespaces = self.registry.get(*NAMESPACES)
        if not remaining and ns is not None and namespaces is not None:
            gone = copy.deepcopy(ns)
            gone["metadata"]["resourceVersion"] = str(self._next_rv())
            self._commit(namespaces, "DELETED", gone, ns)

    def delete_collection(
        self,
        target: Target,
        filters: Filters,
        options: Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> JsonObject:
        resource = target.resource
        victims = self.objects(resource, filters)
        for obj in victims:
            if dry_run:
                continue
            if resource.key == NAMESPACES:
                self._delete_namespace(obj)
            else:
                self._delete_object(resource, obj)
        return (
            self.list_objects(target, Filters(namespace=filters.namespace))
            if dry_run
            else {
                "apiVersion": resource.api_version(target.version),
                "kind": resource.list_kind,
                "metadata": {"resourceVersion": str(self.resource_version)},
                "items": [self.present(resource, target.version, o) for o in victims],
            }
        )

    # --------------------------------------------------------------- persistence

    def snapshot(self) -> JsonObject:
        """Everything needed to come back after a restart (not the watch window)."""
        entries = []
        for (group, plural), bucket in self._objects.items():
            for key in sorted(bucket):
                entries.append({"group": group, "plural": plural, "object": bucket[key]})
        return {"resourceVersion": self.resource_version, "objects": entries}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Load a snapshot taken by ``snapshot()``; CRDs first so their types exist."""
        entries = list(snapshot.get("objects") or [])

        def is_crd(entry: Mapping[str, Any]) -> bool:
            return (entry["group"], entry["plural"]) == (CRD_GROUP, CRD_PLURAL)

        for entry in sorted(entries, key=lambda e: not is_crd(e)):
            key = (str(entry["group"]), str(entry["plural"]))
            obj = entry["object"]
            if key == (CRD_GROUP, CRD_PLURAL):
                self._register(resource_type_from_crd(obj))
            if self.registry.get(*key) is None:
                continue
            meta = obj["metadata"]
            self._objects.setdefault(key, {})[(meta.get("namespace", ""), meta["name"])] = obj
        self.resource_version = max(
            self.resource_version, int(snapshot.get("resourceVersion") or 0)
        )
        # A restarted server must not hand out the UIDs and names of its first life again.
        self._random = random.Random(f"{self._seed}:{self.resource_version}")
        # History does not survive a restart: watches must start from now.
        for log in self._logs.values():
            log.events.clear()
            log.floor = self.resource_version

    def apply_crd(self, crd: Mapping[str, Any]) -> None:
        """Create or update a CRD from a manifest (used for crd_dirs at start-up)."""
        resource = self.registry.get(CRD_GROUP, CRD_PLURAL)
        assert resource is not None
        name = str((crd.get("metadata") or {}).get("name", ""))
        target = Target(resource, "v1", name=name)
        body = copy.deepcopy(dict(crd))
        existing = self._find(target)
        if existing is None:
            self.create(target, body)
            return
        body.setdefault("metadata", {})["resourceVersion"] = existing["metadata"]["resourceVersion"]
        self.replace(target, body)
