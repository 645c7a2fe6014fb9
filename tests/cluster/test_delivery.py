"""From an image push to verified in production, end to end, on both backends.

The path of ``bench/bench_pipeline.py`` (:mod:`tests.support.delivery`), checked for what a team
relies on: an image pushed to the registry (and its webhook) ends as one Freight verified in
``test``, ``uat`` and ``prod``, with one Promotion per Stage, one push per Stage and one sync per
Application, and nothing else happening.

The Argo CD Application and Argo Rollouts AnalysisRun/AnalysisTemplate CRDs installed here are
the upstream ones with their full schemas (not deploy/third-party-crds, trimmed to accept any
field): both servers then prune whatever the controller writes that Argo CD or Argo Rollouts
would never read, and the test checks that what the controller wrote is still there. They are
data others wrote, read from ``LONGSHOREMAN_CONFORMANCE_FIXTURES`` (``argo/upstream-crds/``) as
the conformance group reads its data: CI sets it, so there a missing folder fails the test;
elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from tests.cluster.support import Cluster
from tests.support import conformance
from tests.support.delivery import (
    ARGOCD_NS,
    NS,
    STAGES,
    analysis_template,
    app_name,
    running_delivery,
    values_path,
)
from tests.support.registry import running_registry

UPSTREAM = ("application", "analysis-run", "analysis-template", "cluster-analysis-template")


def upstream_crds() -> list[Path]:
    """The upstream Argo CRD files, or a skip (a failure in CI) saying how to provide them."""
    try:
        folder = conformance.root() / "argo" / "upstream-crds"
    except conformance.ConformanceFixturesError as e:
        reason = f"needs Argo's upstream CRDs: {e}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    files = [folder / f"{name}-crd.yaml" for name in UPSTREAM]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        pytest.fail(f"the conformance fixtures lack {', '.join(missing)}")
    return files


async def test_a_pushed_image_is_verified_in_prod_through_three_stages(
    cluster: Cluster, tmp_path: Path
) -> None:
    crds = upstream_crds()
    await cluster.kubectl("apply", "-k", "deploy/crds")
    # `create`, not `apply`: these CRDs are larger than the last-applied annotation may be.
    await cluster.kubectl("create", *(arg for f in crds for arg in ("-f", str(f))))
    await cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    for namespace in (NS, ARGOCD_NS):
        await cluster.kubectl("create", "namespace", namespace)

    async with (
        running_registry(tmp_path) as registry,
        running_delivery(cluster.api_client, cluster.kubeconfig_path, registry, tmp_path) as world,
    ):
        await world.release("1.0.0")
        name = await world.verified_in_prod("1.0.0", within=120)
        kube = world.kube

        freight, _ = await kube.list(k.FREIGHT, NS)
        assert [f["metadata"]["name"] for f in freight] == [name]
        assert set(freight[0]["status"]["verifiedIn"]) == set(STAGES)

        # One Promotion per Stage, each of this Freight, each Succeeded.
        promotions, _ = await kube.list(k.PROMOTIONS, NS)
        by_stage = {p["spec"]["stage"]: p for p in promotions}
        assert sorted(by_stage) == sorted(STAGES) and len(promotions) == len(STAGES)
        for promotion in promotions:
            assert promotion["spec"]["freight"] == name
            assert promotion["status"]["phase"] == "Succeeded", promotion["status"]

        # One push per Stage: three commits on main, each changing its Stage's values.
        pushed = world.remote.log("main")[:-1]  # newest first, the initial commit left out
        assert [subject for _, subject in pushed] == [f"{s}: web 1.0.0" for s in reversed(STAGES)]
        for stage in STAGES:
            values = world.remote.read_file("main", values_path(stage)) or ""
            assert "tag: 1.0.0" in values, values
        commits = {s: sha for (sha, _), s in zip(pushed, reversed(STAGES), strict=True)}

        # One sync per Application, carrying what the controller wrote (the full Application
        # schema pruned nothing of it), to the commit its Stage pushed.
        synced = {key[1]: operation for key, operation in world.argocd.started}
        assert len(world.argocd.started) == len(STAGES)
        for stage in STAGES:
            operation = synced[app_name(stage)]
            promotion = by_stage[stage]["metadata"]["name"]
            assert (
                operation["initiatedBy"]["username"] and not operation["initiatedBy"]["automated"]
            )
            info = {entry["name"]: entry["value"] for entry in operation["info"]}
            assert info["longshoreman.dev/promotion"] == promotion, info
            assert "Reason" in info
            assert operation["sync"] == {"revision": "main"}
            app = await kube.get(k.APPLICATIONS, ARGOCD_NS, app_name(stage))
            state = app["status"]["operationState"]
            assert state["phase"] == "Succeeded" and state["operation"] == operation
            assert state["syncResult"]["revision"] == commits[stage]
            assert app["metadata"]["annotations"]["argocd.argoproj.io/refresh"] == "hard"

        # One AnalysisRun per Stage, Successful, with the template's metrics and the Stage's
        # argument as the controller wrote them (the full AnalysisRun schema pruned nothing).
        runs, _ = await kube.list(k.ANALYSIS_RUNS, NS)
        assert len(runs) == len(STAGES)
        for run in runs:
            labels = run["metadata"]["labels"]
            stage = labels["longshoreman.dev/stage"]
            assert labels["longshoreman.dev/freight"] == name
            assert labels["longshoreman.dev/promotion"] == by_stage[stage]["metadata"]["name"]
            assert run["spec"]["metrics"] == analysis_template()["spec"]["metrics"]
            assert run["spec"]["args"] == [{"name": "stage", "value": stage}]
            assert run["status"]["phase"] == "Successful"

        # Each Stage shows the Freight verified, its verification naming the run.
        run_of = {r["metadata"]["labels"]["longshoreman.dev/stage"]: r for r in runs}
        for stage in STAGES:
            obj: dict[str, Any] = await kube.get(k.STAGES, NS, stage)
            conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
            assert conditions["Verified"] == "True" and conditions["Healthy"] == "True", conditions
            current = obj["status"]["freightHistory"][0]
            assert [item["name"] for item in current["items"].values()] == [name]
            verification = current["verificationHistory"][0]
            assert verification["phase"] == "Successful"
            assert verification["analysisRun"]["name"] == run_of[stage]["metadata"]["name"]
