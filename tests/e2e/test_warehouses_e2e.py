"""A pushed image reaches an auto-promoting Stage, end to end, with no manual step.

The whole server (``create_app``) runs against the Kubernetes API emulator; the test pushes
images to a real docker-registry through the registry API. A Warehouse subscribes to the image,
a Stage annotated ``longshoreman.dev/auto-promote`` takes its Freight directly. Two ways in:

* **webhook**: the Warehouse polls once an hour, so only the registry's webhook (Harbor's
  ``PUSH_ARTIFACT``, authenticated by its header) can make the new tag's Freight appear; the
  Promotion of that Freight then succeeds;
* **polling**: no webhook at all, a Warehouse polling every second finds the tag by itself.

And for a Stage that does not auto-promote, its Slack channel (the fake Slack, over HTTP) gets
one "New Freight ... is available" message whose Promote button, pressed with a request signed
as Slack signs it, promotes the Freight to Succeeded.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from app.controller import kube as k
from app.server import create_app, wait_started
from app.settings import Settings
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import finished_promotion_of
from tests.support.fixtures import webhook_body
from tests.support.kube import running_apiserver
from tests.support.registry import Registry, running_registry
from tests.support.slack import (
    SIGNING_SECRET,
    TOKEN,
    FakeSlack,
    button_click,
    running_fake_slack,
    signed_headers,
    slash_command,
)
from tests.support.waiting import eventually

NS = "acme"
HARBOR_AUTH = "Bearer harbor-e2e-secret-0123456789"


def warehouse(repo: str, interval: str) -> dict[str, Any]:
    return objects.warehouse(
        "app",
        namespace=NS,
        interval=interval,
        subscriptions=[{"image": {"repoURL": repo, "constraint": "^1.0.0"}}],
    )


def auto_stage(repo: str) -> dict[str, Any]:
    """Stage ``test``, promoting every new Freight of Warehouse ``app``: its one step records
    the tag of ``repo``'s image it deployed."""
    deployed = {"image": '${{ imageFrom("' + repo + '").Tag }}'}
    return objects.stage(
        "test",
        namespace=NS,
        warehouse="app",
        annotations={"longshoreman.dev/auto-promote": "true"},
        steps=[{"uses": "compose-output", "as": "deployed", "config": deployed}],
    )


@dataclass
class World:
    kube: k.Kube
    registry: Registry
    http: TestClient[Any, Any]
    slack: FakeSlack
    # The server's clock: a Warehouse's next poll comes when the test moves it.
    clock: FakeClock

    async def freight_with_tag(self, tag: str) -> dict[str, Any]:
        async def find() -> dict[str, Any] | None:
            items, _ = await self.kube.list(k.FREIGHT, NS)
            return next((f for f in items if f["images"][0]["tag"] == tag), None)

        return await eventually(find, f"Freight of {tag}")

    async def promotion_of(self, freight: str) -> dict[str, Any]:
        return await finished_promotion_of(self.kube, NS, freight)

    async def start(self, interval: str) -> None:
        repo = self.registry.repo("acme/app")
        stage = auto_stage(repo)
        await self.kube.create(k.STAGES, stage)
        await self.kube.create(k.WAREHOUSES, warehouse(repo, interval))


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    # One clock for the server and the API server: creationTimestamps and the Warehouse's
    # Freight stamps agree when a test moves it (promoter.resources.stages.freight_created trusts a
    # stamp
    # only near creationTimestamp).
    clock = FakeClock()
    async with (
        running_apiserver(namespaces=[NS], bookmark_interval=0.2, clock=clock.now) as api,
        running_registry(tmp_path) as registry,
        running_fake_slack() as slack,
    ):
        settings = Settings.from_env(
            {
                "KUBECONFIG": str(api.kubeconfig_path),
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
                "LONGSHOREMAN_HARBOR_WEBHOOK_AUTH": HARBOR_AUTH,
                "LONGSHOREMAN_SLACK_BOT_TOKEN": TOKEN,
                "LONGSHOREMAN_SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "LONGSHOREMAN_SLACK_API_URL": slack.url,
                "LONGSHOREMAN_SLACK_PROJECT": NS,
            }
        )
        kube = k.Kube(api.api_client())
        app = create_app(settings, clock=clock)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            await wait_started(http.app)
            try:
                yield World(kube, registry, http, slack, clock)
            finally:
                with contextlib.suppress(Exception):
                    await kube.close()


async def test_a_registry_webhook_takes_a_pushed_image_to_a_succeeded_promotion(
    world: World,
) -> None:
    await world.registry.push_image("acme/app", "1.0.0")
    await world.start(interval="1h")
    first = await world.freight_with_tag("1.0.0")
    assert (await world.promotion_of(first["metadata"]["name"]))["status"]["phase"] == "Succeeded"
    # The leader's Warehouse reconciles show in the operator's metrics.
    metrics = await (await world.http.get("/metrics")).text()
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    reconciles = families["longshoreman_warehouse_reconcile_duration_seconds"].samples
    assert next(s.value for s in reconciles if s.name.endswith("_count")) >= 1

    # The server's clock stands still unless moved: a moment passes before the next push.
    world.clock.advance(0.5)
    await world.registry.push_image("acme/app", "1.1.0")
    event = webhook_body("harbor.push_artifact")
    resource = event["event_data"]["resources"][0]
    resource["resource_url"] = f"{world.registry.repo('acme/app')}:1.1.0"
    resource["tag"] = "1.1.0"
    response = await world.http.post(
        "/webhooks/harbor", json=event, headers={"Authorization": HARBOR_AUTH}
    )
    assert response.status == 202, await response.text()
    assert (await response.json())["warehouses"] == [f"{NS}/app"]

    newest = await world.freight_with_tag("1.1.0")
    promotion = await world.promotion_of(newest["metadata"]["name"])
    assert promotion["status"]["phase"] == "Succeeded", promotion["status"]
    assert promotion["spec"]["stage"] == "test"

    async def holding() -> dict[str, Any] | None:
        # The Stage's status is written after the Promotion's.
        stage = await world.kube.get(k.STAGES, NS, "test")
        current = (stage.get("status") or {}).get("freightHistory") or []
        return stage if current and newest["metadata"]["name"] in json.dumps(current[0]) else None

    await eventually(holding, "the Stage holding the new Freight")


async def test_polling_finds_a_pushed_image_without_any_webhook(world: World) -> None:
    await world.registry.push_image("acme/app", "1.0.0")
    await world.start(interval="10m")
    first = await world.freight_with_tag("1.0.0")
    assert (await world.promotion_of(first["metadata"]["name"]))["status"]["phase"] == "Succeeded"
    await world.registry.push_image("acme/app", "1.2.0")
    # Nobody tells the Warehouse; its interval (and the jitter of up to 10% of it) passes on
    # the server's clock, and it looks.
    world.clock.advance(660)
    newest = await world.freight_with_tag("1.2.0")
    promotion = await world.promotion_of(newest["metadata"]["name"])
    assert promotion["status"]["phase"] == "Succeeded", promotion["status"]


async def test_a_stage_that_does_not_auto_promote_hears_of_it_in_slack_and_its_button_works(
    world: World,
) -> None:
    await world.registry.push_image("acme/app", "1.4.2")
    repo = world.registry.repo("acme/app")
    stage = auto_stage(repo)
    stage["metadata"]["name"] = "qa"
    stage["metadata"]["annotations"] = {"longshoreman.dev/slack-channel": "C0QA"}
    await world.kube.create(k.STAGES, stage)
    await world.kube.create(k.WAREHOUSES, warehouse(repo, "1h"))
    freight = await world.freight_with_tag("1.4.2")
    [message] = await world.slack.wait_for(
        lambda: world.slack.channel("C0QA"), what="the new-Freight message"
    )
    assert message.text == f"New Freight {freight['alias']} is available to qa"
    assert f"{repo}:1.4.2" in json.dumps(message.blocks)
    items, _ = await world.kube.list(k.PROMOTIONS, NS)
    assert items == []  # nothing happens by itself

    (button,) = message.buttons.values()
    body = button_click(button, user="U0BOB", response_url=world.slack.response_url("b1"))
    response = await world.http.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    promotion = await world.promotion_of(freight["metadata"]["name"])
    assert promotion["status"]["phase"] == "Succeeded"
    assert promotion["spec"]["stage"] == "qa"

    async def recorded() -> str | None:
        told = await world.kube.get(k.FREIGHT, NS, freight["metadata"]["name"])
        value = (told["metadata"].get("annotations") or {}).get("longshoreman.dev/slack-announced")
        return str(value) if value else None

    assert await eventually(recorded, "the announcement recorded") == "qa"
    assert len(world.slack.channel("C0QA")) >= 1
    assert [m.text for m in world.slack.channel("C0QA")].count(message.text) == 1


async def test_a_manual_warehouse_makes_freight_when_chat_asks_for_a_discovered_image(
    world: World,
) -> None:
    for tag in ("1.0.0", "1.1.0"):
        await world.registry.push_image("acme/app", tag)
    repo = world.registry.repo("acme/app")
    stage = auto_stage(repo)
    stage["metadata"]["annotations"] = {}  # promoted by hand
    await world.kube.create(k.STAGES, stage)
    manual = warehouse(repo, "1h")
    manual["spec"]["freightCreationPolicy"] = "Manual"
    await world.kube.create(k.WAREHOUSES, manual)

    async def discovered() -> dict[str, Any] | None:
        got = await world.kube.get(k.WAREHOUSES, NS, "app")
        return got if (got.get("status") or {}).get("discoveredArtifacts") else None

    listed = await eventually(discovered, "the discovered artifacts")
    tags = [r["tag"] for r in listed["status"]["discoveredArtifacts"]["images"][0]["references"]]
    assert tags == ["1.1.0", "1.0.0"]
    assert (await world.kube.list(k.FREIGHT, NS))[0] == []  # Manual: none by itself

    body = slash_command(
        f"{repo}:1.0.0 to test", user="U0BOB", response_url=world.slack.response_url("s1")
    )
    response = await world.http.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    freight = await world.freight_with_tag("1.0.0")
    assert freight["origin"] == {"kind": "Warehouse", "name": "app"} and freight["alias"]
    promotion = await world.promotion_of(freight["metadata"]["name"])
    assert promotion["status"]["phase"] == "Succeeded"
    [answer] = await world.slack.wait_for(lambda: world.slack.responses["s1"], what="the answer")
    assert "created" in answer["text"]
    assert len((await world.kube.list(k.FREIGHT, NS))[0]) == 1
