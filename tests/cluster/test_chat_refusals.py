"""A Promotion the cluster refuses, asked for from chat: the user reads the server's own words.

The operator has taken ``create`` on Promotions away from the controller's ServiceAccount. A
signed Slack ``/promote`` reaches the real Slack app, whose controller talks to the cluster with
that ServiceAccount's rights; the API server answers 403, and the user is told exactly that,
instead of "see the server log".
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from aiohttp import web

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.embedded import seed
from slack.app import setup_slack
from slack.settings import SlackSettings
from tests.cluster.support import ROOT, Cluster, rbac_objects
from tests.support.controller import running_controller
from tests.support.slack import (
    SIGNING_SECRET,
    TOKEN,
    running_fake_slack,
    signed_headers,
    slash_command,
)

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"


def without_promotion_create(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(objects)
    for obj in out:
        for rule in obj.get("rules") or []:
            if rule.get("resources") == ["promotions"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    return out


async def test_a_promotion_refused_by_the_cluster_is_explained_in_chat(
    cluster: Cluster, tmp_path: Path, aiohttp_client: Any
) -> None:
    await cluster.install_crds()
    await seed(cluster.kube(), [PROJECT])
    async with (
        cluster.controller_access(without_promotion_create(rbac_objects())) as access,
        running_fake_slack() as slack,
        running_controller(access, tmp_path / "work") as controller,
    ):
        settings = SlackSettings(
            bot_token=TOKEN, signing_secret=SIGNING_SECRET, api_url=slack.url, namespace=NS
        )
        app = web.Application()
        setup_slack(app, settings, ClusterPromotions(controller.kube, controller))
        client = await aiohttp_client(app)
        body = slash_command(
            "frozen-tauntaun to test", user="U0ALICE", response_url=slack.response_url("cmd")
        )
        response = await client.post("/slack/events", data=body, headers=signed_headers(body))
        assert response.status == 200
        await slack.wait_for(lambda: slack.responses["cmd"], what="the answer")
        answer = slack.responses["cmd"][0]["text"]
        assert "the cluster refused the Promotion" in answer, answer
        assert (
            'promotions.longshoreman.dev is forbidden: User "system:serviceaccount:longshoreman:'
            'longshoreman" cannot create resource "promotions" in API group "longshoreman.dev" '
            'in the namespace "kargo-demo"'
        ) in answer, answer
        items, _ = await cluster.kube().list(k.PROMOTIONS, NS)
        assert items == []
        await client.close()
