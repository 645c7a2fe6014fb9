"""Issue 33: one reference means one Freight, whichever way a person names it.

A Freight's alias may equal another Freight's name (an alias is any label value). Kargo resolves
a reference by exact name first, then by alias; Longshoreman used to do that in chat and the
controller but take the first match on either on the pages, so the same words meant two Freight.
Here one reference is used through all four public ways in: a PR comment (the fake GitHub's
signed webhook), a signed Slack slash command, a status page read over HTTP, and a Promotion
created with the API (what ``kubectl apply`` does) that the controller runs. Everything but
GitHub and Slack is real: the controller on the Kubernetes API server emulator, the chat front
ends through the cluster port (``app.controller.promotions.ClusterPromotions``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.ui.pages import setup_pages
from app.ui.settings import UiSettings
from promoter.resources.freight_refs import ALIAS_LABEL
from slack.app import setup_slack
from tests.support import objects
from tests.support.controller import freight_cached, running_controller, wait_terminal
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.kube import running_apiserver
from tests.support.slack import FakeSlack, running_fake_slack, slash

NS = "shop"
STEPS = [{"uses": "compose-output", "as": "deploy", "config": {"stage": "${{ ctx.stage }}"}}]
# The Freight every reference below means, and one whose alias is that Freight's name. The API
# server lists by name, so the impostor comes first: a "first match on either" rule takes it.
MEANT = "a1b2c3d4e5f6"
IMPOSTOR = "0f9e8d7c6b5a"


def _freight(name: str, alias: str) -> dict[str, Any]:
    # As Kargo stores an alias: the field and the label (its webhook keeps them equal).
    return objects.freight(
        name, namespace=NS, alias=alias, warehouse="shop", labels={ALIAS_LABEL: alias}
    )


@dataclass
class World:
    kube: k.Kube
    github: GitHubEnv
    slack: FakeSlack
    client: TestClient[Any, Any]  # Slack's events and the status pages, as the server mounts them

    async def newest_promotion(self, before: set[str]) -> dict[str, Any]:
        """The one Promotion created since ``before`` (names), run to its end."""
        items, _ = await self.kube.list(k.PROMOTIONS, NS)
        [created] = [p for p in items if p["metadata"]["name"] not in before]
        return await wait_terminal(self.kube, NS, created["metadata"]["name"])

    async def promotion_names(self) -> set[str]:
        items, _ = await self.kube.list(k.PROMOTIONS, NS)
        return {p["metadata"]["name"] for p in items}


@pytest.fixture
async def world(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[World]:
    async with (
        running_fake_slack() as slack,
        running_apiserver(namespaces=[NS], bookmark_interval=0.2) as server,
    ):
        kube = k.Kube(server.api_client())
        await kube.create(
            k.STAGES, objects.stage("test", namespace=NS, warehouse="shop", steps=STEPS)
        )
        await kube.create(k.FREIGHT, _freight(MEANT, "frozen-tauntaun"))
        await kube.create(k.FREIGHT, _freight(IMPOSTOR, MEANT))
        async with running_controller(server, tmp_path / "work") as controller:
            service = ClusterPromotions(kube, controller)
            async with running_github_env(
                tmp_path,
                service=service,
                bot_settings={"GITHUB_PROJECT": NS},  # type: ignore[arg-type]
            ) as github:
                github.fake.set_permission(github.repo, "alice", "write")
                await github.open_pull("change", {"main.go": "package main // 2\n"})
                app = web.Application()
                settings = slack.settings(NS)
                setup_slack(app, settings, service)
                setup_pages(app, UiSettings(), lambda: controller, secrets=())
                client = await aiohttp_client(app)
                await freight_cached(controller, NS, MEANT, IMPOSTOR)
                yield World(kube, github, slack, client)
                await client.close()


async def test_a_name_that_is_another_freights_alias_means_the_named_freight_everywhere(
    world: World,
) -> None:
    # A pull request comment.
    before = await world.promotion_names()
    [reply] = await world.github.comment(f"/promote {MEANT} to test", user="alice")
    assert "Promotion `test." in reply["body"], reply["body"]
    by_github = await world.newest_promotion(before)
    assert by_github["spec"]["freight"] == MEANT
    assert by_github["status"]["phase"] == "Succeeded"

    # A Slack slash command.
    before = await world.promotion_names()
    said = await slash(world.client, world.slack, f"{MEANT} to test", user="U0ALICE", answer="s1")
    assert "frozen-tauntaun" in said and IMPOSTOR not in said, said
    by_slack = await world.newest_promotion(before)
    assert by_slack["spec"]["freight"] == MEANT
    assert by_slack["status"]["phase"] == "Succeeded"

    # A Promotion written by hand (kubectl apply), naming the Freight as people do: the
    # controller runs the named Freight, and by its alias (the informer's alias index).
    for name, ref in (("test.by-name", MEANT), ("test.by-alias", "frozen-tauntaun")):
        await world.kube.create(
            k.PROMOTIONS, objects.promotion(name, "test", namespace=NS, freight=ref)
        )
        done = await wait_terminal(world.kube, NS, name)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert done["status"]["freight"]["name"] == MEANT
    stage = await world.kube.get(k.STAGES, NS, "test")
    [current] = stage["status"]["freightHistory"][0]["items"].values()
    assert current["name"] == MEANT

    # The status page of that hand-written Promotion names the same Freight.
    page = await world.client.get(f"/ui/promotions/{NS}/test.by-name")
    assert page.status == 200
    html = await page.text()
    assert f"frozen-tauntaun ({MEANT})" in html
    assert IMPOSTOR not in html
