"""``verify: STAGE`` check runs, end to end and at the builder level.

End to end: the real controller (over the Kubernetes API emulator) promotes a Freight into
``staging``, whose ``spec.verification`` becomes an AnalysisRun that the fake Argo Rollouts
controller runs to a scripted end; the GitHub integration follows the Stage through the
controller's Stage listener and shows the verification as a ``verify: staging`` check run on the
Freight's commit in the fake GitHub: in progress while the AnalysisRun runs, then cancelled,
success (with the metric table and ``Promote to prod``) or failure, and its ``Re-verify`` button
(a signed ``check_run`` webhook) starts a new AnalysisRun with a check run of its own.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from handlers import checks
from handlers.client import GitHubClient, RetryPolicy
from handlers.context import Deps, Permissions
from handlers.progress import Progress
from handlers.queue import KeyedQueue
from handlers.webhook import WEBHOOK_PATH, GitHubIntegration, setup_github
from tests.support import objects
from tests.support.controller import running_controller, wait_for_object
from tests.support.fixtures import analysis_template
from tests.support.github import FakeGitHub, running_fake_github, webhook_request
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.gitrepo import make_remote
from tests.support.kube import running_apiserver
from tests.support.promotions import FakePromotions
from tests.support.rollouts import HANG, FakeRolloutsController, KubernetesAnalysisRuns, Outcome
from tests.support.waiting import eventually

NS = "verify"
SECRET = "webhook-secret"
APP_URL = "https://github.com/example/app.git"
STEPS = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]


def stage(name: str, sources: dict[str, Any], *, verify: bool) -> dict[str, Any]:
    return objects.stage(
        name,
        namespace=NS,
        warehouse="app",
        sources=sources,
        steps=STEPS,
        verification=["multiple-job"] if verify else (),
    )


@dataclass
class World:
    kube: k.Kube
    fake: FakeGitHub
    rollouts: FakeRolloutsController
    integration: GitHubIntegration
    http: TestClient[Any, Any]
    sha: str

    def verify_runs(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.fake.check_runs("example/app", self.sha)
            if r["name"] == "verify: staging"
        ]

    async def verify_run(self, index: int, status: str, conclusion: str | None = None) -> Any:
        async def probe() -> dict[str, Any] | None:
            await self.integration.queue.join()
            runs = self.verify_runs()
            if len(runs) > index and runs[index]["status"] == status:
                if conclusion is None or runs[index]["conclusion"] == conclusion:
                    return runs[index]
            return None

        return await eventually(probe, f"verify run #{index} to be {status} {conclusion or ''}")

    async def analysis_runs(self) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(k.ANALYSIS_RUNS, NS)
        return list(items)

    async def press(self, run: dict[str, Any], identifier: str, user: str = "alice") -> None:
        payload = self.fake.check_run_payload(
            "example/app", run["id"], "requested_action", sender=user, identifier=identifier
        )
        headers, body = webhook_request("check_run", payload, SECRET)
        response = await self.http.post(WEBHOOK_PATH, data=body, headers=headers)
        assert response.status == 202, await response.text()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_apiserver(namespaces=[NS]))
        fake = await stack.enter_async_context(running_fake_github())
        kube = k.Kube(server.api_client())
        template = analysis_template("multiple-job")
        template["metadata"]["namespace"] = NS
        await kube.create(k.ANALYSIS_TEMPLATES, template)

        app_git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        fake.add_repo("example/app", app_git)
        fake.set_permission("example/app", "alice", "write")
        sha = app_git.head("main")
        assert sha is not None
        await kube.create(
            k.FREIGHT,
            objects.freight(
                "b" * 40,
                namespace=NS,
                alias="brave-bantha",
                warehouse="app",
                commits=[{"repoURL": APP_URL, "id": sha, "branch": "main"}],
            ),
        )
        await kube.create(k.STAGES, stage("staging", {"direct": True}, verify=True))
        await kube.create(k.STAGES, stage("prod", {"stages": ["staging"]}, verify=False))

        rollouts = FakeRolloutsController(KubernetesAnalysisRuns(server.api_client()))
        await stack.enter_async_context(rollouts.running())
        settings = fake.settings(SECRET, LONGSHOREMAN_GITHUB_PROJECT=NS)
        client = GitHubClient(settings, policy=RetryPolicy(backoff=0.01, max_wait=1.0))
        await client.start()
        stack.push_async_callback(client.close)
        controller = await stack.enter_async_context(running_controller(server, tmp_path / "w"))
        web_app = web.Application()
        integration = setup_github(
            web_app,
            settings,
            ClusterPromotions(kube, controller),
            listeners=controller.listeners,
            stage_listeners=controller.stage_listeners,
            client=client,
        )
        http = await stack.enter_async_context(TestClient(TestServer(web_app)))
        yield World(kube, fake, rollouts, integration, http, sha)


async def test_verify_check_runs_follow_analysis_runs_and_reverify_starts_a_new_one(
    world: World,
) -> None:
    # 1st AnalysisRun hangs (aborted below), the 2nd succeeds, the 3rd fails.
    world.rollouts.script_stage("staging", Outcome(HANG), Outcome(), Outcome("Failed"))
    await world.kube.create(
        k.PROMOTIONS, objects.promotion("to-staging", "staging", namespace=NS, freight="b" * 40)
    )

    # While the AnalysisRun runs: in progress, no buttons yet.
    running = await world.verify_run(0, "in_progress")
    assert running["external_id"].startswith(f"{NS}/to-staging#")
    assert running["actions"] == []
    assert "**Running**" in running["output"]["summary"]
    assert "`sleep-job`" in running["output"]["summary"]  # its metrics, measured so far

    # Aborted (Kargo's abort-verification): cancelled, with Re-verify.
    await world.kube.patch(
        k.STAGES,
        NS,
        "staging",
        {"metadata": {"annotations": {"longshoreman.dev/abort-verification": "{}"}}},
    )
    cancelled = await world.verify_run(0, "completed", "cancelled")
    # Not verified: prod may not take it, unless a person approves it there.
    assert [a["identifier"] for a in cancelled["actions"]] == [
        checks.REVERIFY,
        checks.approve_identifier("prod"),
    ]

    # Re-verify from the button: a new AnalysisRun, and a check run of its own that succeeds.
    await world.press(cancelled, checks.REVERIFY)
    success = await world.verify_run(1, "completed", "success")
    assert len(await world.analysis_runs()) == 2
    assert success["external_id"] != cancelled["external_id"]
    summary = success["output"]["summary"]
    assert "Verification of Freight `brave-bantha` in Stage `staging`: **Successful**" in summary
    assert (
        "| Metric | Phase | Measurements | Successful | Failed | Inconclusive | Error |" in summary
    )
    assert "| `sleep-job` | Successful | 1 | 1 | 0 | 0 | 0 |" in summary
    assert "| `sleep-job-rep` | Successful | 1 | 1 | 0 | 0 | 0 |" in summary
    assert [a["label"] for a in success["actions"]] == ["Re-verify", "Promote to prod"]
    statuses = [h[0] for h in success["_history"]]
    assert statuses[-1] == "completed" and len(world.verify_runs()) == 2

    # Again: this time the analysis fails, and the check says why.
    await world.press(success, checks.REVERIFY)
    failure = await world.verify_run(2, "completed", "failure")
    assert len(await world.analysis_runs()) == 3
    assert "**Failed**" in failure["output"]["summary"]
    assert "| `sleep-job` | Failed |" in failure["output"]["summary"]
    assert 'Metric "sleep-job" assessed Failed' in failure["output"]["summary"]
    # It was verified here before, so prod may take it already: nothing to approve.
    assert [a["label"] for a in failure["actions"]] == ["Re-verify"]
    # The earlier runs keep their own results.
    assert [r["conclusion"] for r in world.verify_runs()] == ["cancelled", "success", "failure"]

    # Promote to prod from the successful verification's check run (verified at the time;
    # the Freight stays verified in staging even though the last verification failed).
    await world.press(success, checks.next_identifier("prod"))
    promoted = await wait_for_object(
        world.kube,
        k.STAGES,
        NS,
        "prod",
        lambda s: bool((s.get("status") or {}).get("lastPromotion")),
    )
    assert promoted["status"]["lastPromotion"]["freight"]["name"] == "b" * 40


async def test_an_unauthorized_reverify_changes_nothing(world: World) -> None:
    await world.kube.create(
        k.PROMOTIONS, objects.promotion("to-staging", "staging", namespace=NS, freight="b" * 40)
    )
    success = await world.verify_run(0, "completed", "success")
    await world.press(success, checks.REVERIFY, user="mallory")  # read access only
    await world.integration.queue.join()
    stage_obj = await world.kube.get(k.STAGES, NS, "staging")
    annotations = stage_obj["metadata"].get("annotations") or {}
    assert "longshoreman.dev/reverify" not in annotations
    assert len(await world.analysis_runs()) == 1


# ---- the adapter with an in-memory service: restarts, limits ---------------------------------


def verifying_stage(phase: str, *, entry_id: str = "v1", message: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": entry_id,
        "phase": phase,
        "promotion": "staging.1",
        "analysisRun": {"name": "staging.run", "namespace": "demo", "phase": phase},
    }
    if message:
        entry["message"] = message
    return objects.stage(
        "staging",
        namespace="demo",
        status={
            "freightHistory": [{"verificationHistory": [entry]}],
            "lastPromotion": {"name": "staging.1", "freight": {"name": "c" * 40}},
        },
    )


def analysis_run(phase: str, metrics: int = 1, message: str = "") -> dict[str, Any]:
    results = [
        {
            "name": f"metric-{i}",
            "phase": phase,
            "count": 3,
            "successful": 3 if phase == "Successful" else 0,
            "failed": 0 if phase == "Successful" else 3,
            "measurements": [{"phase": phase, "value": "[0.99]", "message": message}],
        }
        for i in range(metrics)
    ]
    return {
        "metadata": {"name": "staging.run", "namespace": "demo"},
        "spec": {},
        "status": {"phase": phase, "metricResults": results},
    }


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    async with running_github_env(
        tmp_path,
        client=RetryPolicy(backoff=0.01, max_wait=1.0),
    ) as env:
        yield env


def _service(sha: str) -> FakePromotions:
    return FakePromotions(
        "demo",
        stages=[verifying_stage("Running")],
        freight=[
            objects.freight("c" * 40, namespace="demo", commits=[{"repoURL": APP_URL, "id": sha}])
        ],
        promotions=[
            objects.promotion(
                "staging.1", "staging", namespace="demo", freight="c" * 40, phase="Succeeded"
            )
        ],
    )


async def test_a_restarted_leader_finds_its_verify_run_by_name_and_external_id(
    env: GitHubEnv,
) -> None:
    fake, client, sha = env.fake, env.client, env.sha
    service = _service(sha)
    service.analysis_runs[("demo", "staging.run")] = analysis_run("Running")

    def progress() -> Progress:
        deps = Deps(client.settings, client, service, Permissions())
        return Progress(deps, KeyedQueue(workers=1))

    await progress().sync_verification(verifying_stage("Running"))
    assert [r["status"] for r in fake.check_runs("example/app", sha)] == ["in_progress"]
    # A new process (nothing in memory) updates the same run rather than making a second one.
    service.analysis_runs[("demo", "staging.run")] = analysis_run("Successful")
    await progress().sync_verification(verifying_stage("Successful"))
    runs = fake.check_runs("example/app", sha)
    assert [(r["status"], r["conclusion"]) for r in runs] == [("completed", "success")]
    assert fake.requests("GET", "/commits/")  # found through the list-for-ref API
    # A re-verification (a new entry) gets a run of its own.
    await progress().sync_verification(verifying_stage("Pending", entry_id="v2"))
    assert [r["status"] for r in fake.check_runs("example/app", sha)] == ["completed", "queued"]


@pytest.mark.parametrize(
    ("phase", "message", "status", "conclusion"),
    [
        ("Pending", "", "queued", None),
        ("Running", "", "in_progress", None),
        ("Successful", "", "completed", "success"),
        ("Failed", 'Metric "web" assessed Failed', "completed", "failure"),
        ("Error", "provider failed", "completed", "failure"),
        ("Inconclusive", "", "completed", "neutral"),
        ("Failed", "aborted by github:alice", "completed", "cancelled"),
    ],
)
def test_verification_phases_map_to_check_run_states(
    phase: str, message: str, status: str, conclusion: str | None
) -> None:
    entry = checks.latest_verification(verifying_stage(phase, message=message))
    assert entry is not None
    fields = checks.verification_check_fields(
        "staging", entry, analysis_run(phase), external="demo/staging.1#v1", freight_label="x"
    )
    assert fields["status"] == status
    assert fields.get("conclusion") == conclusion
    assert fields["name"] == "verify: staging"


def test_verify_check_fields_stay_within_githubs_limits() -> None:
    entry = checks.latest_verification(verifying_stage("Successful", message="m" * 5000))
    assert entry is not None
    huge = analysis_run("Successful", metrics=2000, message="x" * 10_000)
    downstream = [f"production-region-{i}-with-a-long-name" for i in range(5)]
    fields = checks.verification_check_fields(
        "s" * 200,
        entry,
        huge,
        external="demo/staging.1#v1",
        freight_label="f" * 300,
        link="https://example.com",
        downstream=downstream,
    )
    assert len(fields["output"]["summary"]) <= checks.MAX_OUTPUT
    assert len(fields["output"]["text"]) <= checks.MAX_OUTPUT
    assert len(fields["output"]["title"]) <= 200
    assert len(fields["actions"]) <= checks.MAX_ACTIONS
    for action in fields["actions"]:
        assert len(action["label"]) <= checks.LABEL_LIMIT
        assert len(action["identifier"]) <= checks.IDENTIFIER_LIMIT
        assert len(action["description"]) <= checks.DESCRIPTION_LIMIT
    json.dumps(fields)  # plain data


def test_a_stage_without_a_started_verification_shows_nothing() -> None:
    requested = verifying_stage("Requested", entry_id="")
    assert checks.latest_verification(requested) is None
    assert checks.verification_key(requested) == ()
    assert checks.latest_verification({"status": {}}) is None
