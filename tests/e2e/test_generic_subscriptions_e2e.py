"""A Warehouse with a generic subscription makes Freight, and a Stage promotes it, end to end.

The whole server (``create_app``) runs against the Kubernetes API emulator with one subscriber
service configured (``LONGSHOREMAN_SUBSCRIBERS=s3=<the fake's URL>``, the fake speaking HTTP on
127.0.0.1). A Warehouse subscribes to ``{name: bucket, s3: {config: {...}}}``; the Freight it
makes carries the newest artifact in ``artifacts[]`` as Kargo records it, a Stage that
auto-promotes reads it with ``artifactFrom("bucket")``, and a newer version found on the next
poll is new Freight. A type nobody serves, and a subscriber that fails, are the Warehouse's
discovery failures, said in its conditions.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from promoter.warehouses.freight import freight_id
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import finished_promotion_of
from tests.support.kube import running_apiserver
from tests.support.subscriber import FakeSubscriber, running_fake_subscriber
from tests.support.waiting import eventually

NS = "acme"
TOKEN = "subscriber-token-0123456789"
BUCKET = {"name": "bucket", "s3": {"config": {"bucket": "releases", "prefix": "app/"}}}


@dataclass
class World:
    kube: k.Kube
    subscriber: FakeSubscriber
    clock: FakeClock

    async def freight_with_version(self, version: str) -> dict[str, Any]:
        async def find() -> dict[str, Any] | None:
            items, _ = await self.kube.list(k.FREIGHT, NS)
            return next(
                (f for f in items if (f.get("artifacts") or [{}])[0].get("version") == version),
                None,
            )

        return await eventually(find, f"Freight of version {version}")

    async def promotion_of(self, freight: str) -> dict[str, Any]:
        return await finished_promotion_of(self.kube, NS, freight)

    async def condition(self, warehouse: str, kind: str, reason: str) -> dict[str, Any]:
        async def find() -> dict[str, Any] | None:
            obj = await self.kube.get(k.WAREHOUSES, NS, warehouse)
            conditions = (obj.get("status") or {}).get("conditions") or []
            return next(
                (c for c in conditions if c["type"] == kind and c["reason"] == reason), None
            )

        return await eventually(find, f"Warehouse {warehouse} {kind} {reason}")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock = FakeClock()
    async with (
        running_apiserver(namespaces=[NS], bookmark_interval=0.2, clock=clock.now) as api,
        running_fake_subscriber() as subscriber,
    ):
        settings = Settings.from_env(
            {
                "KUBECONFIG": str(api.kubeconfig_path),
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
                "LONGSHOREMAN_SUBSCRIBERS": f"s3={subscriber.url}",
                "LONGSHOREMAN_SUBSCRIBER_TOKEN": TOKEN,
            }
        )
        kube = k.Kube(api.api_client())
        app = create_app(settings, clock=clock)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            await wait_started(http.app)
            try:
                yield World(kube, subscriber, clock)
            finally:
                with contextlib.suppress(Exception):
                    await kube.close()


async def test_a_generic_subscription_makes_freight_that_a_stage_promotes(world: World) -> None:
    world.subscriber.publish("bucket", "v1.0.0", etag="e1", key="app/v1.0.0.tgz")
    deployed = {"version": '${{ artifactFrom("bucket").Version }}'}
    deployed["etag"] = '${{ artifactFrom("bucket").Metadata.etag }}'
    await world.kube.create(
        k.STAGES,
        objects.stage(
            "test",
            namespace=NS,
            warehouse="app",
            annotations={"longshoreman.dev/auto-promote": "true"},
            steps=[{"uses": "compose-output", "as": "deployed", "config": deployed}],
        ),
    )
    await world.kube.create(
        k.WAREHOUSES, objects.warehouse("app", namespace=NS, interval="10m", subscriptions=[BUCKET])
    )

    first = await world.freight_with_version("v1.0.0")
    artifact = {
        "artifactType": world.subscriber.artifact_type,
        "subscriptionName": "bucket",
        "version": "v1.0.0",
        "metadata": {"etag": "e1", "key": "app/v1.0.0.tgz"},
    }
    assert first["artifacts"] == [artifact]
    assert first["metadata"]["name"] == freight_id(first["origin"], artifacts=[artifact])
    promotion = await world.promotion_of(first["metadata"]["name"])
    assert promotion["status"]["phase"] == "Succeeded", promotion["status"]
    assert promotion["status"]["state"]["deployed"] == {"version": "v1.0.0", "etag": "e1"}

    # What the subscriber was asked: the project, the subscription as written (the discovery
    # limit defaulted), with the operator's token.
    body, authorization = world.subscriber.requests[0]
    assert body == {
        "project": NS,
        "subscription": {
            "name": "bucket",
            "subscriptionType": "s3",
            "config": {"bucket": "releases", "prefix": "app/"},
            "discoveryLimit": 20,
        },
    }
    assert authorization == f"Bearer {TOKEN}"
    warehouse = await world.kube.get(k.WAREHOUSES, NS, "app")
    results = warehouse["status"]["discoveredArtifacts"]["results"]
    assert results == [{"name": "bucket", "artifactReferences": [artifact]}]

    # A newer version, found when the interval has passed, is new Freight, promoted too.
    world.subscriber.publish("bucket", "v1.1.0", etag="e2")
    world.clock.advance(660)
    newest = await world.freight_with_version("v1.1.0")
    promotion = await world.promotion_of(newest["metadata"]["name"])
    assert promotion["status"]["state"]["deployed"] == {"version": "v1.1.0", "etag": "e2"}


async def test_a_type_without_a_subscriber_and_a_failing_subscriber_are_discovery_failures(
    world: World,
) -> None:
    await world.kube.create(
        k.WAREHOUSES,
        objects.warehouse(
            "nobody", namespace=NS, subscriptions=[{"name": "blob", "gcs": {"config": {}}}]
        ),
    )
    unserved = await world.condition("nobody", "Ready", "DiscoveryFailure")
    assert "no matching registration found" in unserved["message"]
    assert "'gcs'" in unserved["message"]

    world.subscriber.failing = 503
    await world.kube.create(
        k.WAREHOUSES, objects.warehouse("failing", namespace=NS, subscriptions=[BUCKET])
    )
    failed = await world.condition("failing", "Healthy", "DiscoveryFailed")
    assert "answered HTTP 503" in failed["message"]
    items, _ = await world.kube.list(k.FREIGHT, NS)
    assert items == []


async def test_creation_criteria_read_a_generic_artifact(world: World) -> None:
    # Evaluated for a Warehouse with only generic subscriptions too (Kargo skips them there).
    world.subscriber.publish("bucket", "v1.0.0", etag="draft")
    criteria = {"expression": 'artifactFrom("bucket").Metadata.etag != "draft"'}
    await world.kube.create(
        k.WAREHOUSES,
        objects.warehouse(
            "gated",
            namespace=NS,
            subscriptions=[BUCKET],
            freightCreationCriteria=criteria,
        ),
    )
    await world.condition("gated", "FreightCreationCriteriaSatisfied", "CriteriaNotSatisfied")
    items, _ = await world.kube.list(k.FREIGHT, NS)
    assert items == []
