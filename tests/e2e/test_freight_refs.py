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
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from app.controller import kube as k
from app.controller.reconciler import Controller
from app.ui.pages import setup_pages
from app.ui.settings import UiSettings
from promoter.resources.freight_refs import ALIAS_LABEL
from tests.support import objects
from tests.support.chat import ChatCluster, running_chat_cluster
from tests.support.controller import freight_cached, wait_terminal
from tests.support.slack import slash

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


def _pages(app: web.Application, controller: Controller) -> None:
    setup_pages(app, UiSettings(), lambda: controller, secrets=())


@pytest.fixture
async def chat(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[ChatCluster]:
    async with running_chat_cluster(tmp_path, aiohttp_client, NS, mount=_pages) as chat:
        await chat.kube.create(
            k.STAGES, objects.stage("test", namespace=NS, warehouse="shop", steps=STEPS)
        )
        await chat.kube.create(k.FREIGHT, _freight(MEANT, "frozen-tauntaun"))
        await chat.kube.create(k.FREIGHT, _freight(IMPOSTOR, MEANT))
        chat.github.fake.set_permission(chat.github.repo, "alice", "write")
        await chat.github.open_pull("change", {"main.go": "package main // 2\n"})
        await freight_cached(chat.controller, NS, MEANT, IMPOSTOR)
        yield chat


async def _promotion_names(chat: ChatCluster) -> set[str]:
    items, _ = await chat.kube.list(k.PROMOTIONS, NS)
    return {p["metadata"]["name"] for p in items}


async def _new_promotion(chat: ChatCluster, before: set[str]) -> dict[str, Any]:
    """The one Promotion created since ``before`` (names), run to its end."""
    items, _ = await chat.kube.list(k.PROMOTIONS, NS)
    [created] = [p for p in items if p["metadata"]["name"] not in before]
    return await wait_terminal(chat.kube, NS, created["metadata"]["name"])


async def test_a_name_that_is_another_freights_alias_means_the_named_freight_everywhere(
    chat: ChatCluster,
) -> None:
    # A pull request comment.
    before = await _promotion_names(chat)
    [reply] = await chat.github.comment(f"/promote {MEANT} to test", user="alice")
    assert "Promotion `test." in reply["body"], reply["body"]
    by_github = await _new_promotion(chat, before)
    assert by_github["spec"]["freight"] == MEANT
    assert by_github["status"]["phase"] == "Succeeded"

    # A Slack slash command.
    before = await _promotion_names(chat)
    said = await slash(chat.client, chat.slack, f"{MEANT} to test", user="U0ALICE", answer="s1")
    assert "frozen-tauntaun" in said and IMPOSTOR not in said, said
    by_slack = await _new_promotion(chat, before)
    assert by_slack["spec"]["freight"] == MEANT
    assert by_slack["status"]["phase"] == "Succeeded"

    # A Promotion written by hand (kubectl apply), naming the Freight as people do: the
    # controller runs the named Freight, and by its alias (the informer's alias index).
    for name, ref in (("test.by-name", MEANT), ("test.by-alias", "frozen-tauntaun")):
        await chat.kube.create(
            k.PROMOTIONS, objects.promotion(name, "test", namespace=NS, freight=ref)
        )
        done = await wait_terminal(chat.kube, NS, name)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert done["status"]["freight"]["name"] == MEANT
    stage = await chat.kube.get(k.STAGES, NS, "test")
    [current] = stage["status"]["freightHistory"][0]["items"].values()
    assert current["name"] == MEANT

    # The status page of that hand-written Promotion names the same Freight.
    page = await chat.client.get(f"/ui/promotions/{NS}/test.by-name")
    assert page.status == 200
    html = await page.text()
    assert f"frozen-tauntaun ({MEANT})" in html
    assert IMPOSTOR not in html
