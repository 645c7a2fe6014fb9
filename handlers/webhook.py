"""``POST /github/webhook`` and the GitHub integration's lifecycle.

The request path only verifies, deduplicates and queues; it answers in milliseconds:

1. ``X-Hub-Signature-256`` is checked by gidgethub's ``Event.from_http`` with the webhook secret:
   missing or wrong -> 401 and nothing else happens; a body that is not JSON -> 400/415. A
   request without a well-formed signature header is refused before its body is read, and
   bodies are read only within :data:`UNVERIFIED_BUDGET` (503 past it).
2. ``ping`` -> 200.
3. A ``X-GitHub-Delivery`` seen in the last hour -> 200 "duplicate", not processed again (GitHub
   retries and manual redeliveries reuse the id).
4. Otherwise the event is queued on a :class:`~handlers.queue.KeyedQueue` under its ordering key
   (:func:`handlers.routing.ordering_key`) and answered 202; a full backlog answers 503.

Workers then dispatch to every matching handler (:func:`handlers.routing.dispatch`).
:func:`setup_github` wires the route, the workers and the client session into an aiohttp
application, and subscribes :class:`~handlers.progress.Progress` to the controller's Promotion
changes when given the controller's ``listeners`` list.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import gidgethub
from aiohttp import web
from cachetools import TTLCache
from gidgethub import sansio

from handlers import routing
from handlers.acting import GitHubActing
from handlers.client import GitHubClient, RetryPolicy
from handlers.context import Deps, Permissions
from handlers.git_credentials import GitHubGitCredentials
from handlers.git_database import GitHubGitDatabase
from handlers.progress import Progress
from handlers.pull_requests import GitHubPullRequests
from handlers.queue import KeyedQueue
from handlers.settings import GitHubSettings
from promoter.chat.port import PromotionService
from promoter.clock import SYSTEM, Clock
from promoter.ports.telemetry import NO_TELEMETRY, Telemetry, log_context

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/github/webhook"
DELIVERY_TTL = 3600.0
DELIVERY_MEMORY = 100_000
# GitHub caps webhook payloads at 25 MB; aiohttp's default request limit (1 MiB) would refuse
# big push events, so the body is read here with GitHub's own cap.
MAX_BODY = 25 * 1024 * 1024
# Bytes of bodies being read before their signature is checked, across all requests: two of
# GitHub's largest deliveries at once; past it a delivery is answered 503 (redeliver later).
UNVERIFIED_BUDGET = 2 * MAX_BODY
_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")

Listener = Callable[[dict[str, Any], dict[str, Any] | None], None]


class GitHubIntegration:
    """Everything the GitHub side runs: client, queue, handlers' deps, progress reporting."""

    def __init__(
        self,
        settings: GitHubSettings,
        service: PromotionService,
        *,
        client: GitHubClient | None = None,
        policy: RetryPolicy | None = None,
        max_pending: int = 10_000,
        telemetry: Telemetry = NO_TELEMETRY,
        on_token: Callable[[str], None] | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        if not settings.enabled or not settings.webhook_secret:
            raise ValueError(
                "GitHub is not configured: LONGSHOREMAN_GITHUB_APP_ID and "
                "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET"
            )
        self.settings = settings
        self.telemetry = telemetry
        self.client = client or GitHubClient(
            settings,
            policy=policy,
            telemetry=telemetry,
            on_token=on_token,
            clock=lambda: clock.now().timestamp(),
        )
        self.queue = KeyedQueue(workers=settings.webhook_workers, max_pending=max_pending)
        self.deps = Deps(settings, self.client, service, Permissions(clock=clock), clock=clock)
        self.progress = Progress(self.deps, self.queue)
        # The status pages' actions for people signed in with GitHub (app.ui.actions).
        self.acting = GitHubActing(self.deps)
        self.deps.forget_deployment = self.progress.environments.forget
        # The step port: put it at StepServices.extra["github"] when building the controller.
        self.pull_requests = GitHubPullRequests(self.client)
        # github-push's port: put it at StepServices.extra["github-git"].
        self.git_database = GitHubGitDatabase(self.client)
        # The git steps' credentials: put it at GitSettings.credentials.
        self.git_credentials = GitHubGitCredentials(self.client, clock=clock)
        self._seen: TTLCache[str, bool] = TTLCache(
            maxsize=DELIVERY_MEMORY, ttl=DELIVERY_TTL, timer=clock.monotonic
        )
        self._unverified = 0  # bytes being read before their signature is checked

    @property
    def service(self) -> PromotionService:
        return self.deps.service

    def on_promotion(self, promotion: dict[str, Any], old: dict[str, Any] | None) -> None:
        """The controller listener (see ``Controller.listeners``)."""
        self.progress.on_promotion(promotion, old)

    def on_stage(self, stage: dict[str, Any], old: dict[str, Any] | None) -> None:
        """The controller's Stage listener (``Controller.stage_listeners``): verify check runs."""
        self.progress.on_stage(stage, old)

    def on_freight(self, freight: dict[str, Any], old: dict[str, Any] | None) -> None:
        """The controller's Freight listener (``Controller.freight_listeners``): an approval
        shows on the check runs that report the Freight."""
        self.progress.on_freight(freight, old)

    async def lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        """For ``app.cleanup_ctx``: one client session for the app's life; drain on the way out."""
        await self.client.start()
        try:
            yield
        finally:
            await self.queue.close()
            await self.client.close()

    # ---- the request path ---------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        # Until the signature is verified, the event header is a stranger's text: it must not
        # become a metric label (each distinct value would be a new series).
        count = self.telemetry.webhook_delivery
        # Signature before body: a request without a well-formed signature is refused before a
        # byte of its body is read, and bodies that may be signed are read only within a budget
        # shared by every request not verified yet, so a flood of large unsigned (or wrongly
        # signed) bodies costs no more memory than UNVERIFIED_BUDGET.
        if not _SIGNATURE.fullmatch(request.headers.get("X-Hub-Signature-256", "")):
            count("github", "unverified", "invalid_signature")
            return _answer(401, "signature missing or invalid")
        if (request.content_length or 0) > MAX_BODY:
            count("github", "unverified", "too_large")
            return _answer(413, "payload larger than GitHub sends")
        # A chunked body (no Content-Length) may be as large as GitHub's limit.
        reserved = MAX_BODY if request.content_length is None else request.content_length
        if self._unverified + reserved > UNVERIFIED_BUDGET:
            count("github", "unverified", "busy")
            return _answer(503, "busy; redeliver later")
        self._unverified += reserved
        try:
            # StreamReader.read(n) returns what has arrived so far (often one TCP chunk), not
            # n bytes: read to the end, stopping once past the limit.
            body = await _read_body(request, reserved)
        finally:
            self._unverified -= reserved
        if len(body) > reserved:
            count("github", "unverified", "too_large")
            return _answer(413, "payload larger than GitHub sends")
        try:
            event = sansio.Event.from_http(
                request.headers, body, secret=self.settings.webhook_secret
            )
        except gidgethub.ValidationFailure as e:
            log.warning(
                "webhook refused: %s",
                e,
                extra={"delivery_id": request.headers.get("X-GitHub-Delivery")},
            )
            count("github", "unverified", "invalid_signature")
            return _answer(401, "signature missing or invalid")
        except gidgethub.BadRequest as e:
            # gidgethub raises 415 for a content type it cannot decode, and for a body that is
            # not JSON at all.
            count("github", "unverified", "bad_request")
            return _answer(int(e.status_code), "expected a JSON body (application/json)")
        except KeyError as e:
            count("github", "unverified", "bad_request")
            return _answer(400, f"missing header {e.args[0]}")
        if not isinstance(event.data, dict):
            count("github", event.event, "bad_request")
            return _answer(400, "expected a JSON object")
        extra = {"delivery_id": event.delivery_id, "github_event": event.event}
        if event.event == "ping":
            log.info("ping from GitHub: %s", event.data.get("zen"), extra=extra)
            count("github", event.event, "ping")
            return _answer(200, "pong")
        if not event.delivery_id:
            count("github", event.event, "bad_request")
            return _answer(400, "missing X-GitHub-Delivery")
        if event.delivery_id in self._seen:
            log.info("duplicate delivery ignored", extra=extra)
            count("github", event.event, "duplicate")
            return _answer(200, "duplicate delivery; already accepted")
        key = routing.ordering_key(event)
        if not self.queue.submit(key, lambda: self._process(event)):
            log.warning("webhook backlog full; refusing delivery", extra=extra)
            count("github", event.event, "busy")
            return _answer(503, "busy; redeliver later")
        self._seen[event.delivery_id] = True
        count("github", event.event, "accepted")
        log.debug(
            "accepted %s in %.1f ms",
            event.event,
            (time.perf_counter() - started) * 1e3,
            extra=extra,
        )
        return _answer(202, "accepted")

    async def _process(self, event: sansio.Event) -> None:
        # Every line the handlers log for this delivery carries its id.
        with log_context(delivery_id=event.delivery_id):
            failed = await routing.dispatch(event, self.deps)
            self.telemetry.webhook_delivery(
                "github", event.event, "failed" if failed else "handled"
            )


def _answer(status: int, message: str) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps({"message": message}).encode(),
        content_type="application/json",
    )


def setup_github(
    app: web.Application,
    settings: GitHubSettings,
    service: PromotionService,
    *,
    listeners: list[Listener] | None = None,
    stage_listeners: list[Listener] | None = None,
    client: GitHubClient | None = None,
    policy: RetryPolicy | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    on_token: Callable[[str], None] | None = None,
    clock: Clock = SYSTEM,
) -> GitHubIntegration:
    """Add ``POST /github/webhook`` and the background workers to ``app``.

    ``listeners`` is the controller's ``listeners`` list: check runs and command replies follow
    Promotions through it (on the leader only); ``stage_listeners`` (the controller's
    ``stage_listeners``) likewise carries verifications to ``verify:`` check runs. Put
    ``integration.pull_requests`` at ``StepServices.extra["github"]`` for the pull-request steps,
    ``integration.git_database`` at ``StepServices.extra["github-git"]`` for ``github-push`` and
    ``integration.git_credentials`` at ``GitSettings.credentials`` for the git steps.
    """
    integration = GitHubIntegration(
        settings,
        service,
        client=client,
        policy=policy,
        telemetry=telemetry,
        on_token=on_token,
        clock=clock,
    )
    app.router.add_post(WEBHOOK_PATH, integration.handle)
    app.cleanup_ctx.append(integration.lifecycle)
    if listeners is not None:
        listeners.append(integration.on_promotion)
    if stage_listeners is not None:
        stage_listeners.append(integration.on_stage)
    return integration


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The whole request body, or its first ``limit + 1`` bytes when it is longer."""
    body = bytearray()
    while len(body) <= limit:
        chunk = await request.content.read(limit + 1 - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)
