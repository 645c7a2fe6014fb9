"""Projects as Kargo marks them, over the API server emulator: a namespace labelled
``kargo.akuity.io/project`` is a project; the controller reconciles the projects its selection
serves and starts on a namespace the moment a label makes it one of them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from app.controller import kube as k
from app.controller.creation import create_promotion
from app.controller.warehouses.charts import ChartClient
from app.controller.warehouses.discover import Discoverer
from app.controller.warehouses.gitsource import GitSource
from app.controller.warehouses.reconciler import WarehouseController
from app.controller.warehouses.registry import OCIClient
from promoter.control.projects import ProjectSelection
from promoter.engine.builder import TaskSource
from promoter.ports.credentials import NO_CREDENTIALS
from tests.support import objects
from tests.support.controller import (
    Cluster,
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)
from tests.support.gitrepo import make_remote
from tests.support.waiting import eventually

GIT = {"git": {"repoURL": "https://github.com/acme/app.git"}}
STEPS = [{"uses": "compose-output", "as": "out", "config": {"done": True}}]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running_cluster(tmp_path, ["team-a", "team-b", "legacy"]) as cluster:
        for ns, labels in (
            ("team-a", {"kargo.akuity.io/project": "true", "team": "a"}),
            ("team-b", {"longshoreman.dev/project": "true", "team": "b"}),
        ):
            await cluster.kube.patch(k.NAMESPACES, None, ns, {"metadata": {"labels": labels}})
        for ns in ("team-a", "team-b", "legacy"):
            await cluster.kube.create(
                k.WAREHOUSES, objects.warehouse(namespace=ns, subscriptions=[GIT])
            )
            await cluster.kube.create(k.FREIGHT, objects.freight(namespace=ns))
            await cluster.kube.create(k.STAGES, objects.stage("test", namespace=ns, steps=STEPS))
        yield cluster


async def _promote(cluster: Cluster, ns: str, tasks: TaskSource) -> str:
    stage = await cluster.kube.get(k.STAGES, ns, "test")
    freight = await cluster.kube.get(k.FREIGHT, ns, objects.FREIGHT)
    created = await create_promotion(cluster.kube, stage, freight, tasks, actor="alice")
    return str(created["metadata"]["name"])


async def test_only_the_projects_a_label_selector_serves_are_reconciled(cluster: Cluster) -> None:
    selection = ProjectSelection.parse(selector="team in (a)")
    async with running_controller(cluster.server, cluster.work, projects=selection) as controller:
        assert [p.name for p in controller.served.projects()] == ["team-a"]
        in_b = await _promote(cluster, "team-b", controller.task_source)
        in_a = await _promote(cluster, "team-a", controller.task_source)
        assert (await wait_terminal(cluster.kube, "team-a", in_a))["status"]["phase"] == "Succeeded"
        # team-a's Promotion was enqueued after team-b's and is done: team-b's was never taken.
        assert "status" not in await cluster.kube.get(k.PROMOTIONS, "team-b", in_b)

        # Relabelled to match, team-b is served from then on, its waiting Promotion included.
        await cluster.kube.patch(
            k.NAMESPACES, None, "team-b", {"metadata": {"labels": {"team": "a"}}}
        )
        assert (await wait_terminal(cluster.kube, "team-b", in_b))["status"]["phase"] == "Succeeded"
        assert [p.name for p in controller.served.projects()] == ["team-a", "team-b"]


async def test_every_namespace_is_served_when_nothing_is_selected_and_the_labelled_are_projects(
    cluster: Cluster,
) -> None:
    async with running_controller(cluster.server, cluster.work) as controller:
        name = await _promote(cluster, "legacy", controller.task_source)
        assert (await wait_terminal(cluster.kube, "legacy", name))["status"]["phase"] == "Succeeded"
        assert [p.name for p in controller.served.projects()] == ["team-a", "team-b"]


async def test_a_list_of_project_names_serves_those_namespaces_labelled_or_not(
    cluster: Cluster,
) -> None:
    selection = ProjectSelection.parse(names="legacy,team-b")
    async with running_controller(cluster.server, cluster.work, projects=selection) as controller:
        assert [p.name for p in controller.served.projects()] == ["legacy", "team-b"]
        in_a = await _promote(cluster, "team-a", controller.task_source)
        in_legacy = await _promote(cluster, "legacy", controller.task_source)
        done = await wait_terminal(cluster.kube, "legacy", in_legacy)
        assert done["status"]["phase"] == "Succeeded"
        assert "status" not in await cluster.kube.get(k.PROMOTIONS, "team-a", in_a)


async def test_with_one_namespace_watched_analysis_objects_are_read_only_there(
    cluster: Cluster,
) -> None:
    seen = len(cluster.server.server.requests)
    async with running_controller(cluster.server, cluster.work, namespace="team-a") as controller:
        name = await _promote(cluster, "team-a", controller.task_source)
        await wait_terminal(cluster.kube, "team-a", name)
    requests = list(cluster.server.server.requests)[seen:]
    analysis = [
        r.path for r in requests if "/analysisruns" in r.path or "/analysistemplates" in r.path
    ]
    assert analysis, "the verifier lists and watches AnalysisRuns and AnalysisTemplates"
    assert all("/namespaces/team-a/" in path for path in analysis), analysis


async def test_only_the_served_projects_warehouses_discover_until_a_label_serves_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    remote = make_remote(tmp_path, {"a": "1\n"})
    local = [{"git": {"repoURL": remote.url, "branch": "main"}}]
    for ns in ("team-a", "team-b"):
        # The fixture's Warehouses name a github.com URL: nothing here may reach it.
        await cluster.kube.delete(k.WAREHOUSES, ns, objects.WAREHOUSE)
        await cluster.kube.create(
            k.WAREHOUSES, objects.warehouse("local", namespace=ns, subscriptions=local)
        )
    selection = ProjectSelection.parse(selector="team=a")
    async with (
        aiohttp.ClientSession() as session,
        running_controller(cluster.server, cluster.work, projects=selection) as controller,
    ):
        oci = OCIClient(session)
        discoverer = Discoverer(
            oci, ChartClient(session, oci), GitSource(tmp_path / "git-cache"), NO_CREDENTIALS
        )
        warehouses = WarehouseController(
            cluster.kube, discoverer, rand=lambda: 0.0, serves=controller.served.serves
        )
        controller.served.on_change.append(warehouses.enqueue_namespace)
        tasks = [
            asyncio.create_task(warehouses.run_informer()),
            asyncio.create_task(warehouses.lead()),
        ]
        try:
            await wait_for_object(
                cluster.kube, k.WAREHOUSES, "team-a", "local", lambda w: "status" in w
            )
            assert "status" not in await cluster.kube.get(k.WAREHOUSES, "team-b", "local")
            await cluster.kube.patch(
                k.NAMESPACES, None, "team-b", {"metadata": {"labels": {"team": "a"}}}
            )
            await wait_for_object(
                cluster.kube, k.WAREHOUSES, "team-b", "local", lambda w: "status" in w
            )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def test_with_one_namespace_watched_applications_are_watched_where_its_stages_name_them(
    cluster: Cluster,
) -> None:
    """Applications live in Argo CD's namespace or wherever a Stage's argocd-update says: those
    are watched, nothing else (a cluster-wide list or watch would read every team's)."""
    sync = [{"uses": "argocd-update", "config": {"apps": [{"name": "web", "namespace": "gitops"}]}}]
    seen = len(cluster.server.server.requests)
    async with running_controller(cluster.server, cluster.work, namespace="team-a"):
        await cluster.kube.create(k.STAGES, objects.stage("prod", namespace="team-a", steps=sync))

        async def watched() -> bool | None:
            paths = [r.path for r in list(cluster.server.server.requests)[seen:]]
            return any("/namespaces/gitops/applications" in p for p in paths) or None

        await eventually(watched, "a watch of the Applications in gitops")
    paths = [
        r.path for r in list(cluster.server.server.requests)[seen:] if "/applications" in r.path
    ]
    where = {
        p.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in p else "*" for p in paths
    }
    assert where == {"team-a", "argocd", "gitops"}, paths
