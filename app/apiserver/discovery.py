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
        "groups": [_group_entry(g, versions) for g, versions in groups.items() if g],
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
