"""Freight approval on a real API server: ``/approve`` and ``kubectl`` both let Freight in.

The example project's ``uat`` takes Freight only once it is verified in ``test``. A signed Slack
``/approve`` reaches the real Slack app, whose controller writes ``status.approvedFor`` through
the Freight's status subresource with the ServiceAccount's rights (deploy/base/rbac.yaml); the
server keeps Longshoreman's ``approvedBy`` (the CRD's schema names it, or the server would prune
it). An approval written with ``kubectl patch --subresource=status``, as Kargo documents for its
CLI-less users, counts the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from app.embedded import seed
from slack.app import setup_slack
from tests.cluster.support import ROOT, Cluster
from tests.support import objects
from tests.support.controller import running_controller
from tests.support.slack import (
    TEAM,
    running_fake_slack,
)
from tests.support.slack import (
    slash as support_slash,
)
from tests.support.waiting import eventually

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"
TAUNTAUN = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
WAMPA = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"


async def test_approve_and_kubectl_let_unverified_freight_into_uat(
    cluster: Cluster, tmp_path: Path, aiohttp_client: Any
) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    await kube.create(
        k.FREIGHT, objects.freight(WAMPA, namespace=NS, alias="wise-wampa", warehouse="kargo-demo")
    )
    async with (
        cluster.controller_access() as access,
        running_fake_slack() as slack,
        running_controller(access, tmp_path / "work") as controller,
    ):
        settings = slack.settings(NS)
        app = web.Application()
        setup_slack(app, settings, ClusterPromotions(controller.kube, controller))
        client = await aiohttp_client(app)

        async def slash(command: str, text: str, answer: str) -> str:
            return await support_slash(
                client, slack, text, user="U0ALICE", answer=answer, command=command
            )

        async def cached(name: str) -> None:
            async def seen() -> bool | None:
                freight = controller.freight.get(NS, name) or {}
                return "uat" in ((freight.get("status") or {}).get("approvedFor") or {}) or None

            await eventually(seen, f"the approval of {name} in the informer")

        async def held() -> bool | None:
            return all(controller.freight.get(NS, n) for n in (TAUNTAUN, WAMPA)) or None

        await eventually(held, "the Freight in the informer")
        assert "not available to Stage `uat`" in await slash(
            "/promote", "frozen-tauntaun to uat", "p1"
        )

        said = await slash("/approve", "frozen-tauntaun for uat", "a1")
        assert "*frozen-tauntaun* is approved for *uat*" in said
        stored = await kube.get(k.FREIGHT, NS, TAUNTAUN)
        approval = stored["status"]["approvedFor"]["uat"]
        assert approval["approvedBy"] == f"slack:{TEAM}/U0ALICE" and approval["approvedAt"]
        events, _ = await kube.list(k.EVENTS, NS)
        assert [e["message"] for e in events if e["reason"] == "FreightApproved"] == [
            f'Freight approved for Stage "uat" by "slack:{TEAM}/U0ALICE"'
        ]
        await cached(TAUNTAUN)
        assert "created" in await slash("/promote", "frozen-tauntaun to uat", "p2")

        # kubectl, as an operator would approve without chat.
        patch = {"status": {"approvedFor": {"uat": {"approvedAt": "2025-01-01T00:00:00Z"}}}}
        await cluster.kubectl(
            "patch", "freights.longshoreman.dev", WAMPA, "-n", NS, "--subresource=status",
            "--type=merge", "-p", json.dumps(patch),
        )  # fmt: skip
        shown = await cluster.kubectl(
            "get", "freights.longshoreman.dev", WAMPA, "-n", NS, "-o", "jsonpath={.status}"
        )
        assert json.loads(shown.stdout)["approvedFor"] == patch["status"]["approvedFor"]
        await cached(WAMPA)
        assert "created" in await slash("/promote", "wise-wampa to uat", "p3")
        said = await slash("/approve", "wise-wampa for uat", "a2")
        assert "already approved" in said

        promotions, _ = await kube.list(k.PROMOTIONS, NS)
        assert sorted(p["spec"]["freight"] for p in promotions if p["spec"]["stage"] == "uat") == (
            sorted([TAUNTAUN, WAMPA])
        )
        await client.close()
