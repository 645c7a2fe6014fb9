"""A git + argocd-update Promotion end to end, run by ``python -m app serve`` against the cluster.

The server gets only a kubeconfig, as in production. The fake Argo CD controller writes the
Application's status into the same API server, as Argo CD would. Checked: one push, one sync,
Succeeded; an aborted Promotion terminates the Argo CD operation it started; two replicas on
real Leases, the leader SIGKILLed in the middle of a Promotion, the other finishes it without a
second sync.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.controller import kube as k
from app.embedded import seed
from tests.cluster.support import ROOT, Cluster
from tests.e2e.test_faults import (
    DEMO_URL,
    FREIGHT,
    GitArgoCD,
    _exactly_once,
    seed_files,
    sigkill_stage,
)
from tests.e2e.test_replicas import lease_holder
from tests.e2e.test_replicas import wait_until as eventually
from tests.support import objects
from tests.support.argocd import KubernetesApps, Outcome, make_app
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.processes import ServerProcess, server_processes

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"
FREIGHT_NAME = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"


@dataclass
class World:
    kube: k.Kube
    apps: KubernetesApps
    remote: RemoteRepo
    git_config: str


async def prepare(cluster: Cluster, stage: str, tmp_path: Path) -> World:
    """CRDs, the example project, a git + argocd-update Stage, its Application and git remote."""
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    await cluster.kubectl("create", "namespace", "argocd")
    await kube.create(k.STAGES, sigkill_stage(stage))
    apps = KubernetesApps(cluster.api_client())
    await apps.put(
        make_app(
            stage, authorized=f"{NS}:{stage}", repo_url=DEMO_URL, target_revision=f"stage/{stage}"
        )
    )
    remote = make_remote(tmp_path, files=seed_files())
    config = git_env(tmp_path, {remote.url: DEMO_URL})["GIT_CONFIG_GLOBAL"]
    return World(kube, apps, remote, config)


def server_env(cluster: Cluster, tmp_path: Path, git_config: str, **extra: str) -> dict[str, str]:
    return {
        "KUBECONFIG": str(cluster.kubeconfig_path),
        "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
        "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
        "LONGSHOREMAN_GIT_CONFIG": git_config,
        **extra,
    }


def promotion(name: str, stage: str) -> dict[str, Any]:
    return objects.promotion(name, stage, namespace=NS, freight=FREIGHT)


def operation_phase(app: dict[str, Any]) -> str:
    return str(((app.get("status") or {}).get("operationState") or {}).get("phase") or "")


async def test_a_git_and_argocd_promotion_pushes_once_syncs_once_and_succeeds(
    cluster: Cluster, tmp_path: Path
) -> None:
    w = await prepare(cluster, "qa", tmp_path)
    kube, remote = w.kube, w.remote
    argocd = GitArgoCD(w.apps, remote)
    async with server_processes() as servers, argocd.running(interval=0.02):
        server = await ServerProcess.start(
            server_env(cluster, tmp_path, w.git_config),
            tmp_path / "server.log",
            servers,
        )
        await kube.create(k.PROMOTIONS, promotion("p1", "qa"))
        done = await wait_terminal(kube, NS, "p1", within=30)
        assert _exactly_once(done, remote, argocd, "qa") == "", done["status"]
        # The Stage shows the Freight it now holds: its status write was accepted.
        stage = await wait_for_object(
            kube,
            k.STAGES,
            NS,
            "qa",
            lambda s: ((s.get("status") or {}).get("freightHistory") or [{}])[0] != {},
        )
        current = stage["status"]["freightHistory"][0]
        assert current["items"]["Warehouse/kargo-demo"]["name"] == FREIGHT_NAME, stage["status"]
        assert "Invalid value" not in server.log, server.log
        # kubectl shows it in the Stage's printer columns.
        await wait_for_object(
            kube, k.STAGES, NS, "qa", lambda s: (s.get("status") or {}).get("freightSummary")
        )
        row = (await cluster.kubectl("get", "stage", "qa", "-n", NS)).stdout.splitlines()[1]
        assert row.split()[:3] == ["qa", FREIGHT_NAME, "Healthy"], row
        await server.stop()


async def test_an_aborted_promotion_terminates_the_argocd_operation_it_started(
    cluster: Cluster, tmp_path: Path
) -> None:
    w = await prepare(cluster, "qa", tmp_path)
    kube, remote = w.kube, w.remote
    argocd = GitArgoCD(w.apps, remote)
    argocd.script("argocd", "qa", Outcome("hang"))
    async with server_processes() as servers, argocd.running(interval=0.02):
        await ServerProcess.start(
            server_env(cluster, tmp_path, w.git_config),
            tmp_path / "server.log",
            servers,
        )
        await kube.create(k.PROMOTIONS, promotion("p1", "qa"))
        await wait_for_object(
            kube,
            k.APPLICATIONS,
            "argocd",
            "qa",
            lambda a: operation_phase(a) == "Running",
            within=30,
        )
        await cluster.kubectl(
            "annotate", "promotion", "p1", "-n", NS,
            'longshoreman.dev/abort={"action":"terminate","actor":"bob"}',
        )  # fmt: skip
        done = await wait_terminal(kube, NS, "p1")
        assert done["status"]["phase"] == "Aborted"
        assert done["status"]["message"] == "Aborted by bob"
        app = await wait_for_object(
            kube, k.APPLICATIONS, "argocd", "qa", lambda a: operation_phase(a) == "Failed"
        )
        assert app["status"]["operationState"]["message"] == "Operation terminated"
        assert len(argocd.started) == 1


async def test_the_standby_finishes_a_promotion_after_the_leader_is_sigkilled(
    cluster: Cluster, tmp_path: Path
) -> None:
    w = await prepare(cluster, "qa", tmp_path)
    kube, apps, remote = w.kube, w.apps, w.remote
    lease = {
        "LONGSHOREMAN_LEASE_DURATION": "2",
        "LONGSHOREMAN_RENEW_DEADLINE": "1.5",
        "LONGSHOREMAN_RETRY_PERIOD": "0.3",
    }

    def env(identity: str) -> dict[str, str]:
        return server_env(
            cluster,
            tmp_path,
            w.git_config,
            LONGSHOREMAN_LEADER_ELECTION="true",
            POD_NAME=identity,
            **lease,
        )

    async with server_processes() as servers:
        replicas = dict(
            zip(
                ("replica-a", "replica-b"),
                await asyncio.gather(
                    *(
                        ServerProcess.start(env(n), tmp_path / f"{n}.log", servers)
                        for n in ("replica-a", "replica-b")
                    )
                ),
                strict=True,
            )
        )
        leader_name = await lease_holder(kube)
        assert leader_name in replicas
        standby_name = next(n for n in replicas if n != leader_name)
        leader, standby = replicas[leader_name], replicas[standby_name]

        first = GitArgoCD(apps, remote)
        first.script("argocd", "qa", Outcome("hang"))
        async with first.running(interval=0.02):
            await kube.create(k.PROMOTIONS, promotion("p1", "qa"))
            await wait_for_object(
                kube, k.APPLICATIONS, "argocd", "qa", lambda a: operation_phase(a) == "Running",
                within=30,
            )  # fmt: skip
        assert len(first.started) == 1
        leader.kill()
        await leader.proc.wait()
        # Argo CD (restarted: it forgets the scripted hang) finishes the sync while nobody leads.
        second = GitArgoCD(apps, remote)
        async with second.running(interval=0.02):

            async def standby_leads() -> bool:
                return await lease_holder(kube) == standby_name

            await eventually(standby_leads, 15, "the standby taking the Lease")
            done = await wait_terminal(kube, NS, "p1", within=30)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert second.started == [], "the new leader started a second sync"
        assert len(remote.log("stage/qa")) == 2, "exactly one push on top of the initial commit"
        assert "became the leader" in standby.log
        await standby.stop()
        assert await lease_holder(kube) == "", "a clean shutdown hands the Lease back"
