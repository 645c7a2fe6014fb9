"""A shard in another cluster: Stages and Promotions in the control plane, Argo CD's Applications
in a second API server that ``LONGSHOREMAN_ARGOCD_KUBECONFIG`` names (Kargo's shard controller
next to its cluster's Argo CD). The Promotion of a Stage that lives in the first server updates
and syncs the Application in the second, waits for its health there, and succeeds; the first
server never holds an Application.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.controller import kube as k
from app.embedded import seed
from promoter.control.shards import SHARD_LABEL
from tests.cluster.support import ROOT, Cluster
from tests.e2e.test_faults import (
    DEMO_URL,
    FREIGHT,
    GitArgoCD,
    seed_files,
    sigkill_app,
    sigkill_stage,
)
from tests.support import objects
from tests.support.argocd import KubernetesApps
from tests.support.controller import wait_terminal
from tests.support.gitrepo import git_env, make_remote
from tests.support.processes import ServerProcess, server_processes

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"


async def test_a_shard_syncs_an_application_in_its_argo_cd_cluster(
    cluster: Cluster, second_cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    edge = sigkill_stage("edge")
    # As Kargo's webhook leaves it: spec.shard and the label (no default controller runs here).
    edge["spec"]["shard"] = "edge"
    edge["metadata"]["labels"] = {SHARD_LABEL: "edge"}
    await kube.create(k.STAGES, edge)
    await second_cluster.install_crds()
    await second_cluster.kubectl("create", "namespace", "argocd")
    apps = KubernetesApps(second_cluster.api_client())
    await apps.put(sigkill_app("edge"))
    remote = make_remote(tmp_path, files=seed_files())
    git_config = git_env(tmp_path, {remote.url: DEMO_URL})["GIT_CONFIG_GLOBAL"]
    env = {
        "KUBECONFIG": str(cluster.kubeconfig_path),
        "LONGSHOREMAN_ARGOCD_KUBECONFIG": str(second_cluster.kubeconfig_path),
        "LONGSHOREMAN_SHARD_NAME": "edge",
        "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
        "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
        "LONGSHOREMAN_GIT_CONFIG": git_config,
    }
    argocd = GitArgoCD(apps, remote)
    async with server_processes() as servers, argocd.running(interval=0.02):
        server = await ServerProcess.start(env, tmp_path / "edge.log", servers)
        promotion = objects.promotion("edge-1", "edge", namespace=NS, freight=FREIGHT)
        promotion["metadata"]["labels"] = {SHARD_LABEL: "edge"}
        await kube.create(k.PROMOTIONS, promotion)
        done = await wait_terminal(kube, NS, "edge-1", within=60)
        await server.stop()
    assert done["status"]["phase"] == "Succeeded", done["status"]
    # One sync, in the second cluster, of the commit the Promotion pushed.
    assert [key for key, _ in argocd.started] == [("argocd", "edge")]
    app = await second_cluster.kube().get(k.APPLICATIONS, "argocd", "edge")
    assert app["status"]["sync"]["revision"] == remote.head("stage/edge")
    with pytest.raises(k.NotFound):
        await kube.get(k.APPLICATIONS, "argocd", "edge")
