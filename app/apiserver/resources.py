"""Resource types the emulator serves: the built-ins we need plus whatever CRDs define.

A ``ResourceType`` carries everything the store and discovery need to treat a resource the way
kube-apiserver does: scope, served versions, whether ``/status`` is a subresource, whether the
kind has ``metadata.generation`` and which field selectors it accepts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.apiserver.errors import FieldCause, ResourceRef, StatusError, invalid

JsonObject = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CRD_GROUP = "apiextensions.k8s.io"
CRD_PLURAL = "customresourcedefinitions"


@dataclass(frozen=True, eq=False)
class ResourceType:
    """One REST resource (``group``/``plural``), possibly served at several versions."""

    group: str
    versions: tuple[str, ...]
    storage_version: str
    plural: str
    singular: str
    kind: str
    list_kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_versions: frozenset[str] = frozenset()
    builtin: bool = False
    # version -> openAPIV3Schema; only custom resources are pruned, defaulted and validated.
    schemas: Mapping[str, JsonObject] = field(default_factory=dict)
    # version -> extra field-selector labels (CRD selectableFields), as "spec.x" paths.
    selectable_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    extra_field_labels: frozenset[str] = frozenset()
    # version -> the CRD version's additionalPrinterColumns, as written (see tables.py).
    printer_columns: Mapping[str, tuple[JsonObject, ...]] = field(default_factory=dict)
    # Set on an alias (``alias_of``): the group whose objects this type serves under its own
    # group name. Both share one store and one watch log; only apiVersion differs.
    storage_group: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """Where the objects live: an alias shares its target's objects and events."""
        return (self.storage_group or self.group, self.plural)

    @property
    def served_key(self) -> tuple[str, str]:
        """Where the type is served: its own group, alias or not."""
        return (self.group, self.plural)

    @property
    def is_alias(self) -> bool:
        return bool(self.storage_group)

    @property
    def storage_api_version(self) -> str:
        """The apiVersion objects are stored with (the target group's, for an alias)."""
        group = self.storage_group or self.group
        return f"{group}/{self.storage_version}" if group else self.storage_version

    def alias_of(self, group: str) -> ResourceType:
        """The same resource served under ``group`` as well (see ``ResourceRegistry``)."""
        return replace(self, group=group, storage_group=self.group)

    @property
    def ref(self) -> ResourceRef:
        return ResourceRef(self.group, self.plural, self.kind)

    @property
    def custom(self) -> bool:
        return not self.builtin

    @property
    def has_generation(self) -> bool:
        # Built-ins we serve (ConfigMap, Secret, Lease, Event, Namespace) never set
        # metadata.generation; custom resources and CRDs always do.
        return self.custom or self.key == (CRD_GROUP, CRD_PLURAL)

    @property
    def allow_unconditional_update(self) -> bool:
        # customresource.strategy.AllowUnconditionalUpdate() is false: a PUT of a custom
        # resource without metadata.resourceVersion is rejected. Built-ins allow it.
        return self.builtin

    @property
    def preferred_version(self) -> str:
        return sort_versions(self.versions)[0]

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def has_status(self, version: str) -> bool:
        return version in self.status_versions

    def field_labels(self, version: str) -> frozenset[str]:
        labels = {"metadata.name", "metadata.namespace"} | set(self.extra_field_labels)
        labels.update(self.selectable_fields.get(version, ()))
        return frozenset(labels)


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def _version_priority(version: str) -> tuple[int, int, int, str]:
    match = _VERSION_RE.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    stage_rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (stage_rank, -int(major), -int(minor or 0), version)


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Order versions like kube-apiserver: GA before beta before alpha, newest first."""
    return sorted(versions, key=_version_priority)


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool,
    short_names: tuple[str, ...] = (),
    status: bool = False,
    extra_field_labels: Iterable[str] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        versions=(version,),
        storage_version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        list_kind=f"{kind}List",
        namespaced=namespaced,
        short_names=short_names,
        status_versions=frozenset({version}) if status else frozenset(),
        builtin=True,
        extra_field_labels=frozenset(extra_field_labels),
    )


def builtin_resource_types() -> list[ResourceType]:
    """The built-in resources the emulator serves natively (no CRD needed)."""
    return [
        _builtin(
            "",
            "v1",
            "namespaces",
            "Namespace",
            namespaced=False,
            short_names=("ns",),
            status=True,
            extra_field_labels=("status.phase",),
        ),
        _builtin("", "v1", "configmaps", "ConfigMap", namespaced=True, short_names=("cm",)),
        _builtin("", "v1", "secrets", "Secret", namespaced=True, extra_field_labels=("type",)),
        _builtin(
            "",
            "v1",
            "events",
            "Event",
            namespaced=True,
            short_names=("ev",),
            # pkg/registry/core/event/strategy.go ToSelectableFields
            extra_field_labels=(
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ),
        ),
        _builtin("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
        _builtin(
            CRD_GROUP,
            "v1",
            CRD_PLURAL,
            "CustomResourceDefinition",
            namespaced=False,
            short_names=("crd", "crds"),
            status=True,
        ),
    ]


def _crd_error(name: str, message: str, path: str) -> StatusError:
    ref = ResourceRef(CRD_GROUP, CRD_PLURAL, "CustomResourceDefinition")
    return invalid(ref, name, [FieldCause("FieldValueInvalid", message, path)])


_PRINTER_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")


def _printer_columns(name: str, columns: Any, path: str) -> tuple[JsonObject, ...]:
    """additionalPrinterColumns, checked like apiextensions validation.go does."""
    if not isinstance(columns, list):
        raise _crd_error(name, "Invalid value: must be a list", f"{path}.additionalPrinterColumns")
    checked: list[JsonObject] = []
    for index, column in enumerate(columns):
        where = f"{path}.additionalPrinterColumns[{index}]"
        if not isinstance(column, Mapping):
            raise _crd_error(name, "Invalid value: must be an object", where)
        if not column.get("name"):
            raise _crd_error(name, "Required value", f"{where}.name")
        kind = column.get("type")
        if not kind:
            raise _crd_error(name, "Required value", f"{where}.type")
        if kind not in _PRINTER_COLUMN_TYPES:
            supported = ", ".join(f'"{t}"' for t in _PRINTER_COLUMN_TYPES)
            raise _crd_error(
                name,
                f"Unsupported value: {json.dumps(kind)}: supported values: {supported}",
                f"{where}.type",
            )
        json_path = column.get("jsonPath")
        if not json_path:
            raise _crd_error(name, "Required value", f"{where}.jsonPath")
        if not str(json_path).startswith("."):
            raise _crd_error(
                name,
                f"Invalid value: {json.dumps(json_path)}: "
                "must be a simple json path starting with .",
                f"{where}.jsonPath",
            )
        checked.append(dict(column))
    return tuple(checked)


def resource_type_from_crd(crd: Mapping[str, Any]) -> ResourceType:
    """Build the served resource type from an apiextensions.k8s.io/v1 CRD object."""
    name = str(crd.get("metadata", {}).get("name", ""))
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        raise _crd_error(name, "Required value", "spec")
    group = spec.get("group")
    names = spec.get("names")
    if not isinstance(group, str) or not group:
        raise _crd_error(name, "Required value", "spec.group")
    if not isinstance(names, Mapping) or not names.get("plural") or not names.get("kind"):
        raise _crd_error(name, "Required value", "spec.names")
    plural = str(names["plural"])
    if name != f"{plural}.{group}":
        raise _crd_error(
            name,
            f'Invalid value: {name!r}: must be spec.names.plural+"."+spec.group',
            "metadata.name",
        )
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        raise _crd_error(name, 'Unsupported value: must be "Namespaced" or "Cluster"', "spec.scope")
    raw_versions = spec.get("versions") or []
    served: list[str] = []
    storage: list[str] = []
    status_versions: set[str] = set()
    schemas: dict[str, JsonObject] = {}
    selectable: dict[str, tuple[str, ...]] = {}
    printer_columns: dict[str, tuple[JsonObject, ...]] = {}
    for index, entry in enumerate(raw_versions):
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise _crd_error(name, "Required value", f"spec.versions[{index}].name")
        version = str(entry["name"])
        if entry.get("served", False):
            served.append(version)
        if entry.get("storage", False):
            storage.append(version)
        subresources = entry.get("subresources") or {}
        if isinstance(subresources, Mapping) and "status" in subresources:
            status_versions.add(version)
        schema = (entry.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, Mapping):
            schemas[version] = dict(schema)
        fields = entry.get("selectableFields") or []
        selectable[version] = tuple(
            str(f.get("jsonPath", "")).lstrip(".") for f in fields if isinstance(f, Mapping)
        )
        printer_columns[version] = _printer_columns(
            name, entry.get("additionalPrinterColumns") or [], f"spec.versions[{index}]"
        )
    if len(storage) != 1:
        raise _crd_error(
            name,
            "Invalid value: must have exactly one version marked as storage version",
            "spec.versions",
        )
    if not served:
        raise _crd_error(name, "Invalid value: must serve at least one version", "spec.versions")
    singular = str(names.get("singular") or str(names["kind"]).lower())
    return ResourceType(
        group=group,
        versions=tuple(served),
        storage_version=storage[0],
        plural=plural,
        singular=singular,
        kind=str(names["kind"]),
        list_kind=str(names.get("listKind") or f"{names['kind']}List"),
        namespaced=scope == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        status_versions=frozenset(status_versions),
        builtin=False,
        schemas=schemas,
        selectable_fields=selectable,
        printer_columns=printer_columns,
    )


def crd_status(resource: ResourceType, now: str) -> JsonObject:
    """The status a real apiextensions controller settles a healthy CRD into."""
    accepted: JsonObject = {
        "plural": resource.plural,
        "singular": resource.singular,
        "kind": resource.kind,
        "listKind": resource.list_kind,
    }
    if resource.short_names:
        accepted["shortNames"] = list(resource.short_names)
    if resource.categories:
        accepted["categories"] = list(resource.categories)
    return {
        "acceptedNames": accepted,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "storedVersions": [resource.storage_version],
    }


class ResourceRegistry:
    """Lookup of served resource types by group/plural, by group/version and by kind.

    ``group_aliases`` (alias group -> target group) serves every custom resource of the target
    group under the alias group too, the same objects under two apiVersions: how the embedded
    cluster serves Kargo's ``kargo.akuity.io`` beside ``longshoreman.dev``. A real server has
    no such thing (there, one group or the other is installed); aliases come after every
    other group in discovery, so a bare ``kubectl get stages`` means the target group.
    """

    def __init__(
        self,
        types: Iterable[ResourceType] = (),
        *,
        group_aliases: Mapping[str, str] | None = None,
    ) -> None:
        self._types: dict[tuple[str, str], ResourceType] = {}
        self.group_aliases = dict(group_aliases or {})
        for resource in types:
            self.add(resource)

    def add(self, resource: ResourceType) -> None:
        self._types[resource.served_key] = resource
        if resource.is_alias:
            return
        for alias, target in self.group_aliases.items():
            if target == resource.group:
                self._types[(alias, resource.plural)] = resource.alias_of(alias)

    def remove(self, key: tuple[str, str]) -> None:
        """Stop serving the type stored at ``key`` under every group it is served in."""
        for served, resource in list(self._types.items()):
            if resource.key == key:
                del self._types[served]

    def is_alias_group(self, group: str) -> bool:
        return group in self.group_aliases

    def get(self, group: str, plural: str) -> ResourceType | None:
        return self._types.get((group, plural))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        resource = self._types.get((group, plural))
        if resource is None or version not in resource.versions:
            return None
        return resource

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions, preferred first; in discovery's order (by name,
        alias groups last)."""
        found: dict[str, set[str]] = {}
        for resource in self._types.values():
            found.setdefault(resource.group, set()).update(resource.versions)
        order = sorted(found, key=lambda group: (self.is_alias_group(group), group))
        return {group: sort_versions(found[group]) for group in order}

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return sorted(
            (r for r in self._types.values() if r.group == group and version in r.versions),
            key=lambda r: r.plural,
        )
