"""Discovery documents (``/api``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``, ``/version``).

Built from the live registry, so a CRD created through the API shows up at once (the real
server takes a moment; clients that re-discover on a miss behave the same either way).
We serve the legacy (unaggregated) format; kubectl falls back to it when the aggregated
``apidiscovery.k8s.io/v2`` form is not offered.
"""

from __future__ import annotations

from typing import Any

from app.apiserver.resources import ALL_VERBS, ResourceRegistry, ResourceType

JsonObject = dict[str, Any]

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-longshoreman",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> JsonObject:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_entry(group: str, versions: list[str]) -> JsonObject:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: ResourceRegistry) -> JsonObject:
    groups = registry.groups()
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(g, groups[g]) for g in sorted(groups) if g],
    }


def api_group(registry: ResourceRegistry, group: str) -> JsonObject | None:
    versions = registry.groups().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _resource_entries(resource: ResourceType, version: str) -> list[JsonObject]:
    entry: JsonObject = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(ALL_VERBS),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    entries = [entry]
    if resource.has_status(version):
        entries.append(
            {
                "name": f"{resource.plural}/status",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    return entries


def api_resource_list(registry: ResourceRegistry, group: str, version: str) -> JsonObject | None:
    resources = registry.in_group_version(group, version)
    if not resources:
        return None
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [e for r in resources for e in _resource_entries(r, version)],
    }


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def openapi_v3_index(registry: ResourceRegistry) -> JsonObject:
    """``/openapi/v3``: where each group-version's document lives."""
    paths: JsonObject = {}
    for group, versions in registry.groups().items():
        for version in versions:
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}"}
    return {"paths": paths}


_QUERY_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation", "pretty")


def openapi_v3_group_version(
    registry: ResourceRegistry, group: str, version: str
) -> JsonObject | None:
    """A skeletal OpenAPI v3 document for one group-version.

    It lists paths and operations with ``x-kubernetes-group-version-kind`` and the write query
    parameters, which is what kubectl reads to decide that the server validates fields itself
    (so ``kubectl create/apply`` work); it carries no schemas, so ``kubectl explain`` does not.
    """
    resources = registry.in_group_version(group, version)
    if not resources:
        return None
    parameters = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for name in _QUERY_PARAMETERS
    ]
    ok = {"200": {"description": "OK"}}
    paths: JsonObject = {}
    for resource in resources:
        gvk = {"group": group, "version": version, "kind": resource.kind}
        base = "/" + _gv_path(group, version)
        if resource.namespaced:
            base += "/namespaces/{namespace}"
        base += f"/{resource.plural}"

        def operation(action: str, gvk: JsonObject = gvk) -> JsonObject:
            return {
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters,
                "responses": ok,
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
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
