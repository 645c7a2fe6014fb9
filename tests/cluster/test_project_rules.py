"""A project's ProjectConfig on a real API server: promotion windows and automatic rollback.

The ProjectConfig is applied with ``kubectl`` as Kargo's manifest, its apiVersion changed to
ours. The controller runs with the ServiceAccount's rights only. Windows: on a Saturday (the
controller's clock) a Promotion created with kubectl is held Pending with the window's name and
its reopening, the Stage's ``status.promotionWindowStatus`` survives the server's schema,
``kubectl get projectconfigs`` says what is in force, and the Promotion starts when Monday
comes. Rollback: a Freight whose AnalysisRun fails is rolled back to the verified one, once.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from app.controller import kube as k
from promoter.resources import annotations as ann
from tests.cluster.support import Cluster
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import running_controller, wait_for_object, wait_terminal
from tests.support.fixtures import analysis_template, kargo_documents
from tests.support.rollouts import FakeRolloutsController, KubernetesAnalysisRuns, Outcome

NS = "kargo-demo"
STEPS = [
    {
        "uses": "compose-output",
        "as": "out",
        "config": {"rollback": "${{ ctx.meta.promotion.rollback }}"},
    }
]
F1, F2 = "a" * 40, "b" * 40


def kargo_project_config() -> dict[str, Any]:
    """Kargo's ProjectConfig for kargo-demo (auto-promotion by glob, a weekend freeze on prod,
    links, a receiver), as written for Kargo."""
    (found,) = [
        d
        for d in kargo_documents("project-configs.yaml")
        if d["kind"] == "ProjectConfig" and d["metadata"]["name"] == NS
    ]
    return found


async def _setup(cluster: Cluster, *stages: dict[str, Any]) -> None:
    await cluster.install_crds()
    await cluster.kubectl("create", "namespace", NS)
    admin = cluster.kube()
    for stage in stages:
        await admin.create(k.STAGES, stage)
    for name in (F1, F2):
        await admin.create(
            k.FREIGHT,
            objects.freight(
                name, namespace=NS, warehouse="app", images=[{"repoURL": "x/app", "tag": name[:3]}]
            ),
        )


async def test_a_promotion_window_holds_a_kubectl_promotion_until_it_opens(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Only prod, which the ProjectConfig's glob auto-promotes; the first Freight comes in by
    # hand and its auto-promotion (of the newer F2) is held as well.
    await _setup(cluster, objects.stage("prod", namespace=NS, warehouse="app", steps=STEPS))
    manifest = objects.served(kargo_project_config())
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    clock = FakeClock(datetime(2026, 1, 10, 12, tzinfo=UTC))  # a Saturday
    admin = cluster.kube()
    async with (
        cluster.controller_access() as access,
        running_controller(access, tmp_path / "work", clock=clock),
    ):
        await admin.create(
            k.PROMOTIONS, objects.promotion("by-hand", "prod", namespace=NS, freight=F1)
        )
        held = await wait_for_object(
            admin,
            k.PROMOTIONS,
            NS,
            "by-hand",
            lambda p: "weekend-freeze" in str((p.get("status") or {}).get("message")),
            within=30,
        )
        assert held["status"].get("phase", "Pending") == "Pending"
        # kubectl's PHASE column says so (the phase is written, not left empty).
        row = (await cluster.kubectl("get", "promotion", "by-hand", "-n", NS)).stdout
        assert "Pending" in row.splitlines()[1].split(), row
        assert held["status"]["message"] == (
            "waiting for promotion window `weekend-freeze`: opens Mon 09:00 Europe/Berlin"
        )
        stage = await wait_for_object(
            admin,
            k.STAGES,
            NS,
            "prod",
            lambda s: bool((s.get("status") or {}).get("promotionWindowStatus")),
            within=30,
        )
        assert stage["status"]["promotionWindowStatus"] == {
            "closed": True,
            "reason": "Deny window `weekend-freeze` is in effect",
            "nextOpen": "2026-01-12T08:00:00Z",
        }
        assert stage["status"]["autoPromotionEnabled"] is True
        # Once its receivers are resolved (the example's is a GitHub one, which the App serves
        # instead), the ProjectConfig says what is in force, and that.
        shown = await wait_for_object(
            admin,
            k.PROJECT_CONFIGS,
            NS,
            NS,
            lambda c: "my-receiver" in str((c.get("status") or {}).get("conditions")),
            within=30,
        )
        assert shown["status"]["conditions"][0]["status"] == "True"
        table = (await cluster.kubectl("get", "projectconfigs", "-n", NS)).stdout
        assert "auto-promotion: prod; auto-rollback: none; windows: weekend-freeze" in table
        assert "webhook receiver `my-receiver` is not served" in table
        wide = (await cluster.kubectl("get", "stages", "-n", NS, "-o", "wide")).stdout
        assert "FROZEN" in wide and "true" in wide

        clock.advance((datetime(2026, 1, 12, 8, tzinfo=UTC) - clock.now()).total_seconds())
        done = await wait_terminal(admin, NS, "by-hand", within=30)
        assert done["status"]["phase"] == "Succeeded"


async def test_a_failed_verification_is_rolled_back_once(cluster: Cluster, tmp_path: Path) -> None:
    await _setup(
        cluster,
        objects.stage(
            "prod",
            namespace=NS,
            warehouse="app",
            steps=STEPS,
            verification=["multiple-job"],
            verification_args=[{"name": "exit-code", "value": "0"}],
        ),
    )
    admin = cluster.kube()
    template = analysis_template("multiple-job")
    template["metadata"]["namespace"] = NS
    await admin.create(k.ANALYSIS_TEMPLATES, template)
    config = objects.project_config(
        NS, policies=[{"stageSelector": {"name": "prod"}, "autoRollback": {}}]
    )
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(objects.served(config)))
    rollouts = FakeRolloutsController(KubernetesAnalysisRuns(cluster.api_client()))
    rollouts.script_stage("prod", Outcome("Successful"), Outcome("Failed"), Outcome("Failed"))
    reconciles: list[float] = []
    async with (
        cluster.controller_access() as access,
        running_controller(access, tmp_path / "work", on_reconcile=reconciles.append),
        rollouts.running(),
    ):
        await admin.create(k.PROMOTIONS, objects.promotion("p1", "prod", namespace=NS, freight=F1))
        await wait_terminal(admin, NS, "p1", within=30)
        await wait_for_object(
            admin,
            k.FREIGHT,
            NS,
            F1,
            lambda f: "prod" in ((f.get("status") or {}).get("verifiedIn") or {}),
            within=30,
        )
        await admin.create(k.PROMOTIONS, objects.promotion("p2", "prod", namespace=NS, freight=F2))

        def rolled_back_and_failed(s: dict[str, Any]) -> bool:
            history = (s.get("status") or {}).get("freightHistory") or []
            latest = (history[0].get("verificationHistory") or [{}])[0] if history else {}
            return len(history) >= 3 and latest.get("phase") == "Failed"

        await wait_for_object(admin, k.STAGES, NS, "prod", rolled_back_and_failed, within=60)
        seen = len(reconciles)
        async with asyncio.timeout(30):
            while True:
                if len(reconciles) >= seen + 5:
                    break
                await asyncio.sleep(0.05)
        items, _ = await admin.list(k.PROMOTIONS, NS)
    rollbacks = [p for p in items if ann.is_rollback(p)]
    assert len(rollbacks) == 1
    (rollback,) = rollbacks
    assert rollback["spec"]["freight"] == F1
    assert rollback["metadata"]["annotations"]["longshoreman.dev/rollback"] == "true"
    assert rollback["status"]["phase"] == "Succeeded"
    assert rollback["status"]["state"]["out"]["rollback"] is True
