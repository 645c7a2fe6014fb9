"""Server-side printing: the ``Table`` that ``kubectl get`` asks for, built as kube-apiserver does.

kubectl knows nothing of a resource's columns. It asks for
``Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`` and prints the columns the server
sends (hiding those with priority > 0 unless ``-o wide``), so the server decides:

- custom resources: NAME, then the CRD version's ``additionalPrinterColumns``, or AGE when it
  declares none (apiextensions-apiserver registry/customresource/tableconvertor and the CRD
  handler's serveDefaultColumnsIfEmpty). Each column's ``jsonPath`` is evaluated with
  Kubernetes' JSONPath (``jsonpath.py``); a path that finds nothing gives a null cell, which
  kubectl prints as an empty cell;
- the built-ins we serve: the columns of pkg/printers/internalversion, always in their wide form
  (the server prints wide and leaves hiding to kubectl);
- CustomResourceDefinitions themselves: rest.defaultTableConvertor's NAME and CREATED AT.

Ages are rendered here, as text, because that is what the real server sends: a custom resource's
``date`` column and a built-in's AGE alike read as apimachinery's HumanDuration ("5m12s",
"3d4h"); only CREATED AT is an RFC 3339 timestamp. kubectl prints every cell as it comes.
Checked against kube-apiserver v1.20.2 (scripts/build-kube-apiserver.sh).

Each row carries the object as ``includeObject`` asks: its metadata as a PartialObjectMetadata
(the default; kubectl reads namespace and labels from it), the whole object, or nothing.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from app.apiserver import errors
from app.apiserver.golang import go_json, go_value, stored_number
from app.apiserver.jsonpath import JsonPath, JsonPathError
from app.apiserver.jsonpath import parse as parse_jsonpath
from app.apiserver.resources import CRD_GROUP, CRD_PLURAL, ResourceType

JsonObject = dict[str, Any]
IncludeObject = Literal["Metadata", "None", "Object"]

# metav1.ObjectMeta's field docs (as of 1.20), which the real server uses to describe NAME and AGE.
NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "http://kubernetes.io/docs/user-guide/identifiers#names"
)
CREATION_TIMESTAMP_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


@dataclass(frozen=True)
class Column:
    """One ``metav1.TableColumnDefinition``."""

    name: str
    type: str
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> JsonObject:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


Cells = Callable[[Mapping[str, Any], datetime], list[Any]]


@dataclass(frozen=True)
class Printer:
    """The columns of one resource type and how to fill them for one object at ``now``."""

    columns: tuple[Column, ...]
    cells: Cells


_NAME = Column("Name", "string", "name", NAME_DESCRIPTION)
_AGE = Column("Age", "string", description=CREATION_TIMESTAMP_DESCRIPTION)

# ------------------------------------------------------------------------------- durations


def human_duration(seconds: float) -> str:
    """apimachinery util/duration.HumanDuration: ~2-3 significant figures ("5m12s", "3d4h")."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _parse_time(value: str) -> datetime | None:
    """An RFC 3339 timestamp (fractions allowed, as Go parses them), or None."""
    if not _RFC3339.match(value):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _since(timestamp: Any, now: datetime) -> str:
    """printers' translateTimestampSince: HumanDuration since a timestamp, <unknown> if unset."""
    moment = _parse_time(timestamp) if isinstance(timestamp, str) else None
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


# ----------------------------------------------------------------- custom resource columns


def _stored(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stored(v) for v in value]
    return stored_number(value)


def _text(value: Any) -> str:
    """What client-go's JSONPath prints for one value (JSONPath.PrintResults)."""
    if isinstance(value, (dict, list)):
        return go_json(_stored(value))
    if value is None:
        # The null reaches text/template's printableValue as an invalid value.
        return "<no value>"
    return go_value(value) if not isinstance(value, str) else value


def _custom_cell(column_type: str, found: Sequence[Any], now: datetime) -> Any:
    """tableconvertor.go: the first value found, typed by the column (cellForJSONValue)."""
    if not found:
        return None
    value = stored_number(found[0])
    if column_type == "string":
        return _text(value)
    if value is None or isinstance(value, bool):
        return value if column_type == "boolean" else None
    if column_type == "integer" and isinstance(value, (int, float)):
        return int(value)
    if column_type == "number" and isinstance(value, (int, float)):
        return float(value)
    if column_type == "date" and isinstance(value, str):
        if value in ("", "null"):
            return "<unknown>"
        moment = _parse_time(value)
        if moment is None:
            return "<invalid>"
        return human_duration((now - moment).total_seconds())
    return None


_DEFAULT_CUSTOM_COLUMNS: tuple[JsonObject, ...] = (
    {
        "name": "Age",
        "type": "date",
        "description": CREATION_TIMESTAMP_DESCRIPTION,
        "jsonPath": ".metadata.creationTimestamp",
    },
)


@functools.lru_cache(maxsize=256)
def _custom_printer(resource: ResourceType, version: str) -> Printer:
    columns = [_NAME]
    paths: list[JsonPath] = []
    for definition in resource.printer_columns.get(version) or _DEFAULT_CUSTOM_COLUMNS:
        json_path = str(definition["jsonPath"])
        try:
            paths.append(parse_jsonpath(json_path))
        except JsonPathError:
            # tableconvertor.New stops at the first column it cannot parse; the server then
            # serves the columns before it.
            break
        columns.append(
            Column(
                name=str(definition["name"]),
                type=str(definition["type"]),
                format=str(definition.get("format") or ""),
                description=str(definition.get("description") or "")
                or f"Custom resource definition column (in JSONPath format): {json_path}",
                priority=int(definition.get("priority") or 0),
            )
        )
    typed = list(zip((c.type for c in columns[1:]), paths, strict=True))

    def cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
        row: list[Any] = [_name(obj)]
        row.extend(_custom_cell(kind, path.find(obj), now) for kind, path in typed)
        return row

    return Printer(tuple(columns), cells)


# ------------------------------------------------------------------------ built-in columns


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _created(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("creationTimestamp")


def _namespace_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    phase = (obj.get("status") or {}).get("phase") or ""
    return [_name(obj), str(phase), _since(_created(obj), now)]


def _config_map_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    size = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [_name(obj), size, _since(_created(obj), now)]


def _secret_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    return [
        _name(obj),
        str(obj.get("type") or ""),
        len(obj.get("data") or {}),
        _since(_created(obj), now),
    ]


def _lease_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    holder = (obj.get("spec") or {}).get("holderIdentity") or ""
    return [_name(obj), str(holder), _since(_created(obj), now)]


def _event_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    # printers.go printEvent, wide.
    first_seen = _since(obj.get("firstTimestamp"), now)
    if not obj.get("firstTimestamp"):
        first_seen = _since(obj.get("eventTime"), now)
    last_seen = _since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first_seen
    count = int(obj.get("count") or 0)
    series = obj.get("series")
    if isinstance(series, Mapping):
        last_seen = _since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        # Singleton events don't have a count set in the new API.
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    where = "<unknown>" if not component else ", ".join(p for p in (component, instance) if p)
    return [
        last_seen,
        str(obj.get("type") or ""),
        str(obj.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        where,
        str(obj.get("message") or "").strip(),
        first_seen,
        count,
        _name(obj),
    ]


def _created_at_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    # rest.defaultTableConvertor: the creation time in UTC, RFC 3339.
    created = _created(obj)
    moment = _parse_time(created) if isinstance(created, str) else None
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "0001-01-01T00:00:00Z"
    return [_name(obj), stamp]


_DEFAULT_PRINTER = Printer(
    (_NAME, Column("Created At", "date", description=CREATION_TIMESTAMP_DESCRIPTION)),
    _created_at_cells,
)

_BUILTIN_PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "namespaces"): Printer(
        (_NAME, Column("Status", "string", description="The status of the namespace"), _AGE),
        _namespace_cells,
    ),
    ("", "configmaps"): Printer(
        (
            _NAME,
            Column(
                "Data",
                "string",
                description="Data contains the configuration data. Each key must consist of "
                "alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences "
                "must use the BinaryData field. The keys stored in Data must not overlap with the "
                "keys in the BinaryData field, this is enforced during validation process.",
            ),
            _AGE,
        ),
        _config_map_cells,
    ),
    ("", "secrets"): Printer(
        (
            _NAME,
            Column(
                "Type",
                "string",
                description="Used to facilitate programmatic handling of secret data. More "
                "info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
            ),
            Column(
                "Data",
                "string",
                description="Data contains the secret data. Each key must consist of "
                "alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data "
                "is a base64 encoded string, representing the arbitrary (possibly non-string) "
                "data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
            ),
            _AGE,
        ),
        _secret_cells,
    ),
    ("", "events"): Printer(
        (
            Column(
                "Last Seen",
                "string",
                description="The time at which the most recent occurrence of this event was "
                "recorded.",
            ),
            Column(
                "Type",
                "string",
                description="Type of this event (Normal, Warning), new types could be added in "
                "the future",
            ),
            Column(
                "Reason",
                "string",
                description="This should be a short, machine understandable string that gives "
                "the reason for the transition into the object's current status.",
            ),
            Column("Object", "string", description="The object that this event is about."),
            Column(
                "Subobject",
                "string",
                priority=1,
                description="If referring to a piece of an object instead of an entire object, "
                "this string should contain a valid JSON/Go field access statement, such as "
                "desiredState.manifest.containers[2].",
            ),
            Column(
                "Source",
                "string",
                priority=1,
                description="The component reporting this event. Should be a short machine "
                "understandable string.",
            ),
            Column(
                "Message",
                "string",
                description="A human-readable description of the status of this operation.",
            ),
            Column(
                "First Seen",
                "string",
                priority=1,
                description="The time at which the event was first recorded. (Time of server "
                "receipt is in TypeMeta.)",
            ),
            Column(
                "Count",
                "string",
                priority=1,
                description="The number of times this event has occurred.",
            ),
            Column("Name", "string", "name", NAME_DESCRIPTION, priority=1),
        ),
        _event_cells,
    ),
    ("coordination.k8s.io", "leases"): Printer(
        (
            _NAME,
            Column(
                "Holder",
                "string",
                description="holderIdentity contains the identity of the holder of a current "
                "lease.",
            ),
            _AGE,
        ),
        _lease_cells,
    ),
    (CRD_GROUP, CRD_PLURAL): _DEFAULT_PRINTER,
}


def printer_for(resource: ResourceType, version: str) -> Printer:
    """The columns ``resource`` is printed with at ``version``."""
    if resource.custom:
        return _custom_printer(resource, version)
    return _BUILTIN_PRINTERS.get(resource.key, _DEFAULT_PRINTER)


# ----------------------------------------------------------------------------------- tables


def include_object(query: Mapping[str, str]) -> IncludeObject:
    """TableOptions.includeObject from the query (validation.ValidateTableOptions)."""
    value = query.get("includeObject", "")
    if value in ("", "Metadata"):
        return "Metadata"
    if value == "None":
        return "None"
    if value == "Object":
        return "Object"
    raise errors.bad_request(
        "Unable to convert to Table as requested: includeObject: Invalid value: "
        f"{json.dumps(value)}: must be 'Metadata', 'Object', 'None', or empty"
    )


def partial_object_metadata(obj: Mapping[str, Any], api_version: str) -> JsonObject:
    """meta.AsPartialObjectMetadata: the object's metadata under kind PartialObjectMetadata."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata") or {},
    }


def build_table(
    printer: Printer,
    objects: Sequence[Mapping[str, Any]],
    *,
    api_version: str,
    metadata: Mapping[str, Any],
    include: IncludeObject,
    now: datetime,
    headers: bool = True,
) -> JsonObject:
    """A ``Table`` (``api_version`` meta.k8s.io/v1 or v1beta1) with one row per object.

    ``objects`` carry their apiVersion and kind (they are what ``includeObject=Object`` shows);
    ``metadata`` is the list's (resourceVersion, continue, remainingItemCount) or, for one
    object, its resourceVersion. ``headers=False`` leaves ``columnDefinitions`` null, as watch
    events after the first do.
    """
    rows = []
    for obj in objects:
        if include == "Object":
            shown: Any = obj
        elif include == "None":
            shown = None
        else:
            shown = partial_object_metadata(obj, api_version)
        rows.append({"cells": printer.cells(obj, now), "object": shown})
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": dict(metadata),
        "columnDefinitions": [c.definition() for c in printer.columns] if headers else None,
        "rows": rows,
    }
