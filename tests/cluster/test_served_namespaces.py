"""Issue 36's cluster "done when": with one namespace served, the controller lists and watches
Argo CD Applications, AnalysisRuns and AnalysisTemplates only in that namespace and where its
Stages' argocd-update steps name Applications, never cluster-wide; checked where the requests
arrived (the real kube-apiserver's audit log; in front of the emulator, the RBAC proxy), under
deploy/'s RBAC.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.controller import kube as k
from app.controller.reconciler import Controller
from promoter.steps.base import StepServices
from promoter.steps.registry import builtin_registry
from tests.cluster.support import Cluster
from tests.support import objects
from tests.support.waiting import eventually

PROJECT = "kargo-demo"  # a namespace deploy/overlays/example grants
ARGO_KINDS = ("applications", "analysisruns", "analysistemplates")


async def test_argo_objects_are_read_only_in_the_served_namespace_and_where_stages_say(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    for namespace in ("argocd", "gitops", "other-team"):
        await cluster.kubectl("create", "namespace", namespace)
    sync = [{"uses": "argocd-update", "config": {"apps": [{"name": "web", "namespace": "gitops"}]}}]
    async with cluster.controller_access() as access:
        admin = cluster.kube()
        await admin.create(k.STAGES, objects.stage("prod", namespace=PROJECT, steps=sync))
        kube = k.Kube(access.api_client())
        controller = Controller(
            kube,
            registry=builtin_registry(),
            services=StepServices(),
            work_dir=tmp_path / "work",
            namespace=PROJECT,
        )
        informers = asyncio.create_task(controller.run_informers())
        try:
            await asyncio.wait_for(controller.wait_synced(), 30)

            async def gitops_listed() -> bool | None:
                return any(r.namespace == "gitops" for r in access.requests_on(*ARGO_KINDS)) or None

            # The real server audits a request once it is complete: lists at once.
            await eventually(gitops_listed, "a list of the Applications in gitops", within=30)
        finally:
            informers.cancel()
            await asyncio.gather(informers, return_exceptions=True)
            await kube.close()
            await admin.close()
        requests = access.requests_on(*ARGO_KINDS)
    assert {r.resource for r in requests} == set(ARGO_KINDS), requests
    assert {r.namespace for r in requests} == {PROJECT, "argocd", "gitops"}, requests
    assert all(r.code == 200 for r in requests if r.verb == "list"), requests
