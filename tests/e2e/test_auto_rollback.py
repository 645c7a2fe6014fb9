"""Automatic rollback (ProjectConfig ``autoRollback``): Kargo's rules as a table, then end to end.

The table holds :func:`promoter.control.rollback.plan_rollback` to the guide's rules (settled
Stage, 20-minute failure age, no rollback of a rollback, a stable Freight to go back to, the
phases and their defaults) and to once-per-failure. The end-to-end test runs the reconciler
against the API server emulator and a fake Argo Rollouts controller: a Freight whose
verification fails is rolled back once, by a Promotion carrying Kargo's annotation, whose steps
see ``ctx.meta.promotion.rollback``; the rollback's own failure starts nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from handlers.checks import summary
from promoter.chat.views import promotion_view
from promoter.control.policies import AutoRollback
from promoter.control.rollback import Rollback, plan_rollback
from promoter.resources import annotations as ann
from slack.messages import render_promotion
from tests.support import objects
from tests.support.controller import (
    Cluster,
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)
from tests.support.fixtures import analysis_template
from tests.support.rollouts import FakeRolloutsController, KubernetesAnalysisRuns, Outcome

NOW = datetime(2026, 1, 7, 12, 0, tzinfo=UTC)
RECENT = "2026-01-07T11:55:00Z"
OLD = "2026-01-07T11:30:00Z"  # more than 20 minutes ago


def entry(freight: str, *verifications: dict[str, Any]) -> dict[str, Any]:
    return {
        "items": {"Warehouse/w": {"name": freight}},
        "verificationHistory": list(verifications),
    }


def verification(
    phase: str, promotion: str, finished: str = RECENT, id_: str = "v1"
) -> dict[str, Any]:
    return {"id": id_, "phase": phase, "promotion": promotion, "finishTime": finished}


def prod(*history: dict[str, Any]) -> dict[str, Any]:
    return objects.stage("prod", status={"freightHistory": list(history)})


def promo(
    name: str,
    phase: str,
    freight: str,
    finished: str = RECENT,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return objects.promotion(
        name,
        "prod",
        freight=freight,
        phase=phase,
        annotations=annotations,
        status={"phase": phase, "finishedAt": finished, "freight": {"name": freight}},
    )


DEFAULTS = AutoRollback()  # autoRollback: {}
BOTH = AutoRollback(on_promotion=("Failed", "Errored"), on_verification=("Failed", "Error"))
VERIFIED_F1 = prod(
    entry("f2", verification("Failed", "p2")), entry("f1", verification("Successful", "p1"))
)
PROMOTIONS = [promo("p1", "Succeeded", "f1", OLD), promo("p2", "Succeeded", "f2")]

ROWS: list[
    tuple[str, AutoRollback | None, dict[str, Any], list[dict[str, Any]], Rollback | None]
] = [
    ("no autoRollback: nothing", None, VERIFIED_F1, PROMOTIONS, None),
    (
        "a failed verification goes back to the newest verified Freight",
        DEFAULTS,
        VERIFIED_F1,
        PROMOTIONS,
        Rollback("f1", "verification/v1", "verification of Freight f2 ended Failed"),
    ),
    (
        "an Error verification is not a failure by default",
        DEFAULTS,
        prod(
            entry("f2", verification("Error", "p2")), entry("f1", verification("Successful", "p1"))
        ),
        PROMOTIONS,
        None,
    ),
    (
        "onVerification: [Failed, Error] rolls back on Error",
        BOTH,
        prod(
            entry("f2", verification("Error", "p2")), entry("f1", verification("Successful", "p1"))
        ),
        PROMOTIONS,
        Rollback("f1", "verification/v1", "verification of Freight f2 ended Error"),
    ),
    (
        "not while a Promotion is queued (it may fix the failure)",
        DEFAULTS,
        VERIFIED_F1,
        [*PROMOTIONS, promo("p3", "Pending", "f3")],
        None,
    ),
    (
        "a failure older than 20 minutes is old news",
        DEFAULTS,
        prod(
            entry("f2", verification("Failed", "p2", OLD)),
            entry("f1", verification("Successful", "p1")),
        ),
        PROMOTIONS,
        None,
    ),
    (
        "no stable Freight: nothing to go back to",
        DEFAULTS,
        prod(entry("f2", verification("Failed", "p2")), entry("f1", verification("Failed", "p1"))),
        PROMOTIONS,
        None,
    ),
    (
        "once per failure: a rollback already answers it",
        DEFAULTS,
        VERIFIED_F1,
        [*PROMOTIONS, promo("rb", "Succeeded", "f1", annotations=ann.rollback("verification/v1"))],
        None,
    ),
    (
        "no rollback of a rollback: its verification failed too",
        DEFAULTS,
        prod(
            entry("f1", verification("Failed", "rb", id_="v2")),
            entry("f2", verification("Failed", "p2")),
            entry("f1", verification("Successful", "p1")),
        ),
        [*PROMOTIONS, promo("rb", "Succeeded", "f1", annotations=ann.rollback("verification/v1"))],
        None,
    ),
    (
        "a failed Promotion does not roll back by default",
        DEFAULTS,
        prod(entry("f1", verification("Successful", "p1"))),
        [promo("p1", "Succeeded", "f1", OLD), promo("p2", "Failed", "f2")],
        None,
    ),
    (
        "onPromotion: [Failed] puts the stable Freight back after a failed Promotion",
        BOTH,
        prod(entry("f1", verification("Successful", "p1", OLD))),
        [promo("p1", "Succeeded", "f1", OLD), promo("p2", "Failed", "f2")],
        Rollback("f1", "promotion/p2", "Promotion p2 ended Failed"),
    ),
    (
        "a failed rollback Promotion is left alone",
        BOTH,
        prod(entry("f1", verification("Successful", "p1", OLD))),
        [
            promo("p1", "Succeeded", "f1", OLD),
            promo("rb", "Errored", "f1", annotations=ann.rollback("promotion/p0")),
        ],
        None,
    ),
    (
        "the stable Freight is the failing one: nothing to do",
        BOTH,
        prod(entry("f1", verification("Successful", "p1", OLD))),
        [promo("p1", "Succeeded", "f1", OLD), promo("p2", "Failed", "f1")],
        None,
    ),
]


@pytest.mark.parametrize(
    ("policy", "stage", "promotions", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_when_a_stage_is_rolled_back(
    policy: AutoRollback | None,
    stage: dict[str, Any],
    promotions: list[dict[str, Any]],
    expected: Rollback | None,
) -> None:
    assert plan_rollback(stage, promotions, policy, lambda name: False, NOW) == expected


def test_the_freight_s_verified_in_counts_as_stable_too() -> None:
    stage = prod(entry("f2", verification("Failed", "p2")), entry("f1"))
    decided = plan_rollback(stage, PROMOTIONS, DEFAULTS, lambda name: name == "f1", NOW)
    assert decided is not None and decided.freight == "f1"


# ---- end to end ---------------------------------------------------------------------------------

NS = "rb"
STEPS = [
    {
        "uses": "compose-output",
        "as": "out",
        "config": {"rollback": "${{ ctx.meta.promotion.rollback }}"},
    }
]


@dataclass
class Env(Cluster):
    rollouts: FakeRolloutsController


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running_cluster(tmp_path, [NS]) as c:
        template = analysis_template("multiple-job")
        template["metadata"]["namespace"] = NS
        await c.kube.create(k.ANALYSIS_TEMPLATES, template)
        rollouts = FakeRolloutsController(KubernetesAnalysisRuns(c.server.api_client()))
        yield Env(c.server, c.kube, c.work, rollouts)


def freight(name: str) -> dict[str, Any]:
    return objects.freight(
        name, namespace=NS, warehouse="app", images=[{"repoURL": "ghcr.io/x/app", "tag": name}]
    )


async def test_a_failed_verification_rolls_the_stage_back_once(env: Env) -> None:
    # f1 passes, f2 fails, and so does the rollback's own verification: one rollback only.
    env.rollouts.script_stage("prod", Outcome("Successful"), Outcome("Failed"), Outcome("Failed"))
    await env.kube.create(
        k.STAGES,
        objects.stage(
            "prod",
            namespace=NS,
            warehouse="app",
            steps=STEPS,
            verification=["multiple-job"],
            verification_args=[{"name": "exit-code", "value": "0"}],
        ),
    )
    await env.kube.create(
        k.PROJECT_CONFIGS,
        objects.project_config(
            NS, policies=[{"stageSelector": {"name": "prod"}, "autoRollback": {}}]
        ),
    )
    f1, f2 = "a" * 40, "b" * 40
    await env.kube.create(k.FREIGHT, freight(f1))
    await env.kube.create(k.FREIGHT, freight(f2))
    reconciles: list[float] = []
    running = running_controller(env.server, env.work, on_reconcile=reconciles.append)
    async with running, env.rollouts.running():
        await env.kube.create(
            k.PROMOTIONS, objects.promotion("p1", "prod", namespace=NS, freight=f1)
        )
        await wait_terminal(env.kube, NS, "p1")
        await wait_for_object(
            env.kube,
            k.FREIGHT,
            NS,
            f1,
            lambda f: "prod" in ((f.get("status") or {}).get("verifiedIn") or {}),
        )
        await env.kube.create(
            k.PROMOTIONS, objects.promotion("p2", "prod", namespace=NS, freight=f2)
        )
        await wait_terminal(env.kube, NS, "p2")

        async def rollbacks() -> list[dict[str, Any]]:
            items, _ = await env.kube.list(k.PROMOTIONS, NS)
            return [p for p in items if ann.is_rollback(p)]

        stage = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "prod",
            lambda s: (
                len((s.get("status") or {}).get("freightHistory") or []) >= 3
                and (s["status"]["freightHistory"][0].get("verificationHistory") or [{}])[0].get(
                    "phase"
                )
                == "Failed"
            ),
        )
        # The rollback's verification failed too; the Stage is reconciled again and again
        # (health checks every 0.2 s) and still there is one rollback.
        seen = len(reconciles)
        async with asyncio.timeout(20):
            while True:
                if len(reconciles) >= seen + 5:
                    break
                await asyncio.sleep(0.02)
        (rollback,) = await rollbacks()
    annotations = rollback["metadata"]["annotations"]
    assert annotations["longshoreman.dev/rollback"] == "true"
    assert annotations[ann.ROLLBACK_OF].startswith("verification/")
    assert ann.created_by(rollback) == "longshoreman:auto-rollback"
    assert rollback["spec"]["freight"] == f1
    done = await env.kube.get(k.PROMOTIONS, NS, rollback["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"
    assert done["status"]["state"]["out"]["rollback"] is True
    history = stage["status"]["freightHistory"]
    assert [next(iter(h["items"].values()))["name"] for h in history[:3]] == [f1, f2, f1]


def test_chat_and_check_runs_call_a_rollback_a_rollback() -> None:
    rollback = objects.promotion(
        "prod.rb",
        "prod",
        freight="f1",
        phase="Running",
        annotations=ann.rollback("verification/v1"),
    )
    view = promotion_view(rollback)
    assert view.rollback
    message = render_promotion(view)
    assert message.text.startswith(":arrows_counterclockwise: Rollback prod.rb: prod back to f1")
    assert "Rollback of *prod* to *f1*" in message.blocks[0]["text"]["text"]
    assert summary(view).startswith("Rollback `prod.rb` of Stage `prod` to Freight `f1`")
    plain = promotion_view(objects.promotion("prod.p", "prod", freight="f1", phase="Running"))
    assert not plain.rollback and "Rollback" not in render_promotion(plain).text
