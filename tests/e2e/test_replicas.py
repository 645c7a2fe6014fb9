"""Two replicas of ``python -m app serve`` with leader election, against one API server.

Exactly one replica reconciles; the other keeps warm caches and reports ready only once it
knows who leads. When the leader is SIGKILLed in the middle of a Promotion (an Argo CD sync it
started is still running), the standby takes the lease over once it expires and finishes the
Promotion, without starting a second sync, even though the sync finished while nobody led.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from app.apiserver import RequestInfo
from app.controller import kube as k
from app.embedded import seed
from tests.support import objects
from tests.support.argocd import FakeArgoCDController, KubernetesApps, Outcome, make_app
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.kube import running_apiserver
from tests.support.processes import ServerProcess, server_processes

ROOT = Path(__file__).resolve().parents[2]
NS = "kargo-demo"
LEASE = ("default", "longshoreman-controller")
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 2.0, 1.5, 0.3
STEPS = [
    {"uses": "compose-output", "as": "before", "config": {"ok": True}},
    {"uses": "argocd-update", "as": "sync", "config": {"apps": [{"name": "web"}]}},
    {"uses": "compose-output", "as": "after", "config": {"synced": "${{ outputs.before.ok }}"}},
]


def requests_made(metrics: str, method: str, resource: str) -> float:
    """Requests of one kind a replica sent, summed over response codes, from its /metrics."""
    pattern = (
        r"^longshoreman_kubernetes_requests_total\{"
        rf'code="[^"]*",method="{method}",resource="{resource}"\}} (\S+)$'
    )
    return sum(float(m) for m in re.findall(pattern, metrics, re.MULTILINE))


def gauge(metrics: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


async def lease_holder(kube: k.Kube) -> str:
    try:
        lease = await kube.get(k.LEASES, *LEASE)
    except k.NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def wait_until(predicate: Any, within: float, what: str) -> float:
    """Poll an async predicate; returns when it first held (time.monotonic())."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await predicate():
            return time.monotonic()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {within}s")


async def test_one_leader_reconciles_and_the_standby_finishes_its_promotion_after_sigkill(
    tmp_path: Path,
) -> None:
    def no_leases(request: RequestInfo) -> str | None:
        # The API server refuses Leases: no replica can learn or claim who leads.
        return "error" if "/leases" in request.path else None

    async with (
        running_apiserver(namespaces=[NS, "argocd"], bookmark_interval=0.5) as api,
        server_processes() as servers,
    ):
        kube = k.Kube(api.api_client())
        await seed(kube, [ROOT / "examples" / "kargo-demo" / "project.yaml"])
        await kube.create(
            k.STAGES, objects.stage("prod", namespace=NS, warehouse="kargo-demo", steps=STEPS)
        )
        apps = KubernetesApps(api.api_client())
        await apps.put(make_app("web", authorized=f"{NS}:prod"))
        api.faults.hook = no_leases

        def env(identity: str) -> dict[str, str]:
            return {
                "KUBECONFIG": str(api.kubeconfig_path),
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / identity),
                "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
                "LONGSHOREMAN_LEADER_ELECTION": "true",
                "LONGSHOREMAN_LEASE_DURATION": str(LEASE_DURATION),
                "LONGSHOREMAN_RENEW_DEADLINE": str(RENEW_DEADLINE),
                "LONGSHOREMAN_RETRY_PERIOD": str(RETRY_PERIOD),
                "POD_NAME": identity,
            }

        replicas = dict(
            zip(
                ("replica-a", "replica-b"),
                await asyncio.gather(
                    *(
                        ServerProcess.start(env(n), tmp_path / f"{n}.log", servers, ready=False)
                        for n in ("replica-a", "replica-b")
                    )
                ),
                strict=True,
            )
        )

        # Caches synced but no leader known: not ready (a Service would send no traffic).
        for replica in replicas.values():

            async def unready_for_lack_of_leader(replica: ServerProcess = replica) -> bool:
                status, text = await replica.get("/readyz")
                return status == 503 and "no leader is known" in text

            await wait_until(unready_for_lack_of_leader, 20, "caches synced, no leader")
        api.faults.hook = None
        for replica in replicas.values():
            await replica.wait_ready(10)  # the standby too, once it has seen the lease holder
        leader_name = await lease_holder(kube)
        assert leader_name in replicas
        standby_name = next(n for n in replicas if n != leader_name)
        leader, standby = replicas[leader_name], replicas[standby_name]

        # The leader starts an Argo CD sync that keeps running.
        first_argocd = FakeArgoCDController(apps)
        first_argocd.script("argocd", "web", Outcome("hang"))
        async with first_argocd.running(interval=0.02):
            await kube.create(
                k.PROMOTIONS,
                objects.promotion("p1", "prod", namespace=NS, freight="frozen-tauntaun"),
            )
            await wait_for_object(
                kube,
                k.APPLICATIONS,
                "argocd",
                "web",
                lambda a: _operation_phase(a) == "Running",
                within=15,
            )
            await wait_for_object(
                kube,
                k.PROMOTIONS,
                NS,
                "p1",
                lambda p: "sync is Running" in str((p.get("status") or {}).get("message")),
                within=15,
            )
        assert len(first_argocd.started) == 1

        # Only the leader wrote anything besides its lease; the standby only watched.
        _, leader_metrics = await leader.get("/metrics")
        _, standby_metrics = await standby.get("/metrics")
        assert gauge(leader_metrics, "longshoreman_leader") == 1
        assert gauge(standby_metrics, "longshoreman_leader") == 0
        assert requests_made(leader_metrics, "PATCH", "promotions") >= 2
        assert requests_made(leader_metrics, "PATCH", "applications") == 1
        for method in ("POST", "PATCH", "PUT"):
            for resource in ("promotions", "stages", "applications", "events"):
                assert requests_made(standby_metrics, method, resource) == 0, (method, resource)
        assert "became the leader" in leader.log and "became the leader" not in standby.log

        # SIGKILL the leader: its lease is not released, the standby must wait it out. Argo CD
        # (restarted too: it forgets the scripted hang) finishes the sync while nobody leads.
        leader.kill()
        killed_at = time.monotonic()
        await leader.proc.wait()
        second_argocd = FakeArgoCDController(apps)
        async with second_argocd.running(interval=0.02):
            await wait_for_object(
                kube,
                k.APPLICATIONS,
                "argocd",
                "web",
                lambda a: _operation_phase(a) == "Succeeded",
                within=5,
            )
            assert await lease_holder(kube) == leader_name, "took over before the sync ended"

            async def standby_leads() -> bool:
                return await lease_holder(kube) == standby_name

            took_over_at = await wait_until(standby_leads, 10, "takeover")
            done = await wait_terminal(kube, NS, "p1", within=5)
            finished_at = time.monotonic()
        takeover = took_over_at - killed_at
        # The lease runs out LEASE_DURATION after the last renewal, and the standby looks every
        # RETRY_PERIOD (+20% jitter); a second of slack absorbs a slow machine.
        assert takeover < LEASE_DURATION + RETRY_PERIOD * 1.2 + 1.0, takeover
        status = done["status"]
        assert status["phase"] == "Succeeded", status
        assert [s["status"] for s in status["stepExecutionMetadata"]] == ["Succeeded"] * 3
        assert second_argocd.started == [], "the new leader started a second sync"
        _, metrics = await standby.get("/metrics")
        assert gauge(metrics, "longshoreman_leader") == 1
        assert requests_made(metrics, "PATCH", "promotions") >= 1
        assert requests_made(metrics, "PATCH", "applications") == 0
        assert "became the leader" in standby.log
        print(
            f"\ntakeover {takeover:.2f}s after SIGKILL; Promotion Succeeded "
            f"{finished_at - took_over_at:.2f}s after takeover"
        )
        await standby.stop()
        # A clean shutdown hands the lease back at once.
        assert await lease_holder(kube) == ""


def _operation_phase(app: dict[str, Any]) -> str:
    return str(((app.get("status") or {}).get("operationState") or {}).get("phase") or "")
