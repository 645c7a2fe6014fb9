"""The reconciler end to end over HTTP: the real Kubernetes client, the API server emulator, real
git. Promotions are created as users create them (through the builder, or bare with kubectl's
shape) and observed only through the objects on the API server.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from app.controller.creation import create_promotion
from app.controller.reconciler import Controller
from promoter.steps.base import GitSettings, StepServices
from promoter.steps.registry import builtin_registry
from tests.support import objects
from tests.support.clock import FakeClock
from tests.support.controller import (
    Cluster,
    Gate,
    registry_with,
    running_cluster,
    running_controller,
    wait_for_object,
    wait_terminal,
)
from tests.support.github import fixture
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO_URL = "https://github.com/example/kargo-demo.git"
NS = "kargo-demo"


def seed_files() -> dict[str, str]:
    base = EXAMPLES / "gitops-repo"
    return {str(p.relative_to(base)): p.read_text() for p in base.rglob("*") if p.is_file()}


@dataclass
class Env(Cluster):
    remote: RemoteRepo
    services: StepServices
    # The emulator's clock (creationTimestamps): a test moves it rather than waiting.
    clock: FakeClock

    async def stage(self, name: str = "test") -> dict[str, Any]:
        return await self.kube.get(k.STAGES, NS, name)

    async def freight(self, alias: str = "frozen-tauntaun") -> dict[str, Any]:
        items, _ = await self.kube.list(k.FREIGHT, NS)
        return next(f for f in items if f.get("alias") == alias)

    async def add_stage(
        self, name: str, steps: list[dict[str, Any]], **spec: Any
    ) -> dict[str, Any]:
        return await self.kube.create(
            k.STAGES, objects.stage(name, namespace=NS, warehouse="kargo-demo", steps=steps, **spec)
        )

    async def bare_promotion(
        self, name: str, stage: str, freight: str = "frozen-tauntaun", **meta: Any
    ) -> dict[str, Any]:
        obj = objects.promotion(name, stage, namespace=NS, freight=freight)
        obj["metadata"].update(meta)
        return await self.kube.create(k.PROMOTIONS, obj)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    remote = make_remote(tmp_path, files=seed_files())
    genv = git_env(tmp_path, {remote.url: DEMO_URL})
    services = StepServices(git=GitSettings(env=genv))
    clock = FakeClock()
    async with running_cluster(
        tmp_path, [NS, "argocd"], seed_from=[EXAMPLES / "kargo-demo"], clock=clock.now
    ) as c:
        yield Env(c.server, c.kube, c.work, remote, services, clock)


def stage_recorded(promotion: str) -> Callable[[dict[str, Any]], bool]:
    def recorded(stage: dict[str, Any]) -> bool:
        status = stage.get("status") or {}
        last = status.get("lastPromotion") or {}
        return last.get("name") == promotion and "currentPromotion" not in status

    return recorded


async def events_for(kube: k.Kube, name: str, *, until_outcome: bool = True) -> list[str]:
    """The reasons of the Events about ``name``; by default once the outcome's Event is there
    (the controller records it after the Stage's status, a moment after the terminal phase)."""

    async def reasons() -> list[str] | None:
        items, _ = await kube.list(k.EVENTS, NS)
        found = [e["reason"] for e in items if (e.get("involvedObject") or {}).get("name") == name]
        outcome = any(r.startswith("Promotion") and r != "PromotionCreated" for r in found)
        return found if outcome or not until_outcome else None

    return await eventually(reasons, f"the outcome Event of {name}", within=10)


async def test_example_promotion_runs_to_success_and_updates_the_stage(env: Env) -> None:
    async with running_controller(env.server, env.work, services=env.services) as controller:
        created = await create_promotion(
            env.kube, await env.stage(), await env.freight(), controller.task_source, actor="alice"
        )
        name = created["metadata"]["name"]
        assert name.startswith("test.") and name.endswith(".7c9e6b1")
        done = await wait_terminal(env.kube, NS, name)
        status = done["status"]
        assert status["phase"] == "Succeeded", status
        assert [s["status"] for s in status["stepExecutionMetadata"]] == ["Succeeded"] * 8
        assert status["state"]["deploy"]["commit"] == env.remote.head("stage/test")
        assert "newTag: 1.27.0" in (
            env.remote.read_file("stage/test", "manifests/kustomization.yaml") or ""
        )
        stage = await wait_for_object(
            env.kube,
            k.STAGES,
            NS,
            "test",
            lambda s: (s.get("status") or {}).get("lastPromotion", {}).get("name") == name,
        )
        sstatus = stage["status"]
        assert "currentPromotion" not in sstatus
        assert sstatus["lastPromotion"]["status"]["phase"] == "Succeeded"
        head = sstatus["freightHistory"][0]["items"]["Warehouse/kargo-demo"]
        assert head["name"] == "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
        conditions = {c["type"]: c for c in sstatus["conditions"]}
        assert conditions["Promoting"]["status"] == "False"
        assert conditions["Healthy"]["status"] == "True"
        assert conditions["Ready"]["status"] == "True"
        assert await events_for(env.kube, name) == ["PromotionCreated", "PromotionSucceeded"]


async def test_a_kubectl_promotion_with_only_stage_and_freight_is_inflated_and_recorded(
    env: Env,
) -> None:
    async with running_controller(env.server, env.work, services=env.services):
        await env.bare_promotion("by-hand", "test", freight="frozen-tauntaun")
        done = await wait_terminal(env.kube, NS, "by-hand")
        assert done["status"]["phase"] == "Succeeded", done["status"]
        aliases = [s["as"] for s in done["spec"]["steps"]]
        assert aliases[:2] == ["deploy::step-1", "deploy::step-2"] and aliases[-1] == "summary"
        assert {v["name"] for v in done["spec"]["vars"]} == {"gitopsRepo", "imageRepo"}
        # Nobody announced it at creation, so the controller does (once), then the outcome.
        assert await events_for(env.kube, "by-hand") == ["PromotionCreated", "PromotionSucceeded"]


async def test_now_in_a_promotion_is_the_controllers_clock(env: Env) -> None:
    """``${{ now() }}`` in a step answers the controller's clock, the one its steps are stamped
    with: a pinned clock gives the pinned time, not the host's."""
    env.clock.advance(-86400 * 365)  # a year back: far from anything the host's clock says
    pinned = env.clock.now()
    stamp = "${{ now().Format('2006-01-02T15:04:05Z07:00') }}"
    await env.add_stage("stamped", [{"uses": "compose-output", "as": "o", "config": {"at": stamp}}])
    async with running_controller(env.server, env.work, clock=env.clock):
        await env.bare_promotion("stamped", "stamped")
        done = await wait_terminal(env.kube, NS, "stamped")
    status = done["status"]
    assert status["phase"] == "Succeeded", status
    assert status["state"]["o"]["at"] == pinned.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert status["stepExecutionMetadata"][0]["startedAt"] == pinned.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_promotions_outcome_and_its_verification_reach_the_stage_in_one_write(
    env: Env,
) -> None:
    """kubectl never sees a Stage whose last Promotion succeeded but whose Freight is not yet
    verified (no verification configured): outcome, health, verification and Ready are one
    status write, and the Freight's verifiedIn is written once."""
    await env.add_stage("quick", [{"uses": "compose-output", "config": {"n": 1}}])
    async with running_controller(env.server, env.work, services=env.services) as controller:
        stage = await wait_for_object(
            env.kube, k.STAGES, NS, "quick", lambda s: bool(s.get("status") or {})
        )
        stream = env.kube.watch(k.STAGES, NS, resource_version=stage["metadata"]["resourceVersion"])
        before = len(env.server.server.requests)
        created = await create_promotion(
            env.kube, stage, await env.freight(), controller.task_source, actor="alice"
        )
        name = created["metadata"]["name"]
        await wait_terminal(env.kube, NS, name)
        async for _, obj in stream:
            if obj["metadata"]["name"] != "quick":
                continue
            status = obj.get("status") or {}
            if (status.get("lastPromotion") or {}).get("name") == name:
                break
        await stream.aclose()
        freight = await env.freight()
    writes = [
        r.path.rsplit("/", 3)[-3:]
        for r in list(env.server.server.requests)[before:]
        if r.method == "PATCH" and r.path.endswith("/status")
    ]
    head = status["freightHistory"][0]
    assert head["items"]["Warehouse/kargo-demo"]["name"] == freight["metadata"]["name"]
    assert head["verificationHistory"][0]["phase"] == "Successful"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "Promoting": "False",
        "Healthy": "True",
        "Verified": "True",
        "Ready": "True",
    }
    assert "quick" in freight["status"]["verifiedIn"]
    # One status write for the step, one for the Stage, one for the Freight's verifiedIn.
    assert writes.count(["promotions", name, "status"]) == 1
    assert writes.count(["stages", "quick", "status"]) == 1
    assert writes.count(["freights", freight["metadata"]["name"], "status"]) == 1
    assert await events_for(env.kube, name) == ["PromotionCreated", "PromotionSucceeded"]


async def test_one_promotion_per_stage_oldest_first_and_stages_in_parallel(env: Env) -> None:
    gate = Gate()
    await env.add_stage("one", [{"uses": "gate", "config": {"name": "${{ ctx.promotion }}"}}])
    await env.add_stage("two", [{"uses": "gate", "config": {"name": "${{ ctx.promotion }}"}}])
    async with running_controller(env.server, env.work, registry=registry_with(gate=gate)):
        for name in ("a1", "a2", "a3"):
            await env.bare_promotion(name, "one")
            env.clock.advance(1)  # creationTimestamp has second precision
        await env.bare_promotion("b1", "two")
        await wait_for_object(
            env.kube,
            k.PROMOTIONS,
            NS,
            "b1",
            lambda o: o.get("status", {}).get("phase") == "Running",
        )
        a1 = await wait_for_object(
            env.kube,
            k.PROMOTIONS,
            NS,
            "a1",
            lambda o: o.get("status", {}).get("phase") == "Running",
        )
        assert a1["status"]["phase"] == "Running"
        for name in ("a2", "a3"):
            assert (await env.kube.get(k.PROMOTIONS, NS, name)).get("status", {}).get(
                "phase", "Pending"
            ) == "Pending"
        stage = await wait_for_object(
            env.kube, k.STAGES, NS, "one", lambda s: "currentPromotion" in (s.get("status") or {})
        )
        assert stage["status"]["currentPromotion"]["name"] == "a1"
        for name in ("a1", "a2", "a3", "b1"):
            gate.open(name)
            await wait_terminal(env.kube, NS, name)
        started = [p for p, _ in gate.entered if p.startswith("a")]
        assert [p for i, p in enumerate(started) if i == 0 or started[i - 1] != p] == [
            "a1",
            "a2",
            "a3",
        ]


async def test_abort_annotation_aborts_with_the_actor(env: Env) -> None:
    gate = Gate()
    await env.add_stage(
        "one",
        [
            {"uses": "gate", "as": "wait", "config": {"name": "never"}},
            {"uses": "compose-output", "config": {"done": True}},
        ],
    )
    async with running_controller(env.server, env.work, registry=registry_with(gate=gate)):
        await env.bare_promotion("p1", "one")
        await env.bare_promotion("p2", "one", annotations={"kargo.akuity.io/abort": "terminate"})
        await wait_for_object(
            env.kube,
            k.PROMOTIONS,
            NS,
            "p1",
            lambda o: o.get("status", {}).get("phase") == "Running",
        )
        request = json.dumps({"action": "terminate", "actor": "slack:T1/U2"})
        await env.kube.patch(
            k.PROMOTIONS,
            NS,
            "p1",
            {"metadata": {"annotations": {"longshoreman.dev/abort": request}}},
        )
        p1 = await wait_terminal(env.kube, NS, "p1")
        assert p1["status"]["phase"] == "Aborted"
        assert p1["status"]["message"] == "Aborted by slack:T1/U2"
        assert p1["status"]["stepExecutionMetadata"][0]["status"] == "Aborted"
        p2 = await wait_terminal(env.kube, NS, "p2")
        assert p2["status"]["phase"] == "Aborted", "a Pending Promotion can be aborted too"
        assert "PromotionAborted" in await events_for(env.kube, "p1")


@pytest.mark.parametrize(
    ("steps", "promotion", "message"),
    [
        ([{"uses": "no-such-step"}], {}, "unknown step kind 'no-such-step'"),
        ([{"uses": "compose-output", "as": "x", "config": {"a": "${{ 1 + }}"}}], {}, "(x).config"),
        (
            [{"uses": "compose-output", "config": {"done": True}}],
            {"stage": "missing"},
            "Stage 'missing' not found in namespace 'kargo-demo'",
        ),
        (
            [{"uses": "compose-output", "config": {"done": True}}],
            {"freight": "nope"},
            "Freight 'nope' not found in namespace 'kargo-demo'",
        ),
    ],
)
async def test_bad_promotions_end_errored_and_other_stages_keep_working(
    env: Env, steps: list[dict[str, Any]], promotion: dict[str, str], message: str
) -> None:
    await env.add_stage("bad", steps)
    await env.add_stage("good", [{"uses": "compose-output", "config": {"ok": True}}])
    async with running_controller(env.server, env.work):
        spec = {"stage": "bad", "freight": "frozen-tauntaun", **promotion}
        await env.kube.create(
            k.PROMOTIONS, {"metadata": {"name": "bad", "namespace": NS}, "spec": spec}
        )
        await env.bare_promotion("good", "good")
        bad = await wait_terminal(env.kube, NS, "bad")
        assert bad["status"]["phase"] == "Errored"
        assert message in bad["status"]["message"]
        good = await wait_terminal(env.kube, NS, "good")
        assert good["status"]["phase"] == "Succeeded"


async def test_image_from_without_an_origin_is_refused_when_two_requested_warehouses_subscribe(
    env: Env,
) -> None:
    """Kargo's rule (pkg/controller/freight/finder.go): the controller reads the requested
    Warehouses' subscriptions; with two on the same image, only an explicit origin works."""
    image = {"repoURL": "public.ecr.aws/nginx/nginx"}
    await env.kube.create(
        k.WAREHOUSES, objects.warehouse("mirror", namespace=NS, subscriptions=[{"image": image}])
    )
    both = [
        {"origin": {"kind": "Warehouse", "name": w}, "sources": {"direct": True}}
        for w in ("kargo-demo", "mirror")
    ]
    repo = image["repoURL"]
    await env.add_stage(
        "guess",
        [{"uses": "compose-output", "config": {"t": f"${{{{ imageFrom('{repo}').Tag }}}}"}}],
    )
    await env.kube.patch(k.STAGES, NS, "guess", {"spec": {"requestedFreight": both}})
    origin = f"${{{{ imageFrom('{repo}', warehouse('kargo-demo')).Tag }}}}"
    await env.add_stage("named", [{"uses": "compose-output", "as": "o", "config": {"t": origin}}])
    await env.kube.patch(k.STAGES, NS, "named", {"spec": {"requestedFreight": both}})
    async with running_controller(env.server, env.work):
        await env.bare_promotion("guess", "guess")
        await env.bare_promotion("named", "named")
        guess = await wait_terminal(env.kube, NS, "guess")
        assert guess["status"]["phase"] == "Errored"
        assert (
            "multiple requested Freight could potentially provide a container image"
            in (guess["status"]["message"])
        )
        named = await wait_terminal(env.kube, NS, "named")
        assert named["status"]["phase"] == "Succeeded", named["status"]
        assert named["status"]["state"]["o"] == {"t": "1.27.0"}


async def test_secret_and_config_map_are_read_from_the_cluster_and_never_shown(env: Env) -> None:
    await env.kube.create(
        k.SECRETS,
        {
            "metadata": {"name": "creds", "namespace": NS},
            "data": {"token": base64.b64encode(b"tok-5ecr3t-value").decode()},
        },
    )
    await env.kube.create(
        k.CONFIG_MAPS, {"metadata": {"name": "settings", "namespace": NS}, "data": {"r": "eu"}}
    )
    await env.add_stage(
        "data",
        [
            {
                "uses": "compose-output",
                "as": "o",
                "config": {
                    "region": "${{ configMap('settings').r }}",
                    "has": "${{ 'token' in secret('creds') }}",
                },
            },
            {"uses": "compose-output", "config": {"n": "${{ int(secret('creds').token) }}"}},
        ],
    )
    async with running_controller(env.server, env.work):
        await env.bare_promotion("data", "data")
        done = await wait_terminal(env.kube, NS, "data")
    status = done["status"]
    assert status["state"]["o"] == {"region": "eu", "has": True}
    assert status["phase"] == "Errored"
    assert "tok-5ecr3t-value" not in json.dumps(done)
    assert "***" in status["stepExecutionMetadata"][1]["message"]


async def test_running_promotion_resumes_after_the_controller_restarts(env: Env) -> None:
    gate = Gate()
    await env.add_stage(
        "one",
        [
            {"uses": "compose-output", "as": "first", "config": {"done": True}},
            {"uses": "gate", "config": {"name": "g"}},
            {"uses": "compose-output", "as": "last", "config": {"done": True}},
        ],
    )
    async with running_controller(env.server, env.work, registry=registry_with(gate=gate)):
        await env.bare_promotion("p", "one")
        await wait_for_object(
            env.kube, k.PROMOTIONS, NS, "p", lambda o: o.get("status", {}).get("currentStep") == 1
        )
    entered = len(gate.entered)
    gate.open("g")
    async with running_controller(env.server, env.work, registry=registry_with(gate=gate)):
        done = await wait_terminal(env.kube, NS, "p")
    assert done["status"]["phase"] == "Succeeded"
    assert [s["status"] for s in done["status"]["stepExecutionMetadata"]] == ["Succeeded"] * 3
    assert len(gate.entered) == entered + 1, "the new controller continued at the gate step"


async def test_a_new_leader_shows_every_stage_and_promotion_to_the_front_ends(env: Env) -> None:
    """Front ends act only while leading; what changed under another leader is replayed."""
    # The previous leader finished everything: no Stage or Promotion will change again.
    async with running_controller(env.server, env.work, services=env.services):
        await env.bare_promotion("p", "test")
        await wait_terminal(env.kube, NS, "p")
        # Its last write: the Stage's status records the finished Promotion.
        await wait_for_object(env.kube, k.STAGES, NS, "test", stage_recorded("p"))
    controller = Controller(
        k.Kube(env.server.api_client()),
        registry=builtin_registry(),
        services=env.services,
        work_dir=env.work,
    )
    seen: list[tuple[str, str, bool]] = []
    controller.stage_listeners.append(
        lambda obj, old: seen.append(("stage", obj["metadata"]["name"], controller.leading))
    )
    controller.listeners.append(
        lambda obj, old: seen.append(("promotion", obj["metadata"]["name"], controller.leading))
    )
    informers = asyncio.create_task(controller.run_informers())
    leader: asyncio.Task[None] | None = None
    try:
        await asyncio.wait_for(controller.wait_synced(), 10)
        assert not any(leading for *_, leading in seen), "nobody leads yet"
        leader = asyncio.create_task(controller.lead())
        stages = {name for _, name, _ in [s for s in seen if s[0] == "stage"]}
        for _ in range(200):
            led = {(kind, name) for kind, name, leading in seen if leading}
            if {("stage", n) for n in stages} | {("promotion", "p")} <= led:
                break
            await asyncio.sleep(0.02)
        led = {(kind, name) for kind, name, leading in seen if leading}
        assert ("stage", "test") in led and ("promotion", "p") in led, seen
        assert {("stage", n) for n in stages} <= led
    finally:
        for task in (leader, informers):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


async def test_dropped_watches_lose_no_event(env: Env) -> None:
    await env.add_stage("one", [{"uses": "compose-output", "config": {"done": True}}])
    async with running_controller(env.server, env.work):
        for i in range(5):
            env.server.close_watches(abort=i % 2 == 0)
            await env.bare_promotion(f"p{i}", "one")
        for i in range(5):
            done = await wait_terminal(env.kube, NS, f"p{i}")
            assert done["status"]["phase"] == "Succeeded"


async def test_chat_promotions_refuse_freight_not_available_to_the_stage(env: Env) -> None:
    from app.controller.promotions import ClusterPromotions
    from promoter.errors import Refused

    async with running_controller(env.server, env.work, services=env.services) as controller:
        service = ClusterPromotions(env.kube, controller)
        freight = (await env.freight())["metadata"]["name"]
        with pytest.raises(Refused, match="is not available to Stage `uat`"):
            await service.promote(NS, "uat", freight, actor="slack:T/U")
        ref = await service.promote(NS, "test", freight, actor="slack:T/U")
        done = await wait_terminal(env.kube, NS, ref.name)
        assert done["status"]["phase"] == "Succeeded"
        assert done["metadata"]["annotations"]["longshoreman.dev/create-actor"] == "slack:T/U"


async def test_the_cluster_port_says_what_kind_of_trouble_it_is(env: Env) -> None:
    """Front ends tell "change this" from "try again" by the error's kind alone."""
    from app.controller.promotions import ClusterPromotions, DeferredPromotions
    from promoter.chat.port import PromotionRef
    from promoter.errors import NotFound, PermanentError, TemporaryError

    starting = DeferredPromotions()
    with pytest.raises(TemporaryError, match="still starting; try again"):
        await starting.snapshot(NS)
    async with running_controller(env.server, env.work, services=env.services) as controller:
        service = ClusterPromotions(env.kube, controller)
        with pytest.raises(NotFound, match="Promotion 'nope' not found in namespace 'kargo-demo'"):
            await service.abort(NS, "nope", actor="slack:T/U")
        with pytest.raises(NotFound, match="Stage 'nope' not found"):
            await service.reverify(NS, "nope", actor="slack:T/U")
        freight = (await env.freight())["metadata"]["name"]
        env.server.faults.add("error", methods="POST", path_pattern="/promotions$", times=None)
        with pytest.raises(TemporaryError, match="the cluster did not answer; try again") as info:
            await service.promote(NS, "test", freight, actor="slack:T/U")
        assert not isinstance(info.value, PermanentError)
        env.server.faults.clear()
        ref = await service.promote(NS, "test", freight, actor="slack:T/U")
        done = await wait_terminal(env.kube, NS, ref.name)
        assert done["status"]["phase"] == "Succeeded"
        # An abort of a finished one is asked all the same; its answer says where it stands.
        aborted = await service.abort(NS, ref.name, actor="slack:T/U")
        said = done["status"]["message"]
        assert aborted == PromotionRef(NS, ref.name, "test", freight, "Succeeded", said)


async def test_push_webhooks_make_freight_in_the_cluster_once_per_commit(env: Env) -> None:
    from app.controller.promotions import ClusterPromotions
    from handlers.push import FreightSink, freight_for_push

    payload = fixture("push.with-new-branch")
    git = {"repoURL": "https://github.com/Codertocat/Hello-World.git", "branch": "master"}
    warehouse = await env.kube.create(
        k.WAREHOUSES, objects.warehouse("hello", namespace=NS, subscriptions=[{"git": git}])
    )
    async with running_controller(env.server, env.work) as controller:
        service = ClusterPromotions(env.kube, controller)
        assert isinstance(service, FreightSink)
        assert sorted(w["metadata"]["name"] for w in await service.warehouses(NS)) == [
            "hello",
            "kargo-demo",
        ]
        freight = freight_for_push(warehouse, payload)
        assert freight is not None
        assert await service.create_freight(NS, freight) is True
        assert await service.create_freight(NS, freight) is False, (
            "a redelivered push makes no second Freight"
        )
        stored = await env.kube.get(k.FREIGHT, NS, freight["metadata"]["name"])
        assert stored["commits"][0]["id"] == payload["after"]
        assert stored["origin"] == {"kind": "Warehouse", "name": "hello"}
