"""The API server emulator, exercised over HTTP with the real ``kubernetes`` clients.

Every test talks to a fresh emulator through ``kubernetes.aio`` (and, where it matters, the
sync client, kubectl and raw aiohttp), so what passes here is what our controllers will see.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
from kubernetes.aio import client, config, dynamic, watch
from kubernetes.aio.client.exceptions import ApiException

from app.apiserver import FaultInjector
from app.apiserver.patching import json_patch, merge_patch, strategic_merge_patch
from app.apiserver.selectors import (
    SelectorError,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from tests.support import objects
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.kubectl import needs_kubectl, run_kubectl
from tests.support.waiting import eventually

ARGO = ("argoproj.io", "v1alpha1")
TEST_GROUP = "test.longshoreman.dev"
NS = "team-a"

# A CRD of our own with a status subresource and a structural schema, to cover what the
# preserve-unknown-fields third-party CRDs cannot: pruning, defaults, validation, /status.
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{TEST_GROUP}"},
    "spec": {
        "group": TEST_GROUP,
        "names": {
            "kind": "Widget",
            "listKind": "WidgetList",
            "plural": "widgets",
            "singular": "widget",
            "shortNames": ["wd"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "selectableFields": [{"jsonPath": ".spec.color"}],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "required": ["color"],
                                "properties": {
                                    "color": {"type": "string", "enum": ["red", "blue", "green"]},
                                    "size": {"type": "integer", "default": 1, "minimum": 0},
                                    "tags": {"type": "array", "items": {"type": "string"}},
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, color: str = "red", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{TEST_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": color, **spec},
    }


def application(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"project": "default", "destination": {"namespace": NS}},
    }


@pytest.fixture
async def kube() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(
        crds=[WIDGET_CRD], namespaces=[NS], bookmark_interval=0.2
    ) as running:
        yield running


@pytest.fixture
def crs(kube: RunningApiServer) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube.api_client())


@pytest.fixture
def core(kube: RunningApiServer) -> client.CoreV1Api:
    return client.CoreV1Api(kube.api_client())


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


async def watch_events(
    func: Callable[..., Any], *args: Any, count: int | None = None, **kwargs: Any
) -> list[dict[str, Any]]:
    """Stream events until ``count`` arrived or the server-side timeout ends the watch."""
    events: list[dict[str, Any]] = []
    async with watch.Watch() as stream:
        async for event in stream.stream(func, *args, **kwargs):
            events.append(event)
            if count is not None and len(events) >= count:
                break
    return events


# ------------------------------------------------------------------------ discovery


async def test_discovery_lists_builtins_and_crds(kube: RunningApiServer) -> None:
    api = kube.api_client()
    version = await client.VersionApi(api).get_code()
    assert version.major == "1"
    groups = {g.name: g for g in (await client.ApisApi(api).get_api_versions()).groups}
    assert {"argoproj.io", TEST_GROUP, "coordination.k8s.io", "apiextensions.k8s.io"} <= set(groups)
    assert groups["argoproj.io"].preferred_version.group_version == "argoproj.io/v1alpha1"
    assert (await client.CoreApi(api).get_api_versions()).versions == ["v1"]

    core_list = await client.CoreV1Api(api).get_api_resources()
    core_resources = {r.name: r for r in core_list.resources}
    assert core_resources["configmaps"].namespaced
    assert not core_resources["namespaces"].namespaced
    assert {"events", "secrets", "namespaces/status"} <= set(core_resources)

    argo = await client.CustomObjectsApi(api).get_api_resources(*ARGO)
    argo_names = {r.name: r for r in argo.resources}
    assert argo_names["applications"].short_names == ["app", "apps"]
    assert not argo_names["clusteranalysistemplates"].namespaced
    # Argo CD and Argo Rollouts declare no status subresource.
    assert "applications/status" not in argo_names
    assert "analysisruns/status" not in argo_names
    widgets = await client.CustomObjectsApi(api).get_api_resources(TEST_GROUP, "v1")
    assert {r.name for r in widgets.resources} == {"widgets", "widgets/status"}

    # The async dynamic client discovers through the same documents.
    dyn = await dynamic.DynamicClient(api)
    leases = await dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
    assert leases.namespaced


async def test_crd_created_through_the_api_is_served(kube: RunningApiServer) -> None:
    api = kube.api_client()
    ext = client.ApiextensionsV1Api(api)
    gadget = json.loads(
        json.dumps(WIDGET_CRD)
        .replace("widget", "gadget")
        .replace("Widget", "Gadget")
        .replace('"wd"', '"gd"')
    )
    created = await ext.create_custom_resource_definition(gadget)
    assert created.metadata.generation == 1
    assert {c.type for c in created.status.conditions} == {"NamesAccepted", "Established"}
    names = {c.metadata.name for c in (await ext.list_custom_resource_definition()).items}
    assert {f"gadgets.{TEST_GROUP}", "applications.argoproj.io"} <= names

    crs = client.CustomObjectsApi(api)
    body = widget("g1") | {"kind": "Gadget"}
    await crs.create_namespaced_custom_object(TEST_GROUP, "v1", NS, "gadgets", body)
    assert (await crs.get_namespaced_custom_object(TEST_GROUP, "v1", NS, "gadgets", "g1"))[
        "kind"
    ] == "Gadget"

    await ext.delete_custom_resource_definition(f"gadgets.{TEST_GROUP}")
    with pytest.raises(ApiException) as gone:
        await crs.list_namespaced_custom_object(TEST_GROUP, "v1", NS, "gadgets")
    assert gone.value.status == 404


# ------------------------------------------------------------- create / get / list


async def test_create_get_list_and_errors(
    kube: RunningApiServer, crs: client.CustomObjectsApi
) -> None:
    created = await crs.create_namespaced_custom_object(
        *ARGO, NS, "applications", application("guestbook")
    )
    meta = created["metadata"]
    assert meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["namespace"] == NS and int(meta["resourceVersion"]) > 0

    with pytest.raises(ApiException) as duplicate:
        await crs.create_namespaced_custom_object(
            *ARGO, NS, "applications", application("guestbook")
        )
    assert duplicate.value.status == 409
    assert status_of(duplicate.value) | {"details": None} == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'applications.argoproj.io "guestbook" already exists',
        "reason": "AlreadyExists",
        "code": 409,
        "details": None,
    }

    generated = await crs.create_namespaced_custom_object(
        *ARGO,
        "default",
        "applications",
        {**application(""), "metadata": {"generateName": "guestbook-"}},
    )
    assert generated["metadata"]["name"].startswith("guestbook-")
    assert len(generated["metadata"]["name"]) == len("guestbook-") + 5

    everywhere = await crs.list_cluster_custom_object(*ARGO, "applications")
    assert everywhere["kind"] == "ApplicationList"
    assert int(everywhere["metadata"]["resourceVersion"]) >= int(
        generated["metadata"]["resourceVersion"]
    )
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]] == [
        ("default", generated["metadata"]["name"]),
        (NS, "guestbook"),
    ]
    only_team = await crs.list_namespaced_custom_object(*ARGO, NS, "applications")
    assert [i["metadata"]["name"] for i in only_team["items"]] == ["guestbook"]

    with pytest.raises(ApiException) as missing:
        await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "nope")
    assert missing.value.status == 404
    assert status_of(missing.value)["reason"] == "NotFound"
    assert status_of(missing.value)["details"] == {
        "name": "nope",
        "group": "argoproj.io",
        "kind": "applications",
    }

    with pytest.raises(ApiException) as no_namespace:
        await crs.create_namespaced_custom_object(
            *ARGO, "nowhere", "applications", application("x")
        )
    assert no_namespace.value.status == 404
    assert status_of(no_namespace.value)["message"] == 'namespaces "nowhere" not found'

    with pytest.raises(ApiException) as no_kind:
        await crs.create_namespaced_custom_object(
            *ARGO, NS, "applications", {"metadata": {"name": "x"}, "spec": {}}
        )
    assert no_kind.value.status == 400


async def test_cluster_scoped_resources(crs: client.CustomObjectsApi) -> None:
    template = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ClusterAnalysisTemplate",
        "metadata": {"name": "smoke"},
        "spec": {"metrics": []},
    }
    created = await crs.create_cluster_custom_object(*ARGO, "clusteranalysistemplates", template)
    assert "namespace" not in created["metadata"]
    listed = await crs.list_cluster_custom_object(*ARGO, "clusteranalysistemplates")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["smoke"]
    await crs.delete_cluster_custom_object(*ARGO, "clusteranalysistemplates", "smoke")
    with pytest.raises(ApiException) as gone:
        await crs.get_cluster_custom_object(*ARGO, "clusteranalysistemplates", "smoke")
    assert gone.value.status == 404


async def test_pagination_with_limit_and_continue(crs: client.CustomObjectsApi) -> None:
    for index in range(5):
        await crs.create_namespaced_custom_object(
            *ARGO, NS, "applications", application(f"app-{index}")
        )
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = await crs.list_namespaced_custom_object(
            *ARGO, NS, "applications", limit=2, _continue=token
        )
        names += [i["metadata"]["name"] for i in page["items"]]
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == [f"app-{i}" for i in range(5)] and pages == 3


# --------------------------------------------------------------- updates & patches


async def test_replace_conflicts_on_stale_resource_version(
    crs: client.CustomObjectsApi,
) -> None:
    created = await crs.create_namespaced_custom_object(
        *ARGO, NS, "applications", application("guestbook")
    )
    first = {**created, "spec": {**created["spec"], "project": "one"}}
    updated = await crs.replace_namespaced_custom_object(
        *ARGO, NS, "applications", "guestbook", first
    )
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert updated["metadata"]["generation"] == 2

    stale = {**created, "spec": {**created["spec"], "project": "two"}}
    with pytest.raises(ApiException) as conflict:
        await crs.replace_namespaced_custom_object(*ARGO, NS, "applications", "guestbook", stale)
    assert conflict.value.status == 409
    body = status_of(conflict.value)
    assert body["kind"] == "Status" and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on applications.argoproj.io "guestbook": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    assert body["details"] == {"name": "guestbook", "group": "argoproj.io", "kind": "applications"}

    # Custom resources refuse unconditional updates (no resourceVersion at all).
    unconditional = {**created, "metadata": {"name": "guestbook"}}
    with pytest.raises(ApiException) as invalid:
        await crs.replace_namespaced_custom_object(
            *ARGO, NS, "applications", "guestbook", unconditional
        )
    assert invalid.value.status == 422
    assert status_of(invalid.value)["details"]["causes"][0]["field"] == ("metadata.resourceVersion")


async def test_patch_dialects(
    kube: RunningApiServer, crs: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    created = await crs.create_namespaced_custom_object(
        *ARGO, NS, "applications", application("guestbook", {"a": "1"})
    )
    rv0 = created["metadata"]["resourceVersion"]

    merged = await crs.patch_namespaced_custom_object(
        *ARGO,
        NS,
        "applications",
        "guestbook",
        {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"revision": "abc"}},
    )
    assert merged["metadata"]["labels"] == {"b": "2"}
    assert merged["spec"]["revision"] == "abc"

    patched = await crs.patch_namespaced_custom_object(
        *ARGO,
        NS,
        "applications",
        "guestbook",
        [
            {"op": "test", "path": "/spec/revision", "value": "abc"},
            {"op": "replace", "path": "/spec/revision", "value": "def"},
            {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
        ],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["revision"] == "def"
    assert patched["metadata"]["annotations"] == {"x": "y"}

    with pytest.raises(ApiException) as failed_test:
        await crs.patch_namespaced_custom_object(
            *ARGO,
            NS,
            "applications",
            "guestbook",
            [{"op": "test", "path": "/spec/revision", "value": "abc"}],
            _content_type="application/json-patch+json",
        )
    assert failed_test.value.status == 422

    # A patch carrying a stale resourceVersion is an optimistic-concurrency write.
    with pytest.raises(ApiException) as stale:
        await crs.patch_namespaced_custom_object(
            *ARGO,
            NS,
            "applications",
            "guestbook",
            {"metadata": {"resourceVersion": rv0}, "spec": {"revision": "zzz"}},
        )
    assert stale.value.status == 409 and status_of(stale.value)["reason"] == "Conflict"

    # Real API servers refuse strategic merge for custom resources with 415.
    with pytest.raises(ApiException) as strategic:
        await crs.patch_namespaced_custom_object(
            *ARGO,
            NS,
            "applications",
            "guestbook",
            {"spec": {"revision": "s"}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert strategic.value.status == 415

    # A no-op patch does not write: same resourceVersion.
    current = await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "guestbook")
    same = await crs.patch_namespaced_custom_object(
        *ARGO, NS, "applications", "guestbook", {"spec": {"revision": "def"}}
    )
    assert same["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]

    # Built-ins get strategic merge: finalizers merge as a set instead of being replaced.
    await core.create_namespaced_config_map(
        NS,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="cm", finalizers=["a.example/x"]), data={"k": "v"}
        ),
    )
    config_map = await core.patch_namespaced_config_map(
        "cm", NS, {"metadata": {"finalizers": ["b.example/y"]}, "data": {"k2": "v2"}}
    )
    assert config_map.metadata.finalizers == ["a.example/x", "b.example/y"]
    assert config_map.data == {"k": "v", "k2": "v2"}


async def test_status_subresource_isolation_and_generation(
    crs: client.CustomObjectsApi,
) -> None:
    created = await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", {**widget("w"), "status": {"phase": "Ignored"}}
    )
    assert "status" not in created  # create drops status when /status exists
    assert created["spec"]["size"] == 1  # schema default applied

    with_status = await crs.patch_namespaced_custom_object_status(
        TEST_GROUP,
        "v1",
        NS,
        "widgets",
        "w",
        {"status": {"phase": "Ready"}, "spec": {"color": "blue"}},
    )
    assert with_status["status"] == {"phase": "Ready"}
    assert with_status["spec"]["color"] == "red"  # /status ignores everything but status
    assert with_status["metadata"]["generation"] == 1

    replaced = await crs.replace_namespaced_custom_object(
        TEST_GROUP,
        "v1",
        NS,
        "widgets",
        "w",
        {**with_status, "status": {"phase": "Hacked"}, "spec": {"color": "blue", "size": 2}},
    )
    assert replaced["status"] == {"phase": "Ready"}  # main resource ignores status
    assert replaced["metadata"]["generation"] == 2  # spec change bumps generation

    relabelled = await crs.patch_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", "w", {"metadata": {"labels": {"x": "y"}}}
    )
    assert relabelled["metadata"]["generation"] == 2  # metadata is not spec

    status_put = await crs.replace_namespaced_custom_object_status(
        TEST_GROUP, "v1", NS, "widgets", "w", {**relabelled, "status": {"phase": "Done"}}
    )
    assert status_put["status"] == {"phase": "Done"}
    assert status_put["metadata"]["generation"] == 2

    with pytest.raises(ApiException) as stale_status:
        await crs.replace_namespaced_custom_object_status(
            TEST_GROUP, "v1", NS, "widgets", "w", {**relabelled, "status": {"phase": "Old"}}
        )
    assert stale_status.value.status == 409

    # Application has no status subresource: status is written with the object, bumps
    # generation (customresource strategy), and /status does not exist.
    await crs.create_namespaced_custom_object(*ARGO, NS, "applications", application("app"))
    synced = await crs.patch_namespaced_custom_object(
        *ARGO, NS, "applications", "app", {"status": {"sync": {"status": "Synced"}}}
    )
    assert synced["status"] == {"sync": {"status": "Synced"}}
    assert synced["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as no_status:
        await crs.get_namespaced_custom_object_status(*ARGO, NS, "applications", "app")
    assert no_status.value.status == 404


async def test_schema_pruning_defaults_and_validation(kube: RunningApiServer) -> None:
    url = f"{kube.url}/apis/{TEST_GROUP}/v1/namespaces/{NS}/widgets"
    async with aiohttp.ClientSession() as http:
        body = widget("w", unknown="dropped", extra={"kept": True})
        async with http.post(url, json=body) as response:
            assert response.status == 201
            created = await response.json()
            warnings = response.headers.getall("Warning")
            assert warnings == ['299 - "unknown field \\"spec.unknown\\""']
        assert created["spec"] == {"color": "red", "size": 1, "extra": {"kept": True}}

        async with http.post(
            url + "?fieldValidation=Strict", json=widget("strict", unknown=1)
        ) as response:
            assert response.status == 400
            assert 'unknown field "spec.unknown"' in (await response.json())["message"]

        async with http.post(url, json=widget("bad", color="pink", size="big")) as response:
            assert response.status == 422
            status = await response.json()
        assert status["reason"] == "Invalid"
        assert {c["field"] for c in status["details"]["causes"]} == {"spec.color", "spec.size"}


async def test_updates_ratchet_validation_of_unchanged_fields(kube: RunningApiServer) -> None:
    """As kube-apiserver's CRD validation ratcheting: after the schema tightens, an object
    whose old values no longer pass can still be updated elsewhere; changing the invalid
    value itself must pass the new schema."""
    api = kube.api_client()
    ext = client.ApiextensionsV1Api(api)
    crs = client.CustomObjectsApi(api)
    await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", widget("w", tags=["x" * 10])
    )
    crd = await ext.read_custom_resource_definition(f"widgets.{TEST_GROUP}")
    stricter = api.sanitize_for_serialization(crd)
    spec_schema = stricter["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec_schema["spec"]["properties"]["tags"]["maxItems"] = 0
    await ext.replace_custom_resource_definition(f"widgets.{TEST_GROUP}", stricter)

    patched = await crs.patch_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", "w", {"spec": {"size": 3}}
    )
    assert patched["spec"] == {"color": "red", "size": 3, "tags": ["x" * 10]}
    with pytest.raises(ApiException) as invalid:
        await crs.patch_namespaced_custom_object(
            TEST_GROUP, "v1", NS, "widgets", "w", {"spec": {"tags": ["y"]}}
        )
    assert invalid.value.status == 422
    assert status_of(invalid.value)["details"]["causes"][0]["field"] == "spec.tags"


async def test_a_field_the_schema_no_longer_declares_is_pruned_on_the_next_write(
    kube: RunningApiServer,
) -> None:
    api = kube.api_client()
    ext = client.ApiextensionsV1Api(api)
    crs = client.CustomObjectsApi(api)
    await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", widget("w", size=5, tags=["a"])
    )
    crd = api.sanitize_for_serialization(
        await ext.read_custom_resource_definition(f"widgets.{TEST_GROUP}")
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["tags"]
    await ext.replace_custom_resource_definition(f"widgets.{TEST_GROUP}", crd)
    patched = await crs.patch_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", "w", {"spec": {"size": 6}}
    )
    assert patched["spec"] == {"color": "red", "size": 6}


# One field per validation rule, for the messages below.
RULES_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"rules.{TEST_GROUP}"},
    "spec": {
        "group": TEST_GROUP,
        "names": {"kind": "Rule", "plural": "rules", "singular": "rule"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {
                                        "type": "string",
                                        "pattern": "^[a-z]+$",
                                        "maxLength": 5,
                                        "minLength": 2,
                                    },
                                    "count": {"type": "integer", "minimum": 1, "maximum": 3},
                                    "ratio": {
                                        "type": "number",
                                        "maximum": 1,
                                        "exclusiveMaximum": True,
                                    },
                                    "mode": {"type": "string", "enum": ["a", "b"]},
                                    "level": {"type": "integer", "enum": [1, 2]},
                                    "flag": {"type": "boolean"},
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "obj": {"type": "object"},
                                    "tags": {
                                        "type": "array",
                                        "maxItems": 2,
                                        "items": {"type": "string", "maxLength": 3},
                                    },
                                    "items": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["k"],
                                            "properties": {
                                                "k": {"type": "string", "enum": ["x", "y"]},
                                                "deep": {
                                                    "type": "array",
                                                    "items": {"type": "integer"},
                                                },
                                            },
                                        },
                                    },
                                    "map": {
                                        "type": "object",
                                        "additionalProperties": {"type": "integer"},
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def _invalid(field: str, value: str, detail: str) -> tuple[str, str, str]:
    return ("FieldValueInvalid", field, f"Invalid value: {value}: {field} in body {detail}")


def _type(field: str, expected: str, actual: str) -> tuple[str, str, str]:
    return _invalid(field, f'"{actual}"', f'must be of type {expected}: "{actual}"')


def _enum(field: str, value: str, allowed: str) -> tuple[str, str, str]:
    message = f"Unsupported value: {value}: supported values: {allowed}"
    return ("FieldValueNotSupported", field, message)


# Recorded from kube-apiserver v1.20.2: go-openapi's messages, a list item named by the list's
# path, one cause per message text (the bad value aside), a string's first failing check only.
@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        (
            {"name": "ABCDEFG"},
            [_invalid("spec.name", '"ABCDEFG"', "should be at most 5 chars long")],
        ),
        ({"name": "a"}, [_invalid("spec.name", '"a"', "should be at least 2 chars long")]),
        ({"name": "AB"}, [_invalid("spec.name", '"AB"', "should match '^[a-z]+$'")]),
        ({}, [("FieldValueRequired", "spec.name", "Required value")]),
        (
            {"name": "ok", "count": 0, "ratio": 1},
            [
                _invalid("spec.count", "0", "should be greater than or equal to 1"),
                _invalid("spec.ratio", "1", "should be less than 1"),
            ],
        ),
        (
            {"name": "ok", "mode": "c", "level": 5},
            [
                _enum("spec.level", "5", '"1", "2"'),
                _enum("spec.mode", '"c"', '"a", "b"'),
            ],
        ),
        ({"name": "ok", "port": True}, [_type("spec.port", "integer,string", "boolean")]),
        (
            {"name": 5, "flag": "yes", "obj": "s", "tags": "x", "map": {"a": "b"}, "count": 1.5},
            [
                _type("spec.count", "integer", "number"),
                _type("spec.flag", "boolean", "string"),
                _type("spec.map.a", "integer", "string"),
                _type("spec.name", "string", "integer"),
                _type("spec.obj", "object", "string"),
                _type("spec.tags", "array", "string"),
            ],
        ),
        (
            {
                "name": "ok",
                "items": [{"k": "z"}, {"k": "w"}, {}, {"k": "x", "deep": [1, "a", None]}],
            },
            [
                _type("spec.items.deep", "integer", "null"),
                _type("spec.items.deep", "integer", "string"),
                _enum("spec.items.k", '"z"', '"x", "y"'),
                ("FieldValueRequired", "spec.items.k", "Required value"),
            ],
        ),
        (
            {"name": "ok", "tags": ["abcd", "efgh", 1]},
            [
                _invalid("spec.tags", '"abcd"', "should be at most 3 chars long"),
                _type("spec.tags", "string", "integer"),
                _invalid("spec.tags", "3", "should have at most 2 items"),
            ],
        ),
    ],
)
async def test_validation_messages_read_like_kube_apiserver_1_20(
    kube: RunningApiServer, spec: dict[str, Any], causes: list[tuple[str, str, str]]
) -> None:
    api = kube.api_client()
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(RULES_CRD)
    body = {"apiVersion": f"{TEST_GROUP}/v1", "kind": "Rule", "metadata": {"name": "r"}}
    with pytest.raises(ApiException) as refused:
        await client.CustomObjectsApi(api).create_namespaced_custom_object(
            TEST_GROUP, "v1", NS, "rules", {**body, "spec": spec}
        )
    status = status_of(refused.value)
    assert (refused.value.status, status["reason"]) == (422, "Invalid")
    found = [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]
    assert sorted(found) == causes
    # (The real server lists several causes in no fixed order.)
    rendered = [f"{field}: {message}" for _, field, message in found]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    assert status["message"] == f'Rule.{TEST_GROUP} "r" is invalid: {summary}'


# Fields for each null rule of kube-apiserver 1.20+ (see app/apiserver/schema.py).
NULLABLES_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"nullables.{TEST_GROUP}"},
    "spec": {
        "group": TEST_GROUP,
        "names": {"kind": "Nullable", "plural": "nullables", "singular": "nullable"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "text": {"type": "string"},
                                    "size": {"type": "integer", "default": 1},
                                    "note": {"type": "string", "nullable": True},
                                    "kept": {"type": "string", "nullable": True, "default": "d"},
                                    "labels": {
                                        "type": "object",
                                        "additionalProperties": {"type": "string"},
                                    },
                                    "limits": {
                                        "type": "object",
                                        "additionalProperties": {"type": "integer", "default": 9},
                                    },
                                    "tags": {"type": "array", "items": {"type": "string"}},
                                    "sizes": {
                                        "type": "array",
                                        "items": {"type": "integer", "default": 0},
                                    },
                                    "free": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


async def test_nulls_for_non_nullable_fields_are_dropped_or_defaulted_like_kube_apiserver(
    kube: RunningApiServer,
) -> None:
    """Since 1.20 a null for a field that is not nullable means "not set" (then defaulted)."""
    api = kube.api_client()
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(NULLABLES_CRD)
    crs = client.CustomObjectsApi(api)
    spec = {
        "text": None,
        "size": None,
        "note": None,
        "kept": None,
        "labels": {"a": None, "b": "x"},
        "limits": {"cpu": None},
        "sizes": [None, 2],
        "free": {"anything": None},
    }
    body = {"apiVersion": f"{TEST_GROUP}/v1", "kind": "Nullable", "metadata": {"name": "n"}}
    created = await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "nullables", {**body, "spec": spec}
    )
    assert created["spec"] == {
        "size": 1,
        "note": None,
        "kept": None,
        "labels": {"b": "x"},
        "limits": {"cpu": 9},
        "sizes": [0, 2],
        "free": {"anything": None},
    }
    # Written by JSON patch (a merge patch's null would delete the key): dropped just the same.
    patched = await crs.patch_namespaced_custom_object(
        TEST_GROUP,
        "v1",
        NS,
        "nullables",
        "n",
        [{"op": "add", "path": "/spec/text", "value": None}],
        _content_type="application/json-patch+json",
    )
    assert "text" not in patched["spec"]


async def test_a_null_list_item_is_invalid_on_every_write(kube: RunningApiServer) -> None:
    api = kube.api_client()
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(NULLABLES_CRD)
    crs = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{TEST_GROUP}/v1", "kind": "Nullable", "metadata": {"name": "n"}}
    # (kube-apiserver 1.20 names a list item by the list's path, without an index.)
    message = (
        f'Nullable.{TEST_GROUP} "n" is invalid: spec.tags: Invalid value: "null": '
        'spec.tags in body must be of type string: "null"'
    )

    async def refused(write: Any) -> dict[str, Any]:
        with pytest.raises(ApiException) as caught:
            await write
        assert caught.value.status == 422
        return status_of(caught.value)

    created_with_null = await refused(
        crs.create_namespaced_custom_object(
            TEST_GROUP, "v1", NS, "nullables", {**body, "spec": {"tags": [None]}}
        )
    )
    assert created_with_null["reason"] == "Invalid"
    assert created_with_null["message"] == message
    assert created_with_null["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "null": spec.tags in body must be of type string: "null"',
            "field": "spec.tags",
        }
    ]

    stored = await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "nullables", {**body, "spec": {"tags": ["a"]}}
    )
    # Ratcheting lets unchanged invalid values through, never a newly written null: not in an
    # update, nor in a JSON patch.
    replaced = {**stored, "spec": {"tags": [None]}}
    assert (
        await refused(
            crs.replace_namespaced_custom_object(TEST_GROUP, "v1", NS, "nullables", "n", replaced)
        )
    )["message"] == message
    json_patch_ = [{"op": "add", "path": "/spec/tags/-", "value": None}]
    assert (
        await refused(
            crs.patch_namespaced_custom_object(
                TEST_GROUP,
                "v1",
                NS,
                "nullables",
                "n",
                json_patch_,
                _content_type="application/json-patch+json",
            )
        )
    )["message"] == message
    # A merge patch never gets that far: it drops the nulls of the lists it writes
    # (evanphx/json-patch, as kube-apiserver applies it).
    merged = await crs.patch_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "nullables", "n", {"spec": {"tags": ["b", None]}}
    )
    assert merged["spec"]["tags"] == ["b"]


async def test_a_null_in_a_required_field_is_a_missing_required_value(
    kube: RunningApiServer,
) -> None:
    """A Stage condition with ``message: null``, written through /status in each way: the null
    is dropped and the condition lacks its required message (metav1.Condition's rule)."""
    api = kube.api_client()
    crs = client.CustomObjectsApi(api)
    group, version = "longshoreman.dev", "v1alpha1"
    stage = objects.served(objects.stage("test", namespace=NS, steps=[{"uses": "compose-output"}]))
    created = await crs.create_namespaced_custom_object(group, version, NS, "stages", stage)
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "Healthy",
        "lastTransitionTime": "2030-01-01T00:00:00Z",
        "message": None,
    }
    status = {"conditions": [condition]}
    writes: list[Callable[[], Any]] = [
        lambda: crs.replace_namespaced_custom_object_status(
            group, version, NS, "stages", "test", {**created, "status": status}
        ),
        lambda: crs.patch_namespaced_custom_object_status(
            group, version, NS, "stages", "test", {"status": status}
        ),
        lambda: crs.patch_namespaced_custom_object_status(
            group,
            version,
            NS,
            "stages",
            "test",
            [{"op": "add", "path": "/status", "value": status}],
            _content_type="application/json-patch+json",
        ),
    ]
    for write in writes:
        with pytest.raises(ApiException) as refused:
            await write()
        assert refused.value.status == 422
        assert status_of(refused.value)["message"] == (
            'Stage.longshoreman.dev "test" is invalid: status.conditions.message: Required value'
        )


async def test_an_empty_string_is_a_string(kube: RunningApiServer) -> None:
    """``message: ""`` satisfies a required string, as on a kube-apiserver release build.

    (A 1.20 built with Go >= 1.16 refuses it as null: kubernetes#99804; see schema.py.)"""
    crs = client.CustomObjectsApi(kube.api_client())
    group, version = "longshoreman.dev", "v1alpha1"
    stage = objects.served(objects.stage("test", namespace=NS, steps=[{"uses": "compose-output"}]))
    await crs.create_namespaced_custom_object(group, version, NS, "stages", stage)
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "lastTransitionTime": "2030-01-01T00:00:00Z",
        "message": "",
    }
    written = await crs.patch_namespaced_custom_object_status(
        group, version, NS, "stages", "test", {"status": {"conditions": [condition]}}
    )
    assert written["status"]["conditions"] == [condition]


async def test_each_watch_event_shows_its_own_version(
    kube: RunningApiServer, crs: client.CustomObjectsApi
) -> None:
    """Writes never change an object already committed: events read from the watch log after
    several later writes still show what each write made."""
    created = await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", widget("w", extra={"history": []})
    )
    start = created["metadata"]["resourceVersion"]
    for n in range(1, 4):
        await crs.patch_namespaced_custom_object(
            TEST_GROUP, "v1", NS, "widgets", "w", {"spec": {"size": n, "extra": {"n": n}}}
        )
        await crs.patch_namespaced_custom_object_status(
            TEST_GROUP, "v1", NS, "widgets", "w", {"status": {"seen": n}}
        )
    events = await watch_events(
        crs.list_namespaced_custom_object,
        TEST_GROUP,
        "v1",
        NS,
        "widgets",
        resource_version=start,
        timeout_seconds=1,
    )
    shown = [(e["object"]["spec"], e["object"].get("status")) for e in events]
    assert shown == [
        ({"color": "red", "size": 1, "extra": {"history": [], "n": 1}}, None),
        ({"color": "red", "size": 1, "extra": {"history": [], "n": 1}}, {"seen": 1}),
        ({"color": "red", "size": 2, "extra": {"history": [], "n": 2}}, {"seen": 1}),
        ({"color": "red", "size": 2, "extra": {"history": [], "n": 2}}, {"seen": 2}),
        ({"color": "red", "size": 3, "extra": {"history": [], "n": 3}}, {"seen": 2}),
        ({"color": "red", "size": 3, "extra": {"history": [], "n": 3}}, {"seen": 3}),
    ]


# ------------------------------------------------------------------------ selectors


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=web", {"a", "b"}),
        ("tier==web,env!=prod", {"b"}),
        ("env in (prod,staging)", {"a", "c"}),
        ("env notin (prod)", {"b", "c", "d"}),
        ("!env", {"b", "d"}),
        ("env", {"a", "c"}),
        ("tier=web,!env", {"b"}),
        ("", {"a", "b", "c", "d"}),
    ],
)
async def test_label_selectors(
    crs: client.CustomObjectsApi, selector: str, expected: set[str]
) -> None:
    labels = {
        "a": {"tier": "web", "env": "prod"},
        "b": {"tier": "web"},
        "c": {"tier": "db", "env": "staging"},
        "d": {},
    }
    for name, object_labels in labels.items():
        await crs.create_namespaced_custom_object(
            *ARGO, NS, "applications", application(name, object_labels)
        )
    found = await crs.list_cluster_custom_object(*ARGO, "applications", label_selector=selector)
    assert {i["metadata"]["name"] for i in found["items"]} == expected


async def test_field_selectors(crs: client.CustomObjectsApi) -> None:
    for namespace, name in [(NS, "one"), (NS, "two"), ("default", "one")]:
        await crs.create_namespaced_custom_object(
            *ARGO, namespace, "applications", application(name)
        )
    by_name = await crs.list_cluster_custom_object(
        *ARGO, "applications", field_selector="metadata.name=one"
    )
    assert {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in by_name["items"]} == {
        (NS, "one"),
        ("default", "one"),
    }
    by_both = await crs.list_cluster_custom_object(
        *ARGO, "applications", field_selector=f"metadata.namespace={NS},metadata.name!=one"
    )
    assert [i["metadata"]["name"] for i in by_both["items"]] == ["two"]

    await crs.create_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", widget("blue", color="blue")
    )
    await crs.create_namespaced_custom_object(TEST_GROUP, "v1", NS, "widgets", widget("red"))
    blue = await crs.list_namespaced_custom_object(
        TEST_GROUP, "v1", NS, "widgets", field_selector="spec.color=blue"
    )
    assert [i["metadata"]["name"] for i in blue["items"]] == ["blue"]  # selectableFields

    with pytest.raises(ApiException) as unsupported:
        await crs.list_cluster_custom_object(
            *ARGO, "applications", field_selector="spec.project=default"
        )
    assert unsupported.value.status == 400
    with pytest.raises(ApiException) as malformed:
        await crs.list_cluster_custom_object(*ARGO, "applications", label_selector="a in (")
    assert malformed.value.status == 400


def test_selector_parsing_edge_cases() -> None:
    requirements = parse_label_selector("a.b/c=d, e notin (f, g),!h,i>3")
    assert labels_match(requirements, {"metadata": {"labels": {"a.b/c": "d", "i": "4"}}})
    assert not labels_match(requirements, {"metadata": {"labels": {"a.b/c": "d", "i": "2"}}})
    for bad in ["a=b=c", "=x", "a in ()", "a in (b"]:
        with pytest.raises(SelectorError):
            parse_label_selector(bad)
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.x"):
        parse_field_selector("spec.x=1", frozenset({"metadata.name"}))


def test_patch_functions() -> None:
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert merge_patch(doc, {"a": {"b": None, "c": [3]}, "e": 1}) == {
        "a": {"c": [3]},
        "d": "x",
        "e": 1,
    }
    assert json_patch(
        doc,
        [
            {"op": "add", "path": "/a/c/-", "value": 3},
            {"op": "move", "from": "/d", "path": "/f"},
            {"op": "copy", "from": "/f", "path": "/g"},
            {"op": "remove", "path": "/a/b"},
        ],
    ) == {"a": {"c": [1, 2, 3]}, "f": "x", "g": "x"}
    assert doc == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}  # inputs untouched
    meta = {"metadata": {"finalizers": ["x", "y"], "ownerReferences": [{"uid": "1", "n": 1}]}}
    assert strategic_merge_patch(
        meta,
        {
            "metadata": {
                "$deleteFromPrimitiveList/finalizers": ["x"],
                "finalizers": ["z"],
                "ownerReferences": [{"uid": "1", "n": 2}, {"uid": "2"}],
            }
        },
    ) == {
        "metadata": {
            "finalizers": ["y", "z"],
            "ownerReferences": [{"uid": "1", "n": 2}, {"uid": "2"}],
        }
    }


# ----------------------------------------------------------------------- finalizers


async def test_finalizers_hold_deletion_until_removed(
    kube: RunningApiServer, crs: client.CustomObjectsApi
) -> None:
    body = application("held")
    body["metadata"]["finalizers"] = ["longshoreman.dev/cleanup"]
    created = await crs.create_namespaced_custom_object(*ARGO, NS, "applications", body)
    start = created["metadata"]["resourceVersion"]

    terminating = await crs.delete_namespaced_custom_object(*ARGO, NS, "applications", "held")
    assert terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["generation"] == 2  # markAsDeleting bumps generation
    still = await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "held")
    assert still["metadata"]["deletionTimestamp"] == terminating["metadata"]["deletionTimestamp"]

    with pytest.raises(ApiException) as new_finalizer:
        await crs.patch_namespaced_custom_object(
            *ARGO,
            NS,
            "applications",
            "held",
            {"metadata": {"finalizers": ["longshoreman.dev/cleanup", "late/one"]}},
        )
    assert new_finalizer.value.status == 422

    released = await crs.patch_namespaced_custom_object(
        *ARGO, NS, "applications", "held", {"metadata": {"finalizers": None}}
    )
    assert released["metadata"]["name"] == "held"
    with pytest.raises(ApiException) as gone:
        await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "held")
    assert gone.value.status == 404

    events = await watch_events(
        crs.list_namespaced_custom_object,
        *ARGO,
        NS,
        "applications",
        resource_version=start,
        timeout_seconds=1,
        count=2,
    )
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]

    # Without finalizers, delete answers with a Success Status.
    await crs.create_namespaced_custom_object(*ARGO, NS, "applications", application("free"))
    result = await crs.delete_namespaced_custom_object(*ARGO, NS, "applications", "free")
    assert result["kind"] == "Status" and result["status"] == "Success"
    assert result["details"]["name"] == "free"


async def test_namespace_deletion_removes_its_contents(
    kube: RunningApiServer, core: client.CoreV1Api
) -> None:
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="doomed")))
    namespace = await core.read_namespace("doomed")
    assert namespace.status.phase == "Active"
    assert namespace.metadata.labels == {"kubernetes.io/metadata.name": "doomed"}
    await core.create_namespaced_config_map(
        "doomed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"))
    )
    await core.delete_namespace("doomed")
    with pytest.raises(ApiException) as gone:
        await core.read_namespace("doomed")
    assert gone.value.status == 404
    assert kube.objects("", "configmaps") == []


# ---------------------------------------------------------------------------- watch


async def test_watch_replays_changes_in_order_from_a_resource_version(
    kube: RunningApiServer,
    crs: client.CustomObjectsApi,
) -> None:
    before = await crs.list_namespaced_custom_object(*ARGO, NS, "applications")
    start = before["metadata"]["resourceVersion"]
    await crs.create_namespaced_custom_object(*ARGO, NS, "applications", application("a"))
    await crs.patch_namespaced_custom_object(
        *ARGO, NS, "applications", "a", {"spec": {"revision": "1"}}
    )
    await crs.create_namespaced_custom_object(
        *ARGO, "default", "applications", application("elsewhere")
    )
    await crs.delete_namespaced_custom_object(*ARGO, NS, "applications", "a")

    events = await watch_events(
        crs.list_namespaced_custom_object,
        *ARGO,
        NS,
        "applications",
        resource_version=start,
        timeout_seconds=1,
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(start)

    # Without a resourceVersion the watch starts with synthetic ADDED events for what exists.
    initial = await watch_events(
        crs.list_cluster_custom_object, *ARGO, "applications", timeout_seconds=1, count=1
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in initial] == [
        ("ADDED", "elsewhere")
    ]


async def test_watch_streams_live_events_and_selector_transitions(
    kube: RunningApiServer,
    crs: client.CustomObjectsApi,
) -> None:
    stream = asyncio.create_task(
        watch_events(
            crs.list_namespaced_custom_object,
            *ARGO,
            NS,
            "applications",
            label_selector="stage=prod",
            timeout_seconds=5,
            count=3,
        )
    )
    await kube.server.wait_for_watches(1)
    await crs.create_namespaced_custom_object(
        *ARGO, NS, "applications", application("x", {"stage": "prod"})
    )
    await crs.create_namespaced_custom_object(
        *ARGO, NS, "applications", application("y", {"stage": "dev"})
    )
    await crs.patch_namespaced_custom_object(
        *ARGO, NS, "applications", "y", {"metadata": {"labels": {"stage": "prod"}}}
    )
    await crs.patch_namespaced_custom_object(
        *ARGO, NS, "applications", "x", {"metadata": {"labels": {"stage": "dev"}}}
    )
    events = await asyncio.wait_for(stream, 5)
    # Entering the selection reads as ADDED, leaving it as DELETED (of the previous state).
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "x"),
        ("ADDED", "y"),
        ("DELETED", "x"),
    ]
    assert events[2]["object"]["metadata"]["labels"] == {"stage": "prod"}


async def test_watch_sends_bookmarks(kube: RunningApiServer, crs: client.CustomObjectsApi) -> None:
    await crs.create_namespaced_custom_object(*ARGO, NS, "applications", application("a"))
    latest = kube.server.store.resource_version
    events = await watch_events(
        crs.list_namespaced_custom_object,
        *ARGO,
        NS,
        "applications",
        resource_version=str(latest),
        allow_watch_bookmarks=True,
        timeout_seconds=2,
        count=1,
    )
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["raw_object"] == {
        "kind": "Application",
        "apiVersion": "argoproj.io/v1alpha1",
        "metadata": {"resourceVersion": str(latest)},
    }


async def test_watch_from_an_expired_resource_version_gets_410() -> None:
    async with running_apiserver(crds=[], namespaces=[NS], event_window=3) as kube:
        core = client.CoreV1Api(kube.api_client())
        start = (await core.list_namespaced_config_map(NS)).metadata.resource_version
        for index in range(5):
            await core.create_namespaced_config_map(
                NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{index}"))
            )

        # With timeout_seconds the client does not retry, so the 410 surfaces.
        with pytest.raises(ApiException) as expired:
            await watch_events(
                core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=1
            )
        assert expired.value.status == 410

        # On the wire: HTTP 200, then an ERROR event carrying a 410 Status.
        url = f"{kube.url}/api/v1/namespaces/{NS}/configmaps?watch=1&resourceVersion={start}"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            assert response.status == 200
            lines = (await response.text()).splitlines()
        event = json.loads(lines[0])
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
        assert event["object"]["message"].startswith(f"too old resource version: {start} (")

        # Versions still inside the window resume normally.
        recent = await watch_events(
            core.list_namespaced_config_map,
            NS,
            resource_version=str(kube.server.store.resource_version - 1),
            timeout_seconds=1,
        )
        assert [e["object"].metadata.name for e in recent] == ["cm-4"]


async def test_watch_honours_timeout_seconds(
    kube: RunningApiServer, crs: client.CustomObjectsApi
) -> None:
    started = time.monotonic()
    events = await watch_events(
        crs.list_namespaced_custom_object,
        *ARGO,
        NS,
        "applications",
        resource_version=str(kube.server.store.resource_version),
        timeout_seconds=1,
    )
    elapsed = time.monotonic() - started
    assert events == [] and 0.9 <= elapsed < 3


# ------------------------------------------------------------ built-in resources


async def test_leases_via_coordination_api(kube: RunningApiServer) -> None:
    leases = client.CoordinationV1Api(kube.api_client())
    lease = await leases.create_namespaced_lease(
        NS,
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="longshoreman-leader"),
            spec=client.V1LeaseSpec(
                holder_identity="pod-a", lease_duration_seconds=15, lease_transitions=0
            ),
        ),
    )
    assert lease.metadata.generation is None  # built-ins do not track generation
    lease.spec.holder_identity = "pod-b"
    lease.spec.lease_transitions = 1
    taken = await leases.replace_namespaced_lease("longshoreman-leader", NS, lease)
    assert taken.spec.holder_identity == "pod-b"
    read = await leases.read_namespaced_lease("longshoreman-leader", NS)
    assert read.spec.lease_transitions == 1

    lease.spec.holder_identity = "pod-c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as conflict:
        await leases.replace_namespaced_lease("longshoreman-leader", NS, lease)
    assert conflict.value.status == 409
    listed = await leases.list_namespaced_lease(NS)
    assert [item.metadata.name for item in listed.items] == ["longshoreman-leader"]


async def test_events_via_core_api(core: client.CoreV1Api) -> None:
    for name, involved in [("e1", "guestbook"), ("e2", "other")]:
        await core.create_namespaced_event(
            NS,
            client.CoreV1Event(
                metadata=client.V1ObjectMeta(name=name),
                involved_object=client.V1ObjectReference(
                    kind="Promotion",
                    name=involved,
                    namespace=NS,
                    api_version="longshoreman.dev/v1alpha1",
                ),
                reason="Promoted",
                message="promoted to prod",
                type="Normal",
                source=client.V1EventSource(component="longshoreman"),
            ),
        )
    found = await core.list_namespaced_event(
        NS, field_selector="involvedObject.name=guestbook,involvedObject.kind=Promotion"
    )
    assert [e.metadata.name for e in found.items] == ["e1"]
    assert found.items[0].reason == "Promoted"
    by_source = await core.list_event_for_all_namespaces(field_selector="source=longshoreman")
    assert len(by_source.items) == 2


async def test_secrets_and_config_maps(core: client.CoreV1Api) -> None:
    secret = await core.create_namespaced_secret(
        NS,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="token"), string_data={"token": "hunter2"}
        ),
    )
    assert secret.data == {"token": "aHVudGVyMg=="} and secret.type == "Opaque"
    config_map = await core.create_namespaced_config_map(
        NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings"), data={"a": "1"})
    )
    config_map.data["b"] = "2"
    config_map.metadata.resource_version = None  # built-ins allow unconditional updates
    updated = await core.replace_namespaced_config_map("settings", NS, config_map)
    assert updated.data == {"a": "1", "b": "2"}


# ------------------------------------------------------------------ fault injection


async def _statuses_under_random_faults(seed: int) -> list[int]:
    injector = FaultInjector(seed=seed, error_rate=0.3, conflict_rate=0.3)
    async with running_apiserver(crds=[], faults=injector) as kube:
        core = client.CoreV1Api(kube.api_client())
        for index in range(12):
            try:
                await core.create_namespaced_config_map(
                    "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{index}"))
                )
            except ApiException:
                pass
        return [r.status for r in kube.requests]


async def test_random_faults_are_deterministic_per_seed() -> None:
    first = await _statuses_under_random_faults(7)
    assert first == await _statuses_under_random_faults(7)
    assert {201, 409, 500} <= set(first)


async def test_targeted_faults_and_dropped_connections(
    kube: RunningApiServer, crs: client.CustomObjectsApi
) -> None:
    await crs.create_namespaced_custom_object(*ARGO, NS, "applications", application("a"))

    kube.faults.add("conflict", methods="PATCH", path_pattern="/applications/a$")
    with pytest.raises(ApiException) as conflict:
        await crs.patch_namespaced_custom_object(*ARGO, NS, "applications", "a", {"spec": {}})
    assert conflict.value.status == 409 and status_of(conflict.value)["reason"] == "Conflict"

    kube.faults.add("error", methods="GET")
    with pytest.raises(ApiException) as error:
        await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "a")
    assert error.value.status == 500
    assert status_of(error.value)["reason"] == "InternalError"

    # aiohttp retries an idempotent request once when a kept-alive connection drops, so
    # dropping two attempts is what a caller actually notices.
    kube.faults.add("drop", methods="GET", times=2)
    with pytest.raises(aiohttp.ClientConnectionError):
        await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "a")

    # drop_after: the write lands, the answer never arrives.
    kube.faults.add("drop_after", methods="POST")
    with pytest.raises(aiohttp.ClientConnectionError):
        await crs.create_namespaced_custom_object(*ARGO, NS, "applications", application("b"))
    assert (await crs.get_namespaced_custom_object(*ARGO, NS, "applications", "b"))["metadata"][
        "name"
    ] == "b"
    assert [f.kind for f in kube.faults.injected] == [
        "conflict",
        "error",
        "drop",
        "drop",
        "drop_after",
    ]


async def test_close_watches_ends_open_streams(
    kube: RunningApiServer, crs: client.CustomObjectsApi
) -> None:
    stream = asyncio.create_task(
        watch_events(
            crs.list_namespaced_custom_object, *ARGO, NS, "applications", timeout_seconds=30
        )
    )
    await kube.server.wait_for_watches(1)
    started = time.monotonic()
    assert kube.close_watches() == 1
    assert await asyncio.wait_for(stream, 5) == []
    assert time.monotonic() - started < 2


# --------------------------------------------------- clients, kubeconfig, restarts


async def test_kubeconfig_works_for_async_and_sync_clients(kube: RunningApiServer) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(kube.kubeconfig_path), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        namespaces = await client.CoreV1Api(api).list_namespace()
    assert {NS, "default", "kube-system"} <= {n.metadata.name for n in namespaces.items}

    def sync_round_trip() -> list[str]:
        sync_config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=str(kube.kubeconfig_path), client_configuration=sync_config
        )
        with kubernetes.client.ApiClient(sync_config) as sync_api:
            objects = kubernetes.client.CustomObjectsApi(sync_api)
            objects.create_namespaced_custom_object(*ARGO, NS, "applications", application("sync"))
            listed = objects.list_namespaced_custom_object(*ARGO, NS, "applications")
            return [i["metadata"]["name"] for i in listed["items"]]

    assert await asyncio.to_thread(sync_round_trip) == ["sync"]


@needs_kubectl
async def test_kubectl_accepts_the_kubeconfig(kube: RunningApiServer) -> None:
    async def kubectl(*args: str, stdin: str = "") -> str:
        result = await run_kubectl(kube.kubeconfig_path, *args, stdin=stdin, within=20)
        assert result.code == 0, result.stderr
        return result.stdout

    # create -f needs the OpenAPI v3 index to learn that the server validates fields.
    await kubectl("-n", NS, "create", "-f", "-", stdin=json.dumps(application("kc")))
    names = await kubectl("get", "apps", "-A", "-o", "jsonpath={.items[*].metadata.name}")
    assert names == "kc"


async def test_state_file_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    async with running_apiserver(
        crds=[WIDGET_CRD], namespaces=[NS], state_file=state, persist_debounce=0.01
    ) as first:
        crs = client.CustomObjectsApi(first.api_client())
        created = await crs.create_namespaced_custom_object(
            TEST_GROUP, "v1", NS, "widgets", widget("w")
        )

        async def written() -> bool | None:
            return (state.exists() and '"name":"w"' in state.read_text()) or None

        await eventually(written, "the debounced write, while the server runs")
        ext = client.ApiextensionsV1Api(first.api_client())
        gadget = json.loads(
            json.dumps(WIDGET_CRD)
            .replace("widget", "gadget")
            .replace("Widget", "Gadget")
            .replace('"wd"', '"gd"')
        )
        await ext.create_custom_resource_definition(gadget)
        last_version = first.server.store.resource_version

    # Restart with no CRDs given: the API-created and file-loaded CRDs come back too.
    async with running_apiserver(crd_dirs=[], state_file=state) as second:
        crs = client.CustomObjectsApi(second.api_client())
        restored = await crs.get_namespaced_custom_object(TEST_GROUP, "v1", NS, "widgets", "w")
        assert restored["spec"]["color"] == "red"
        gadgets = await crs.list_namespaced_custom_object(TEST_GROUP, "v1", NS, "gadgets")
        assert int(gadgets["metadata"]["resourceVersion"]) >= last_version
        assert restored["metadata"]["uid"] == created["metadata"]["uid"]
        second_life = await crs.create_namespaced_custom_object(
            TEST_GROUP, "v1", NS, "widgets", widget("w2")
        )
        assert int(second_life["metadata"]["resourceVersion"]) > last_version
        assert second_life["metadata"]["uid"] != created["metadata"]["uid"]
