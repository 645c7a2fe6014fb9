"""A Promotion whose replica is SIGKILLed anywhere, finished by another with its own work directory.

The scenario of issue 19, end to end over HTTP, against any Kubernetes API server: two (or one)
``python -m app serve`` processes with leader election and *separate* ``LONGSHOREMAN_WORK_DIR``s
(each pod's ``emptyDir``), the fake GitHub (:mod:`tests.support.github`: REST API and git over
smart HTTP with App tokens), the fake Argo CD controller, and a small HTTP "gate" the Promotion's
``http`` step polls. The Promotion::

    git-clone -> kustomize-set-image (edit) -> git-commit -> http (waits on the gate)
      -> git-push (generated branch) -> git-open-pr -> git-wait-for-pr -> argocd-update

For each :class:`KillPoint` one Promotion (on its own Stage and branch ``stage/<stage>``) is
created, the leader is SIGKILLed at that point, the standby takes the Lease over and finishes it,
and the killed replica is started again with a fresh work directory (as the next case's
standby). Every case must end ``Succeeded`` with exactly one git push, one pull request, one Argo
CD sync, and the same final tree on its branch as the uninterrupted case.

Kill points are precise where the test owns the thing the leader talks to (the fake GitHub's
git and REST endpoints, a ``git`` wrapper on the servers' PATH that parks ``git commit``, the
gate, the fake Argo CD) and, with the API server emulator, on the exact status write that
records a step (``emulator.faults.hook``). Against a real API server (``emulator=None``) those
become "as soon as the test sees the write", a few milliseconds later: still a SIGKILL in the
middle of the Promotion, with the same checks.

To keep it quick, the cases run in lanes side by side (a namespace, a repository and a pair of
replicas with their own Lease each, ``LONGSHOREMAN_WATCH_NAMESPACE``), and the cases that park by
themselves (a step waiting on its gate, its pull request, its sync) share one SIGKILL.

    # the emulator (tests/cluster/test_takeover.py)
    async with running_apiserver() as api:
        await takeover_scenario(tmp_path, api.kubeconfig_path, api.api_client, emulator=api)
    # any cluster with the CRDs installed (ours, and Argo CD's Application)
    await takeover_scenario(tmp_path, cluster.kubeconfig_path, cluster.api_client)
    await fresh_work_dir_scenario(tmp_path, cluster.kubeconfig_path, cluster.api_client)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from app.apiserver import RequestInfo
from app.controller import kube as k
from app.embedded import seed
from tests.support import objects
from tests.support.argocd import FakeArgoCDController, KubernetesApps, make_app
from tests.support.github import FakeGitHub
from tests.support.gitrepo import RemoteRepo, make_remote
from tests.support.kube import RunningApiServer
from tests.support.processes import ServerProcess, server_processes

ROOT = Path(__file__).resolve().parents[2]
NS = "kargo-demo"
FREIGHT = "frozen-tauntaun"
GITOPS = "example/gitops"
IMAGE = "public.ecr.aws/nginx/nginx"
# The shortest leader election the settings allow: a takeover in about a second.
LEASE = {
    "LONGSHOREMAN_LEASE_DURATION": "1",
    "LONGSHOREMAN_RENEW_DEADLINE": "0.5",
    "LONGSHOREMAN_RETRY_PERIOD": "0.1",
}
ALIASES = ("clone", "edit", "commit", "wait", "push", "open-pr", "wait-for-pr", "sync")
TERMINAL = ("Succeeded", "Failed", "Errored", "Aborted")
# How long a case may take to reach each thing it waits for. A liveness bound, not a timing
# claim: a case is done 2-7 s after creation on a quiet machine, but six servers, the emulator
# and the fakes share two cores here, and under CI's load one took more than 30 s to get from
# its kill to the pull request. Only a case that is really stuck waits this long.
PATIENCE = 120


def steps(repo_url: str, gate_url: str) -> list[dict[str, Any]]:
    return [
        {
            "uses": "git-clone",
            "as": "clone",
            "config": {
                "repoURL": repo_url,
                "checkout": [{"branch": "stage/${{ ctx.stage }}", "path": "./out"}],
            },
        },
        {
            "uses": "kustomize-set-image",
            "as": "edit",
            "config": {"path": "./out/base", "images": [{"image": IMAGE}]},
        },
        {
            "uses": "git-commit",
            "as": "commit",
            "config": {"path": "./out", "message": "${{ outputs.edit.commitMessage }}"},
        },
        {
            "uses": "http",
            "as": "wait",
            "config": {
                "url": gate_url + "/ready/${{ ctx.stage }}",
                "successExpression": "response.body.ready",
            },
        },
        {
            "uses": "git-push",
            "as": "push",
            "config": {"path": "./out", "generateTargetBranch": True},
        },
        {
            "uses": "git-open-pr",
            "as": "open-pr",
            "config": {
                "repoURL": repo_url,
                "sourceBranch": "${{ outputs.push.branch }}",
                "targetBranch": "stage/${{ ctx.stage }}",
            },
        },
        {
            "uses": "git-wait-for-pr",
            "as": "wait-for-pr",
            "config": {"repoURL": repo_url, "prNumber": "${{ outputs['open-pr'].pr.id }}"},
        },
        {
            "uses": "argocd-update",
            "as": "sync",
            "config": {
                "apps": [
                    {
                        "name": "${{ ctx.stage }}",
                        "sources": [
                            {
                                "repoURL": repo_url,
                                "desiredRevision": "${{ outputs['wait-for-pr'].commit }}",
                            }
                        ],
                    }
                ]
            },
        },
    ]


# ---- where to kill ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillPoint:
    """Where the leader is SIGKILLed.

    ``at`` is one of: ``write:<alias>`` (the status write that records that step's first outcome
    lands: its end for a step that does not wait, its first Running for one that waits),
    ``clone`` (git's clone request was answered), ``commit`` (git commit made the commit),
    ``push-before`` / ``push-after`` (git's push request arrives: refused / answered),
    ``pr-created`` (the pull request was created, the answer never arrives), ``sync-landed``
    (the sync request reached the Application), ``waiting:<alias>`` (that step waits: its gate
    is closed, its pull request unmerged, its sync held; these park by themselves, so all of
    them share one kill), or ``never``. ``gate_first`` opens the http step's gate and
    ``merge_first`` merges the pull request before the kill (once the Promotion waits on it), so
    that the kill comes after those steps.
    """

    label: str
    at: str
    gate_first: bool = False
    merge_first: bool = False


# clone, edit and commit change nothing outside the work directory (LOCAL), so the controller
# records all three in one status write, before the http step reaches out: a kill anywhere in
# them (inside the clone, the edit or the commit) leaves what "inside git-commit" leaves, the
# standby sees the Promotion as it was before the clone, and the killed replica's half-done
# work directory is one nobody uses again.
KILL_POINTS: tuple[KillPoint, ...] = (
    KillPoint("uninterrupted", "never", gate_first=True, merge_first=True),
    KillPoint("inside git-clone", "clone"),
    KillPoint("inside git-commit", "commit"),
    KillPoint("after commit", "write:commit"),
    KillPoint("inside http, waiting", "waiting:wait"),
    KillPoint("after http", "write:wait", gate_first=True),
    KillPoint("inside push, not landed", "push-before", gate_first=True),
    KillPoint("inside push, landed", "push-after", gate_first=True),
    KillPoint("after push", "write:push", gate_first=True),
    KillPoint("inside open-pr, PR created", "pr-created", gate_first=True),
    KillPoint("after open-pr", "write:open-pr", gate_first=True),
    KillPoint("inside wait-for-pr, waiting", "waiting:wait-for-pr", gate_first=True),
    KillPoint("after wait-for-pr", "write:wait-for-pr", gate_first=True, merge_first=True),
    KillPoint(
        "inside argocd-update, sync landed", "sync-landed", gate_first=True, merge_first=True
    ),
    KillPoint("inside argocd-update, waiting", "waiting:sync", gate_first=True, merge_first=True),
)


@dataclass
class Killer:
    """SIGKILLs ``target`` when the armed point is reached (from whichever hook sees it)."""

    emulator: RunningApiServer | None
    namespace: str = NS
    target: ServerProcess | None = None
    point: KillPoint | None = None
    promotion: str = ""
    stage: str = ""
    fired: asyncio.Event = field(default_factory=asyncio.Event)
    _pending: asyncio.Task[None] | None = None

    def arm(self, target: ServerProcess, point: KillPoint, promotion: str, stage: str) -> None:
        self.target, self.point, self.promotion, self.stage = target, point, promotion, stage
        self.fired = asyncio.Event()

    def armed(self, at: str) -> bool:
        return self.point is not None and self.point.at == at and not self.fired.is_set()

    def fire(self) -> None:
        if self.target is not None and not self.fired.is_set():
            self.target.kill()
            self.fired.set()
        self.point = None

    # The emulator's request hook. It runs before the request is read: killing there could
    # keep the body from ever arriving, so the kill waits until the write has landed (the
    # next turn of the emulator's loop after the store changed: before any next step can
    # have done anything).
    def api_hook(self, request: RequestInfo) -> None:
        point = self.point
        if point is None or self.emulator is None or request.method != "PATCH":
            return None
        if point.at.startswith("write:"):
            if not request.path.endswith(f"/promotions/{self.promotion}/status"):
                return None
            stored = self._stored("longshoreman.dev", "promotions", self.promotion)
            current = int((stored or {}).get("currentStep") or 0)
            index = ALIASES.index(point.at.removeprefix("write:"))
            # One write may record several steps (LOCAL ones in a row): the write that moves
            # currentStep past this step is the one.
            if current <= index:
                self._fire_once_changed(
                    "longshoreman.dev", "promotions", self.promotion, stored, past=index
                )
        elif point.at == "sync-landed" and request.path.endswith(f"/applications/{self.stage}"):
            stored = self._stored("argoproj.io", "applications", self.stage)
            self._fire_once_changed("argoproj.io", "applications", self.stage, stored)
        return None

    def _stored(self, group: str, plural: str, name: str) -> Any:
        """What the awaited write changes: a Promotion's status, an Application's spec."""
        assert self.emulator is not None
        found = (o for o in self.emulator.objects(group, plural) if o["metadata"]["name"] == name)
        obj = next(found, None) or {}
        if plural == "promotions":
            return obj.get("status")
        return {key: value for key, value in obj.items() if key not in ("metadata", "status")}

    def _fire_once_changed(
        self, group: str, plural: str, name: str, before: Any, *, past: int | None = None
    ) -> None:
        point, self.point = self.point, None  # this request is the one (unless, see below)

        async def fire() -> None:
            for _ in range(4000):  # 2 s at most (a write refused with 409 never lands)
                if self._stored(group, plural, name) != before:
                    break
                await asyncio.sleep(0.0005)
            landed = self._stored(group, plural, name)
            if past is not None and int((landed or {}).get("currentStep") or 0) <= past:
                self.point = point  # it recorded an earlier step only: wait for the next write
                return
            self.fire()

        self._pending = asyncio.get_running_loop().create_task(fire())

    async def observe(self, kube: k.Kube, apps: KubernetesApps) -> None:
        """Without the emulator's hook: kill as soon as the point is seen from outside."""
        point = self.point
        if self.emulator is not None or point is None:
            return
        if not (point.at.startswith("write:") or point.at == "sync-landed"):
            return
        while not self.fired.is_set():
            if point.at == "sync-landed":
                app = await apps.get("argocd", self.stage) or {}
                if (app.get("operation") or app.get("status", {}).get("operationState")) and (
                    self.promotion in str(app)
                ):
                    self.fire()
            else:
                promotion = await kube.get(k.PROMOTIONS, self.namespace, self.promotion)
                status = promotion.get("status") or {}
                index = ALIASES.index(point.at.removeprefix("write:"))
                entries = status.get("stepExecutionMetadata") or []
                if int(status.get("currentStep") or 0) > index or (
                    len(entries) > index and entries[index].get("status")
                ):
                    self.fire()
            await asyncio.sleep(0.005)


@dataclass
class HoldingArgoCD(FakeArgoCDController):
    """The fake Argo CD controller, leaving the Applications named in ``held`` alone: their
    sync stays requested, and the step waiting on it keeps waiting."""

    held: set[str] = field(default_factory=set)

    async def _reconcile(self, app: Mapping[str, Any]) -> int:
        if (app.get("metadata") or {}).get("name") in self.held:
            return 0
        return await super()._reconcile(app)


class KillingGitHub(FakeGitHub):
    """The fake GitHub, telling each lane's :class:`Killer` about the requests it waits for."""

    world: World | None = None

    def _killer(self, path: str) -> Killer | None:
        for lane in self.world.lanes if self.world is not None else ():
            if f"/{lane.repo}.git/" in path or f"/repos/{lane.repo}/" in path:
                return lane.killer
        return None

    async def h_git(self, request: web.Request) -> web.StreamResponse:
        killer = self._killer(request.path)
        if killer is not None and request.method == "POST":
            if request.path.endswith("/git-receive-pack") and killer.armed("push-before"):
                killer.fire()
                return web.Response(status=503, text="the pusher is gone\n")
            fire_after = (
                request.path.endswith("/git-receive-pack") and killer.armed("push-after")
            ) or (request.path.endswith("/git-upload-pack") and killer.armed("clone"))
            response = await super().h_git(request)
            if fire_after:
                killer.fire()
            return response
        return await super().h_git(request)

    async def h_create_pull(self, request: web.Request) -> web.Response:
        response = await super().h_create_pull(request)
        killer = self._killer(request.path)
        if killer is not None and killer.armed("pr-created"):
            killer.fire()
        return response


def git_wrapper(directory: Path, control: Path) -> Path:
    """A ``git`` for the servers' PATH that parks the ``commit`` of the Promotion named in
    ``control`` (its worktree is under a directory of that name).

    It runs the real git, then (the commit made, the step not yet told) writes ``control``.done
    and waits for its parent server to die. The control file is consumed, so only the armed
    leader parks.
    """
    real = shutil.which("git")
    assert real is not None
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "git"
    script.write_text(
        f"""#!/bin/sh
sub=""
skip=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in
    -c) skip=1 ;;
    -*) ;;
    *) sub="$a"; break ;;
  esac
done
if [ "$sub" = commit ] && [ -f "{control}" ]; then
  case "$PWD" in
    */"$(cat "{control}")"/*)
      rm -f "{control}"
      "{real}" "$@"
      rc=$?
      : > "{control}.done"
      while kill -0 "$PPID" 2>/dev/null; do sleep 0.02; done
      exit $rc
      ;;
  esac
fi
exec "{real}" "$@"
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


# ---- the world -----------------------------------------------------------------------------------


@dataclass
class Lane:
    """One namespace with its own pair of replicas (own Lease), repository and killer: lanes
    run side by side, so the kill points do not wait on each other's takeovers."""

    index: int
    namespace: str
    remote: RemoteRepo
    repo_url: str
    killer: Killer
    control: Path
    env: dict[str, str]

    @property
    def repo(self) -> str:
        return f"{GITOPS}-{self.index}"


@dataclass
class World:
    tmp_path: Path
    kube: k.Kube
    apps: KubernetesApps
    argocd: HoldingArgoCD
    github: KillingGitHub
    gate_url: str
    opened: set[str]
    servers: list[ServerProcess]
    kubeconfig_path: Path
    emulator: RunningApiServer | None
    lanes: list[Lane] = field(default_factory=list)
    lives: int = 0

    async def lane(self, index: int) -> Lane:
        namespace = f"{NS}-{index}"
        project = (ROOT / "examples" / "kargo-demo" / "project.yaml").read_text()
        manifest = self.tmp_path / f"project-{index}.yaml"
        manifest.write_text(project.replace(f"namespace: {NS}\n", f"namespace: {namespace}\n"))
        await seed(self.kube, [manifest])
        base = ROOT / "examples" / "gitops-repo"
        files = {str(p.relative_to(base)): p.read_text() for p in base.rglob("*") if p.is_file()}
        remote = make_remote(self.tmp_path, files=files, name=f"gitops-{index}")
        repo = f"{GITOPS}-{index}"
        self.github.add_repo(repo, remote)
        control = self.tmp_path / f"park-commit-{index}"
        wrapper = git_wrapper(self.tmp_path / f"bin-{index}", control)
        env = {
            "KUBECONFIG": str(self.kubeconfig_path),
            "LONGSHOREMAN_WATCH_NAMESPACE": namespace,
            "LONGSHOREMAN_LEASE_NAME": f"longshoreman-{namespace}",
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            "LONGSHOREMAN_LEADER_ELECTION": "true",
            **LEASE,
            "LONGSHOREMAN_GITHUB_APP_ID": str(self.github.app_id),
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": self.github.private_key,
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": "webhook-secret",
            "LONGSHOREMAN_GITHUB_API_URL": self.github.url,
            "LONGSHOREMAN_GITHUB_PROJECT": namespace,
            "LONGSHOREMAN_HTTP_ALLOW": "127.0.0.1",
            "PATH": f"{wrapper}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        }
        killer = Killer(self.emulator, namespace)
        lane = Lane(index, namespace, remote, self.github.git_url(repo), killer, control, env)
        self.lanes.append(lane)
        return lane

    async def start(
        self, lane: Lane, name: str, work_dir: Path, *, ready: bool = False
    ) -> ServerProcess:
        self.lives += 1
        env = {**lane.env, "LONGSHOREMAN_WORK_DIR": str(work_dir), "POD_NAME": name}
        log = self.tmp_path / f"{name}-{self.lives}.log"
        return await ServerProcess.start(env, log, self.servers, ready=ready)

    async def add_stage(self, lane: Lane, stage: str) -> None:
        base = lane.remote.head("main")
        assert base is not None
        lane.remote.git("update-ref", f"refs/heads/stage/{stage}", base)
        await self.kube.create(
            k.STAGES,
            objects.stage(
                stage,
                namespace=lane.namespace,
                warehouse="kargo-demo",
                steps=steps(lane.repo_url, self.gate_url),
            ),
        )
        await self.apps.put(
            make_app(
                stage,
                authorized=f"{lane.namespace}:{stage}",
                repo_url=lane.repo_url,
                target_revision=f"stage/{stage}",
            )
        )

    def pushes(self, lane: Lane) -> int:
        return sum(
            1
            for r in self.github.git_requests
            if r.method == "POST"
            and r.path.endswith(f"/{lane.repo}.git/git-receive-pack")
            and r.allowed
        )

    def pulls(self, lane: Lane, head: str) -> list[Any]:
        return [p for p in self.github.repo(lane.repo).pulls.values() if p.head == head]

    async def promotion(self, lane: Lane, name: str) -> dict[str, Any]:
        return await self.kube.get(k.PROMOTIONS, lane.namespace, name)

    def api_hook(self, request: RequestInfo) -> None:
        for lane in self.lanes:
            lane.killer.api_hook(request)
        return None


@contextlib.asynccontextmanager
async def world(
    tmp_path: Path,
    kubeconfig_path: Path,
    api_client: Callable[[], aio_client.ApiClient],
    emulator: RunningApiServer | None,
) -> AsyncIterator[World]:
    api = api_client()
    with contextlib.suppress(ApiException):  # already there (the emulator makes it)
        await aio_client.CoreV1Api(api).create_namespace({"metadata": {"name": "argocd"}})
    kube = k.Kube(api)
    apps = KubernetesApps(api_client())
    opened: set[str] = set()

    async def ready(request: web.Request) -> web.Response:
        return web.json_response({"ready": request.match_info["stage"] in opened})

    gates = web.Application()
    gates.router.add_get("/ready/{stage}", ready)
    gate_runner = web.AppRunner(gates, access_log=None)
    await gate_runner.setup()
    await web.TCPSite(gate_runner, "127.0.0.1", 0).start()
    gate_url = f"http://127.0.0.1:{gate_runner.addresses[0][1]}"

    github = KillingGitHub()
    github_runner = web.AppRunner(github.app, access_log=None)
    await github_runner.setup()
    await web.TCPSite(github_runner, "127.0.0.1", 0).start()
    github.url = f"http://127.0.0.1:{github_runner.addresses[0][1]}"
    argocd = HoldingArgoCD(apps)
    try:
        async with argocd.running(interval=0.05), server_processes() as servers:
            w = World(
                tmp_path, kube, apps, argocd, github, gate_url, opened, servers,
                kubeconfig_path, emulator,
            )  # fmt: skip
            github.world = w
            if emulator is not None:
                emulator.faults.hook = w.api_hook
            yield w
    finally:
        if emulator is not None:
            emulator.faults.hook = None
        await github.close_session()
        await github_runner.cleanup()
        await gate_runner.cleanup()


# ---- one case ------------------------------------------------------------------------------------


async def _until(predicate: Callable[[], Awaitable[bool] | bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        outcome = predicate()
        if outcome if isinstance(outcome, bool) else await outcome:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {within}s")


@dataclass
class Case:
    """One Promotion driven through one kill point: the gate, the merge, the nudges."""

    w: World
    lane: Lane
    point: KillPoint
    stage: str
    # Called right after the merge (arming a kill that must come after it).
    after_merge: Callable[[], None] = lambda: None
    merged: bool = False
    # Set once the pull request may be merged (after the kill, unless merge_first).
    may_merge: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return f"{self.stage}-p"

    async def promotion(self) -> dict[str, Any]:
        return await self.w.promotion(self.lane, self.name)

    async def step_status(self, alias: str) -> str:
        entries = ((await self.promotion()).get("status") or {}).get("stepExecutionMetadata")
        index = ALIASES.index(alias)
        return str(entries[index].get("status") or "") if len(entries or ()) > index else ""

    async def terminal(self) -> bool:
        return ((await self.promotion()).get("status") or {}).get("phase") in TERMINAL

    async def merge_when_open(self) -> None:
        head = f"kargo/promotion/{self.name}"
        await _until(lambda: bool(self.w.pulls(self.lane, head)), PATIENCE, f"a PR from {head}")
        if self.point.merge_first:
            # Once the step waits on it, so that its next status write records the merge.
            async def waiting() -> bool:
                return await self.step_status("wait-for-pr") == "Running"

            await _until(waiting, PATIENCE, "waiting on the PR")
        else:
            await self.may_merge.wait()
        pull = self.w.pulls(self.lane, head)[0].number
        merged = await self.w.github.merge(self.lane.repo, pull)
        self.after_merge()
        # What Argo CD's repo server resolves the Application's branch to from now on.
        self.w.argocd.set_head(
            self.lane.repo_url, f"stage/{self.stage}", merged["merge_commit_sha"]
        )
        self.merged = True

    async def nudge(self) -> None:
        """Wake the waiting steps (the http step polls every 10 s at best, the PR every 30 s),
        as the refresh annotation does, once what they wait for has happened."""
        n = 0
        while True:
            await asyncio.sleep(0.2)
            if self.stage in self.w.opened or self.merged:
                n += 1
                with contextlib.suppress(k.KubeError):
                    await self.w.kube.patch(
                        k.PROMOTIONS,
                        self.lane.namespace,
                        self.name,
                        {"metadata": {"annotations": {"longshoreman.dev/refresh": str(n)}}},
                    )


@dataclass
class Outcome:
    """A finished case: the Promotion, where it was killed, what went wrong ("" if nothing)."""

    point: KillPoint
    lane: Lane
    stage: str
    promotion: dict[str, Any]
    where: str
    seconds: float
    problem: str
    tree: str

    def line(self) -> str:
        return (
            f"{self.point.label:>36}: killed {self.where}; done {self.seconds:.1f}s after "
            f"creation: {self.problem or 'ok'}"
        )


def rounds(points: Sequence[KillPoint]) -> list[list[tuple[int, KillPoint]]]:
    """Cases grouped under one SIGKILL: the ones that park by themselves (``waiting:``) share
    one; every other needs a kill of its own at its own moment."""
    waiting = [(i, p) for i, p in enumerate(points) if p.at.startswith("waiting:")]
    alone = [[(i, p)] for i, p in enumerate(points) if not p.at.startswith("waiting:")]
    return ([waiting] if waiting else []) + alone


async def run_round(
    w: World,
    lane: Lane,
    cases: Sequence[tuple[KillPoint, str]],
    leader: ServerProcess | None,
    *,
    meanwhile: Callable[[Case], Awaitable[None]] | None = None,
    killed: Callable[[], None] = lambda: None,
) -> list[Outcome]:
    """Run Promotions, one per (point, stage), and SIGKILL ``leader`` once: at a single case's
    point, or once every ``waiting:`` case waits. (Or do ``meanwhile`` to a single case.)
    Returns once every one is terminal."""
    started = time.monotonic()
    pushes = w.pushes(lane)
    made = [Case(w, lane, point, stage) for point, stage in cases]
    killing = leader is not None and any(p.at != "never" for p, _ in cases)
    parked = all(p.at.startswith("waiting:") for p, _ in cases)
    for case in made:
        await w.add_stage(lane, case.stage)
        if case.point.gate_first:
            w.opened.add(case.stage)
        if case.point.at == "waiting:sync":
            w.argocd.held.add(case.stage)
    if killing and not parked:
        (case,) = made
        assert leader is not None

        def arm() -> None:
            assert leader is not None
            lane.killer.arm(leader, case.point, case.name, case.stage)

        if case.point.merge_first:
            case.after_merge = arm
        else:
            arm()
        if case.point.at == "commit":
            lane.control.write_text(f"{case.name}\n")
    where: dict[str, str] = {}
    async with asyncio.TaskGroup() as group:
        helpers = [group.create_task(c.merge_when_open()) for c in made]
        helpers += [group.create_task(c.nudge()) for c in made]
        for case in made:
            await w.kube.create(
                k.PROMOTIONS,
                objects.promotion(case.name, case.stage, namespace=lane.namespace, freight=FREIGHT),
            )
        if meanwhile is not None:
            (case,) = made
            await meanwhile(case)
        if killing:
            assert leader is not None
            if parked:
                for case in made:
                    alias = case.point.at.removeprefix("waiting:")

                    async def waiting(case: Case = case, alias: str = alias) -> bool:
                        return await case.step_status(alias) == "Running"

                    await _until(waiting, PATIENCE, f"{case.point.label}: waiting")
                lane.killer.arm(leader, made[0].point, made[0].name, made[0].stage)
                lane.killer.fire()
            else:
                (case,) = made
                if case.point.merge_first:
                    await _until(lambda: case.merged, PATIENCE, "the merge")
                helpers.append(group.create_task(lane.killer.observe(w.kube, w.apps)))
                if case.point.at == "commit":
                    done_file = Path(f"{lane.control}.done")
                    await _until(done_file.exists, PATIENCE, "a parked git commit")
                    await asyncio.to_thread(done_file.unlink)
                    lane.killer.fire()
            await asyncio.wait_for(lane.killer.fired.wait(), PATIENCE)
            await leader.proc.wait()
            killed()
            for case in made:
                where[case.stage] = _position(await case.promotion())
        for case in made:
            w.opened.add(case.stage)
            w.argocd.held.discard(case.stage)
            case.may_merge.set()
        for case in made:
            await _until(case.terminal, PATIENCE, f"{case.point.label}: the end")
        for helper in helpers:
            helper.cancel()
    outcomes = []
    for case in made:
        done = await case.promotion()
        outcomes.append(
            Outcome(
                case.point,
                lane,
                case.stage,
                done,
                where.get(case.stage, "not killed"),
                time.monotonic() - started,
                problems(w, lane, done, case.stage),
                lane.remote.git("rev-parse", f"stage/{case.stage}^{{tree}}"),
            )
        )
    # Pushes are counted per lane: all of a round's together.
    total = w.pushes(lane) - pushes
    if total != len(made) and not any(o.problem for o in outcomes):
        for outcome in outcomes:
            outcome.problem = f"{total} git pushes for {len(made)} Promotion(s)"
    return outcomes


def _position(promotion: Mapping[str, Any]) -> str:
    status = promotion.get("status") or {}
    entries = status.get("stepExecutionMetadata") or []
    return f"at step {status.get('currentStep', 0)} " + "/".join(
        str(s.get("status", "?"))[:4] for s in entries
    )


def problems(w: World, lane: Lane, done: Mapping[str, Any], stage: str) -> str:
    """What is wrong with a finished case, or "" (the pushes are counted by the caller)."""
    status = done.get("status") or {}
    name = f"{stage}-p"
    if status.get("phase") != "Succeeded":
        return f"{status.get('phase')}: {status.get('message')}"
    if [s.get("status") for s in status.get("stepExecutionMetadata") or []] != ["Succeeded"] * 8:
        return f"steps {status.get('stepExecutionMetadata')}"
    pulls = w.pulls(lane, f"kargo/promotion/{name}")
    if len(pulls) != 1:
        return f"{len(pulls)} pull requests"
    syncs = [op for key, op in w.argocd.started if key == ("argocd", stage)]
    if len(syncs) != 1:
        return f"{len(syncs)} Argo CD syncs"
    state = status.get("state") or {}
    merge = lane.remote.head(f"stage/{stage}")
    if state.get("wait-for-pr", {}).get("commit") != merge:
        return f"wait-for-pr output {state.get('wait-for-pr')} is not the merge {merge}"
    pushed = lane.remote.head(f"kargo/promotion/{name}")
    if state.get("push", {}).get("commit") != pushed or state["commit"]["commit"] != pushed:
        return f"pushed {pushed}, but the outputs say {state.get('push')} / {state.get('commit')}"
    # What a replay needs survived the API server (the CRD's schema keeps it).
    replay = status.get("replay") or {}
    recorded = {"clone", "edit", "commit", "push", "open-pr", "wait-for-pr", "sync"}
    if not replay.get("workDir") or set(replay.get("steps") or {}) != recorded:
        return f"status.replay is {replay}"
    return ""


def _judge(outcomes: Sequence[Outcome]) -> list[str]:
    """Every case against the uninterrupted one's final tree; raises listing the failures."""
    reference = next(o.tree for o in outcomes if o.point.at == "never")
    failed = False
    for outcome in outcomes:
        if not outcome.problem and outcome.tree != reference:
            outcome.problem = "the final tree is not the uninterrupted run's"
        failed = failed or bool(outcome.problem)
    report = [o.line() for o in outcomes]
    if failed:
        raise AssertionError("\n".join(report))
    return report


# ---- the scenarios -------------------------------------------------------------------------------


async def takeover_scenario(
    tmp_path: Path,
    kubeconfig_path: Path,
    api_client: Callable[[], aio_client.ApiClient],
    *,
    emulator: RunningApiServer | None = None,
    points: Sequence[KillPoint] = KILL_POINTS,
    lanes: int = 3,
) -> list[str]:
    """Two replicas (per lane) with separate work directories; the leader is SIGKILLed at each
    point and the standby finishes. Raises AssertionError listing the failed cases; returns the
    report. ``points`` must include one ``never`` (the uninterrupted reference)."""
    grouped = sorted(rounds(points), key=lambda r: all(p.at != "never" for _, p in r))
    async with world(tmp_path, kubeconfig_path, api_client, emulator) as w:
        made = [await w.lane(i) for i in range(lanes)]
        per_lane = await asyncio.gather(
            *(_run_lane(w, lane, grouped[lane.index :: lanes]) for lane in made)
        )
    outcomes = sorted((o for lane in per_lane for o in lane), key=lambda o: o.stage)
    return _judge(outcomes)


async def _run_lane(
    w: World, lane: Lane, lane_rounds: Sequence[Sequence[tuple[int, KillPoint]]]
) -> list[Outcome]:
    # Each replica is a pod: its own emptyDir, and a new one after each restart.
    lives = {"a": 0, "b": 0}

    def start(name: str) -> Awaitable[ServerProcess]:
        lives[name] += 1
        pod = f"{lane.namespace}-{name}"
        return w.start(lane, pod, w.tmp_path / f"work-{pod}-{lives[name]}", ready=True)

    replicas = dict(zip(("a", "b"), await asyncio.gather(start("a"), start("b")), strict=True))
    outcomes = []
    restarting: list[asyncio.Task[ServerProcess]] = []
    for n, cases in enumerate(lane_rounds):
        leader_pod = await _lease_holder(w.kube, lane)
        leader_name = leader_pod.rsplit("-", 1)[1]
        last = n == len(lane_rounds) - 1

        def restart(name: str = leader_name, last: bool = last) -> None:
            # The killed pod comes back at once (with a fresh emptyDir), as the next standby.
            if not last:
                restarting.append(asyncio.create_task(start(name)))

        named = [(point, f"t{index:02d}") for index, point in cases]
        outcomes += await run_round(w, lane, named, replicas[leader_name], killed=restart)
        if restarting:
            replicas[leader_name] = await restarting.pop()
    return outcomes


async def fresh_work_dir_scenario(
    tmp_path: Path,
    kubeconfig_path: Path,
    api_client: Callable[[], aio_client.ApiClient],
    *,
    emulator: RunningApiServer | None = None,
) -> list[str]:
    """One replica loses its work directory mid-Promotion: deleted under the running process
    while the http step waits, and (another Promotion) a pod restart with a fresh emptyDir while
    it waits on the pull request. Both finish once, with the uninterrupted run's tree."""
    async with world(tmp_path, kubeconfig_path, api_client, emulator) as w:
        lane = await w.lane(0)
        work = tmp_path / "work-solo"
        solo = await w.start(lane, "solo", work, ready=True)
        outcomes = await run_round(w, lane, [(KILL_POINTS[0], "r00")], None)

        async def delete_while_waiting(case: Case) -> None:
            async def waiting() -> bool:
                return await case.step_status("wait") == "Running"

            await _until(waiting, PATIENCE, "the http step waiting")
            await asyncio.to_thread(shutil.rmtree, work / lane.namespace / case.name)

        deleted = KillPoint("work directory deleted while waiting", "never")
        outcomes += await run_round(
            w, lane, [(deleted, "r01")], None, meanwhile=delete_while_waiting
        )
        restarted: list[asyncio.Task[ServerProcess]] = []

        def restart() -> None:
            fresh = w.start(lane, "solo", tmp_path / "work-solo-2", ready=True)
            restarted.append(asyncio.create_task(fresh))

        point = KillPoint("pod restarted with a fresh emptyDir", "waiting:wait-for-pr", True)
        outcomes += await run_round(w, lane, [(point, "r02")], solo, killed=restart)
        await asyncio.gather(*restarted)
    return _judge(outcomes)


async def _lease_holder(kube: k.Kube, lane: Lane) -> str:
    name = f"longshoreman-{lane.namespace}"
    holder = ""

    async def held() -> bool:
        nonlocal holder
        with contextlib.suppress(k.NotFound):
            lease = await kube.get(k.LEASES, "default", name)
            holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return bool(holder)

    await _until(held, PATIENCE, f"a leader in {lane.namespace}")
    return holder
