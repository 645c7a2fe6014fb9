"""The ``argocd-update`` and ``argocd-wait`` steps against a fake Argo CD.

Applications live in :class:`InMemoryApps` (resourceVersion conflicts included) and a
:class:`FakeArgoCDController` runs their sync operations with scripted outcomes; each test drives
both explicitly (run the step, let the controller take a pass, run the step again with its
previous output), the way the engine re-enters a Running step. One test runs the same flow over
the Kubernetes API emulator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.resources import annotations as ann
from promoter.rules.argocd import MAX_SYNC_ATTEMPTS, health_of
from promoter.steps.argocd import (
    ARGOCD_UPDATE,
    ARGOCD_WAIT,
    CONFLICT_RETRY_SECONDS,
    RUNNING_RETRY_SECONDS,
    STEPS,
    ApplicationConflict,
)
from promoter.steps.base import StepContext, StepResult, StepStatus
from tests.support.argocd import (
    ERROR_MESSAGE,
    FAIL_MESSAGE,
    TERMINATED_MESSAGE,
    FakeArgoCDController,
    InMemoryApps,
    KubernetesApps,
    Outcome,
    make_app,
)
from tests.support.fixtures import kargo_step
from tests.support.kube import running_apiserver
from tests.support.steps import make_context

REPO = "https://github.com/example/repo.git"
SHA = "0123456789abcdef0123456789abcdef01234567"
PROMOTION = "test.01hzzzzzzzzzzzzzzzzzzzzzzz.abc1234"
KEY = ("argocd", "web")


class Clock:
    """Virtual time for the controller: each reading is one second later."""

    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def world(*apps: Mapping[str, Any]) -> tuple[InMemoryApps, FakeArgoCDController]:
    store = InMemoryApps(apps or [make_app("web")])
    controller = FakeArgoCDController(store, clock=Clock())
    controller.set_head(REPO, "main", SHA)
    return store, controller


def context(
    tmp_path: Path,
    store: Any,
    previous: Mapping[str, Any] | None = None,
    *,
    promotion: str = PROMOTION,
) -> StepContext:
    return make_context(
        tmp_path,
        project="demo",
        stage="test",
        promotion=promotion,
        previous_output=previous,
        extra_services={"argocd": store} if store is not None else None,
    )


def requests(store: InMemoryApps) -> list[tuple[str, str, dict[str, Any]]]:
    """The patches that requested a sync (the steps'), not the controller's status writes."""
    return [(ns, n, p) for ns, n, p in store.patches if isinstance(p.get("operation"), dict)]


def config(revision: str = SHA, name: str = "web") -> dict[str, Any]:
    return {"apps": [{"name": name, "sources": [{"repoURL": REPO, "desiredRevision": revision}]}]}


async def run_update(
    tmp_path: Path, store: Any, cfg: Mapping[str, Any], previous: Mapping[str, Any] | None = None
) -> StepResult:
    return await ARGOCD_UPDATE.run(context(tmp_path, store, previous), cfg)


async def drive(
    tmp_path: Path,
    store: InMemoryApps,
    controller: FakeArgoCDController,
    cfg: Mapping[str, Any],
    *,
    step: Any = ARGOCD_UPDATE,
    limit: int = 20,
) -> list[StepResult]:
    """Run a step, then alternate controller passes and re-entries until it finishes."""
    results = [await step.run(context(tmp_path, store), cfg)]
    while results[-1].status is StepStatus.RUNNING and len(results) < limit:
        await controller.process()
        results.append(await step.run(context(tmp_path, store, results[-1].output), cfg))
    return results


def test_steps_are_exposed_by_kind() -> None:
    assert STEPS == {"argocd-update": ARGOCD_UPDATE, "argocd-wait": ARGOCD_WAIT}


# ---- argocd-update ------------------------------------------------------------------------------


async def test_sync_succeeds_then_registers_a_health_check(tmp_path: Path) -> None:
    store, controller = world()
    first = await run_update(tmp_path, store, config())
    assert first.status is StepStatus.RUNNING
    assert first.retry_after == RUNNING_RETRY_SECONDS
    assert first.output["apps"] == [{"namespace": "argocd", "name": "web"}]
    assert "sync started" in first.message
    ((_, _, patch),) = requests(store)
    assert patch["operation"]["initiatedBy"] == {"username": "tester", "automated": False}
    assert {"name": ann.PROMOTION_INFO, "value": PROMOTION} in patch["operation"]["info"]

    # Re-entered before Argo CD picked the sync up: it waits, and does not sync again.
    again = await run_update(tmp_path, store, config(), first.output)
    assert again.status is StepStatus.RUNNING and "has not started yet" in again.message
    await controller.process()  # Argo CD starts the operation
    running = await run_update(tmp_path, store, config(), again.output)
    assert running.status is StepStatus.RUNNING and "sync is Running" in running.message
    await controller.process()  # ... and finishes it
    done = await run_update(tmp_path, store, config(), running.output)

    assert done.status is StepStatus.SUCCEEDED, done.message
    assert done.health_check == {
        "uses": "argocd-update",
        "config": {"apps": [{"namespace": "argocd", "name": "web", "desiredRevisions": [SHA]}]},
    }
    assert done.output["apps"] == [{"namespace": "argocd", "name": "web"}]
    assert len(requests(store)) == 1 and len(controller.started) == 1

    # The Stage's health follows the Application, drift included.
    check = done.health_check["config"]
    assert health_of(check, {KEY: store.snapshot(*KEY)})[0] == "Healthy"
    await controller.drift(*KEY)
    status, message = health_of(check, {KEY: store.snapshot(*KEY)})
    assert status == "Unhealthy" and "OutOfSync" in message


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (Outcome("fail"), FAIL_MESSAGE),
        (Outcome("error"), ERROR_MESSAGE),
        (Outcome("fail", message="hook failed"), "hook failed"),
    ],
)
async def test_failed_sync_fails_with_argo_cds_message(
    tmp_path: Path, outcome: Outcome, message: str
) -> None:
    store, controller = world()
    controller.script(*KEY, outcome)
    results = await drive(tmp_path, store, controller, config())
    last = results[-1]
    assert last.status is StepStatus.FAILED
    assert last.message == (
        f"Argo CD Application 'web' in namespace 'argocd' failed with: {message}"
    )
    assert last.health_check is None
    assert len(controller.started) == 1  # no retry of a failed sync


async def test_waits_for_an_operation_it_did_not_start_then_syncs(tmp_path: Path) -> None:
    busy = make_app("web")
    manual = {"initiatedBy": {"username": "admin"}, "sync": {"revision": "main"}}
    busy["operation"] = manual
    busy["status"]["operationState"] = {
        "phase": "Running",
        "operation": manual,
        "startedAt": "2024-01-01T11:59:00Z",
    }
    store, controller = world(busy)

    first = await run_update(tmp_path, store, config())
    assert first.status is StepStatus.RUNNING
    assert "initiated by 'admin' is Running" in first.message
    assert store.patches == []

    await controller.process()  # the admin's sync finishes
    second = await run_update(tmp_path, store, config(), first.output)
    assert second.status is StepStatus.RUNNING and "sync started" in second.message
    assert len(requests(store)) == 1
    await controller.settle()
    done = await run_update(tmp_path, store, config(), second.output)
    assert done.status is StepStatus.SUCCEEDED


async def test_reentry_after_a_crash_finds_its_own_sync(tmp_path: Path) -> None:
    store, controller = world()
    await run_update(tmp_path, store, config())
    # The process died before the output was saved: re-entered with no previous output.
    lost = await run_update(tmp_path, store, config(), {})
    assert lost.status is StepStatus.RUNNING
    await controller.settle()
    done = await run_update(tmp_path, store, config(), {})
    assert done.status is StepStatus.SUCCEEDED
    assert len(requests(store)) == 1 and len(controller.started) == 1


async def test_an_earlier_promotions_sync_does_not_count(tmp_path: Path) -> None:
    store, controller = world()
    await drive(tmp_path, store, controller, config())
    assert len(controller.started) == 1
    later = await ARGOCD_UPDATE.run(
        context(tmp_path, store, promotion="test.later.def5678"), config()
    )
    assert later.status is StepStatus.RUNNING and "for Promotion" in later.message
    assert len(requests(store)) == 2


async def test_resyncs_when_argo_cd_lands_elsewhere_then_gives_up(tmp_path: Path) -> None:
    store, controller = world()
    controller.set_head(REPO, "main", "f" * 40)  # the branch moved past the promoted commit
    results = await drive(tmp_path, store, controller, config())
    last = results[-1]
    assert last.status is StepStatus.FAILED
    assert f"after {MAX_SYNC_ATTEMPTS} sync(s)" in last.message
    assert len(controller.started) == MAX_SYNC_ATTEMPTS


async def test_abort_terminates_only_our_operation(tmp_path: Path) -> None:
    store, controller = world()
    controller.script(*KEY, Outcome("hang"))
    first = await run_update(tmp_path, store, config())
    await controller.process()
    assert store.snapshot(*KEY)["status"]["operationState"]["phase"] == "Running"

    await ARGOCD_UPDATE.abort(context(tmp_path, store, first.output), config())
    assert store.patches[-1][2] == {"status": {"operationState": {"phase": "Terminating"}}}
    await controller.process()
    state = store.snapshot(*KEY)["status"]["operationState"]
    assert (state["phase"], state["message"]) == ("Failed", TERMINATED_MESSAGE)
    # Nothing left to terminate: a second abort writes nothing.
    writes = len(store.patches)
    await ARGOCD_UPDATE.abort(context(tmp_path, store, first.output), config())
    assert len(store.patches) == writes


async def test_abort_leaves_other_operations_alone(tmp_path: Path) -> None:
    busy = make_app("web")
    manual = {"initiatedBy": {"username": "admin"}, "sync": {}}
    busy["operation"] = manual
    busy["status"]["operationState"] = {"phase": "Running", "operation": manual}
    store, _ = world(busy)
    await ARGOCD_UPDATE.abort(context(tmp_path, store), config())
    another = context(tmp_path, store, promotion="test.other.1234567")
    await ARGOCD_UPDATE.abort(another, config())
    assert store.patches == []


async def test_abort_withdraws_a_request_argo_cd_has_not_started(tmp_path: Path) -> None:
    store, controller = world()
    first = await run_update(tmp_path, store, config())
    await ARGOCD_UPDATE.abort(context(tmp_path, store, first.output), config())
    assert "operation" not in store.snapshot(*KEY)
    await controller.process()
    assert controller.started == []


async def test_unauthorized_application_is_refused(tmp_path: Path) -> None:
    store, _ = world(make_app("web", authorized="demo:prod"))
    with pytest.raises(StepError) as e:
        await run_update(tmp_path, store, config())
    assert e.value.terminal
    assert ann.KARGO_AUTHORIZED_STAGE in e.value.message
    assert "longshoreman.dev/authorized-stage: 'demo:test'" in e.value.message
    assert store.patches == []


async def test_missing_application_is_a_retryable_error(tmp_path: Path) -> None:
    store, _ = world()
    with pytest.raises(StepError) as e:
        await run_update(tmp_path, store, config(name="nope"))
    assert not e.value.terminal
    assert e.value.message == "unable to find Argo CD Application 'nope' in namespace 'argocd'"


async def test_selector_matching_several_applications(tmp_path: Path) -> None:
    labels = {"team": "platform", "environment": "staging"}
    store, controller = world(
        make_app("web-a", labels=labels),
        make_app("web-b", labels=labels),
        make_app("web-c", labels=labels, authorized="demo:prod"),
        make_app("web-d", labels={"team": "other"}),
        make_app("web-e", "elsewhere", labels=labels),
    )
    cfg = kargo_step("task-argocd-selectors.yaml", "update-platform")["config"]
    cfg["apps"][0]["sources"][0]["desiredRevision"] = SHA
    results = await drive(tmp_path, store, controller, cfg)
    first, last = results[0], results[-1]
    assert first.output["apps"] == [
        {"namespace": "argocd", "name": "web-a"},
        {"namespace": "argocd", "name": "web-b"},
    ]
    assert "skipped unauthorized argocd/web-c" in first.message
    assert sorted(name for _, name, _ in requests(store)) == ["web-a", "web-b"]
    assert last.status is StepStatus.SUCCEEDED
    assert last.health_check is not None
    assert [a["name"] for a in last.health_check["config"]["apps"]] == ["web-a", "web-b"]


async def test_selector_needs_compatible_sources_before_any_change(tmp_path: Path) -> None:
    store, _ = world(
        make_app("web-a", labels={"team": "platform"}),
        make_app("web-b", labels={"team": "platform"}, repo_url="https://github.com/x/other"),
    )
    cfg = {
        "apps": [
            {
                "selector": {"matchLabels": {"team": "platform"}},
                "sources": [{"repoURL": REPO, "desiredRevision": SHA}],
            }
        ]
    }
    with pytest.raises(StepError) as e:
        await run_update(tmp_path, store, cfg)
    assert e.value.terminal
    assert "must have compatible sources; 1 incompatible. No Applications were updated" in (
        e.value.message
    )
    assert store.patches == []


async def test_selector_hard_refresh_without_sources(tmp_path: Path) -> None:
    store, controller = world(make_app("web", labels={"auto-refresh": "enabled"}))
    cfg = kargo_step("task-argocd-selectors.yaml", "refresh-only")["config"]
    results = await drive(tmp_path, store, controller, cfg)
    assert results[-1].status is StepStatus.SUCCEEDED
    ((_, _, patch),) = requests(store)
    assert "spec" not in patch
    assert patch["metadata"]["annotations"] == {"argocd.argoproj.io/refresh": "hard"}


async def test_a_stage_syncs_its_application_to_the_commit_it_pushed(tmp_path: Path) -> None:
    # The runner renders ${{ outputs.commit.commit }} to the commit git-commit made.
    cfg = kargo_step("stage-argocd.yaml", "sync")["config"]
    cfg["apps"][0]["sources"][0]["desiredRevision"] = SHA
    store, controller = world(make_app("my-app"))
    results = await drive(tmp_path, store, controller, cfg)
    assert results[-1].status is StepStatus.SUCCEEDED
    assert store.snapshot("argocd", "my-app")["status"]["sync"]["revision"] == SHA


async def test_multi_source_application(tmp_path: Path) -> None:
    chart = "https://charts.example.com"
    store, controller = world(
        make_app(
            "web",
            sources=[
                {"repoURL": REPO, "targetRevision": "main", "path": "."},
                {"repoURL": chart, "chart": "web", "targetRevision": "1.0.0"},
            ],
        )
    )
    cfg = {
        "apps": [
            {
                "name": "web",
                "sources": [
                    {
                        "repoURL": chart,
                        "chart": "web",
                        "desiredRevision": "2.0.0",
                        "updateTargetRevision": True,
                    }
                ],
            }
        ]
    }
    results = await drive(tmp_path, store, controller, cfg)
    last = results[-1]
    assert last.status is StepStatus.SUCCEEDED, last.message
    assert last.health_check is not None
    assert last.health_check["config"]["apps"][0]["desiredRevisions"] == ["", "2.0.0"]
    app = store.snapshot(*KEY)
    assert app["spec"]["sources"][1]["targetRevision"] == "2.0.0"
    assert app["status"]["sync"]["revisions"] == [SHA, "2.0.0"]


async def test_kustomize_and_helm_image_updates(tmp_path: Path) -> None:
    store, controller = world()
    cfg = {
        "apps": [
            {
                "name": "web",
                "sources": [
                    {
                        "repoURL": REPO,
                        "kustomize": {"images": [{"repoURL": "ghcr.io/example/web", "tag": "v2"}]},
                        "helm": {"images": [{"key": "image.tag", "value": "v2"}]},
                    }
                ],
            }
        ]
    }
    results = await drive(tmp_path, store, controller, cfg)
    assert results[-1].status is StepStatus.SUCCEEDED
    source = store.snapshot(*KEY)["spec"]["source"]
    assert source["kustomize"]["images"] == ["ghcr.io/example/web:v2"]
    assert source["helm"]["parameters"] == [{"name": "image.tag", "value": "v2"}]
    # Nothing desired: the health check does not pin a revision.
    check = results[-1].health_check
    assert check is not None and check["config"]["apps"][0]["desiredRevisions"] == [""]


async def test_one_failed_application_stops_the_step_before_other_writes(tmp_path: Path) -> None:
    store, controller = world(make_app("web"), make_app("api"))
    controller.script("argocd", "web", Outcome("fail"))
    only_web = await drive(tmp_path, store, controller, config())
    assert only_web[-1].status is StepStatus.FAILED
    writes = len(store.patches)
    both = {"apps": [config()["apps"][0], {**config()["apps"][0], "name": "api"}]}
    result = await run_update(tmp_path, store, both, only_web[-1].output)
    assert result.status is StepStatus.FAILED and "'web'" in result.message
    assert len(store.patches) == writes  # api was not synced


async def test_conflict_on_patch_is_retried_soon(tmp_path: Path) -> None:
    store, _ = world()
    store.force_conflicts(1)
    first = await run_update(tmp_path, store, config())
    assert first.status is StepStatus.RUNNING
    assert first.retry_after == CONFLICT_RETRY_SECONDS
    assert "conflict" in first.message and "will retry" in first.message
    assert store.patches == []
    second = await run_update(tmp_path, store, config(), first.output)
    assert second.status is StepStatus.RUNNING and len(store.patches) == 1


async def test_stale_resource_version_is_a_conflict(tmp_path: Path) -> None:
    store, _ = world()
    stale = await store.get(*KEY)
    assert stale is not None
    store.put(store.snapshot(*KEY))  # someone wrote in between
    with pytest.raises(ApplicationConflict) as e:
        await store.patch(
            *KEY,
            {"metadata": {"labels": {"x": "y"}}},
            resource_version=stale["metadata"]["resourceVersion"],
        )
    assert not e.value.terminal and e.value.retry_after == CONFLICT_RETRY_SECONDS


async def test_without_the_port_it_explains_where_it_runs(tmp_path: Path) -> None:
    with pytest.raises(StepError) as e:
        await run_update(tmp_path, None, config())
    assert e.value.terminal
    assert e.value.message == (
        "argocd-update needs the Argo CD port; it runs under `python -m app serve`, not in the "
        "local runner without a cluster"
    )
    with pytest.raises(StepError) as w:
        await ARGOCD_WAIT.run(context(tmp_path, None), {"apps": [{"name": "web"}]})
    assert w.value.terminal and w.value.message.startswith("argocd-wait needs the Argo CD port")


async def test_bad_config_is_terminal_before_any_read(tmp_path: Path) -> None:
    with pytest.raises(StepError) as e:
        await run_update(tmp_path, None, {"apps": [{"name": "web", "sources": [{}]}]})
    assert e.value.terminal and "repoURL is required" in e.value.message


async def test_with_the_controller_running_in_the_background(tmp_path: Path) -> None:
    store, controller = world()
    async with controller.running():
        result = await run_update(tmp_path, store, config())
        for _ in range(200):
            if result.status is not StepStatus.RUNNING:
                break
            await asyncio.sleep(0.005)
            result = await run_update(tmp_path, store, config(), result.output)
    assert result.status is StepStatus.SUCCEEDED


async def test_over_the_kubernetes_api_emulator(tmp_path: Path) -> None:
    async with running_apiserver(namespaces=["argocd"]) as kube:
        apps = KubernetesApps(kube.api_client())
        await apps.put(make_app("web"))
        controller = FakeArgoCDController(apps, clock=Clock())
        controller.set_head(REPO, "main", SHA)
        results = [await ARGOCD_UPDATE.run(context(tmp_path, apps), config())]
        while results[-1].status is StepStatus.RUNNING and len(results) < 10:
            await controller.process()
            results.append(
                await ARGOCD_UPDATE.run(context(tmp_path, apps, results[-1].output), config())
            )
        assert results[-1].status is StepStatus.SUCCEEDED, results[-1].message
        app = await apps.get(*KEY)
        assert app is not None and "operation" not in app
        assert app["status"]["sync"] == {"status": "Synced", "revision": SHA}
        wait = await ARGOCD_WAIT.run(context(tmp_path, apps), {"apps": [{"name": "web"}]})
        assert wait.status is StepStatus.SUCCEEDED, wait.message


# ---- argocd-wait --------------------------------------------------------------------------------


async def test_wait_follows_a_sync_to_healthy(tmp_path: Path) -> None:
    store, controller = world(make_app("my-app"))
    await run_update(tmp_path, store, config(name="my-app"))
    wait_cfg = kargo_step("stage-argocd.yaml", "wait")["config"]
    results = await drive(tmp_path, store, controller, wait_cfg, step=ARGOCD_WAIT)
    assert results[0].status is StepStatus.RUNNING
    assert "operation is in progress" in results[0].message
    assert results[-1].status is StepStatus.SUCCEEDED, results[-1].message
    assert results[-1].output["apps"] == [{"namespace": "argocd", "name": "my-app"}]
    assert results[-1].output["healthStatus"] == {"argocd/my-app": "Healthy"}


async def test_wait_fails_when_health_regresses(tmp_path: Path) -> None:
    store, controller = world()
    cfg = {"apps": [{"name": "web"}]}
    await controller.set_health(*KEY, "Progressing")
    first = await ARGOCD_WAIT.run(context(tmp_path, store), cfg)
    assert first.status is StepStatus.RUNNING
    await controller.set_health(*KEY, "Degraded")
    second = await ARGOCD_WAIT.run(context(tmp_path, store, first.output), cfg)
    assert second.status is StepStatus.FAILED
    assert "health has regressed from Progressing to Degraded" in second.message


async def test_wait_for_suspended_and_by_selector(tmp_path: Path) -> None:
    store, controller = world(make_app("my-app", labels={"environment": "staging"}))
    suspended = kargo_step("task-argocd-selectors.yaml", "wait-suspended")
    first = await ARGOCD_WAIT.run(context(tmp_path, store), suspended["config"])
    assert first.status is StepStatus.RUNNING and "waiting for Suspended" in first.message
    await controller.set_health("argocd", "my-app", "Suspended")
    assert (await ARGOCD_WAIT.run(context(tmp_path, store), suspended["config"])).status is (
        StepStatus.SUCCEEDED
    )
    by_label = kargo_step("task-argocd-selectors.yaml", "wait-staging")
    await controller.set_health("argocd", "my-app", "Healthy")
    result = await ARGOCD_WAIT.run(context(tmp_path, store), by_label["config"])
    assert result.status is StepStatus.SUCCEEDED
    assert result.output["apps"] == [{"namespace": "argocd", "name": "my-app"}]


async def test_wait_needs_no_authorization_but_an_application(tmp_path: Path) -> None:
    store, _ = world(make_app("web", authorized=None))
    ok = await ARGOCD_WAIT.run(context(tmp_path, store), {"apps": [{"name": "web"}]})
    assert ok.status is StepStatus.SUCCEEDED
    with pytest.raises(StepError) as e:
        await ARGOCD_WAIT.run(
            context(tmp_path, store), {"apps": [{"selector": {"matchLabels": {"x": "y"}}}]}
        )
    assert not e.value.terminal and "no Argo CD Applications found matching selector" in (
        e.value.message
    )
