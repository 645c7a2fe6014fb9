"""Verification and Freight flow end to end: the reconciler, a fake Argo Rollouts analysis
controller, and the API server emulator, all over HTTP.

A new Freight moves dev -> staging -> prod by itself, each hop gated by an AnalysisRun built from
real Argo Rollouts templates; a failing AnalysisRun stops it with the reason on the Stage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from promoter.resources.model import parse_time
from tests.support import objects
from tests.support.controller import (
    Cluster,
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)
from tests.support.fixtures import analysis_template
from tests.support.kube import OUR_CRDS, running_apiserver
from tests.support.rollouts import HANG, FakeRolloutsController, KubernetesAnalysisRuns, Outcome

NS = "flow"
STEPS = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]


def stage(
    name: str, sources: dict[str, Any], *, verify: bool = True, auto: bool = True
) -> dict[str, Any]:
    return objects.stage(
        name,
        namespace=NS,
        warehouse="app",
        sources=sources,
        steps=STEPS,
        annotations={"longshoreman.dev/auto-promote": "true"} if auto else {},
        verification=["multiple-job"] if verify else (),
        verification_args=[
            {"name": "exit-code", "value": "${{ ctx.stage == 'never' ? '1' : '0' }}"}
        ],
        analysis_run_metadata={"labels": {"team": "platform"}},
    )


def freight(name: str) -> dict[str, Any]:
    return objects.freight(
        name,
        namespace=NS,
        alias=f"alias-{name[:6]}",
        warehouse="app",
        images=[{"repoURL": "ghcr.io/example/app", "tag": "1.0.0"}],
    )


@dataclass
class Env(Cluster):
    rollouts: FakeRolloutsController

    async def verified_in(self, freight_name: str, stage_name: str) -> dict[str, Any]:
        return await wait_for_object(
            self.kube,
            k.FREIGHT,
            NS,
            freight_name,
            lambda f: stage_name in ((f.get("status") or {}).get("verifiedIn") or {}),
        )

    async def promotions_to(self, stage_name: str) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(k.PROMOTIONS, NS)
        return [p for p in items if p["spec"]["stage"] == stage_name]


async def _template(kube: k.Kube) -> None:
    template = analysis_template("multiple-job")
    template["metadata"]["namespace"] = NS
    await kube.create(k.ANALYSIS_TEMPLATES, template)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running_cluster(tmp_path, [NS]) as c:
        await _template(c.kube)
        rollouts = FakeRolloutsController(KubernetesAnalysisRuns(c.server.api_client()))
        yield Env(c.server, c.kube, c.work, rollouts)


def verification_succeeded(stage: dict[str, Any]) -> bool:
    history = (stage.get("status") or {}).get("freightHistory") or [{}]
    entries = history[0].get("verificationHistory") or [{}]
    return bool(entries[0].get("phase") == "Successful")


async def test_freight_flows_dev_staging_prod_gated_by_analysis(env: Env) -> None:
    await env.kube.create(k.STAGES, stage("dev", {"direct": True}))
    await env.kube.create(k.STAGES, stage("staging", {"stages": ["dev"]}))
    await env.kube.create(
        k.STAGES, stage("prod", {"stages": ["staging"], "requiredSoakTime": "1s"})
    )
    async with running_controller(env.server, env.work), env.rollouts.running():
        await env.kube.create(k.FREIGHT, freight("f1" + "0" * 38))
        verified = await env.verified_in("f1" + "0" * 38, "prod")
        # The Freight is marked verified first; the Stage's status write records it after.
        for name in ("dev", "staging", "prod"):
            await wait_for_object(env.kube, k.STAGES, NS, name, verification_succeeded)
    assert set(verified["status"]["verifiedIn"]) == {"dev", "staging", "prod"}
    for name in ("dev", "staging", "prod"):
        promotions = await env.promotions_to(name)
        assert len(promotions) == 1
        assert promotions[0]["metadata"]["annotations"]["longshoreman.dev/create-actor"] == (
            "longshoreman:auto-promotion"
        )
        assert promotions[0]["status"]["phase"] == "Succeeded"
        st = (await env.kube.get(k.STAGES, NS, name))["status"]
        entry = st["freightHistory"][0]["verificationHistory"][0]
        assert entry["phase"] == "Successful"
        run = await env.kube.get(k.ANALYSIS_RUNS, NS, entry["analysisRun"]["name"])
        labels = run["metadata"]["labels"]
        assert labels["longshoreman.dev/stage"] == name and labels["team"] == "platform"
        assert {"name": "exit-code", "value": "0"} in run["spec"]["args"]
        assert run["metadata"]["ownerReferences"][0]["kind"] == "Freight"
        conditions = {c["type"]: c["status"] for c in st["conditions"]}
        assert conditions["Verified"] == "True"
    # prod waited out its soak time in staging, counted as Kargo counts it: from when the
    # Freight entered staging (currentlyIn.since), not from when it was verified there.
    entered = verified["status"]["currentlyIn"]["staging"]["since"]
    prod_promo = (await env.promotions_to("prod"))[0]
    waited = parse_time(prod_promo["metadata"]["creationTimestamp"]) - parse_time(entered)
    assert waited.total_seconds() >= 1


async def test_a_failing_analysis_stops_the_flow_with_the_reason_on_the_stage(env: Env) -> None:
    env.rollouts.script_stage("staging", Outcome("Failed"))
    await env.kube.create(k.STAGES, stage("dev", {"direct": True}))
    await env.kube.create(k.STAGES, stage("staging", {"stages": ["dev"]}))
    await env.kube.create(k.STAGES, stage("prod", {"stages": ["staging"]}))
    async with running_controller(env.server, env.work), env.rollouts.running():
        await env.kube.create(k.FREIGHT, freight("f2" + "0" * 38))
        staging = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "staging",
            lambda s: any(
                c.get("type") == "Verified" and c.get("status") == "False"
                for c in (s.get("status") or {}).get("conditions") or ()
            ),
        )
        condition = next(c for c in staging["status"]["conditions"] if c["type"] == "Verified")
        assert condition["reason"] == "VerificationFailed"
        assert "assessed Failed" in condition["message"]
        entry = staging["status"]["freightHistory"][0]["verificationHistory"][0]
        assert entry["phase"] == "Failed" and entry["message"]
        assert await env.promotions_to("prod") == []
        f = await env.kube.get(k.FREIGHT, NS, "f2" + "0" * 38)
        assert set(f["status"]["verifiedIn"]) == {"dev"}
        events, _ = await env.kube.list(k.EVENTS, NS)
    # Kargo's Events on the Freight: dev's verification succeeded, staging's failed.
    verifications = {
        e["metadata"]["annotations"]["event.kargo.akuity.io/stage-name"]: e
        for e in events
        if e["reason"].startswith("FreightVerification")
    }
    assert verifications["dev"]["reason"] == "FreightVerificationSucceeded"
    assert verifications["dev"]["message"] == "Freight verification succeeded"
    failed = verifications["staging"]
    assert failed["reason"] == "FreightVerificationFailed"
    assert "assessed Failed" in failed["message"]
    assert failed["involvedObject"]["kind"] == "Freight"
    assert failed["involvedObject"]["name"] == "f2" + "0" * 38
    notes = failed["metadata"]["annotations"]
    assert notes["event.kargo.akuity.io/analysis-run-name"] == entry["analysisRun"]["name"]
    assert notes["event.kargo.akuity.io/promotion-name"].startswith("staging.")
    assert notes["event.kargo.akuity.io/actor"] == "controller:longshoreman"
    assert "prod" not in verifications


async def test_reverify_and_abort_verification(env: Env) -> None:
    env.rollouts.script_stage("dev", Outcome("Successful"), Outcome(HANG))
    await env.kube.create(k.STAGES, stage("dev", {"direct": True}, auto=True))
    async with running_controller(env.server, env.work), env.rollouts.running():
        await env.kube.create(k.FREIGHT, freight("f3" + "0" * 38))
        await env.verified_in("f3" + "0" * 38, "dev")
        request = json.dumps({"actor": "alice"})
        await env.kube.patch(
            k.STAGES,
            NS,
            "dev",
            {"metadata": {"annotations": {"longshoreman.dev/reverify": request}}},
        )
        running = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "dev",
            lambda s: (
                len(
                    ((s.get("status") or {}).get("freightHistory") or [{}])[0].get(
                        "verificationHistory"
                    )
                    or []
                )
                == 2
                and s["status"]["freightHistory"][0]["verificationHistory"][0]["phase"]
                in ("Pending", "Running")
            ),
        )
        second = running["status"]["freightHistory"][0]["verificationHistory"][0]
        assert second["actor"] == "alice"
        abort = json.dumps({"actor": "bob"})
        await env.kube.patch(
            k.STAGES,
            NS,
            "dev",
            {"metadata": {"annotations": {"longshoreman.dev/abort-verification": abort}}},
        )
        aborted = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "dev",
            lambda s: (
                s["status"]["freightHistory"][0]["verificationHistory"][0]["phase"] == "Failed"
            ),
        )
        entry = aborted["status"]["freightHistory"][0]["verificationHistory"][0]
        assert entry["message"] == "aborted by bob"
        run = await env.kube.get(k.ANALYSIS_RUNS, NS, second["analysisRun"]["name"])
        assert run["spec"]["terminate"] is True


async def test_without_verification_freight_is_verified_at_once(env: Env) -> None:
    await env.kube.create(k.STAGES, stage("dev", {"direct": True}, verify=False, auto=False))
    async with running_controller(env.server, env.work):
        await env.kube.create(k.FREIGHT, freight("f4" + "0" * 38))
        await env.kube.create(
            k.PROMOTIONS, objects.promotion("p", "dev", namespace=NS, freight="f4" + "0" * 38)
        )
        await wait_terminal(env.kube, NS, "p")
        await env.verified_in("f4" + "0" * 38, "dev")


async def test_missing_analysisrun_crd_records_an_error(tmp_path: Path) -> None:
    async with running_apiserver(crd_dirs=[OUR_CRDS], namespaces=[NS]) as server:
        kube = k.Kube(server.api_client())
        await kube.create(k.STAGES, stage("dev", {"direct": True}, auto=True))
        async with running_controller(server, tmp_path / "work"):
            await kube.create(k.FREIGHT, freight("f5" + "0" * 38))
            dev = await wait_for_object(
                kube,
                k.STAGES,
                NS,
                "dev",
                lambda s: bool(
                    ((s.get("status") or {}).get("freightHistory") or [{}])[0].get(
                        "verificationHistory"
                    )
                ),
            )
    entry = dev["status"]["freightHistory"][0]["verificationHistory"][0]
    assert entry["phase"] == "Error"
    assert "AnalysisRun CRD (analysisruns.argoproj.io) is not installed" in entry["message"]


async def test_verification_survives_a_controller_restart_and_repromotion_reverifies(
    env: Env,
) -> None:
    env.rollouts.script_stage("dev", Outcome(HANG))
    await env.kube.create(k.STAGES, stage("dev", {"direct": True}, auto=False))
    name = "f6" + "0" * 38
    await env.kube.create(k.FREIGHT, freight(name))
    promotion = objects.promotion("p1", "dev", namespace=NS, freight=name)
    async with running_controller(env.server, env.work), env.rollouts.running():
        await env.kube.create(k.PROMOTIONS, promotion)
        first = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "dev",
            lambda s: (
                (
                    ((s.get("status") or {}).get("freightHistory") or [{}])[0].get(
                        "verificationHistory"
                    )
                    or [{}]
                )[0].get("phase")
                == "Running"
            ),
        )
    run_name = first["status"]["freightHistory"][0]["verificationHistory"][0]["analysisRun"]["name"]
    # While no controller runs, Argo Rollouts (a fresh instance) finishes the analysis.
    rollouts = FakeRolloutsController(KubernetesAnalysisRuns(env.server.api_client()))
    async with rollouts.running():
        await wait_for_object(
            env.kube,
            k.ANALYSIS_RUNS,
            NS,
            run_name,
            lambda r: (r.get("status") or {}).get("phase") == "Successful",
        )
    env.rollouts = rollouts
    async with running_controller(env.server, env.work), env.rollouts.running():
        await env.verified_in(name, "dev")
        env.rollouts.script_stage("dev", Outcome("Successful"))
        await env.kube.create(
            k.PROMOTIONS, objects.promotion("p2", "dev", namespace=NS, freight=name)
        )
        await wait_terminal(env.kube, NS, "p2")
        again = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "dev",
            lambda s: (
                len(s["status"]["freightHistory"][0].get("verificationHistory") or []) == 2
                and s["status"]["freightHistory"][0]["verificationHistory"][0]["phase"]
                == "Successful"
            ),
        )
    entries = again["status"]["freightHistory"][0]["verificationHistory"]
    assert [e["promotion"] for e in entries] == ["p2", "p1"]
