"""``app.controller.kube.Kube`` over real HTTP against the API server emulator.

Each test starts its own emulator (tests/support/kube.py) and drives it through ``Kube`` only,
so what is checked is the request the real ``kubernetes.aio`` transport sends and the error
kinds our callers see.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes.aio.client import Configuration

from app.apiserver.patching import merge_patch
from app.controller.kube import (
    APPLICATIONS,
    CLUSTER_PROMOTION_TASKS,
    EVENTS,
    LEASES,
    PROMOTIONS,
    Conflict,
    Gone,
    Invalid,
    Kube,
    KubeError,
    NotFound,
    TemporaryError,
    error_for,
    event_for,
    load_kube,
    merge_patch_between,
    micro_time,
    parse_retry_after,
    resource_path,
)
from tests.support import objects
from tests.support.kube import RunningApiServer, running_apiserver

NS = "demo"


@pytest.fixture
async def server() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[NS], bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
def calls() -> list[tuple[str, str, int | None]]:
    return []


@pytest.fixture
def kube(server: RunningApiServer, calls: list[tuple[str, str, int | None]]) -> Kube:
    return Kube(
        server.api_client(),
        request_timeout=5.0,
        on_request=lambda method, plural, status: calls.append((method, plural, status)),
    )


def promotion(name: str, stage: str = "prod", freight: str = "abc123") -> dict[str, Any]:
    return objects.promotion(name, stage, namespace=NS, freight=freight, labels={"stage": stage})


def application(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"project": "default", "destination": {"namespace": NS}},
    }


async def collect(kube: Kube, resource_version: str, *, count: int) -> list[tuple[str, Any]]:
    """The first ``count`` events of a watch of promotions from ``resource_version``."""
    events: list[tuple[str, Any]] = []
    stream = kube.watch(PROMOTIONS, NS, resource_version=resource_version, timeout_seconds=5)
    async with contextlib.aclosing(stream):
        async for kind, obj in stream:
            events.append((kind, obj))
            if len(events) >= count:
                break
    return events


# ----------------------------------------------------------------------- pure parts


def test_resource_paths() -> None:
    assert resource_path(PROMOTIONS, NS, "p1", "status") == (
        "/apis/longshoreman.dev/v1alpha1/namespaces/demo/promotions/p1/status"
    )
    assert resource_path(PROMOTIONS) == "/apis/longshoreman.dev/v1alpha1/promotions"
    assert resource_path(EVENTS, NS) == "/api/v1/namespaces/demo/events"
    assert resource_path(CLUSTER_PROMOTION_TASKS, None, "t") == (
        "/apis/longshoreman.dev/v1alpha1/clusterpromotiontasks/t"
    )
    with pytest.raises(ValueError):
        resource_path(CLUSTER_PROMOTION_TASKS, NS, "t")


@pytest.mark.parametrize(
    ("status", "body", "headers", "kind", "retry_after"),
    [
        (404, {"kind": "Status", "reason": "NotFound"}, {}, NotFound, None),
        (409, {"kind": "Status", "reason": "AlreadyExists"}, {}, Conflict, None),
        (410, {"kind": "Status", "reason": "Expired"}, {}, Gone, None),
        (422, {"kind": "Status", "reason": "Invalid"}, {}, Invalid, None),
        (400, "not json", {}, Invalid, None),
        (429, {}, {"Retry-After": "3"}, TemporaryError, 3.0),
        (429, {"kind": "Status", "details": {"retryAfterSeconds": 2}}, {}, TemporaryError, 2.0),
        (503, None, {}, TemporaryError, None),
        (403, {"kind": "Status", "reason": "Forbidden"}, {}, KubeError, None),
    ],
)
def test_error_kinds(
    status: int, body: Any, headers: dict[str, str], kind: type[KubeError], retry_after: float
) -> None:
    error = error_for(status, body, headers, request="GET /x")
    assert type(error) is kind and error.status == status
    assert getattr(error, "retry_after", None) == retry_after


def test_retry_after_accepts_http_dates() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("garbage") is None and parse_retry_after(None) is None


def test_event_builder_and_micro_time() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert micro_time(now) == "2024-05-01T12:00:00.123456Z"
    involved = {
        "apiVersion": "longshoreman.dev/v1alpha1",
        "kind": "ClusterPromotionTask",
        "metadata": {"name": "t", "uid": "u-1"},
    }
    event = event_for(
        involved, reason="R", message="m" * 5000, type="Warning", component="longshoreman", now=now
    )
    assert event["metadata"]["namespace"] == "default"  # cluster-scoped objects
    assert event["metadata"]["name"].startswith("t.")
    assert event["involvedObject"] == {
        "apiVersion": "longshoreman.dev/v1alpha1",
        "kind": "ClusterPromotionTask",
        "name": "t",
        "uid": "u-1",
    }
    assert len(event["message"]) == 1024 and event["type"] == "Warning"


# ------------------------------------------------------------------------- over HTTP


async def test_crud_round_trip(kube: Kube, calls: list[tuple[str, str, int | None]]) -> None:
    created = await kube.create(PROMOTIONS, promotion("p1"))
    assert created["apiVersion"] == "longshoreman.dev/v1alpha1"
    assert created["kind"] == "Promotion" and created["metadata"]["uid"]

    fetched = await kube.get(PROMOTIONS, NS, "p1")
    assert fetched == created

    fetched["spec"]["freight"] = "def456"
    replaced = await kube.replace(PROMOTIONS, fetched)
    assert replaced["spec"]["freight"] == "def456"
    assert int(replaced["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )

    patched = await kube.patch(PROMOTIONS, NS, "p1", {"metadata": {"labels": {"x": "1"}}})
    assert patched["metadata"]["labels"] == {"stage": "prod", "x": "1"}

    await kube.delete(PROMOTIONS, NS, "p1")
    with pytest.raises(NotFound):
        await kube.get(PROMOTIONS, NS, "p1")
    with pytest.raises(NotFound):
        await kube.delete(PROMOTIONS, NS, "p1")
    await kube.create(PROMOTIONS, promotion("p2"))
    with pytest.raises(Conflict) as exists:
        await kube.create(PROMOTIONS, promotion("p2"))
    assert exists.value.reason == "AlreadyExists"
    with pytest.raises(Invalid):
        await kube.create(
            PROMOTIONS, {"metadata": {"name": "bad", "namespace": NS}, "spec": {"freight": "x"}}
        )
    assert calls[:3] == [
        ("POST", "promotions", 201),
        ("GET", "promotions", 200),
        ("PUT", "promotions", 200),
    ]
    assert ("GET", "promotions", 404) in calls


async def test_stale_writes_conflict(kube: Kube) -> None:
    created = await kube.create(PROMOTIONS, promotion("p1"))
    stale = created["metadata"]["resourceVersion"]
    await kube.patch(PROMOTIONS, NS, "p1", {"spec": {"freight": "new"}}, resource_version=stale)

    with pytest.raises(Conflict) as replace_conflict:
        await kube.replace(PROMOTIONS, created)
    assert replace_conflict.value.reason == "Conflict"
    with pytest.raises(Conflict):
        await kube.patch(PROMOTIONS, NS, "p1", {"spec": {"freight": "x"}}, resource_version=stale)
    with pytest.raises(Conflict):
        await kube.patch(
            PROMOTIONS,
            NS,
            "p1",
            [{"op": "replace", "path": "/spec/freight", "value": "x"}],
            patch_type="json",
            resource_version=stale,
        )
    with pytest.raises(Conflict):
        await kube.patch_status(PROMOTIONS, NS, "p1", {"phase": "Running"}, resource_version=stale)
    assert (await kube.get(PROMOTIONS, NS, "p1"))["spec"]["freight"] == "new"


async def test_json_patch(kube: Kube) -> None:
    created = await kube.create(PROMOTIONS, promotion("p1"))
    patched = await kube.patch(
        PROMOTIONS,
        NS,
        "p1",
        [
            {"op": "replace", "path": "/spec/freight", "value": "f2"},
            {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
        ],
        patch_type="json",
        resource_version=created["metadata"]["resourceVersion"],
    )
    assert patched["spec"]["freight"] == "f2"
    assert patched["metadata"]["annotations"] == {"a": "b"}


async def test_status_patch_is_isolated_from_spec(kube: Kube) -> None:
    created = await kube.create(PROMOTIONS, promotion("p1"))
    updated = await kube.patch_status(
        PROMOTIONS,
        NS,
        "p1",
        {"phase": "Running", "message": "step 1"},
        resource_version=created["metadata"]["resourceVersion"],
    )
    assert updated["status"] == {"phase": "Running", "message": "step 1"}
    # Merge semantics: fields not mentioned stay.
    updated = await kube.patch_status(
        PROMOTIONS, NS, "p1", {"phase": "Succeeded"}, resource_version=None
    )
    assert updated["status"] == {"phase": "Succeeded", "message": "step 1"}
    # The main resource cannot change status, the status endpoint cannot change spec.
    sneaky = await kube.patch(PROMOTIONS, NS, "p1", {"status": {"phase": "Failed"}})
    assert sneaky["status"]["phase"] == "Succeeded"

    # Argo CD Applications have no /status: the main resource carries it.
    await kube.create(APPLICATIONS, application("guestbook"))
    app = await kube.patch_status(
        APPLICATIONS, NS, "guestbook", {"health": {"status": "Healthy"}}, resource_version=None
    )
    assert app["status"] == {"health": {"status": "Healthy"}}
    assert app["spec"]["project"] == "default"


async def test_list_returns_typed_items_and_resource_version(
    kube: Kube, server: RunningApiServer
) -> None:
    for index in range(3):
        await kube.create(PROMOTIONS, promotion(f"p{index}", stage="prod" if index else "dev"))
    items, resource_version = await kube.list(PROMOTIONS, NS)
    assert [i["metadata"]["name"] for i in items] == ["p0", "p1", "p2"]
    assert all(i["kind"] == "Promotion" for i in items)
    assert resource_version == str(server.server.store.resource_version)

    selected, _ = await kube.list(PROMOTIONS, label_selector="stage=prod")
    assert [i["metadata"]["name"] for i in selected] == ["p1", "p2"]

    await kube.create(
        LEASES, {"metadata": {"name": "l", "namespace": NS}, "spec": {"holderIdentity": "a"}}
    )
    leases, _ = await kube.list(LEASES, NS)
    # Built-in lists carry no TypeMeta per item on the wire; Kube fills it in.
    assert leases[0]["apiVersion"] == "coordination.k8s.io/v1" and leases[0]["kind"] == "Lease"


async def test_list_follows_pages(server: RunningApiServer) -> None:
    calls: list[tuple[str, str, int | None]] = []
    kube = Kube(server.api_client(), list_page_size=2, on_request=lambda *call: calls.append(call))
    for index in range(5):
        await kube.create(PROMOTIONS, promotion(f"p{index}"))
    _, first_version = await kube.list(PROMOTIONS, NS)
    items, resource_version = await kube.list(PROMOTIONS, NS)
    assert [i["metadata"]["name"] for i in items] == [f"p{i}" for i in range(5)]
    assert resource_version == first_version
    assert calls.count(("GET", "promotions", 200)) == 6  # three pages per list


async def test_load_kube_reads_a_kubeconfig(server: RunningApiServer) -> None:
    kube = await load_kube(str(server.kubeconfig_path), in_cluster=False)
    try:
        assert kube.api_client.configuration.host == server.url
        assert kube.api_client.configuration is not Configuration.get_default()
        items, _ = await kube.list(PROMOTIONS, NS)
        assert items == []
    finally:
        await kube.close()


async def test_watch_delivers_changes_in_order_then_bookmarks(kube: Kube) -> None:
    _, start = await kube.list(PROMOTIONS, NS)
    await kube.create(PROMOTIONS, promotion("p1"))
    await kube.patch_status(PROMOTIONS, NS, "p1", {"phase": "Running"}, resource_version=None)
    await kube.delete(PROMOTIONS, NS, "p1")

    events = await collect(kube, start, count=4)
    assert [(kind, obj["metadata"].get("name")) for kind, obj in events] == [
        ("ADDED", "p1"),
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
        ("BOOKMARK", None),
    ]
    versions = [int(obj["metadata"]["resourceVersion"]) for _, obj in events]
    assert versions[:3] == sorted(versions[:3]) and versions[3] >= versions[2]
    assert events[0][1]["kind"] == "Promotion"


async def test_watch_ends_when_the_server_closes_it(kube: Kube, server: RunningApiServer) -> None:
    _, start = await kube.list(PROMOTIONS, NS)

    seen: list[str] = []
    added = asyncio.Event()

    async def drain() -> list[str]:
        stream = kube.watch(PROMOTIONS, NS, resource_version=start, allow_bookmarks=False)
        async for kind, _ in stream:
            seen.append(kind)
            added.set()
        return seen

    task = asyncio.create_task(drain())
    await server.server.wait_for_watches(1)
    await kube.create(PROMOTIONS, promotion("p1"))
    await asyncio.wait_for(added.wait(), 5)  # delivered before the server closes the watch
    server.close_watches()
    assert await asyncio.wait_for(task, 5) == ["ADDED"]


async def test_watch_from_an_expired_version_raises_gone() -> None:
    async with running_apiserver(namespaces=[NS], event_window=2) as server:
        kube = Kube(server.api_client())
        _, start = await kube.list(PROMOTIONS, NS)
        for index in range(4):
            await kube.create(PROMOTIONS, promotion(f"p{index}"))
        with pytest.raises(Gone) as gone:
            await collect(kube, start, count=1)
        assert gone.value.status == 410


async def test_dropped_watch_is_a_temporary_error(kube: Kube, server: RunningApiServer) -> None:
    _, start = await kube.list(PROMOTIONS, NS)
    task = asyncio.create_task(collect(kube, start, count=10))
    await server.server.wait_for_watches(1)
    server.close_watches(abort=True)
    with pytest.raises(TemporaryError):
        await asyncio.wait_for(task, 5)


async def test_server_errors_are_temporary(
    kube: Kube, server: RunningApiServer, calls: list[tuple[str, str, int | None]]
) -> None:
    await kube.create(PROMOTIONS, promotion("p1"))
    server.faults.add("error", methods="GET")
    with pytest.raises(TemporaryError) as error:
        await kube.get(PROMOTIONS, NS, "p1")
    assert error.value.status == 500 and error.value.retry_after is None

    server.faults.add("throttle", methods="PATCH")
    with pytest.raises(TemporaryError) as throttled:
        await kube.patch(PROMOTIONS, NS, "p1", {"spec": {"freight": "x"}})
    assert throttled.value.status == 429 and throttled.value.retry_after == 1.0

    # aiohttp retries an idempotent request once on a dropped connection; two drops surface.
    server.faults.add("drop", methods="GET", times=2)
    with pytest.raises(TemporaryError):
        await kube.get(PROMOTIONS, NS, "p1")
    assert calls[-1] == ("GET", "promotions", None)


async def test_errors_never_leak_the_token(server: RunningApiServer) -> None:
    api = server.api_client()
    api.configuration.api_key = {"BearerToken": "Bearer s3cret-token"}
    kube = Kube(api)
    server.faults.add("error", methods="GET")
    with pytest.raises(TemporaryError) as error:
        await kube.get(PROMOTIONS, NS, "p1")
    server.faults.add("drop", methods="GET", times=2)
    with pytest.raises(TemporaryError) as dropped:
        await kube.get(PROMOTIONS, NS, "p1")
    assert "s3cret" not in str(error.value) and "s3cret" not in str(dropped.value)


async def test_emit_event_is_visible_and_best_effort(
    kube: Kube, server: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    created = await kube.create(PROMOTIONS, promotion("p1"))
    await kube.emit_event(created, reason="PromotionSucceeded", message="promoted to prod")
    events, _ = await kube.list(EVENTS, NS)
    assert len(events) == 1
    event = events[0]
    assert event["reason"] == "PromotionSucceeded" and event["type"] == "Normal"
    assert event["involvedObject"]["uid"] == created["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "Promotion"
    assert event["source"] == {"component": "longshoreman"}

    server.faults.add("error", methods="POST")
    await kube.emit_event(created, reason="X", message="lost")  # does not raise
    assert "could not record event X" in caplog.text


@contextlib.asynccontextmanager
async def recording_proxy(target: str) -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    """A plain HTTP proxy on 127.0.0.1 that forwards to ``target`` and records what it saw
    (request target and Proxy-Authorization)."""
    seen: list[tuple[str, str]] = []

    async def forward(request: web.Request) -> web.Response:
        seen.append((str(request.url), request.headers.get("Proxy-Authorization", "")))
        async with aiohttp.ClientSession() as session:
            async with session.request(
                request.method,
                target + request.path_qs,
                data=await request.read(),
                headers={k: v for k, v in request.headers.items() if k.startswith("Content")},
            ) as answer:
                return web.Response(
                    status=answer.status, body=await answer.read(), content_type="application/json"
                )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


async def test_the_proxy_from_the_environment_is_used_and_looked_up_once(
    server: RunningApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with recording_proxy(server.url) as (proxy, seen):
        user_proxy = proxy.replace("http://", "http://user:pa55@")
        monkeypatch.setenv("HTTP_PROXY", user_proxy)
        kube = Kube(server.api_client())
        await kube.create(PROMOTIONS, promotion("p1"))
        # Changing the environment afterwards changes nothing: it was read at start.
        monkeypatch.delenv("HTTP_PROXY")
        assert (await kube.get(PROMOTIONS, NS, "p1"))["metadata"]["name"] == "p1"
        await kube.close()
    assert [url.endswith("/promotions") for url, _ in seen] == [True, False]
    assert (
        seen[1][0] == f"{server.url}/apis/longshoreman.dev/v1alpha1/namespaces/{NS}/promotions/p1"
    )
    assert {auth for _, auth in seen} == {"Basic " + base64.b64encode(b"user:pa55").decode()}


async def test_a_proxy_failure_never_shows_the_proxys_credentials(
    server: RunningApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with recording_proxy(server.url) as (proxy, _):
        pass  # closed: nothing listens there any more
    monkeypatch.setenv("HTTP_PROXY", proxy.replace("http://", "http://user:s3cret@"))
    kube = Kube(server.api_client(), request_timeout=5.0)
    with pytest.raises(TemporaryError) as error:
        await kube.get(PROMOTIONS, NS, "p1")
    await kube.close()
    assert "s3cret" not in str(error.value)


async def test_no_proxy_bypasses_the_proxy(
    server: RunningApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with recording_proxy(server.url) as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        kube = Kube(server.api_client())
        await kube.create(PROMOTIONS, promotion("p1"))
        await kube.close()
    assert seen == []


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        ({"a": 1}, {"a": 1}, {}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
        ({"a": 1}, {"a": 2, "c": [1]}, {"a": 2, "c": [1]}),
        ({"s": {"x": 1, "y": 2}}, {"s": {"x": 1, "y": 3}}, {"s": {"y": 3}}),
        ({"s": {"x": 1}}, {"s": {}}, {"s": {"x": None}}),
        ({"s": "text"}, {"s": {"x": 1}}, {"s": {"x": 1}}),
        ({"l": [1, 2]}, {"l": [1, 2, 3]}, {"l": [1, 2, 3]}),
        (
            {"s": {"deep": {"k": 1, "j": 2}}},
            {"s": {"deep": {"k": 1}}},
            {"s": {"deep": {"j": None}}},
        ),
    ],
)
def test_merge_patch_between(old: dict[str, Any], new: dict[str, Any], patch: Any) -> None:
    assert merge_patch_between(old, new) == patch
    assert merge_patch(old, patch) == new  # the emulator's RFC 7386 applies it back


async def test_a_diff_patch_with_a_resource_version_writes_exactly_the_change(kube: Kube) -> None:
    created = await kube.create(PROMOTIONS, promotion("p1"))
    first = {"phase": "Running", "state": {"a": {"n": 1}, "b": {"n": 2}}}
    written = await kube.patch_status(
        PROMOTIONS, NS, "p1", first, resource_version=created["metadata"]["resourceVersion"]
    )
    second = {"phase": "Running", "state": {"a": {"n": 1}, "c": {"n": 3}}}
    patch = merge_patch_between(first, second)
    assert patch == {"state": {"b": None, "c": {"n": 3}}}
    written = await kube.patch_status(
        PROMOTIONS, NS, "p1", patch, resource_version=written["metadata"]["resourceVersion"]
    )
    assert written["status"] == second
    with pytest.raises(Conflict):  # diffed against an older version: refused, never merged
        await kube.patch_status(
            PROMOTIONS, NS, "p1", patch, resource_version=created["metadata"]["resourceVersion"]
        )
