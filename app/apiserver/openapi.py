"""OpenAPI documents built from the served types: ``/openapi/v3`` (an index and one document
per group-version) and ``/openapi/v2`` (one document, JSON).

kubectl reads them for two things. ``kubectl apply``/``create`` validate by default: when the
v3 document of an object's group-version lists the ``fieldValidation`` query parameter on its
operations, kubectl leaves validation to the server (``fieldValidation=Strict``, which the
store enforces against the CRD schema); for a group-version missing from v3 it falls back to
client-side validation over ``/openapi/v2``. ``kubectl explain`` walks the schemas in
``components.schemas``, found by their ``x-kubernetes-group-version-kind``.

Each custom resource's schema is its CRD's ``openAPIV3Schema`` with ``apiVersion``, ``kind``
and ``metadata`` (a reference to ``ObjectMeta``) filled in, named as kube-apiserver names it:
the group reversed, then version and kind (``dev.longshoreman.v1alpha1.Stage``). Built-ins get
operations but no schema. v2 is served as JSON only: client-go asks for it in protobuf, which
the emulator does not write, and gets 406 (it then has nothing to fall back to, as on a real
server without v2); every group-version served is in v3, so kubectl never needs v2 to apply.
"""

from __future__ import annotations

import copy
from typing import Any

from app.apiserver.resources import ResourceRegistry, ResourceType

JsonObject = dict[str, Any]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_QUERY_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation", "pretty")

# What kubectl explain and validation need of ObjectMeta: the fields a manifest sets.
_OBJECT_META_SCHEMA: JsonObject = {
    "description": "Standard object's metadata.",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer", "format": "int64"},
        "creationTimestamp": {"type": "string", "format": "date-time"},
        "deletionTimestamp": {"type": "string", "format": "date-time"},
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
        "managedFields": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def schema_name(resource: ResourceType, version: str) -> str:
    """kube-apiserver's definition name: the group reversed, the version, the kind."""
    reversed_group = ".".join(reversed(resource.group.split(".")))
    return f"{reversed_group}.{version}.{resource.kind}"


def resource_schema(resource: ResourceType, version: str, meta_ref: str) -> JsonObject | None:
    """The object's schema as served: the CRD's, with TypeMeta and ObjectMeta filled in."""
    declared = resource.schemas.get(version)
    if declared is None:
        return None
    schema = copy.deepcopy(declared)
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation.",
    }
    properties["kind"] = {
        "type": "string",
        "description": "Kind is a string value representing the REST resource.",
    }
    properties["metadata"] = {"$ref": meta_ref}
    schema["x-kubernetes-group-version-kind"] = [
        {"group": resource.group, "version": version, "kind": resource.kind}
    ]
    return schema


def v3_index(registry: ResourceRegistry) -> JsonObject:
    """``/openapi/v3``: where each group-version's document lives."""
    paths: JsonObject = {}
    for group, versions in registry.groups().items():
        for version in versions:
            path = gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}"}
    return {"paths": paths}


def _paths(resources: list[ResourceType], version: str, ref_prefix: str) -> JsonObject:
    """Every REST path of ``resources`` with its operations, as kubectl looks them up."""
    parameters = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for name in _QUERY_PARAMETERS
    ]
    paths: JsonObject = {}
    for resource in resources:
        gvk = {"group": resource.group, "version": version, "kind": resource.kind}
        ok: JsonObject = {"description": "OK"}
        if resource.schemas.get(version) is not None:
            ok["content"] = {
                "application/json": {
                    "schema": {"$ref": ref_prefix + schema_name(resource, version)}
                }
            }
        base = "/" + gv_path(resource.group, version)
        if resource.namespaced:
            base += "/namespaces/{namespace}"
        base += f"/{resource.plural}"

        def operation(action: str, gvk: JsonObject = gvk, ok: JsonObject = ok) -> JsonObject:
            return {
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters,
                "responses": {"200": ok},
            }

        paths[base] = {
            "get": operation("list"),
            "post": operation("post"),
            "delete": operation("deletecollection"),
        }
        paths[base + "/{name}"] = {
            "get": operation("get"),
            "put": operation("put"),
            "patch": operation("patch"),
            "delete": operation("delete"),
        }
        if resource.has_status(version):
            paths[base + "/{name}/status"] = {
                "get": operation("get"),
                "put": operation("put"),
                "patch": operation("patch"),
            }
    return paths


def v3_group_version(
    registry: ResourceRegistry, group: str, version: str, server_version: str
) -> JsonObject | None:
    """The OpenAPI v3 document of one group-version: its paths and its kinds' schemas."""
    resources = registry.in_group_version(group, version)
    if not resources:
        return None
    ref_prefix = "#/components/schemas/"
    schemas: JsonObject = {}
    for resource in resources:
        schema = resource_schema(resource, version, ref_prefix + OBJECT_META)
        if schema is not None:
            schemas[schema_name(resource, version)] = schema
    if schemas:
        schemas[OBJECT_META] = copy.deepcopy(_OBJECT_META_SCHEMA)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": _paths(resources, version, ref_prefix),
        "components": {"schemas": schemas},
    }


def _to_v2(schema: Any) -> Any:
    """A v3 structural schema in Swagger 2.0's words: ``nullable`` is ``x-nullable``."""
    if isinstance(schema, list):
        return [_to_v2(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: JsonObject = {}
    for key, value in schema.items():
        if key == "nullable":
            converted["x-nullable"] = value
        elif key in ("properties", "patternProperties", "definitions"):
            converted[key] = {name: _to_v2(child) for name, child in value.items()}
        else:
            converted[key] = _to_v2(value)
    return converted


def v2_document(registry: ResourceRegistry, server_version: str) -> JsonObject:
    """``/openapi/v2``: every served group-version's paths and schemas in one Swagger 2.0
    document."""
    ref_prefix = "#/definitions/"
    paths: JsonObject = {}
    definitions: JsonObject = {OBJECT_META: _to_v2(_OBJECT_META_SCHEMA)}
    for group, versions in registry.groups().items():
        for version in versions:
            resources = registry.in_group_version(group, version)
            for path, operations in _paths(resources, version, ref_prefix).items():
                paths[path] = {
                    method: _v2_operation(operation) for method, operation in operations.items()
                }
            for resource in resources:
                schema = resource_schema(resource, version, ref_prefix + OBJECT_META)
                if schema is not None:
                    definitions[schema_name(resource, version)] = _to_v2(schema)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "definitions": definitions,
    }


def _v2_operation(operation: JsonObject) -> JsonObject:
    """A v3 operation in Swagger 2.0's shape (parameters typed inline, responses' schema)."""
    converted = {k: v for k, v in operation.items() if k not in ("parameters", "responses")}
    converted["parameters"] = [
        {"name": p["name"], "in": p["in"], "type": "string", "uniqueItems": True}
        for p in operation["parameters"]
    ]
    responses: JsonObject = {}
    for code, response in operation["responses"].items():
        entry: JsonObject = {"description": response["description"]}
        content = response.get("content", {}).get("application/json")
        if content is not None:
            entry["schema"] = content["schema"]
        responses[code] = entry
    converted["responses"] = responses
    return converted


def accepts_json(accept: str | None) -> bool:
    """Whether an ``Accept`` header takes JSON (client-go asks for v2 in protobuf only)."""
    if not accept:
        return True
    for clause in accept.split(","):
        media = clause.split(";")[0].strip().lower()
        if media in ("application/json", "application/*", "*/*"):
            return True
    return False
