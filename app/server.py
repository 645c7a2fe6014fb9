"""The server process: one aiohttp application running the reconciler and the HTTP endpoints.

``create_app(settings)`` is the factory; everything is wired here and nowhere else. With no
cluster configured the embedded API server is started first, and the first log line says where
it is and how to point kubectl at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from app.admission import mutation_response, review_response
from app.controller import kube as k
from app.controller.credentials import ClusterCredentials
from app.controller.informer import FreightRefs
from app.controller.leader import LeaderElector
from app.controller.oci import Registries
from app.controller.promotions import ClusterPromotions, DeferredPromotions
from app.controller.reconciler import Controller
from app.controller.warehouses.credentials import DockerConfigCredentials
from app.controller.warehouses.reconciler import (
    WarehouseController,
    start_warehouse_controller,
)
from app.controller.warehouses.subscribers import http_subscribers
from app.embedded import DEFAULT_SEED, EmbeddedCluster, embedded_cluster, seed
from app.logs import REDACTOR
from app.metrics import Metrics
from app.receivers.routes import Receivers, setup_receivers
from app.settings import Settings
from app.ui.pages import setup_pages
from handlers.git_credentials import GitHubGitCredentials, SecretAppTokens
from handlers.webhook import GitHubIntegration, setup_github
from promoter.clock import SYSTEM, Clock
from promoter.ports.credentials import NO_CREDENTIALS, Credentials
from promoter.ports.telemetry import NO_TELEMETRY, Telemetry
from promoter.steps.base import GitSettings, HttpSettings, StepServices
from promoter.steps.registry import StepRegistry, builtin_registry
from promoter.tasks import stop_tasks
from slack.app import SlackIntegration, setup_slack

log = logging.getLogger("longshoreman")


@dataclass
class ServerState:
    """What the running server holds; reachable as ``app[SERVER]``."""

    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    registry: StepRegistry | None = None
    clock: Clock = SYSTEM
    kube: k.Kube | None = None
    controller: Controller | None = None
    warehouses: WarehouseController | None = None
    receivers: Receivers | None = None
    elector: LeaderElector | None = None
    cluster: EmbeddedCluster | None = None
    # The chat front ends, when configured (their queues and followers, for tests and benches).
    github: GitHubIntegration | None = None
    slack: SlackIntegration | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    failure: BaseException | None = None
    # The chat front ends' port to the cluster, attached once the controller runs.
    service: DeferredPromotions = field(default_factory=DeferredPromotions)
    listeners: list[Callable[[dict[str, Any], dict[str, Any] | None], None]] = field(
        default_factory=list
    )
    # The GitHub App's installation tokens: its repositories and ghcr.io packages, after the
    # project's Secrets and the global credentials namespace (app/controller/credentials.py).
    github_app: GitHubGitCredentials | None = None
    # The one credentials port every consumer asks, attached once the cluster is known.
    credentials: Credentials = NO_CREDENTIALS
    stage_listeners: list[Callable[[dict[str, Any], dict[str, Any] | None], None]] = field(
        default_factory=list
    )
    freight_listeners: list[Callable[[dict[str, Any], dict[str, Any] | None], None]] = field(
        default_factory=list
    )

    def ready(self) -> tuple[bool, str]:
        if self.failure is not None:
            return False, f"failed: {self.failure}"
        if self.controller is None or not self.controller.synced():
            return False, "caches are not synced yet"
        if self.settings.leader_election and (self.elector is None or not self.elector.leader):
            return False, "no leader is known yet"
        return True, "ok"


SERVER = web.AppKey("server", ServerState)


async def healthz(request: web.Request) -> web.Response:
    state = request.app[SERVER]
    if state.failure is not None:
        return web.Response(status=500, text=f"failed: {state.failure}\n")
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    ok, reason = request.app[SERVER].ready()
    return web.Response(status=200 if ok else 503, text=f"{reason}\n")


async def admission_validate(request: web.Request) -> web.Response:
    """``POST /admission/validate``: a validating webhook's AdmissionReview, decided by
    ``app.admission`` over the controller's caches. Until they are synced it answers 503, so
    the API server applies the webhook's failurePolicy rather than a guess from empty caches."""
    state = request.app[SERVER]
    controller = state.controller
    if controller is None or not controller.synced():
        return web.Response(status=503, text="caches are not synced yet\n")
    try:
        review = await request.json()
    except ValueError:
        return web.Response(status=400, text="the body must be an AdmissionReview (JSON)\n")
    if not isinstance(review, dict):
        return web.Response(status=400, text="the body must be an AdmissionReview (JSON)\n")
    caches = controller.caches
    informers = {
        "stages": (caches.stages, k.STAGES),
        "freights": (caches.freight, k.FREIGHT),
        "promotiontasks": (caches.tasks, k.PROMOTION_TASKS),
        "clusterpromotiontasks": (caches.cluster_tasks, k.CLUSTER_PROMOTION_TASKS),
    }
    # What the caches did not have. An object created a moment ago (a PromotionTask applied
    # just before the Stage naming it, in one kubectl apply) may not have reached the watch
    # yet: a miss is asked of the API server before it refuses anything.
    fetched: dict[tuple[str, str, str], Mapping[str, Any] | None] = {}
    missed: set[tuple[str, str, str]] = set()

    def read(plural: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        key = (plural, namespace, name)
        if key in fetched:
            return fetched[key]
        informer = informers.get(plural)
        found = None if informer is None else informer[0].get(namespace or None, name)
        if found is None and informer is not None:
            missed.add(key)
        return found

    def aliased(namespace: str, alias: str) -> list[dict[str, Any]]:
        return caches.freight.by_index(FreightRefs.INDEX, f"{namespace}/{alias}")

    kinds = frozenset(state.registry or builtin_registry())
    limits = state.settings.limits
    answer = review_response(review, read, kinds, state.clock.now(), aliased, limits)
    if not answer["response"]["allowed"] and missed and state.kube is not None:
        for plural, namespace, name in missed:
            try:
                fetched[(plural, namespace, name)] = await state.kube.get(
                    informers[plural][1], namespace or None, name
                )
            except k.NotFound:
                fetched[(plural, namespace, name)] = None
        limits = state.settings.limits
    answer = review_response(review, read, kinds, state.clock.now(), aliased, limits)
    return web.json_response(answer)


async def admission_mutate(request: web.Request) -> web.Response:
    """``POST /admission/mutate``: a mutating webhook's AdmissionReview (a Promotion's
    creator and abort requester, ``app.admission``). Needs no cache, so it answers at once."""
    state = request.app[SERVER]
    try:
        review = await request.json()
    except ValueError:
        review = None
    if not isinstance(review, dict):
        return web.Response(status=400, text="the body must be an AdmissionReview (JSON)\n")
    users = frozenset(state.settings.control_plane_users)
    return web.json_response(mutation_response(review, users))


async def metrics(request: web.Request) -> web.Response:
    state = request.app[SERVER]
    if state.controller is not None:
        state.metrics.queue_depth.set(len(state.controller.queue))
    body, content_type = state.metrics.render()
    return web.Response(body=body, headers={"Content-Type": content_type})


def create_app(
    settings: Settings,
    *,
    registry: StepRegistry | None = None,
    extra_services: Mapping[str, Any] | None = None,
    clock: Clock = SYSTEM,
) -> web.Application:
    """The aiohttp application: endpoints plus the reconciler's lifecycle.

    ``clock`` is where every part of it reads the time (tests pass a fake).
    """
    # GitHub's payloads can be large (a push with many commits); its handler reads the body
    # itself with GitHub's own cap.
    app = web.Application(client_max_size=30 * 1024 * 1024)
    state = ServerState(settings=settings, registry=registry, clock=clock)
    app[SERVER] = state
    # Whatever logs this process writes, these values never appear in them (app.logs).
    REDACTOR.add_static(settings.secrets())
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/admission/validate", admission_validate)
    app.router.add_post("/admission/mutate", admission_mutate)

    async def may_read(login: str, namespace: str) -> bool:
        # LONGSHOREMAN_UI_GITHUB_ACCESS=project: who may act on the project from GitHub.
        return state.github is not None and await state.github.deps.may_read(login, namespace)

    per_project = settings.ui.auth == "github" and settings.ui.github_access == "project"
    pages = setup_pages(
        app,
        settings.ui,
        lambda: state.controller,
        secrets=settings.secrets(),
        clock=clock,
        readers=may_read if per_project else None,
    )
    state.listeners.append(pages.on_promotion)
    extra = dict(extra_services or {})
    # Registry webhooks: mounted now, answered 503 until the Warehouse informer exists.
    state.receivers = setup_receivers(
        app,
        settings.receivers,
        lambda: state.warehouses,
        # The projects' own receivers (ProjectConfig webhookReceivers), as the controller has them.
        lambda: state.controller.rules.receivers if state.controller is not None else {},
    )

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            await _start(state, stack, extra)
            yield

    app.cleanup_ctx.append(lifecycle)
    # Chat front ends mount their routes now; their cluster side attaches in _start.
    if settings.github is not None:
        github = setup_github(
            app,
            settings.github,
            state.service,
            telemetry=state.metrics,
            # Installation tokens join the log redactor as GitHub issues them.
            on_token=REDACTOR.add,
            clock=clock,
        )
        state.github = github
        pages.actions.acting = github.acting
        pages.diffs = github.deps.diffs  # the Freight page's commits, from the App's cache
        extra.setdefault("github", github.pull_requests)
        extra.setdefault("github-git", github.git_database)
        state.github_app = github.git_credentials
        state.listeners.append(github.on_promotion)
        state.stage_listeners.append(github.on_stage)
        state.freight_listeners.append(github.on_freight)
    if settings.slack is not None:
        slack_app = setup_slack(
            app,
            settings.slack,
            state.service,
            telemetry=state.metrics,
            clock=clock,
            # Freight diffs in Slack read GitHub through the App, sharing its cache.
            diffs=state.github.deps.diffs if state.github is not None else None,
        )
        state.slack = slack_app
        state.listeners.append(slack_app.on_promotion)
        state.freight_listeners.append(slack_app.on_freight)
    return app


def _services(
    settings: Settings,
    kube: k.Kube,
    extra: Mapping[str, Any],
    credentials: Credentials = NO_CREDENTIALS,
    telemetry: Telemetry = NO_TELEMETRY,
) -> StepServices:
    env = {"GIT_CONFIG_GLOBAL": str(settings.git_config)} if settings.git_config else {}
    return StepServices(
        git=GitSettings(
            author_name=settings.git_author_name,
            author_email=settings.git_author_email,
            env=env,
            credentials=credentials,
            push_integration_policy=settings.git_push_integration_policy,
            github_push_max_revisions=settings.github_push_max_revisions,
            github_push_verify_untrusted=settings.github_push_verify_untrusted,
        ),
        http=HttpSettings(
            allow_hosts=settings.http_allow,
            deny_hosts=settings.http_deny,
            max_download_bytes=settings.http_max_download_bytes,
        ),
        ui_base_url=settings.ui.public_url or "",
        oci=Registries(credentials),
        shared_namespace=settings.shared_resources_namespace,
        extra=dict(extra),
        telemetry=telemetry,
    )


async def _start(
    state: ServerState, stack: contextlib.AsyncExitStack, extra: Mapping[str, Any]
) -> None:
    settings = state.settings
    if settings.embedded:
        kubeconfig = settings.embedded_kubeconfig or settings.work_dir / "kubeconfig"
        state.cluster = await stack.enter_async_context(
            embedded_cluster(
                kubeconfig,
                state_file=settings.embedded_state_file,
                clock=state.clock,
                limits=settings.limits,
                kinds=frozenset(state.registry or builtin_registry()),
            )
        )
        log.info(
            "no cluster configured: started the embedded API server at %s; kubeconfig written "
            "to %s (try: kubectl --kubeconfig %s get promotions -A)",
            state.cluster.url,
            kubeconfig,
            kubeconfig,
        )
        kube = await k.load_kube(
            str(kubeconfig), on_request=state.metrics.on_kube_request, api_group=settings.api_group
        )
        seeded = await seed(kube, settings.embedded_seed or DEFAULT_SEED)
        log.info("seeded the embedded cluster with %d object(s)", seeded)
    else:
        where = "in-cluster service account" if settings.in_cluster else str(settings.kubeconfig)
        log.info("using the cluster from %s", where)
        kube = await k.load_kube(
            str(settings.kubeconfig) if settings.kubeconfig else None,
            settings.in_cluster,
            on_request=state.metrics.on_kube_request,
            api_group=settings.api_group,
        )
    state.kube = kube
    stack.push_async_callback(kube.close)
    # The one credentials port: the project's Secrets, the global credentials namespace, the
    # GitHub App, the operator's docker config.json (and, for git, its gitconfig). Warehouses,
    # the git steps and the oci steps all ask it.
    app_tokens = SecretAppTokens(
        configured=settings.github, clock=state.clock, on_token=REDACTOR.add
    )
    stack.push_async_callback(app_tokens.close)
    state.credentials = ClusterCredentials(
        kube,
        global_namespace=settings.global_credentials_namespace,
        allow_http=settings.allow_credentials_over_http,
        app=state.github_app,
        app_tokens=app_tokens,
        docker_config=(
            DockerConfigCredentials(settings.registry_auth_file)
            if settings.registry_auth_file
            else None
        ),
        on_secret=REDACTOR.add,
    )
    argocd_kube = None
    if settings.argocd_kubeconfig is not None:
        log.info("Argo CD's Applications: the cluster of %s", settings.argocd_kubeconfig)
        argocd_kube = await k.load_kube(
            str(settings.argocd_kubeconfig), on_request=state.metrics.on_kube_request
        )
        stack.push_async_callback(argocd_kube.close)
    services = _services(settings, kube, extra, state.credentials, state.metrics)
    if isinstance(services.oci, Registries):
        stack.push_async_callback(services.oci.close)
    controller = Controller(
        kube,
        registry=state.registry or builtin_registry(),
        services=services,
        work_dir=settings.work_dir,
        namespace=settings.watch_namespace,
        projects=settings.projects,
        max_concurrent=settings.max_concurrent_reconciles,
        min_requeue=settings.min_requeue,
        default_requeue=settings.default_requeue,
        health_interval=settings.health_check_interval,
        on_promotion_finished=state.metrics.on_promotion_finished,
        on_reconcile=state.metrics.on_reconcile,
        clock=state.clock,
        # Where the projects' webhook receivers are reached (their status says so).
        receiver_base_url=settings.ui.public_url or "",
        retention=settings.retention if settings.gc_enabled else None,
        gc_interval=settings.gc_interval,
        on_garbage_collected=state.metrics.on_garbage_collected,
        shard=settings.shard,
        argocd_kube=argocd_kube,
        limits=settings.limits,
        receiver_min_secret=settings.receivers.min_secret_length,
    )
    state.metrics.watch_promotions(controller.promotions.items)
    state.controller = controller
    controller.listeners.extend(state.listeners)
    controller.stage_listeners.extend(state.stage_listeners)
    controller.freight_listeners.extend(state.freight_listeners)
    cluster = ClusterPromotions(kube, controller)
    state.service.target = cluster
    # Warehouses discover Freight beside the Promotion controller: own informer, leader only.
    warehouses = await start_warehouse_controller(
        kube,
        settings.work_dir,
        stack,
        namespace=settings.watch_namespace,
        credentials=state.credentials,
        git_config=settings.git_config,
        clock=state.clock,
        on_reconcile=state.metrics.on_warehouse_reconcile,
        shard=settings.shard,
        serves=controller.served.serves,
        subscribers=lambda session: http_subscribers(
            session, dict(settings.subscribers), settings.subscriber_token
        ),
    )
    controller.served.on_change.append(warehouses.enqueue_namespace)
    state.warehouses = warehouses
    cluster.warehouse_source = warehouses.all_warehouses
    if not settings.warehouse_discovery:
        log.info(
            "Warehouse discovery is off (LONGSHOREMAN_WAREHOUSE_DISCOVERY=false): "
            "no registry is polled"
        )

    async def lead() -> None:
        # What the leader runs: the Promotion controller, and the Warehouses unless turned off.
        # A TaskGroup, not gather(): cancelled (the lease lost), it returns only once both have
        # wound down, where gather() returns as soon as the first one has. The elector waits
        # for this before it campaigns again, so two generations never run side by side.
        async with asyncio.TaskGroup() as group:
            group.create_task(controller.lead())
            if settings.warehouse_discovery:
                group.create_task(warehouses.lead())

    tasks: list[asyncio.Task[None]] = []

    stack.push_async_callback(stop_tasks, tasks, "server's background loops")
    tasks.append(_supervised(state, controller.run_informers(), "informers"))
    tasks.append(_supervised(state, warehouses.run_informer(), "warehouse-informer"))
    if settings.leader_election:
        elector = LeaderElector(
            kube,
            namespace=settings.lease_namespace,
            # One Lease per shard: each shard elects its own leader.
            name=settings.shard.lease_name(settings.lease_name),
            identity=settings.identity,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
            clock=state.clock,
        )
        state.elector = elector

        async def started_leading() -> None:
            log.info("became the leader (%s)", settings.identity)
            state.metrics.leader.set(1)
            await lead()

        def stopped_leading() -> None:
            log.warning("lost the leader lease (%s): stopped reconciling", settings.identity)
            # The elector cancels controller.lead(); nothing more to stop here.
            state.metrics.leader.set(0)

        tasks.append(_supervised(state, elector.run(started_leading, stopped_leading), "leader"))
    else:
        tasks.append(_supervised(state, lead(), "reconciler"))
    state.started.set()


def _supervised(state: ServerState, coro: Any, what: str) -> asyncio.Task[None]:
    async def run() -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # surfaced on /healthz so the pod restarts
            log.exception("%s stopped", what)
            state.failure = e

    return asyncio.create_task(run(), name=f"longshoreman-{what}")


async def wait_started(app: web.Application, limit: float = 30.0) -> ServerState:
    state = app[SERVER]
    async with asyncio.timeout(limit):
        await state.started.wait()
    return state
