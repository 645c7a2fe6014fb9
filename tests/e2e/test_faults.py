"""Faults and bad input: the controller is killed, the API server misbehaves, watches break.

Each scenario runs the real thing end to end over HTTP and checks only what users can see: the
Promotions' final status, the commits on the git remote and the syncs Argo CD was asked for.

- ``python -m app serve`` is SIGKILLed (with its git children) at many points of a git +
  argocd-update Promotion and restarted; every Promotion still completes exactly once.
- One API request in ten is answered 500 or 409 or loses its connection; every Promotion
  completes.
- Watches are closed or dropped while Promotions are created, and resume from versions so old
  that the server answers 410 Gone; the informers relist and every Promotion completes.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.apiserver import RequestInfo
from app.controller import kube as k
from app.embedded import seed
from tests.support import objects
from tests.support.argocd import FakeArgoCDController, KubernetesApps, Outcome, make_app
from tests.support.controller import (
    Gate,
    registry_with,
    running_controller,
    wait_terminal,
)
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.processes import ServerProcess, server_processes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NS = "kargo-demo"
DEMO_URL = "https://github.com/example/kargo-demo.git"
FREIGHT = "frozen-tauntaun"


# ---- (a) SIGKILL at random points --------------------------------------------------------------


def sigkill_app(stage: str) -> dict[str, Any]:
    """The Argo CD Application :func:`sigkill_stage` ``stage`` syncs (branch ``stage/<stage>``)."""
    return make_app(
        stage, authorized=f"{NS}:{stage}", repo_url=DEMO_URL, target_revision=f"stage/{stage}"
    )


def sigkill_stage(name: str) -> dict[str, Any]:
    """A Stage that commits an image change to ``stage/<name>`` and syncs its Application."""
    steps = [
        {
            "uses": "git-clone",
            "config": {
                "repoURL": DEMO_URL,
                "checkout": [
                    {"branch": "main", "path": "./src"},
                    {"branch": "stage/${{ ctx.stage }}", "create": True, "path": "./out"},
                ],
            },
        },
        {
            "uses": "kustomize-set-image",
            "as": "update-image",
            "config": {"path": "./src/base", "images": [{"image": "public.ecr.aws/nginx/nginx"}]},
        },
        {"uses": "copy", "config": {"inPath": "./src/base", "outPath": "./out/manifests"}},
        {
            "uses": "git-commit",
            "as": "commit",
            "config": {"path": "./out", "message": "${{ outputs['update-image'].commitMessage }}"},
        },
        {
            "uses": "git-push",
            "as": "push",
            "config": {"path": "./out", "targetBranch": "stage/${{ ctx.stage }}"},
        },
        {
            "uses": "argocd-update",
            "as": "sync",
            "config": {
                "apps": [
                    {
                        "name": "${{ ctx.stage }}",
                        "sources": [
                            {"repoURL": DEMO_URL, "desiredRevision": "${{ outputs.push.commit }}"}
                        ],
                    }
                ]
            },
        },
    ]
    return objects.stage(name, namespace=NS, warehouse="kargo-demo", steps=steps)


class GitArgoCD(FakeArgoCDController):
    """The fake Argo CD, resolving a branch to whatever the git remote holds right now (as Argo
    CD's repo server would), so a sync of ``stage/<x>`` lands on the pushed commit."""

    def __init__(self, apps: KubernetesApps, remote: RemoteRepo) -> None:
        super().__init__(apps, default=Outcome(ticks=3))
        self.remote = remote

    def resolve(self, repo_url: str, ref: str) -> str:
        return (self.remote.head(ref) if repo_url == DEMO_URL else None) or ref


@dataclass(frozen=True)
class KillPoint:
    """Where to SIGKILL the server during one Promotion.

    Either on the ``nth`` request matching ``method`` and ``path`` (the request is then served:
    its write lands, but the server never learns that it did), or ``delay`` seconds after the
    Promotion was created.
    """

    label: str
    method: str = ""
    path: str = ""
    nth: int = 0
    delay: float = 0.0


def kill_points(rng: random.Random, timed: int) -> list[KillPoint]:
    promotion = r"/promotions/[^/]+(/status)?$"
    points = [
        # Every write of the Promotion: the one that records the inflated steps (1), then the
        # status writes around the steps that reach out (before and after git-push, argocd-update
        # starting, the end: 2-5; local steps share one), each landing without the server
        # learning that it did.
        *(KillPoint(f"Promotion write {n} landed", "PATCH", promotion, nth=n) for n in range(1, 6)),
        # The sync request reached the Application, the step never saw it succeed.
        KillPoint("sync request landed", "PATCH", r"/applications/[^/]+$", nth=1),
        KillPoint("PromotionCreated event", "POST", r"/events$", nth=1),
    ]
    # Anywhere inside the steps (git subprocesses, file edits, waiting for Argo CD).
    points += [
        KillPoint(f"after {delay * 1000:.0f} ms", delay=delay)
        for delay in sorted(rng.uniform(0.0, 0.35) for _ in range(timed))
    ]
    return points


@dataclass
class Killer:
    """A fault-injector hook that SIGKILLs the server on one chosen API request."""

    server: ServerProcess | None = None
    point: KillPoint | None = None
    seen: int = 0
    fired: asyncio.Event = field(default_factory=asyncio.Event)

    def arm(self, server: ServerProcess, point: KillPoint) -> None:
        self.server, self.point, self.seen = server, point, 0
        self.fired.clear()

    def hook(self, request: RequestInfo) -> None:
        point = self.point
        if point is None or self.server is None or not point.method:
            return None
        if request.method != point.method or not re.search(point.path, request.path):
            return None
        self.seen += 1
        if self.seen == point.nth:
            self.server.kill()
            self.point = None
            self.fired.set()
        return None


async def test_sigkill_at_many_points_of_a_git_and_argocd_promotion_completes_it_once(
    tmp_path: Path,
) -> None:
    rng = random.Random(20240601)
    points = kill_points(rng, timed=13)
    assert len(points) >= 20
    remote = make_remote(tmp_path, files=seed_files())
    genv = git_env(tmp_path, {remote.url: DEMO_URL})
    killer = Killer()
    async with (
        running_apiserver(namespaces=[NS, "argocd"], bookmark_interval=0.5) as api,
        server_processes() as servers,
    ):
        api.faults.hook = killer.hook
        kube = k.Kube(api.api_client())
        await seed(kube, [EXAMPLES / "kargo-demo" / "project.yaml"])
        apps = KubernetesApps(api.api_client())
        stages = [f"k{i:02d}" for i in range(len(points))]
        for stage in stages:
            await kube.create(k.STAGES, sigkill_stage(stage))
            await apps.put(sigkill_app(stage))
        argocd = GitArgoCD(apps, remote)
        env = {
            "KUBECONFIG": str(api.kubeconfig_path),
            "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            "LONGSHOREMAN_GIT_CONFIG": genv["GIT_CONFIG_GLOBAL"],
        }
        lives = 0

        async def start() -> ServerProcess:
            nonlocal lives
            lives += 1
            return await ServerProcess.start(env, tmp_path / f"server-{lives}.log", servers)

        report: list[str] = []
        failures: list[str] = []
        async with argocd.running(interval=0.02):
            server = await start()
            for stage, point in zip(stages, points, strict=True):
                name = f"{stage}-p"
                killer.arm(server, point)
                await kube.create(
                    k.PROMOTIONS, objects.promotion(name, stage, namespace=NS, freight=FREIGHT)
                )
                if point.method:
                    try:
                        await asyncio.wait_for(killer.fired.wait(), 20)
                    except TimeoutError:
                        raise AssertionError(
                            f"{point.label}: never happened ({killer.seen} such requests seen);"
                            " if the Promotion now writes less, kill_points must follow"
                        ) from None
                else:
                    await asyncio.sleep(point.delay)
                    server.kill()
                await server.proc.wait()
                where = _position(await kube.get(k.PROMOTIONS, NS, name))
                server = await start()
                restarted = time.monotonic()
                done = await wait_terminal(kube, NS, name, within=20)
                took = f"done {time.monotonic() - restarted:.2f}s after the restart"
                problems = _exactly_once(done, remote, argocd, stage)
                report.append(f"{point.label:>28}: killed {where}; {took}: {problems or 'ok'}")
                if problems:
                    failures.append(report[-1])
        await server.stop()
    print("\n" + "\n".join(report))
    assert not failures, "\n".join(failures)


def _exactly_once(
    promotion: Mapping[str, Any], remote: RemoteRepo, argocd: GitArgoCD, stage: str
) -> str:
    """What is wrong with a finished Promotion of ``sigkill_stage``, or "" if nothing is."""
    status = promotion["status"]
    if status["phase"] != "Succeeded":
        return f"{status['phase']}: {status.get('message')}"
    if [s["status"] for s in status["stepExecutionMetadata"]] != ["Succeeded"] * 6:
        return f"steps {status['stepExecutionMetadata']}"
    # The branch holds git-clone's "Initial commit" (create: true) and exactly one push.
    history = remote.log(f"stage/{stage}")
    if len(history) != 2:
        return f"{len(history) - 1} commits on stage/{stage}: {history}"
    if status["state"]["push"]["commit"] != history[0][0]:
        return f"push output {status['state']['push']} is not the branch head {history[0][0]}"
    syncs = [op for key, op in argocd.started if key == ("argocd", stage)]
    if len(syncs) != 1:
        return f"{len(syncs)} Argo CD syncs: {syncs}"
    return ""


def seed_files() -> dict[str, str]:
    base = EXAMPLES / "gitops-repo"
    return {str(p.relative_to(base)): p.read_text() for p in base.rglob("*") if p.is_file()}


def _position(promotion: Mapping[str, Any]) -> str:
    status = promotion.get("status") or {}
    steps = status.get("stepExecutionMetadata") or []
    return f"{status.get('phase', 'Pending')} at step {status.get('currentStep', 0)} " + "/".join(
        str(s.get("status", "?"))[:4] for s in steps
    )


# ---- shared by (b) and (c): Stages of quick steps, Promotions read from the store --------------


def quick_stage(name: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return objects.stage(name, namespace=NS, warehouse="kargo-demo", steps=steps)


def stored_phases(api: RunningApiServer) -> dict[str, str]:
    """Promotion name -> phase, straight from the emulator's store (no HTTP, so no faults)."""
    return {
        p["metadata"]["name"]: (p.get("status") or {}).get("phase", "Pending")
        for p in api.objects("longshoreman.dev", "promotions")
    }


async def wait_all_terminal(
    api: RunningApiServer, names: list[str], within: float
) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        phases = stored_phases(api)
        if all(phases.get(n) in ("Succeeded", "Failed", "Errored", "Aborted") for n in names):
            break
        await asyncio.sleep(0.05)
    return {
        p["metadata"]["name"]: p
        for p in api.objects("longshoreman.dev", "promotions")
        if p["metadata"]["name"] in names
    }


async def with_retries(call: Any, attempts: int = 20) -> Any:
    """The test's own requests ride out the injected faults too (an AlreadyExists after a lost
    answer means the create landed)."""
    for attempt in range(attempts):
        try:
            return await call()
        except k.Conflict as e:
            if e.reason == "AlreadyExists":
                return None
            if attempt == attempts - 1:
                raise
        except k.TemporaryError:
            if attempt == attempts - 1:
                raise
        await asyncio.sleep(0.01)
    return None


# ---- (b) a flaky API server ----------------------------------------------------------------------


async def test_one_request_in_ten_failing_delays_but_never_loses_a_promotion(
    tmp_path: Path,
) -> None:
    gate = Gate()
    steps = [
        {"uses": "compose-output", "as": "first", "config": {"n": 1}},
        {"uses": "gate", "config": {"name": "${{ ctx.stage }}"}},
        {"uses": "compose-output", "as": "last", "config": {"n": "${{ outputs.first.n + 1 }}"}},
    ]
    stages = [f"flaky-{i}" for i in range(4)]
    names = [f"{stage}-{j}" for stage in stages for j in range(5)]
    async with running_apiserver(namespaces=[NS], bookmark_interval=0.2) as api:
        kube = k.Kube(api.api_client())
        await seed(kube, [EXAMPLES / "kargo-demo" / "project.yaml"])
        for stage in stages:
            await kube.create(k.STAGES, quick_stage(stage, steps))
        # From here on every request (but watch streams) may fail: 500, 409 on writes, or a
        # connection closed before the server handled it.
        api.faults.error_rate = api.faults.conflict_rate = api.faults.drop_rate = 0.034
        async with running_controller(
            api, tmp_path / "work", registry=registry_with(gate=gate), health_interval=60
        ):
            for name in names:
                stage = name.rsplit("-", 1)[0]
                body = objects.promotion(name, stage, namespace=NS, freight=FREIGHT)
                await with_retries(lambda body=body: kube.create(k.PROMOTIONS, body))
            for stage in stages:
                gate.open(stage)
            done = await wait_all_terminal(api, names, within=25)
    injected = {f.kind for f in api.faults.injected}
    assert injected == {"error", "conflict", "drop"}, injected
    assert len(api.faults.injected) >= 20, "the faults were not frequent enough to matter"
    phases = {n: (p.get("status") or {}).get("phase") for n, p in done.items()}
    assert phases == {n: "Succeeded" for n in names}
    for promotion in done.values():
        assert promotion["status"]["state"]["last"] == {"n": 2}


# ---- (c) dropped and expired watches -------------------------------------------------------------


async def test_watches_closed_dropped_and_expired_lose_no_promotion(tmp_path: Path) -> None:
    steps = [{"uses": "compose-output", "as": f"s{i}", "config": {"i": i}} for i in range(3)]
    stages = [f"watch-{i}" for i in range(3)]
    names = [f"{stage}-{j}" for j in range(5) for stage in stages]
    # A window of 3 events per type: a watch that resumes after a pause is almost always
    # too old, and gets 410 Gone.
    async with running_apiserver(namespaces=[NS], event_window=3) as api:
        kube = k.Kube(api.api_client())
        await seed(kube, [EXAMPLES / "kargo-demo" / "project.yaml"])
        for stage in stages:
            await kube.create(k.STAGES, quick_stage(stage, steps))
        async with running_controller(api, tmp_path / "work"):
            for i, name in enumerate(names):
                # Alternate a clean end of stream with a connection dropped mid-stream (the
                # informer then backs off, and the events pile up past the window meanwhile).
                api.close_watches(abort=i % 2 == 0)
                stage = name.rsplit("-", 1)[0]
                await kube.create(
                    k.PROMOTIONS, objects.promotion(name, stage, namespace=NS, freight=FREIGHT)
                )
                await asyncio.sleep(0.03)
            done = await wait_all_terminal(api, names, within=20)
    phases = {n: (p.get("status") or {}).get("phase") for n, p in done.items()}
    assert phases == {n: "Succeeded" for n in names}
    relists = [
        r
        for r in api.requests
        if r.method == "GET" and r.path.endswith("/promotions") and "watch=true" not in r.query
    ]
    assert len(relists) >= 2, "no watch expired: the test did not test relisting"
