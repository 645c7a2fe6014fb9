"""The fake Argo Rollouts analysis controller, against the Kubernetes API emulator.

AnalysisRuns are built by :func:`promoter.control.verification.build_analysis_run` from our analysis
templates (tests/fixtures/argo), created through the real ``kubernetes.aio`` client, and driven
by explicit ``process()`` passes (or the background loop); each test then reads what a verification
controller would read. One emulator per test; the whole module runs in well under 5 seconds.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from promoter.control.verification import (
    ANALYSIS_TERMINAL,
    build_analysis_run,
    verification_message,
    verification_phase,
)
from tests.support import objects
from tests.support.fixtures import analysis_template as template
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.rollouts import (
    ERROR_MESSAGE,
    HANG,
    INSTANCE_ID_LABEL,
    METRIC_TERMINATED_MESSAGE,
    TERMINATED_MESSAGE,
    FakeRolloutsController,
    InMemoryAnalysisRuns,
    KubernetesAnalysisRuns,
    Outcome,
)

NAMESPACE = "demo"
FREIGHT = objects.freight(
    "abcdef0123456789abcdef0123456789abcdef01", namespace=NAMESPACE, warehouse="web"
)


def analysis_run(
    stage: str,
    *templates: dict[str, Any],
    ulid: str = "01j0000000000000000000000z",
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    stage_obj = objects.stage(
        stage,
        namespace=NAMESPACE,
        verification=[t["metadata"]["name"] for t in templates],
        analysis_run_metadata={"labels": dict(labels)} if labels else None,
    )
    return build_analysis_run(
        stage=stage_obj,
        freight=FREIGHT,
        templates=list(templates),
        promotion=f"{stage}.01hzzzzzzzzzzzzzzzzzzzzzzz.abcdef0",
        namespace=NAMESPACE,
        ulid=ulid,
    )  # fmt: skip


class Clock:
    """Virtual time for the controller: moves only when the test says so."""

    def __init__(self) -> None:
        self.now = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def phases_after_passes(
    controller: FakeRolloutsController, runs: KubernetesAnalysisRuns, name: str, passes: int
) -> list[str]:
    seen = []
    for _ in range(passes):
        await controller.process()
        run = await runs.get(NAMESPACE, name)
        assert run is not None
        seen.append(verification_phase(run))
    return seen


@pytest.fixture
async def kube() -> Any:
    async with running_apiserver(namespaces=[NAMESPACE]) as running:
        yield running


async def test_pending_running_successful(kube: RunningApiServer) -> None:
    runs = KubernetesAnalysisRuns(kube.api_client())
    clock = Clock()
    controller = FakeRolloutsController(runs, clock=clock)
    created = await runs.create(analysis_run("test", template("multiple-job")))
    name = created["metadata"]["name"]
    assert verification_phase(created) == ""

    assert await phases_after_passes(controller, runs, name, 3) == [
        "Pending",
        "Running",
        "Successful",
    ]
    run = await runs.get(NAMESPACE, name)
    assert run is not None
    status = run["status"]
    assert status["startedAt"] == "2024-05-01T12:00:00Z"
    assert status["completedAt"] == "2024-05-01T12:00:00Z"
    assert "message" not in status
    assert [
        (r["name"], r["phase"], r["count"], r["successful"]) for r in status["metricResults"]
    ] == [
        ("sleep-job", "Successful", 1, 1),
        ("sleep-job-rep", "Successful", 1, 1),
    ]
    assert status["runSummary"] == {
        "count": 2, "successful": 2, "failed": 0, "inconclusive": 0, "error": 0,
    }  # fmt: skip
    assert verification_message(run) == ""
    # A completed run is left alone.
    assert await controller.process() == 0
    # The spec we built survived the status writes (no status subresource: one object).
    assert run["spec"]["metrics"][0]["name"] == "sleep-job"
    assert run["metadata"]["labels"]["longshoreman.dev/stage"] == "test"


async def test_scripted_outcomes_by_stage_and_prefix(kube: RunningApiServer) -> None:
    runs = KubernetesAnalysisRuns(kube.api_client())
    controller = FakeRolloutsController(runs, namespaces=[NAMESPACE])
    controller.script_stage("uat", Outcome("Failed"))
    controller.script("prod.", Outcome("Error", ticks=2))
    controller.script("qa.", Outcome("Inconclusive", metric="web"))
    web = template("web-background")
    for stage in ("uat", "prod", "qa", "dev"):
        await runs.create(analysis_run(stage, web))
    await controller.settle()

    by_stage = {
        r["metadata"]["labels"]["longshoreman.dev/stage"]: r for r in await runs.list(NAMESPACE)
    }
    assert {s: verification_phase(r) for s, r in by_stage.items()} == {
        "uat": "Failed",
        "prod": "Error",
        "qa": "Inconclusive",
        "dev": "Successful",
    }
    assert verification_message(by_stage["uat"]) == (
        'Metric "web" assessed Failed due to failed (1) > failureLimit (0)'
    )
    assert verification_message(by_stage["prod"]) == (
        'Metric "web" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4): '
        f'"Error Message: {ERROR_MESSAGE}"'
    )
    error = by_stage["prod"]["status"]["metricResults"][0]
    assert (error["error"], error["consecutiveError"], len(error["measurements"])) == (5, 5, 5)
    assert verification_message(by_stage["qa"]) == (
        'Metric "web" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)'
    )
    assert [k[1].split(".")[0] for k, _ in controller.started] == ["dev", "prod", "qa", "uat"]


async def test_terminate_ends_successful_with_run_terminated(kube: RunningApiServer) -> None:
    runs = KubernetesAnalysisRuns(kube.api_client())
    controller = FakeRolloutsController(runs, default=Outcome(HANG))
    created = await runs.create(analysis_run("test", template("web-background")))
    name = created["metadata"]["name"]
    assert await phases_after_passes(controller, runs, name, 4) == [
        "Pending",
        "Running",
        "Running",
        "Running",
    ]
    await controller.terminate(NAMESPACE, name)
    assert await phases_after_passes(controller, runs, name, 1) == ["Successful"]
    run = await runs.get(NAMESPACE, name)
    assert run is not None
    assert run["status"]["message"] == TERMINATED_MESSAGE
    metric = run["status"]["metricResults"][0]
    assert metric["phase"] == "Successful"
    assert metric["measurements"][-1]["message"] == METRIC_TERMINATED_MESSAGE


async def test_seconds_wait_on_the_controller_clock(kube: RunningApiServer) -> None:
    runs = KubernetesAnalysisRuns(kube.api_client())
    clock = Clock()
    controller = FakeRolloutsController(runs, clock=clock, default=Outcome(seconds=30))
    name = (await runs.create(analysis_run("test", template("web-background"))))["metadata"]["name"]
    assert await phases_after_passes(controller, runs, name, 4) == [
        "Pending",
        "Running",
        "Running",
        "Running",
    ]
    clock.advance(30)
    assert await phases_after_passes(controller, runs, name, 1) == ["Successful"]
    run = await runs.get(NAMESPACE, name)
    assert run is not None
    assert run["status"]["completedAt"] == "2024-05-01T12:00:30Z"


async def test_background_loop(kube: RunningApiServer) -> None:
    runs = KubernetesAnalysisRuns(kube.api_client())
    controller = FakeRolloutsController(runs)
    controller.script_stage("test", Outcome("Failed"))
    async with controller.running():
        name = (await runs.create(analysis_run("test", template("web-background"))))["metadata"][
            "name"
        ]
        async with asyncio.timeout(3):
            while True:
                run = await runs.get(NAMESPACE, name)
                assert run is not None
                if verification_phase(run) in ANALYSIS_TERMINAL:
                    break
                await asyncio.sleep(0.01)
    assert verification_phase(run) == "Failed"


# ---- details, in memory -------------------------------------------------------------------------


async def test_dry_run_failure_leaves_the_run_successful() -> None:
    dry = copy.deepcopy(template("dry-run-job"))
    dry["spec"]["dryRun"] = [{"metricName": "test.*"}]
    runs = InMemoryAnalysisRuns()
    controller = FakeRolloutsController(runs, default=Outcome("Failed"))
    created = await runs.create(analysis_run("test", dry, template("web-background")))
    await controller.settle()
    run = await runs.get(*_key(created))
    assert run is not None
    status = run["status"]
    # The failure lands on the first metric that counts, not on the dry-run one.
    assert [(r["name"], r["phase"]) for r in status["metricResults"]] == [
        ("test-1", "Successful"),
        ("web", "Failed"),
    ]
    assert status["metricResults"][0]["dryRun"] is True

    only_dry = await runs.create(analysis_run("other", dry))
    controller.default = Outcome("Failed", metric="test-1")
    await controller.settle()
    run = await runs.get(*_key(only_dry))
    assert run is not None
    assert verification_phase(run) == "Successful"
    assert run["status"]["metricResults"][0]["message"] == (
        "Metric assessed Failed due to failed (1) > failureLimit (0)"
    )
    assert run["status"]["dryRunSummary"]["failed"] == 1
    assert run["status"]["runSummary"]["count"] == 0


async def test_limits_and_counts_come_from_args() -> None:
    runs = InMemoryAnalysisRuns()
    controller = FakeRolloutsController(runs, default=Outcome("Failed"))
    secret_args = template("analysis-secret-args")
    stage = objects.stage(
        "test",
        namespace=NAMESPACE,
        verification=["analysis-secret-args"],
        verification_args=[
            {"name": "failure-limit", "value": "2"},
            {"name": "inconclusive-limit", "value": "2"},
            {"name": "success-condition", "value": "It worked!"},
        ],
    )
    created = await runs.create(
        build_analysis_run(
            stage=stage, freight=FREIGHT, templates=[secret_args], promotion=None,
            namespace=NAMESPACE,
        )
    )  # fmt: skip
    await controller.settle()
    run = await runs.get(*_key(created))
    assert run is not None
    result = run["status"]["metricResults"][0]
    assert (result["failed"], result["count"], len(result["measurements"])) == (3, 3, 3)
    assert verification_message(run) == (
        'Metric "webmetric" assessed Failed due to failed (3) > failureLimit (2)'
    )


async def test_instance_id_selects_runs() -> None:
    runs = InMemoryAnalysisRuns()
    web = template("web-background")
    mine = await runs.create(analysis_run("a", web, labels={INSTANCE_ID_LABEL: "blue"}))
    theirs = await runs.create(analysis_run("b", web, labels={INSTANCE_ID_LABEL: "green"}))
    unlabelled = await runs.create(analysis_run("c", web))
    await FakeRolloutsController(runs, instance_id="blue").settle()
    phases = [
        verification_phase(await runs.get(*_key(r)) or {}) for r in (mine, theirs, unlabelled)
    ]
    assert phases == ["Successful", "", ""]
    await FakeRolloutsController(runs).settle()
    assert verification_phase(await runs.get(*_key(unlabelled)) or {}) == "Successful"


async def test_a_run_started_elsewhere_is_adopted() -> None:
    runs = InMemoryAnalysisRuns()
    created = await runs.create(analysis_run("test", template("web-background")))
    first = FakeRolloutsController(runs)
    await first.process()
    await first.process()
    assert verification_phase(await runs.get(*_key(created)) or {}) == "Running"
    # Another instance finishes what it did not start, the default way.
    await FakeRolloutsController(runs, default=Outcome("Error")).settle()
    assert verification_phase(await runs.get(*_key(created)) or {}) == "Error"


class DeletedAfterListing(InMemoryAnalysisRuns):
    """Every run listed is deleted before the controller can write it."""

    async def list(
        self, namespace: str | None = None, label_selector: str = ""
    ) -> list[Mapping[str, Any]]:
        found = await super().list(namespace, label_selector)
        for run in found:
            await self.delete(*_key(run))
        return found


async def test_a_deleted_run_is_skipped() -> None:
    runs = DeletedAfterListing()
    await runs.create(analysis_run("test", template("web-background")))
    assert await FakeRolloutsController(runs).process() == 0
    assert runs.patches == []


def test_unknown_outcome_phase() -> None:
    with pytest.raises(ValueError, match="unknown outcome phase 'Succeeded'"):
        Outcome("Succeeded")


def _key(run: Mapping[str, Any]) -> tuple[str, str]:
    return (run["metadata"]["namespace"], run["metadata"]["name"])
