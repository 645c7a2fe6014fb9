"""Kargo's shards on one API server: two ``python -m app serve`` Deployments, shard ``a`` and shard
``b`` (the default controller), each with its own Lease.

Stage ``alpha`` names shard ``a``, ``beta`` shard ``b``, ``gamma`` none (the default's). The
Stages and Promotions are created unlabelled, as kubectl creates them: the default controller
mirrors ``spec.shard`` into the label, a Promotion follows its Stage, and each server promotes
only its own Stages (its ``/metrics`` counts the Promotions it finished, by Stage). Then ``a`` is
SIGKILLed in the middle of a Promotion: ``b`` goes on with its Stages and leaves ``alpha``'s
alone, and a second ``a`` replica takes ``a``'s Lease and finishes the Promotion without a second
sync.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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
from tests.e2e.test_replicas import wait_until as eventually
from tests.support import objects
from tests.support.argocd import KubernetesApps, Outcome
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.gitrepo import git_env, make_remote
from tests.support.processes import ServerProcess, server_processes

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"
SHARDS = {"alpha": "a", "beta": "b", "gamma": ""}
LEASE = {
    "LONGSHOREMAN_LEADER_ELECTION": "true",
    "LONGSHOREMAN_LEASE_DURATION": "2",
    "LONGSHOREMAN_RENEW_DEADLINE": "1.5",
    "LONGSHOREMAN_RETRY_PERIOD": "0.3",
}
_FINISHED = re.compile(
    r'^longshoreman_promotions_finished_total\{[^}]*stage="([^"]+)"[^}]*\} (\S+)$'
)


async def finished_here(server: ServerProcess) -> set[str]:
    """The Stages this server finished Promotions of (its own /metrics)."""
    _, text = await server.get("/metrics")
    stages = set()
    for line in text.splitlines():
        match = _FINISHED.match(line)
        if match and float(match.group(2)) > 0:
            stages.add(match.group(1))
    return stages


async def lease_holder(kube: k.Kube, shard: str) -> str:
    try:
        lease = await kube.get(k.LEASES, "default", f"longshoreman-controller-{shard}")
    except k.NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def label(obj: dict[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get(SHARD_LABEL) or "")


def operation_phase(app: dict[str, Any]) -> str:
    return str(((app.get("status") or {}).get("operationState") or {}).get("phase") or "")


async def test_each_shard_promotes_its_own_stages_and_a_second_replica_takes_over_its_lease(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    await cluster.kubectl("create", "namespace", "argocd")
    apps = KubernetesApps(cluster.api_client())
    for stage, shard in SHARDS.items():
        made = sigkill_stage(stage)
        if shard:
            made["spec"]["shard"] = shard
        await kube.create(k.STAGES, made)
        await apps.put(sigkill_app(stage))
    remote = make_remote(tmp_path, files=seed_files())
    git_config = git_env(tmp_path, {remote.url: DEMO_URL})["GIT_CONFIG_GLOBAL"]

    def env(shard: str, identity: str, **extra: str) -> dict[str, str]:
        return {
            "KUBECONFIG": str(cluster.kubeconfig_path),
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / f"work-{identity}"),
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            "LONGSHOREMAN_GIT_CONFIG": git_config,
            "LONGSHOREMAN_SHARD_NAME": shard,
            "POD_NAME": identity,
            **LEASE,
            **extra,
        }

    def promotion(name: str, stage: str) -> dict[str, Any]:
        return objects.promotion(name, stage, namespace=NS, freight=FREIGHT)

    async with server_processes() as servers:
        a1 = await ServerProcess.start(env("a", "a-1"), tmp_path / "a-1.log", servers)
        b = await ServerProcess.start(
            env("b", "b-1", LONGSHOREMAN_IS_DEFAULT_CONTROLLER="true"), tmp_path / "b.log", servers
        )
        argocd = GitArgoCD(apps, remote)
        async with argocd.running(interval=0.02):
            for stage in SHARDS:
                await kube.create(k.PROMOTIONS, promotion(f"{stage}-1", stage))
            for stage in SHARDS:
                done = await wait_terminal(kube, NS, f"{stage}-1", within=60)
                assert done["status"]["phase"] == "Succeeded", done["status"]
        # The default controller mirrored spec.shard; each Promotion carries its Stage's.
        for stage, shard in SHARDS.items():
            assert label(await kube.get(k.STAGES, NS, stage)) == shard
            assert label(await kube.get(k.PROMOTIONS, NS, f"{stage}-1")) == shard
        assert await finished_here(a1) == {"alpha"}
        assert await finished_here(b) == {"beta", "gamma"}
        assert await lease_holder(kube, "a") == "a-1"
        assert await lease_holder(kube, "b") == "b-1"

        # a dies in the middle of alpha's sync.
        first = GitArgoCD(apps, remote)
        first.script("argocd", "alpha", Outcome("hang"))
        async with first.running(interval=0.02):
            await kube.create(k.PROMOTIONS, promotion("alpha-2", "alpha"))
            await wait_for_object(
                kube, k.APPLICATIONS, "argocd", "alpha",
                lambda a: operation_phase(a) == "Running", within=60,
            )  # fmt: skip
        a1.kill()
        await a1.proc.wait()
        # Argo CD (restarted: it forgets the scripted hang) goes on; b goes on with its Stages,
        # and nobody runs alpha's.
        second = GitArgoCD(apps, remote)
        async with second.running(interval=0.02):
            await kube.create(k.PROMOTIONS, promotion("beta-2", "beta"))
            done = await wait_terminal(kube, NS, "beta-2", within=60)
            assert done["status"]["phase"] == "Succeeded", done["status"]
            alpha = await kube.get(k.PROMOTIONS, NS, "alpha-2")
            assert alpha["status"]["phase"] == "Running", alpha["status"]
            assert [key for key, _ in second.started] == [("argocd", "beta")]

            a2 = await ServerProcess.start(env("a", "a-2"), tmp_path / "a-2.log", servers)

            async def a2_leads() -> bool:
                return await lease_holder(kube, "a") == "a-2"

            await eventually(a2_leads, 15, "the second a replica taking a's Lease")
            done = await wait_terminal(kube, NS, "alpha-2", within=60)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert [key for key, _ in second.started] == [("argocd", "beta")], "a second alpha sync"
        assert await finished_here(a2) == {"alpha"}
        assert await finished_here(b) == {"beta", "gamma"}
        assert await lease_holder(kube, "b") == "b-1"
        await a2.stop()
        await b.stop()
