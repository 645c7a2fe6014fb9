"""The controller with only its ServiceAccount's rights: deploy/overlays/example's RBAC is enough.

``python -m app serve`` runs with leader election as the ServiceAccount the overlay installs
(real server: a token of that user under ``--authorization-mode=RBAC``; emulator: a proxy that
evaluates the same rules). It promotes with argocd-update, verifies the Stage with an
AnalysisRun on the Argo Rollouts CRDs (deploy/third-party-crds), re-verifies and aborts that
verification. Nothing it asked for was forbidden.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.controller import kube as k
from app.embedded import seed
from tests.cluster.support import ROOT, Cluster
from tests.e2e.test_faults import FREIGHT
from tests.integration.test_deploy import _analysis_template as analysis_template
from tests.integration.test_deploy import _history as history
from tests.integration.test_deploy import _prod_stage as prod_stage
from tests.support.argocd import FakeArgoCDController, KubernetesApps, make_app
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.processes import ServerProcess, server_processes
from tests.support.rollouts import HANG, FakeRolloutsController, KubernetesAnalysisRuns, Outcome

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"


def forbidden(metrics: str) -> float:
    pattern = r'^longshoreman_kubernetes_requests_total\{code="403"[^}]*\} (\S+)$'
    return sum(float(m) for m in re.findall(pattern, metrics, re.MULTILINE))


async def test_the_controller_runs_promotion_and_verification_with_its_rbac_only(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    admin = cluster.kube()
    await seed(admin, [PROJECT])
    await cluster.kubectl("create", "namespace", "argocd")
    await analysis_template(admin)
    await admin.create(k.STAGES, prod_stage())
    apps = KubernetesApps(cluster.api_client())
    await apps.put(make_app("web", authorized=f"{NS}:prod"))
    argocd = FakeArgoCDController(apps)
    rollouts = FakeRolloutsController(KubernetesAnalysisRuns(cluster.api_client()))
    rollouts.script_stage("prod", Outcome("Successful"), Outcome(HANG))

    async with (
        cluster.controller_access() as access,
        server_processes() as servers,
        argocd.running(interval=0.02),
        rollouts.running(),
    ):
        env = {
            "KUBECONFIG": str(access.kubeconfig_path),
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            "LONGSHOREMAN_HEALTH_CHECK_INTERVAL_SECONDS": "1",
            "LONGSHOREMAN_LEADER_ELECTION": "true",
            "LONGSHOREMAN_LEASE_NAMESPACE": "longshoreman",
            "POD_NAME": "longshoreman-0",
        }
        server = await ServerProcess.start(env, tmp_path / "server.log", servers)
        await admin.create(
            k.PROMOTIONS,
            {
                "metadata": {"name": "p1", "namespace": NS},
                "spec": {"stage": "prod", "freight": FREIGHT},
            },
        )
        done = await wait_terminal(admin, NS, "p1", within=30)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        freight = await wait_for_object(
            admin,
            k.FREIGHT,
            NS,
            "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b",
            lambda f: "prod" in ((f.get("status") or {}).get("verifiedIn") or {}),
            within=30,
        )
        assert "prod" in freight["status"]["verifiedIn"]
        runs = await KubernetesAnalysisRuns(cluster.api_client()).list(NS, "")
        assert len(runs) == 1 and runs[0]["status"]["phase"] == "Successful"

        # Re-verify (what /verify does), then abort the hanging run.
        await admin.patch(
            k.STAGES,
            NS,
            "prod",
            {"metadata": {"annotations": {"kargo.akuity.io/reverify": "again"}}},
        )
        await wait_for_object(
            admin, k.STAGES, NS, "prod", lambda s: len(history(s)) == 2, within=30
        )
        await admin.patch(
            k.STAGES,
            NS,
            "prod",
            {"metadata": {"annotations": {"longshoreman.dev/abort-verification": "x"}}},
        )
        aborted = await wait_for_object(
            admin, k.STAGES, NS, "prod", lambda s: history(s)[0]["phase"] == "Failed", within=30
        )
        assert "aborted" in history(aborted)[0].get("message", "")
        runs = await KubernetesAnalysisRuns(cluster.api_client()).list(NS, "")
        assert any(r["spec"].get("terminate") for r in runs), "the aborted run was terminated"

        _, metrics = await server.get("/metrics")
        assert forbidden(metrics) == 0, [
            line for line in metrics.splitlines() if 'code="403"' in line
        ]
        assert access.denied == []
        assert "forbidden" not in server.log.lower(), server.log
        await server.stop()
