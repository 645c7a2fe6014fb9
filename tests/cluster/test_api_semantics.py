"""What the controller relies on from the API server, checked on both backends.

The status subresource (spec and status written separately, generation counting spec changes),
optimistic concurrency on resourceVersion, validation messages, and watches that resume, expire
(410 Gone after compaction) and are dropped, with the informer relisting and losing nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from app.controller import kube as k
from app.controller.informer import Backoff, Informer
from tests.cluster.support import Cluster
from tests.support import objects
from tests.support.tcpproxy import tcp_proxy

NS = "team-a"


def stage(name: str, **spec: Any) -> dict[str, Any]:
    return objects.stage(name, namespace=NS, **spec)


async def ready(cluster: Cluster) -> k.Kube:
    await cluster.install_crds()
    await cluster.kubectl("create", "namespace", NS)
    return cluster.kube()


async def test_status_and_spec_are_written_through_their_own_endpoints(cluster: Cluster) -> None:
    kube = await ready(cluster)
    created = await kube.create(k.STAGES, stage("s1"))
    assert created["metadata"]["generation"] == 1
    # A status written through the main resource is dropped; the spec change is kept.
    updated = await kube.patch(
        k.STAGES,
        NS,
        "s1",
        {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "ignored"}},
    )
    assert "phase" not in (updated.get("status") or {})
    assert updated["metadata"]["generation"] == 1, "metadata is not spec"
    # Through /status, the status is written and a spec change is dropped.
    written = await kube.patch_status(
        k.STAGES, NS, "s1", {"observedGeneration": 1}, resource_version=None
    )
    assert written["status"]["observedGeneration"] == 1
    assert written["metadata"]["generation"] == 1, "a status write is not a new generation"
    await cluster.kubectl(
        "patch", "stage", "s1", "-n", NS, "--subresource=status", "--type=merge",
        "-p", '{"spec": {"shard": "ignored"}, "status": {"observedGeneration": 1}}',
    )  # fmt: skip
    assert "shard" not in (await kube.get(k.STAGES, NS, "s1"))["spec"]
    respec = await kube.patch(k.STAGES, NS, "s1", {"spec": {"shard": "east"}})
    assert respec["metadata"]["generation"] == 2
    assert respec["status"]["observedGeneration"] == 1, "the spec write kept the status"


async def test_a_stale_resource_version_is_a_conflict(cluster: Cluster) -> None:
    kube = await ready(cluster)
    first = await kube.create(k.STAGES, stage("s1"))
    await kube.patch(k.STAGES, NS, "s1", {"metadata": {"labels": {"moved": "on"}}})
    stale = {**first, "metadata": {**first["metadata"], "labels": {"stale": "yes"}}}
    with pytest.raises(k.Conflict) as caught:
        await kube.replace(k.STAGES, stale)
    assert caught.value.reason == "Conflict"
    assert "the object has been modified; please apply your changes to the latest version" in str(
        caught.value
    )
    with pytest.raises(k.Conflict) as exists:
        await kube.create(k.STAGES, stage("s1"))
    assert exists.value.reason == "AlreadyExists"
    assert 'stages.longshoreman.dev "s1" already exists' in str(exists.value)


async def test_an_invalid_object_is_refused_with_the_fields_named(cluster: Cluster) -> None:
    kube = await ready(cluster)
    with pytest.raises(k.Invalid) as caught:
        await kube.create(
            k.PROMOTIONS,
            {
                "metadata": {"name": "p", "namespace": NS},
                "spec": {"stage": "Not_A_Name", "freight": ""},
            },
        )
    message = str(caught.value)
    assert 'Promotion.longshoreman.dev "p" is invalid' in message, message
    assert "spec.stage" in message and "spec.freight" in message, message
    # A null where the schema says string is dropped before validation (apiextensions prunes
    # nulls of non-nullable fields since 1.20), so a required field sent as null is missing, in a
    # merge patch (where null means "remove") as in a JSON patch (where it does not).
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": None,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await kube.create(k.STAGES, stage("s1"))
    with pytest.raises(k.Invalid) as merged:
        await kube.patch_status(
            k.STAGES, NS, "s1", {"conditions": [condition]}, resource_version=None
        )
    assert 'Stage.longshoreman.dev "s1" is invalid: status.conditions.message: Required value' in (
        str(merged.value)
    ), merged.value
    op = [{"op": "add", "path": "/status", "value": {"conditions": [condition]}}]
    kept = await cluster.kubectl(
        "patch", "stage", "s1", "-n", NS, "--subresource=status", "--type=json",
        "-p", json.dumps(op), check=False,
    )  # fmt: skip
    assert kept.code != 0
    assert 'The Stage "s1" is invalid: status.conditions.message: Required value' in kept.stderr
    # An optional field sent as null is simply not stored; an empty string is a string.
    optional = {**condition, "message": "", "observedGeneration": None}
    op = [{"op": "add", "path": "/status", "value": {"conditions": [optional]}}]
    await cluster.kubectl(
        "patch", "stage", "s1", "-n", NS, "--subresource=status", "--type=json",
        "-p", json.dumps(op),
    )  # fmt: skip
    [stored] = (await kube.get(k.STAGES, NS, "s1"))["status"]["conditions"]
    assert stored["message"] == "" and "observedGeneration" not in stored, stored


async def test_the_informer_resumes_relists_after_gone_and_loses_nothing(cluster: Cluster) -> None:
    kube = await ready(cluster)
    for name in ("keep", "change", "remove"):
        await kube.create(k.STAGES, stage(name))
    async with tcp_proxy(cluster.url) as proxy:
        watcher_api = cluster.api_client()
        watcher_api.configuration.host = proxy.url_for(cluster.url)
        events: list[tuple[str, str]] = []
        informer = Informer(
            k.Kube(watcher_api),
            k.STAGES,
            namespace=NS,
            watch_timeout=30,
            backoff=Backoff.deterministic(base=0.05, cap=0.2),
            on_event=lambda kind, obj, _old: events.append((kind, obj["metadata"]["name"])),
        )
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 10)
            assert sorted(n for _, n in events) == ["change", "keep", "remove"]
            # Live: a change arrives through the watch.
            await kube.patch(k.STAGES, NS, "keep", {"metadata": {"labels": {"seen": "live"}}})
            await eventually(lambda: ("MODIFIED", "keep") in events)

            # The connection drops; changes happen while nobody watches; history is compacted.
            proxy.cut()
            await kube.patch(k.STAGES, NS, "change", {"metadata": {"labels": {"v": "2"}}})
            await kube.delete(k.STAGES, NS, "remove")
            await kube.create(k.STAGES, stage("new"))
            await cluster.compact()
            proxy.resume()

            def converged() -> bool:
                names = {key[1] for key in informer.store}
                changed = informer.get(NS, "change") or {}
                return (
                    names == {"keep", "change", "new"}
                    and ((changed.get("metadata") or {}).get("labels") or {}).get("v") == "2"
                )

            await eventually(converged, within=20)
            assert ("DELETED", "remove") in events and ("ADDED", "new") in events
            # Back to live watching after the relist.
            await kube.patch(k.STAGES, NS, "new", {"metadata": {"labels": {"after": "relist"}}})
            await eventually(
                lambda: (
                    ((informer.get(NS, "new") or {}).get("metadata") or {})
                    .get("labels", {})
                    .get("after")
                    == "relist"
                )
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def eventually(predicate: Any, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)
