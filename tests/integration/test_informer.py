"""``app.controller.informer.Informer`` against the API server emulator: sync, events, indexes,
and not losing a change across watch reconnects, 410 relists and server errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from app.apiserver import RequestInfo
from app.controller.informer import Backoff, FreightRefs, Informer, ObjectKey, diff_snapshot
from app.controller.kube import FREIGHT, PROMOTIONS, Kube
from promoter.resources.freight_refs import ALIAS_LABEL
from tests.support import objects
from tests.support.kube import RunningApiServer, running_apiserver

NS = "demo"
Seen = list[tuple[str, str, str | None]]


def promotion(name: str, stage: str = "prod", namespace: str = NS) -> dict[str, Any]:
    return objects.promotion(name, stage, namespace=namespace)


def recorder(seen: Seen) -> Callable[[str, dict[str, Any], dict[str, Any] | None], None]:
    """An on_event that records (type, name, previous object's stage)."""

    def on_event(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        seen.append((kind, obj["metadata"]["name"], old["spec"]["stage"] if old else None))

    return on_event


async def eventually(predicate: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def lists(server: RunningApiServer) -> int:
    return sum(
        1
        for r in server.requests
        if r.method == "GET" and r.path.endswith("/promotions") and "watch" not in r.query
    )


def block_watches(server: RunningApiServer) -> None:
    server.faults.hook = lambda request: "error" if request.is_watch else None


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 5)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def server() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[NS, "other"], bookmark_interval=0.2) as started:
        yield started


@pytest.fixture
def kube(server: RunningApiServer) -> Kube:
    return Kube(server.api_client(), request_timeout=5.0)


def fast_backoff() -> Backoff:
    return Backoff.deterministic(base=0.05, cap=0.2)


# ----------------------------------------------------------------------- pure parts


def test_backoff_grows_caps_and_jitters_downwards() -> None:
    backoff = Backoff.deterministic(base=0.1, cap=1.0)
    assert [round(backoff.next_delay(), 3) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next_delay() == 0.1
    jittered = Backoff(1.0, 10.0, jitter=0.5, rand=lambda: 1.0)
    assert [jittered.next_delay() for _ in range(2)] == [0.5, 1.0]
    with pytest.raises(ValueError):
        Backoff(base=2.0, cap=1.0)


def test_diff_snapshot() -> None:
    def obj(name: str, rv: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv}}

    old: dict[ObjectKey, dict[str, Any]] = {
        (NS, "same"): obj("same", "1"),
        (NS, "changed"): obj("changed", "2"),
        (NS, "gone"): obj("gone", "3"),
    }
    new: dict[ObjectKey, dict[str, Any]] = {
        (NS, "same"): obj("same", "1"),
        (NS, "changed"): obj("changed", "5"),
        (NS, "new"): obj("new", "6"),
    }
    assert [
        (kind, o["metadata"]["name"], p and p["metadata"]["resourceVersion"])
        for kind, o, p in diff_snapshot(old, new)
    ] == [("MODIFIED", "changed", "2"), ("ADDED", "new", None), ("DELETED", "gone", "3")]


# ------------------------------------------------------------------------- over HTTP


async def test_initial_sync_and_live_events(kube: Kube, server: RunningApiServer) -> None:
    await kube.create(PROMOTIONS, promotion("a"))
    await kube.create(PROMOTIONS, promotion("b", stage="dev"))
    await kube.create(PROMOTIONS, promotion("elsewhere", namespace="other"))
    seen: Seen = []
    informer = Informer(kube, PROMOTIONS, namespace=NS, on_event=recorder(seen))
    assert not informer.synced.is_set()
    async with running(informer):
        assert sorted(seen) == [("ADDED", "a", None), ("ADDED", "b", None)]
        assert [o["metadata"]["name"] for o in informer.items()] == ["a", "b"]
        assert informer.resource_version

        seen.clear()
        await server.server.wait_for_watches(1)
        await kube.create(PROMOTIONS, promotion("c"))
        await kube.patch(PROMOTIONS, NS, "b", {"spec": {"stage": "prod"}})
        await kube.delete(PROMOTIONS, NS, "a")
        await eventually(lambda: len(seen) == 3)
        assert seen == [("ADDED", "c", None), ("MODIFIED", "b", "dev"), ("DELETED", "a", "prod")]
        assert informer.get(NS, "a") is None
        assert informer.get(NS, "b")["spec"]["stage"] == "prod"  # type: ignore[index]
        assert set(informer.store) == {(NS, "b"), (NS, "c")}
        # Bookmarks move the resourceVersion on even when nothing changes.
        await kube.create(PROMOTIONS, promotion("x", namespace="other"))
        latest = str(server.server.store.resource_version)
        await eventually(lambda: informer.resource_version == latest)


async def test_cluster_wide_informer_and_items_by_namespace(kube: Kube) -> None:
    await kube.create(PROMOTIONS, promotion("a"))
    await kube.create(PROMOTIONS, promotion("b", namespace="other"))
    informer = Informer(kube, PROMOTIONS)
    async with running(informer):
        assert [o["metadata"]["name"] for o in informer.items()] == ["a", "b"]
        assert [o["metadata"]["name"] for o in informer.items("other")] == ["b"]
        assert informer.get("other", "b") is not None and informer.get(NS, "b") is None


async def test_indexes_follow_every_change(kube: Kube, server: RunningApiServer) -> None:
    await kube.create(PROMOTIONS, promotion("a", stage="dev"))
    informer = Informer(kube, PROMOTIONS, namespace=NS)
    informer.add_index("stage", lambda o: [o["spec"]["stage"]])
    informer.add_index("broken", lambda o: [o["spec"]["missing"]])

    def names(key: str) -> list[str]:
        return [o["metadata"]["name"] for o in informer.by_index("stage", key)]

    async with running(informer):
        assert names("dev") == ["a"]
        await server.server.wait_for_watches(1)
        await kube.create(PROMOTIONS, promotion("b", stage="dev"))
        await kube.patch(PROMOTIONS, NS, "a", {"spec": {"stage": "prod"}})
        await eventually(lambda: names("prod") == ["a"])
        assert names("dev") == ["b"]
        await kube.delete(PROMOTIONS, NS, "b")
        await eventually(lambda: names("dev") == [])
        # Indexes added late cover what is already cached.
        informer.add_index("freight", lambda o: [o["spec"]["freight"]])
        assert [o["metadata"]["name"] for o in informer.by_index("freight", "f1")] == ["a"]
        assert informer.by_index("broken", "anything") == []


async def test_freight_refs_follow_alias_changes_and_names_win(
    kube: Kube, server: RunningApiServer
) -> None:
    def aliased(name: str, alias: str) -> dict[str, Any]:
        return objects.freight(name, namespace=NS, alias=alias, labels={ALIAS_LABEL: alias})

    def found(ref: str) -> str | None:
        freight = refs.find(NS, ref)
        return freight["metadata"]["name"] if freight is not None else None

    await kube.create(FREIGHT, aliased("f1", "tauntaun"))
    informer = Informer(kube, FREIGHT, namespace=NS)
    refs = FreightRefs(informer)
    async with running(informer):
        assert (found("f1"), found("tauntaun"), found("wampa")) == ("f1", "f1", None)
        await server.server.wait_for_watches(1)
        relabel = {"alias": "wampa", "metadata": {"labels": {ALIAS_LABEL: "wampa"}}}
        await kube.patch(FREIGHT, NS, "f1", relabel)
        await eventually(lambda: found("wampa") == "f1")
        assert found("tauntaun") is None
        # A Freight named as another's alias is what the reference means, while it exists.
        await kube.create(FREIGHT, objects.freight("wampa", namespace=NS))
        await eventually(lambda: found("wampa") == "wampa")
        await kube.delete(FREIGHT, NS, "wampa")
        await eventually(lambda: found("wampa") == "f1")
        assert refs.find("elsewhere", "wampa") is None


async def test_resumes_after_a_closed_watch_without_losing_events(
    kube: Kube, server: RunningApiServer
) -> None:
    seen: Seen = []
    informer = Informer(
        kube, PROMOTIONS, namespace=NS, on_event=recorder(seen), backoff=fast_backoff()
    )
    async with running(informer):
        await server.server.wait_for_watches(1)
        block_watches(server)  # the reconnect fails until we are done writing
        assert server.close_watches() == 1
        await kube.create(PROMOTIONS, promotion("a"))
        await kube.create(PROMOTIONS, promotion("b"))
        await kube.patch(PROMOTIONS, NS, "a", {"spec": {"stage": "dev"}})
        await kube.delete(PROMOTIONS, NS, "b")
        server.faults.hook = None
        await eventually(lambda: len(seen) == 4)
        assert seen == [
            ("ADDED", "a", None),
            ("ADDED", "b", None),
            ("MODIFIED", "a", "prod"),
            ("DELETED", "b", "prod"),
        ]
        # Resumed from the last resourceVersion: no relist was needed.
        assert lists(server) == 1
        # A plain close (no errors) is followed by a resumed watch as well.
        await server.server.wait_for_watches(1)
        server.close_watches()
        await server.server.wait_for_watches(1)
        await kube.create(PROMOTIONS, promotion("c"))
        await eventually(lambda: informer.get(NS, "c") is not None)
        assert lists(server) == 1


async def test_relists_after_410_and_reports_what_was_missed() -> None:
    async with running_apiserver(namespaces=[NS], event_window=2) as server:
        kube = Kube(server.api_client(), request_timeout=5.0)
        for name in ("a", "b", "c"):
            await kube.create(PROMOTIONS, promotion(name, stage="dev"))
        seen: Seen = []
        informer = Informer(
            kube, PROMOTIONS, namespace=NS, on_event=recorder(seen), backoff=fast_backoff()
        )
        informer.add_index("stage", lambda o: [o["spec"]["stage"]])
        async with running(informer):
            await server.server.wait_for_watches(1)
            seen.clear()
            block_watches(server)
            server.close_watches()
            await kube.delete(PROMOTIONS, NS, "a")
            await kube.patch(PROMOTIONS, NS, "b", {"spec": {"stage": "prod"}})
            await kube.create(PROMOTIONS, promotion("d", stage="dev"))
            await kube.patch(PROMOTIONS, NS, "d", {"spec": {"stage": "qa"}})
            server.faults.hook = None
            await eventually(lambda: len(seen) == 3)
            assert sorted(seen) == [
                ("ADDED", "d", None),
                ("DELETED", "a", "dev"),
                ("MODIFIED", "b", "dev"),
            ]
            assert lists(server) == 2
            assert sorted(informer.store) == [(NS, "b"), (NS, "c"), (NS, "d")]
            assert [o["metadata"]["name"] for o in informer.by_index("stage", "dev")] == ["c"]
            # And it keeps watching from the relist.
            await server.server.wait_for_watches(1)
            await kube.delete(PROMOTIONS, NS, "c")
            await eventually(lambda: informer.get(NS, "c") is None)


async def test_backs_off_on_errors_without_busy_looping(
    kube: Kube, server: RunningApiServer
) -> None:
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)
        await asyncio.sleep(0.02)  # real time passes, but far less than asked

    def failing(request: RequestInfo) -> str | None:
        return "error" if "/promotions" in request.path else None

    server.faults.hook = failing  # type: ignore[assignment]
    informer = Informer(
        kube,
        PROMOTIONS,
        namespace=NS,
        backoff=Backoff.deterministic(base=0.1, cap=0.4),
        sleep=sleep,
    )
    task = asyncio.create_task(informer.run())
    await eventually(lambda: len(delays) >= 6)
    assert [round(d, 3) for d in delays[:6]] == [0.1, 0.2, 0.4, 0.4, 0.4, 0.4]
    attempts = sum(1 for r in server.requests if "/promotions" in r.path)
    assert attempts <= len(delays) + 1  # one request per sleep: no hidden retry loop
    assert not informer.synced.is_set()

    server.faults.hook = None
    await asyncio.wait_for(informer.synced.wait(), 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.mark.looptime  # the second of backoff below passes on virtual time
async def test_real_backoff_bounds_requests(kube: Kube, server: RunningApiServer) -> None:
    server.faults.add("throttle", path_pattern="/promotions$", times=None)
    informer = Informer(
        kube, PROMOTIONS, namespace=NS, backoff=Backoff(base=0.05, cap=0.2, jitter=0.5)
    )
    task = asyncio.create_task(informer.run())
    await asyncio.sleep(1.0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    attempts = sum(1 for r in server.requests if r.path.endswith("/promotions"))  # all GETs
    # Retry-After (1 s) from the 429 wins over the shorter backoff.
    assert 1 <= attempts <= 2


async def test_observe_puts_our_own_writes_in_early(kube: Kube, server: RunningApiServer) -> None:
    await kube.create(PROMOTIONS, promotion("a", stage="dev"))
    seen: Seen = []
    informer = Informer(kube, PROMOTIONS, namespace=NS, on_event=recorder(seen))
    informer.add_index("stage", lambda o: [o["spec"]["stage"]])
    async with running(informer):
        seen.clear()
        block_watches(server)
        server.close_watches()
        written = await kube.patch(PROMOTIONS, NS, "a", {"spec": {"stage": "prod"}})
        assert informer.observe(written)
        assert informer.get(NS, "a") == written and seen == []
        assert [o["metadata"]["name"] for o in informer.by_index("stage", "prod")] == ["a"]
        assert not informer.observe(written)  # that version is cached already

        await kube.delete(PROMOTIONS, NS, "a")
        server.faults.hook = None
        await eventually(lambda: informer.get(NS, "a") is None)
        # The watch still reports both changes, once each.
        assert seen == [("MODIFIED", "a", "prod"), ("DELETED", "a", "prod")]
        # The watch is past that version: observing the old write cannot resurrect it.
        assert not informer.observe(written)
        assert informer.get(NS, "a") is None


async def test_a_failing_handler_does_not_stop_the_cache(
    kube: Kube, server: RunningApiServer
) -> None:
    def explode(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        raise RuntimeError("handler bug")

    informer = Informer(kube, PROMOTIONS, namespace=NS, on_event=explode)
    async with running(informer):
        await server.server.wait_for_watches(1)
        await kube.create(PROMOTIONS, promotion("a"))
        await eventually(lambda: informer.get(NS, "a") is not None)


async def test_cancellation_closes_the_watch(kube: Kube, server: RunningApiServer) -> None:
    informer = Informer(kube, PROMOTIONS, namespace=NS)
    async with running(informer) as task:
        await server.server.wait_for_watches(1)
    assert task.cancelled()
    await eventually(lambda: server.server.open_watches == 0, seconds=3)
