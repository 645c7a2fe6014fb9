"""The whole delivery path as one world: an image pushed, then verified in production.

Shared by the end-to-end test (``tests/cluster/test_delivery.py``) and the benchmark
(``bench/bench_pipeline.py``), so both walk the same path:

* Debian's docker-registry (:mod:`tests.support.registry`) holds ``acme/web``; a Warehouse
  subscribes to it;
* Stages ``test`` -> ``uat`` -> ``prod`` in a line, each annotated to auto-promote, each with
  git-clone / yaml-update / git-commit / git-push (into a local bare repository standing in for
  ``https://github.com/example/delivery.git`` through a git ``insteadOf`` rule) / argocd-update
  (its own Application ``web-<stage>``, synced to the pushed commit), each verified by an
  AnalysisRun of the AnalysisTemplate ``smoke``;
* the whole server (``create_app``) in this process, configured as an operator would (only the
  cluster, the work directory, git's config and the Harbor webhook's secret are set: requeue
  floors, health-check intervals and polling are the defaults);
* stand-ins for Argo CD (:class:`tests.support.argocd.FakeArgoCDController`) and Argo Rollouts
  (:class:`tests.support.rollouts.FakeRolloutsController`), each finishing its operation a set
  time after it started (default 0) and reacting to watch events as the real ones do, not
  polling.

:meth:`Delivery.release` pushes a tag and sends the registry's webhook (Harbor's
``PUSH_ARTIFACT``); :class:`Timeline` notes when each change first shows in a watch of our own
(Freight created, Promotion created and Succeeded, sync requested and done, AnalysisRun created
and done, Freight verified in a Stage), which the test asserts on and the benchmark splits into
hops. Every wait is bounded and names what it waited for.

The caller brings the API server (emulator or real, CRDs installed, namespaces ``delivery``
and ``argocd`` created) and the registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes.aio import client as aio_client
from prometheus_client.parser import text_string_to_metric_families

from app.controller import kube as k
from app.controller.informer import Informer
from app.server import SERVER, create_app, wait_started
from app.settings import Settings
from promoter.steps.registry import StepRegistry
from tests.support import objects
from tests.support.argocd import FakeArgoCDController, KubernetesApps, make_app
from tests.support.argocd import Outcome as SyncOutcome
from tests.support.fixtures import webhook_body
from tests.support.gitrepo import RemoteRepo, git_env, make_remote
from tests.support.registry import Registry, serving
from tests.support.rollouts import FakeRolloutsController, KubernetesAnalysisRuns
from tests.support.rollouts import Outcome as AnalysisOutcome

NS = "delivery"
ARGOCD_NS = "argocd"
NAMESPACES = (NS, ARGOCD_NS)
STAGES = ("test", "uat", "prod")
IMAGE = "acme/web"
WAREHOUSE = "web"
TEMPLATE = "smoke"
GITOPS_REPO = "https://github.com/example/delivery.git"
HARBOR_AUTH = "Bearer delivery-harbor-secret-0123456789"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
STAGE_LABEL = "longshoreman.dev/stage"
FREIGHT_LABEL = "longshoreman.dev/freight"
PROMOTION_INFO = ("longshoreman.dev/promotion", "kargo.akuity.io/promotion")


def app_name(stage: str) -> str:
    return f"web-{stage}"


def values_path(stage: str) -> str:
    return f"{stage}/values.yaml"


def stage_object(name: str, upstream: str | None, image_repo: str) -> dict[str, Any]:
    """One Stage of the line: the four git steps, argocd-update, verification by ``smoke``."""
    tag = '${{ imageFrom("' + image_repo + '").Tag }}'
    steps = [
        {
            "uses": "git-clone",
            "config": {"repoURL": GITOPS_REPO, "checkout": [{"branch": "main", "path": "./out"}]},
        },
        {
            "uses": "yaml-update",
            "config": {
                "path": f"./out/{values_path(name)}",
                "updates": [{"key": "image.tag", "value": tag}],
            },
        },
        {
            "uses": "git-commit",
            "config": {"path": "./out", "message": f"{name}: web {tag}"},
        },
        {"uses": "git-push", "as": "push", "config": {"path": "./out"}},
        {
            "uses": "argocd-update",
            "config": {
                "apps": [
                    {
                        "name": app_name(name),
                        "sources": [
                            {
                                "repoURL": GITOPS_REPO,
                                "desiredRevision": "${{ outputs.push.commit }}",
                            }
                        ],
                    }
                ]
            },
        },
    ]
    return objects.stage(
        name,
        namespace=NS,
        warehouse=WAREHOUSE,
        upstream=[upstream] if upstream else (),
        annotations={"longshoreman.dev/auto-promote": "true"},
        steps=steps,
        verification=[TEMPLATE],
        verification_args=[{"name": "stage", "value": "${{ ctx.stage }}"}],
    )


def analysis_template() -> dict[str, Any]:
    """``smoke``: one web metric (the stand-in Rollouts queries nothing) with a Stage argument."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": TEMPLATE, "namespace": NS},
        "spec": {
            "args": [{"name": "stage"}],
            "metrics": [
                {
                    "name": "smoke",
                    "successCondition": "result == true",
                    "failureLimit": 0,
                    "provider": {
                        "web": {
                            "url": "http://web.{{args.stage}}.svc/healthz",
                            "jsonPath": "{$.ok}",
                            "timeoutSeconds": 10,
                        }
                    },
                }
            ],
        },
    }


class Timeline:
    """When each change first showed in a watch (``time.perf_counter()``), by key."""

    def __init__(self) -> None:
        self.at: dict[Hashable, float] = {}
        self.changed = asyncio.Event()

    def mark(self, key: Hashable, when: float | None = None) -> None:
        if key not in self.at:
            self.at[key] = time.perf_counter() if when is None else when
            self.changed.set()

    async def until(self, predicate: Callable[[], bool], what: str, within: float) -> None:
        """Wait until ``predicate()`` holds; after ``within`` seconds raise naming ``what``."""
        try:
            async with asyncio.timeout(within):
                while not predicate():
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise TimeoutError(f"gave up after {within:g}s waiting for {what}") from None


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


@dataclass
class Delivery:
    """The running world; see the module docstring."""

    kube: k.Kube
    registry: Registry
    remote: RemoteRepo
    server_url: str
    http: aiohttp.ClientSession
    argocd: FakeArgoCDController
    rollouts: FakeRolloutsController
    timeline: Timeline
    freight_by_tag: dict[str, str] = field(default_factory=dict)
    promotions: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def image_repo(self) -> str:
        return self.registry.repo(IMAGE)

    async def release(self, tag: str) -> float:
        """Push ``tag``, then send Harbor's webhook; returns when the webhook was sent."""
        await self.registry.push_image(IMAGE, tag)
        event = webhook_body("harbor.push_artifact")
        resource = event["event_data"]["resources"][0]
        resource.update(resource_url=f"{self.image_repo}:{tag}", tag=tag)
        body = json.dumps(event).encode()
        sent = time.perf_counter()
        async with self.http.post(
            f"{self.server_url}/webhooks/harbor",
            data=body,
            headers={"Authorization": HARBOR_AUTH, "Content-Type": "application/json"},
        ) as response:
            if response.status != 202:
                raise RuntimeError(
                    f"the Harbor webhook got {response.status}: {await response.text()}"
                )
        return sent

    def freight_of(self, tag: str) -> str | None:
        return self.freight_by_tag.get(tag)

    async def verified_in_prod(self, tag: str, within: float) -> str:
        """Wait until the Freight of ``tag`` is verified in ``prod``; returns its name."""
        try:
            await self.timeline.until(
                lambda: (self.freight_of(tag) or "", "verified", STAGES[-1]) in self.timeline.at,
                f"the Freight of {tag} to be verified in {STAGES[-1]}",
                within,
            )
        except TimeoutError as e:
            raise TimeoutError(f"{e}; {await self.describe(tag)}") from None
        return self.freight_by_tag[tag]

    async def describe(self, tag: str) -> str:
        """What the watches last saw of this tag's way through the pipeline, and the Stages'
        conditions now (read when a wait gives up: no watch of ours loads the API server with
        the Stages' status writes)."""
        name = self.freight_of(tag)
        if name is None:
            return f"no Freight of {tag} was seen"
        reached = [key for key in self.timeline.at if isinstance(key, tuple) and key[0] == name]
        parts = [f"Freight {name}: seen {', '.join('/'.join(map(str, k[1:])) for k in reached)}"]
        stages = {s["metadata"]["name"]: s for s in (await self.kube.list(k.STAGES, NS))[0]}
        for stage in STAGES:
            promotion = next(
                (
                    p
                    for p in self.promotions.values()
                    if p["spec"].get("stage") == stage and p["spec"].get("freight") == name
                ),
                None,
            )
            if promotion is not None:
                status = _status(promotion)
                parts.append(
                    f"{stage}: Promotion {promotion['metadata']['name']} "
                    f"{status.get('phase') or 'Pending'} ({status.get('message') or ''})"
                )
            conditions = {
                c.get("type"): f"{c.get('status')} {c.get('reason')}: {c.get('message')}"
                for c in _status(stages.get(stage) or {}).get("conditions") or ()
            }
            parts.append(f"{stage} conditions {conditions}")
        return "; ".join(parts)

    async def server_writes(self) -> dict[str, float]:
        """The server's API writes so far, by resource (from its /metrics)."""
        async with self.http.get(f"{self.server_url}/metrics") as response:
            text = await response.text()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name != "longshoreman_kubernetes_requests":
                continue
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels.get("method") in WRITES:
                    resource = sample.labels.get("resource", "?")
                    out[resource] = out.get(resource, 0.0) + sample.value
        return out

    # ---- what the watches report --------------------------------------------------------------

    def on_freight(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        for image in obj.get("images") or ():
            self.freight_by_tag.setdefault(str(image.get("tag")), name)
        self.timeline.mark((name, "created"))
        for stage in _status(obj).get("verifiedIn") or {}:
            self.timeline.mark((name, "verified", stage))

    def on_promotion(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        self.promotions[name] = obj
        freight, stage = obj["spec"].get("freight"), obj["spec"].get("stage")
        self.timeline.mark((freight, "promotion", stage))
        phase = _status(obj).get("phase")
        if phase in ("Succeeded", "Failed", "Errored", "Aborted"):
            self.timeline.mark((freight, "promotion " + phase.lower(), stage))

    def on_application(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.argocd.notify()
        stage = obj["metadata"]["name"].removeprefix("web-")
        requested = obj.get("operation") or {}
        promotion = _promotion_of(requested)
        if promotion in self.promotions:
            self.timeline.mark((self.promotions[promotion]["spec"]["freight"], "sync", stage))
        state = _status(obj).get("operationState") or {}
        promotion = _promotion_of(state.get("operation") or {})
        if promotion in self.promotions and state.get("phase") == "Succeeded":
            freight = self.promotions[promotion]["spec"]["freight"]
            self.timeline.mark((freight, "sync done", stage))

    def on_run(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.rollouts.notify()
        labels = obj["metadata"].get("labels") or {}
        freight, stage = labels.get(FREIGHT_LABEL), labels.get(STAGE_LABEL)
        self.timeline.mark((freight, "analysis", stage))
        if _status(obj).get("phase") in ("Successful", "Failed", "Error", "Inconclusive"):
            self.timeline.mark((freight, "analysis done", stage))


class WatchedStore:
    """A stand-in's store that reads from a watch's cache and writes through the API, as the
    real Argo CD and Argo Rollouts controllers read their informers: no list per pass (which
    would grow with every AnalysisRun kept and load the API server no real controller loads).
    What it writes goes into the cache at once, so its next pass does not act on the old copy.
    """

    def __init__(self, informer: Informer, writer: Any) -> None:
        self.informer, self.writer = informer, writer

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.informer.get(namespace, name)

    async def list(
        self, namespace: str | None = None, label_selector: str = ""
    ) -> list[Mapping[str, Any]]:
        assert not label_selector, "the stand-ins list everything they watch"
        return list(self.informer.items(namespace))

    async def create(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        return self._seen(await self.writer.create(obj))

    async def patch(
        self, namespace: str, name: str, patch: Mapping[str, Any], **options: Any
    ) -> Mapping[str, Any]:
        return self._seen(await self.writer.patch(namespace, name, patch, **options))

    def _seen(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        self.informer.observe(dict(obj))
        return obj


def _promotion_of(operation: Mapping[str, Any]) -> str | None:
    for entry in operation.get("info") or ():
        if isinstance(entry, Mapping) and entry.get("name") in PROMOTION_INFO:
            return str(entry.get("value"))
    return None


def branch_head(remote: RemoteRepo, branch: str) -> str | None:
    """The commit a branch of the bare repository points at, read from its ref files (no git
    process: the stand-in Argo CD asks in the middle of the event loop)."""
    loose = remote.path / "refs" / "heads" / branch
    if loose.is_file():
        return loose.read_text().strip()
    packed = remote.path / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            commit, _, ref = line.partition(" ")
            if ref == f"refs/heads/{branch}":
                return commit
    return None


async def create_objects(kube: k.Kube, registry: Registry) -> None:
    """The Warehouse, the AnalysisTemplate, the Stages and their Applications."""
    repo = registry.repo(IMAGE)
    await kube.create(k.ANALYSIS_TEMPLATES, analysis_template())
    apps = KubernetesApps(kube.api_client)
    for i, stage in enumerate(STAGES):
        await apps.put(
            make_app(
                app_name(stage),
                ARGOCD_NS,
                authorized=f"{NS}:{stage}",
                repo_url=GITOPS_REPO,
                target_revision="main",
            )
        )
        await kube.create(k.STAGES, stage_object(stage, STAGES[i - 1] if i else None, repo))
    await kube.create(
        k.WAREHOUSES,
        objects.warehouse(
            WAREHOUSE,
            namespace=NS,
            subscriptions=[{"image": {"repoURL": repo, "constraint": "^1.0.0"}}],
        ),
    )


@contextlib.asynccontextmanager
async def running_delivery(
    api_client: Callable[[], aio_client.ApiClient],
    kubeconfig: Path,
    registry: Registry,
    work: Path,
    *,
    sync_seconds: float = 0.0,
    analysis_seconds: float = 0.0,
    step_registry: StepRegistry | None = None,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[Delivery]:
    """The server, the stand-ins and our watches running against the cluster behind
    ``api_client``/``kubeconfig``, with the pipeline's objects created; everything stops when
    the block ends. ``environ`` adds settings (e.g. ``LONGSHOREMAN_MIN_REQUEUE_SECONDS``)."""
    remote = make_remote(work, files={values_path(s): "image:\n  tag: 0.0.0\n" for s in STAGES})
    git_config = Path(git_env(work, {remote.url: GITOPS_REPO})["GIT_CONFIG_GLOBAL"])
    settings = Settings.from_env(
        {
            "KUBECONFIG": str(kubeconfig),
            "LONGSHOREMAN_WORK_DIR": str(work / "server"),
            "LONGSHOREMAN_GIT_CONFIG": str(git_config),
            "LONGSHOREMAN_HARBOR_WEBHOOK_AUTH": HARBOR_AUTH,
            **(environ or {}),
        }
    )
    kube = k.Kube(api_client())
    await create_objects(kube, registry)
    watcher = k.Kube(api_client())
    apps = Informer(watcher, k.APPLICATIONS, namespace=ARGOCD_NS)
    runs = Informer(watcher, k.ANALYSIS_RUNS, namespace=NS)
    argocd = FakeArgoCDController(
        WatchedStore(apps, KubernetesApps(api_client())),
        namespaces=(ARGOCD_NS,),
        default=SyncOutcome(seconds=sync_seconds),
        # Argo CD syncs a branch to the commit it points at in the repository.
        resolver=lambda url, ref: branch_head(remote, ref) if url == GITOPS_REPO else None,
    )
    rollouts = FakeRolloutsController(
        WatchedStore(runs, KubernetesAnalysisRuns(api_client())),
        namespaces=[NS],
        default=AnalysisOutcome(seconds=analysis_seconds),
    )
    app = create_app(settings, registry=step_registry)
    async with (
        aiohttp.ClientSession() as http,
        serving(app) as url,
        argocd.reacting(),
        rollouts.reacting(),
    ):
        await wait_started(app)
        world = Delivery(kube, registry, remote, url, http, argocd, rollouts, Timeline())
        apps.on_event, runs.on_event = world.on_application, world.on_run
        informers = [
            Informer(watcher, k.FREIGHT, namespace=NS, on_event=world.on_freight),
            Informer(watcher, k.PROMOTIONS, namespace=NS, on_event=world.on_promotion),
            apps,
            runs,
        ]
        tasks = [asyncio.create_task(i.run()) for i in informers]
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(i.synced.wait() for i in informers))
                state = app[SERVER]
                # Start-up only: the server has no "ready" event to wait on, /readyz is polled.
                while not state.ready()[0]:
                    if state.failure is not None:
                        raise RuntimeError(f"the server failed: {state.failure}")
                    await asyncio.sleep(0.05)
            yield world
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await kube.close()
            await watcher.close()
