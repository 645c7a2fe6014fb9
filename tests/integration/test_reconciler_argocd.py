"""Argo CD sync-and-wait inside the Promotion, end to end: the reconciler and a fake Argo CD
application controller both talk to the API server emulator over HTTP, as they would to a cluster.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.apiserver.faults import RequestInfo
from app.apiserver.store import Target
from app.controller import kube as k
from tests.support import objects
from tests.support.argocd import (
    FAIL_MESSAGE,
    FakeArgoCDController,
    KubernetesApps,
    Outcome,
    make_app,
)
from tests.support.clock import FakeClock
from tests.support.controller import (
    Cluster,
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)
from tests.support.fixtures import analysis_template
from tests.support.telemetry import RecordingTelemetry
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
NS = "kargo-demo"
STEPS = [
    {
        "uses": "argocd-update",
        "as": "sync",
        "config": {
            "apps": [
                {
                    "name": "web",
                    "sources": [
                        {
                            "repoURL": "https://github.com/example/repo.git",
                            "desiredRevision": "${{ vars.revision }}",
                        }
                    ],
                }
            ]
        },
    }
]


@dataclass
class Env(Cluster):
    apps: KubernetesApps
    argocd: FakeArgoCDController

    async def promote(self, name: str, *, annotations: dict[str, str] | None = None) -> None:
        promotion = objects.promotion(
            name, "prod", namespace=NS, freight="frozen-tauntaun", annotations=annotations or None
        )
        await self.kube.create(k.PROMOTIONS, promotion)

    async def app(self) -> dict[str, Any]:
        return await self.kube.get(k.APPLICATIONS, "argocd", "web")


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    project = ROOT / "examples" / "kargo-demo" / "project.yaml"
    async with running_cluster(tmp_path, [NS, "argocd"], seed_from=[project]) as c:
        server, kube = c.server, c.kube
        template = {"spec": {"vars": [{"name": "revision", "value": "c0ffee1"}], "steps": STEPS}}
        await kube.create(
            k.STAGES,
            objects.stage("prod", namespace=NS, warehouse="kargo-demo", promotionTemplate=template),
        )
        apps = KubernetesApps(server.api_client())
        await apps.put(make_app("web", authorized=f"{NS}:prod"))
        argocd = FakeArgoCDController(apps)
        # The Promotion's desired commit is what the tracked branch points at (a git-push
        # earlier in a real template put it there).
        argocd.set_head("https://github.com/example/repo.git", "main", "c0ffee1")
        yield Env(server, kube, c.work, apps, argocd)


async def test_a_sync_finished_before_the_promotion_waits_on_it_still_wakes_it(env: Env) -> None:
    """Argo CD finishes the sync while the controller writes the status that says the Promotion
    waits on it (the emulator finishes it as that write arrives): the Application's event found
    nothing waiting yet, and the Promotion is not left for the requeue floor (an hour here)."""
    store = env.server.server.store
    target = Target(store.registry.get("argoproj.io", "applications"), "v1alpha1", "argocd", "web")
    finished = asyncio.Event()

    def finish_the_sync_first(request: RequestInfo) -> None:
        if finished.is_set() or request.method != "PATCH":
            return None
        if not request.path.endswith("/promotions/p1/status"):
            return None
        app = store.get(target)
        if not app.get("operation"):
            return None  # not the write that records the sync request
        state = {"operation": app["operation"], "phase": "Succeeded", "message": "synced",
                 "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z",
                 "syncResult": {"revision": "c0ffee1"}}  # fmt: skip
        done = {"operation": None, "status": {"operationState": state,
                "reconciledAt": "2026-01-01T00:00:01Z", "sync": {"status": "Synced",
                "revision": "c0ffee1"}, "health": {"status": "Healthy"}}}  # fmt: skip
        store.patch(target, "merge", done)
        finished.set()
        return None

    env.server.faults.hook = finish_the_sync_first
    async with running_controller(env.server, env.work, min_requeue=3600.0):
        await env.promote("p1")
        # Well before the step's own retry (RUNNING_RETRY_SECONDS, 10 s) would look again.
        done = await wait_terminal(env.kube, NS, "p1", within=5)
        assert finished.is_set()
        assert done["status"]["phase"] == "Succeeded", done["status"]


async def test_health_waits_for_argo_cd_to_reassess_and_asks_it_to_refresh(env: Env) -> None:
    """After the sync, the Stage is not Healthy until Argo CD has reconciled the Application
    since the operation finished (Kargo's rule); meanwhile the controller asks it to refresh."""
    async with running_controller(env.server, env.work, min_requeue=60.0, health_interval=3600):
        async with env.argocd.running():
            await env.promote("p1")
            done = await wait_terminal(env.kube, NS, "p1", within=15)
            assert done["status"]["phase"] == "Succeeded", done["status"]
        # Argo CD's health assessment predates the operation's end (its status write skipped).
        app = await env.app()
        finished = app["status"]["operationState"]["finishedAt"]
        await env.kube.patch(
            k.APPLICATIONS,
            "argocd",
            "web",
            {
                "metadata": {"annotations": {"argocd.argoproj.io/refresh": None}},
                "status": {"reconciledAt": "2020-01-01T00:00:00Z"},
            },
        )
        refreshed = await wait_for_object(
            env.kube,
            k.APPLICATIONS,
            "argocd",
            "web",
            lambda a: (
                (a["metadata"].get("annotations") or {}).get("argocd.argoproj.io/refresh")
                == "normal"
            ),
        )
        stage = await env.kube.get(k.STAGES, NS, "prod")
        assert _condition(stage, "Healthy") == "Unknown", stage["status"]["conditions"]
        # Argo CD refreshes: reconciledAt catches up and the annotation goes.
        await env.kube.patch(
            k.APPLICATIONS,
            "argocd",
            "web",
            {
                "metadata": {"annotations": {"argocd.argoproj.io/refresh": None}},
                "status": {"reconciledAt": finished},
            },
            resource_version=refreshed["metadata"]["resourceVersion"],
        )
        await wait_for_object(
            env.kube, k.STAGES, NS, "prod", lambda s: _condition(s, "Healthy") == "True"
        )


async def test_sync_succeeds_and_the_application_event_wakes_the_promotion(env: Env) -> None:
    # A minute-long requeue: only the Application's change can finish this test in time.
    async with (
        running_controller(env.server, env.work, min_requeue=60.0),
        env.argocd.running(),
    ):
        await env.promote("p1")
        done = await wait_terminal(env.kube, NS, "p1", within=15)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert len(env.argocd.started) == 1, "exactly one sync"
        operation = env.argocd.started[0][1]
        assert {"name": "longshoreman.dev/promotion", "value": "p1"} in operation["info"]
        app = await env.app()
        assert app["status"]["operationState"]["phase"] == "Succeeded"
        assert app["status"]["sync"]["revision"] == "c0ffee1"
        checks = done["status"]["healthChecks"]
        assert checks[0]["uses"] == "argocd-update"
        stage = await wait_for_object(
            env.kube, k.STAGES, NS, "prod", lambda s: _condition(s, "Healthy") == "True"
        )
        assert _condition(stage, "Ready") == "True"
        # Drift (someone synced another revision by hand) shows as unhealthy.
        await env.argocd.drift("argocd", "web")
        await wait_for_object(
            env.kube, k.STAGES, NS, "prod", lambda s: _condition(s, "Healthy") == "False"
        )


async def test_failed_sync_fails_the_promotion_with_argo_cds_message(env: Env) -> None:
    env.argocd.script("argocd", "web", Outcome("fail"))
    async with running_controller(env.server, env.work), env.argocd.running():
        await env.promote("p1")
        done = await wait_terminal(env.kube, NS, "p1")
    assert done["status"]["phase"] == "Failed"
    assert FAIL_MESSAGE in done["status"]["message"]
    assert "step 'sync' (argocd-update) failed" in done["status"]["message"]


async def test_abort_terminates_the_operation_this_promotion_started(env: Env) -> None:
    env.argocd.script("argocd", "web", Outcome("hang"))
    async with running_controller(env.server, env.work), env.argocd.running():
        await env.promote("p1")
        await wait_for_object(
            env.kube,
            k.APPLICATIONS,
            "argocd",
            "web",
            lambda a: (
                ((a.get("status") or {}).get("operationState") or {}).get("phase") == "Running"
            ),
        )
        await env.kube.patch(
            k.PROMOTIONS,
            NS,
            "p1",
            {
                "metadata": {
                    "annotations": {
                        "longshoreman.dev/abort": '{"action":"terminate","actor":"bob"}'
                    }
                }
            },
        )
        done = await wait_terminal(env.kube, NS, "p1")
        assert done["status"]["phase"] == "Aborted"
        assert done["status"]["message"] == "Aborted by bob"
        app = await wait_for_object(
            env.kube,
            k.APPLICATIONS,
            "argocd",
            "web",
            lambda a: (
                ((a.get("status") or {}).get("operationState") or {}).get("phase") == "Failed"
            ),
        )
        assert app["status"]["operationState"]["message"] == "Operation terminated"


async def test_an_operation_we_did_not_start_is_left_alone_on_abort(env: Env) -> None:
    env.argocd.script("argocd", "web", Outcome("hang"))
    # Someone else's sync is running: the step waits for it and must not terminate it.
    await env.apps.patch(
        "argocd",
        "web",
        {"operation": {"initiatedBy": {"username": "alice"}, "sync": {"revision": "main"}}},
        resource_version=str((await env.app())["metadata"]["resourceVersion"]),
    )
    async with running_controller(env.server, env.work), env.argocd.running():
        await wait_for_object(
            env.kube,
            k.APPLICATIONS,
            "argocd",
            "web",
            lambda a: (
                ((a.get("status") or {}).get("operationState") or {}).get("phase") == "Running"
            ),
        )
        await env.promote("p1", annotations={})
        await wait_for_object(
            env.kube,
            k.PROMOTIONS,
            NS,
            "p1",
            lambda o: (o.get("status") or {}).get("phase") == "Running",
        )
        await env.kube.patch(
            k.PROMOTIONS,
            NS,
            "p1",
            {"metadata": {"annotations": {"kargo.akuity.io/abort": "terminate"}}},
        )
        await wait_terminal(env.kube, NS, "p1")
        app = await env.app()
    assert app["status"]["operationState"]["phase"] == "Running"


async def test_unauthorized_application_errors_naming_the_annotation(env: Env) -> None:
    app = await env.app()
    await env.apps.patch(
        "argocd",
        "web",
        {"metadata": {"annotations": {"kargo.akuity.io/authorized-stage": f"{NS}:test"}}},
        resource_version=str(app["metadata"]["resourceVersion"]),
    )
    async with running_controller(env.server, env.work), env.argocd.running():
        await env.promote("p1")
        done = await wait_terminal(env.kube, NS, "p1")
    assert done["status"]["phase"] == "Errored"
    assert "authorized-stage" in done["status"]["message"]
    assert f"{NS}:prod" in done["status"]["message"]
    assert env.argocd.started == []


def _reason(stage: dict[str, Any], type_: str) -> str | None:
    for c in (stage.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return str(c.get("reason"))
    return None


def _condition(stage: dict[str, Any], type_: str) -> str | None:
    for c in (stage.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


async def test_a_reverify_requested_while_unhealthy_starts_once_the_stage_is_healthy(
    env: Env,
) -> None:
    template = analysis_template("multiple-job")
    template["metadata"]["namespace"] = NS
    await env.kube.create(k.ANALYSIS_TEMPLATES, template)
    await env.kube.patch(
        k.STAGES,
        NS,
        "prod",
        {
            "spec": {
                "verification": {
                    "analysisTemplates": [{"name": "multiple-job"}],
                    "args": [{"name": "exit-code", "value": "0"}],
                }
            }
        },
    )

    def runs(stage: dict[str, Any]) -> list[dict[str, Any]]:
        history = (stage.get("status") or {}).get("freightHistory") or [{}]
        return list(history[0].get("verificationHistory") or [])

    counted = RecordingTelemetry()
    controller = running_controller(env.server, env.work, on_reconcile=counted.on_reconcile)
    async with controller, env.argocd.running():
        await env.promote("p1")
        assert (await wait_terminal(env.kube, NS, "p1"))["status"]["phase"] == "Succeeded"
        await wait_for_object(env.kube, k.STAGES, NS, "prod", lambda s: len(runs(s)) == 1)
        await env.argocd.set_health("argocd", "web", "Degraded")
        await wait_for_object(
            env.kube, k.STAGES, NS, "prod", lambda s: _condition(s, "Healthy") == "False"
        )
        request = json.dumps({"actor": "alice", "id": "r1"})
        await env.kube.patch(
            k.STAGES,
            NS,
            "prod",
            {"metadata": {"annotations": {"longshoreman.dev/reverify": request}}},
        )
        waiting = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "prod",
            lambda s: _reason(s, "Verified") == "WaitingForHealth",
        )
        assert len(runs(waiting)) == 1, "no verification starts on an unhealthy Stage"
        assert waiting["status"].get("lastHandledReverify") != request
        # Several health re-checks (Stage reconciles) pass; the request must survive them.
        rechecked = counted.reconciles + 5

        async def five_more() -> bool | None:
            return counted.reconciles >= rechecked or None

        await eventually(five_more, "five Stage reconciles")
        assert "lastHandledReverify" not in (await env.kube.get(k.STAGES, NS, "prod"))["status"]
        await env.argocd.set_health("argocd", "web", "Healthy")
        started = await wait_for_object(env.kube, k.STAGES, NS, "prod", lambda s: len(runs(s)) == 2)
        assert runs(started)[0]["actor"] == "alice"
        assert started["status"]["lastHandledReverify"] == request
        items, _ = await env.kube.list(k.ANALYSIS_RUNS, NS)
        assert len(items) == 2


def _sync_step(promotion: dict[str, Any]) -> dict[str, Any]:
    entries = (promotion.get("status") or {}).get("stepExecutionMetadata") or [{}]
    return dict(entries[0])


async def test_a_step_waiting_on_a_sync_is_written_once_however_often_argo_cd_wakes_it(
    env: Env,
) -> None:
    """Every change of the Application wakes the waiting step, which looks at Argo CD again,
    but only its first Running is written: what a takeover resumes from does not change
    (promoter/engine/recording.py). Its own retry, once due, writes the newest message."""
    clock = FakeClock()
    env.argocd.script("argocd", "web", Outcome(ticks=2))
    counted = RecordingTelemetry()

    def status_writes() -> int:
        return sum(
            1
            for r in list(env.server.server.requests)
            if r.method == "PATCH" and r.path.endswith("/promotions/p1/status")
        )

    async with running_controller(
        env.server, env.work, clock=clock, min_requeue=3600.0, on_reconcile=counted.on_reconcile
    ) as controller:
        await env.promote("p1")
        first = await wait_for_object(
            env.kube, k.PROMOTIONS, NS, "p1", lambda p: _sync_step(p).get("status") == "Running"
        )
        written = status_writes()
        await env.argocd.process()  # the sync starts: Argo CD's operationState says Running
        for health in ("Progressing", "Degraded", "Progressing"):
            await env.argocd.set_health("argocd", "web", health)
        version = (await env.app())["metadata"]["resourceVersion"]

        async def seen_last_change() -> int | None:
            cached = controller.applications.get("argocd", "web") or {}
            seen = cached.get("metadata", {}).get("resourceVersion") == version
            return counted.reconciles if seen else None

        seen = await eventually(seen_last_change, "the controller to see the last change")

        async def two_more_reconciles() -> bool | None:
            # At least one of them began after the last change had woken the Stage.
            return counted.reconciles >= seen + 2 or None

        await eventually(two_more_reconciles, "two Stage reconciles")
        assert status_writes() == written
        assert (await env.kube.get(k.PROMOTIONS, NS, "p1"))["status"] == first["status"]
        clock.advance(11)  # past the step's own retry (RUNNING_RETRY_SECONDS)
        retried = await wait_for_object(
            env.kube,
            k.PROMOTIONS,
            NS,
            "p1",
            lambda p: _sync_step(p).get("message") != _sync_step(first).get("message"),
        )
        assert status_writes() == written + 1
        assert "Running" in _sync_step(retried)["message"]
        async with env.argocd.running():
            done = await wait_terminal(env.kube, NS, "p1")
        assert done["status"]["phase"] == "Succeeded", done["status"]
