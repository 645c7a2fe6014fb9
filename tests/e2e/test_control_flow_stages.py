"""Control-flow Stages, done when: Kargo's example (a Stage without steps between ``test`` and two
prod Stages, kargo-advanced's ``prod``) applies unchanged, and Freight verified in ``test``
reaches both prod Stages by ``/promote`` and by auto-promotion.

Everything real but GitHub and Slack (:func:`tests.support.chat.running_chat_cluster`). The
control-flow Stage is applied as Kargo's manifest reads (only the API group changed, as for any
Kargo manifest in a cluster): no ``promotionTemplate``, requesting Freight verified in ``test``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.controller import kube as k
from tests.support import objects
from tests.support.chat import ChatCluster, running_chat_cluster
from tests.support.controller import freight_cached, wait_for_object, wait_terminal
from tests.support.slack import slash
from tests.support.waiting import eventually

NS = "kargo-advanced"
STEPS = [{"uses": "compose-output", "as": "deploy", "config": {"stage": "${{ ctx.stage }}"}}]
# kargo-advanced's control-flow Stage, as Kargo's example writes it (its upstream renamed test).
PROD = """
apiVersion: longshoreman.dev/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: kargo-advanced
  annotations:
    kargo.akuity.io/color: blue
spec:
  requestedFreight:
  - origin:
      kind: Warehouse
      name: guestbook
    sources:
      stages:
      - test
"""
FREIGHT = "0123456789abcdef0123456789abcdef01234567"


def region(name: str, auto: bool) -> dict[str, Any]:
    return objects.stage(
        name,
        namespace=NS,
        warehouse="guestbook",
        upstream=["prod"],
        steps=STEPS,
        annotations={"longshoreman.dev/auto-promote": "true"} if auto else {},
    )


async def setup(chat: ChatCluster, *, auto: bool) -> None:
    kube = chat.kube
    await kube.create(
        k.STAGES,
        objects.stage("test", namespace=NS, warehouse="guestbook", steps=STEPS),
    )
    await kube.create(k.STAGES, yaml.safe_load(PROD))
    for name in ("prod-west", "prod-east"):
        await kube.create(k.STAGES, region(name, auto))
    await kube.create(
        k.FREIGHT, objects.freight(FREIGHT, namespace=NS, alias="wise-wampa", warehouse="guestbook")
    )
    await freight_cached(chat.controller, NS, FREIGHT)


async def verified_in_test(chat: ChatCluster) -> None:
    """The Freight goes into test by /promote and is verified there (no verification: at once)."""
    said = await slash(chat.client, chat.slack, "wise-wampa to test", user="U0ALICE", answer="t")
    assert "created" in said, said
    promotions, _ = await chat.kube.list(k.PROMOTIONS, NS)
    [to_test] = [p for p in promotions if p["spec"]["stage"] == "test"]
    done = await wait_terminal(chat.kube, NS, to_test["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"


def _in_prod(freight: dict[str, Any] | None) -> bool:
    return "prod" in (((freight or {}).get("status") or {}).get("verifiedIn") or {})


async def passed_on(chat: ChatCluster) -> dict[str, Any]:
    """Until prod (control flow) has marked the Freight verified, and the controller's cache,
    which chat commands read, holds that."""
    freight = await wait_for_object(chat.kube, k.FREIGHT, NS, FREIGHT, _in_prod)

    async def cached() -> bool | None:
        return _in_prod(chat.controller.freight.get(NS, FREIGHT)) or None

    await eventually(cached, "the passed-on Freight in the controller's cache")
    return freight


async def test_freight_reaches_both_prod_stages_by_promote(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    async with running_chat_cluster(tmp_path, aiohttp_client, NS) as chat:
        await setup(chat, auto=False)
        await verified_in_test(chat)
        freight = await passed_on(chat)
        assert set(freight["status"]["verifiedIn"]) == {"test", "prod"}
        # Nothing is promoted to the control-flow Stage itself, and it says why.
        said = await slash(
            chat.client, chat.slack, "wise-wampa to prod", user="U0ALICE", answer="cf"
        )
        assert "is a control-flow Stage" in said, said
        for name in ("prod-west", "prod-east"):
            said = await slash(
                chat.client, chat.slack, f"wise-wampa to {name}", user="U0ALICE", answer=name
            )
            assert "created" in said, said
        promotions, _ = await chat.kube.list(k.PROMOTIONS, NS)
        regional = [p for p in promotions if p["spec"]["stage"] in ("prod-west", "prod-east")]
        assert len(regional) == 2
        for promotion in regional:
            done = await wait_terminal(chat.kube, NS, promotion["metadata"]["name"])
            assert done["status"]["phase"] == "Succeeded"
        prod = await chat.kube.get(k.STAGES, NS, "prod")
        events, _ = await chat.kube.list(k.EVENTS, NS)
    # The control-flow Stage's status is Kargo's: no Freight of its own, Ready.
    assert prod["status"]["freightSummary"] == "N/A"
    assert "freightHistory" not in prod["status"]
    assert [c["status"] for c in prod["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    [passed] = [
        e for e in events
        if e["reason"] == "FreightVerificationSucceeded"
        and e["metadata"]["annotations"]["event.kargo.akuity.io/stage-name"] == "prod"
    ]  # fmt: skip
    assert passed["involvedObject"]["kind"] == "Freight"
    assert passed["message"] == "Freight verification succeeded"
    assert passed["metadata"]["annotations"]["event.kargo.akuity.io/freight-alias"] == "wise-wampa"


async def test_freight_reaches_both_prod_stages_by_auto_promotion(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    async with running_chat_cluster(tmp_path, aiohttp_client, NS) as chat:
        await setup(chat, auto=True)
        await verified_in_test(chat)
        await passed_on(chat)
        for name in ("prod-west", "prod-east"):
            stage = await wait_for_object(
                chat.kube, k.STAGES, NS, name,
                lambda s: bool((s.get("status") or {}).get("freightHistory")),
            )  # fmt: skip
            [item] = stage["status"]["freightHistory"][0]["items"].values()
            assert item["name"] == FREIGHT
        promotions, _ = await chat.kube.list(k.PROMOTIONS, NS)
    actors = {
        p["spec"]["stage"]: p["metadata"]["annotations"]["longshoreman.dev/create-actor"]
        for p in promotions
    }
    assert actors["prod-west"] == actors["prod-east"] == "longshoreman:auto-promotion"
    assert "prod" not in actors
