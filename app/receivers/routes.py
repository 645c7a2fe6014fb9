"""``POST /webhooks/<sender>[/<token>]``: registry webhooks refresh the Warehouses they concern.

One router for the family. The request path authenticates, parses and decides (all in memory,
from the Warehouse informer's cache), then answers; the refresh writes (one annotation patch per
Warehouse, which the leader's Warehouse reconciler reacts to) run after the answer on a
background task, so a push that concerns a thousand Warehouses is still acknowledged in
milliseconds:

* bad or missing credentials -> 401, nothing decided, nothing refreshed;
* a body the sender would not send -> 400 (or 501 for an Artifactory event type Kargo does not
  handle either), nothing refreshed;
* a repository no Warehouse subscribes to -> 200, nothing refreshed, one log line;
* otherwise 202 with the Warehouses being refreshed.

A request arriving before the controller has started gets 503, which every sender retries.

Beside the operator's receivers, each project's own (ProjectConfig ``webhookReceivers``,
:mod:`promoter.warehouses.project_receivers`) listens at ``/webhooks/<sender>/<hash>``, with its
sender's authentication and its Secret, and refreshes only its project's Warehouses. The
controller keeps their table; a path no receiver has is 404.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from app.receivers import forges, senders
from app.receivers.settings import TOKEN_SENDERS, ReceiverSettings
from promoter.tasks import stop_tasks
from promoter.warehouses import generic_actions
from promoter.warehouses.project_receivers import SECRET_KEYS, ProjectReceiver
from promoter.warehouses.refresh import WarehouseDirectory, warehouses_to_refresh

__all__ = ["MAX_BODY", "PATH_PREFIX", "Receivers", "setup_receivers"]

log = logging.getLogger(__name__)

# Kargo's receivers read at most 2 MiB of a body.
MAX_BODY = 2 * 1024 * 1024
# Every receiver's URL starts so (the example Ingress publishes this prefix).
PATH_PREFIX = "/webhooks/"


def _answer(status: int, **body: Any) -> web.Response:
    return web.json_response(body, status=status)


class Receivers:
    """The mounted receivers, their pending refresh writes, and what they refreshed."""

    def __init__(
        self,
        settings: ReceiverSettings,
        directory: Callable[[], WarehouseDirectory | None],
        project_receivers: Callable[[], Mapping[str, ProjectReceiver]] = dict,
    ) -> None:
        self.settings = settings
        self.directory = directory
        # The projects' own receivers by path (the controller resolves their Secrets).
        self.project_receivers = project_receivers
        self._tokens = settings.path_tokens()
        self._pending: set[asyncio.Task[None]] = set()
        self.refreshed = 0

    # ------------------------------------------------------------ routes

    def routes(self) -> web.RouteTableDef:
        table = web.RouteTableDef()
        for name in self.settings.enabled:
            if name not in TOKEN_SENDERS:
                table.post(f"{PATH_PREFIX}{name}")(self._handler(name))
        # /webhooks/<sender>/<token or hash>: the operator's unsigned senders and every
        # sender's project receivers.
        for name in SECRET_KEYS:
            table.post(f"{PATH_PREFIX}{name}/{{token}}")(self._handler(name))
        return table

    def _handler(self, sender: str) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.Response:
            if "token" in request.match_info:
                receiver = self.project_receivers().get(request.path)
                if receiver is not None and receiver.sender == sender:
                    return await self.receive(sender, request, receiver)
                if sender not in self._tokens:
                    return _answer(404, error="no such webhook receiver")
            return await self.receive(sender, request)

        handle.__name__ = f"receive_{sender}"
        return handle

    def _authentic(
        self,
        sender: str,
        request: web.Request,
        body: bytes,
        receiver: ProjectReceiver | None = None,
    ) -> bool:
        secret = receiver.secret if receiver is not None else self.settings.secret(sender) or ""
        if receiver is not None and sender in (*TOKEN_SENDERS, "azure"):
            return True  # the path (derived from its Secret) was the credential
        if sender in TOKEN_SENDERS:
            return senders.same_secret(request.match_info.get("token"), self._tokens[sender])
        if sender == "bitbucket":
            return forges.hub_signature_matches(
                request.headers.get("X-Hub-Signature"), body, secret
            )
        if sender == "gitea":
            return forges.hub_signature_matches(
                request.headers.get("X-Gitea-Signature"), body, secret
            )
        if sender == "harbor":
            return senders.same_secret(request.headers.get("Authorization"), secret)
        if sender == "gitlab":
            return senders.same_secret(request.headers.get("X-Gitlab-Token"), secret)
        if sender == "artifactory":
            return senders.hmac_sha256_matches(
                request.headers.get("X-Jfrog-Event-Auth"), body, secret
            )
        return False

    def _parse(
        self, sender: str, request: web.Request, body: bytes, virtual_repo: str
    ) -> senders.Delivery:
        if sender == "dockerhub":
            return senders.dockerhub(body)
        if sender == "quay":
            return senders.quay(body)
        if sender == "harbor":
            return senders.harbor(body)
        if sender == "gitlab":
            return senders.gitlab(body, request.headers.get("X-Gitlab-Event"))
        if sender == "artifactory":
            return senders.artifactory(body, virtual_repo)
        if sender == "bitbucket":
            return forges.bitbucket(body, request.headers.get("X-Event-Key"))
        if sender == "gitea":
            return forges.gitea(body, request.headers.get("X-Gitea-Event"))
        if sender == "azure":
            return forges.azure(body, request.headers.get("User-Agent"))
        return senders.generic(body)

    async def receive(
        self, sender: str, request: web.Request, receiver: ProjectReceiver | None = None
    ) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_BODY:
            return _answer(413, error=f"request body larger than {MAX_BODY} bytes")
        # Bounded: the application's client_max_size refuses a longer body without a length.
        body = await request.read()
        if len(body) > MAX_BODY:
            return _answer(413, error=f"request body larger than {MAX_BODY} bytes")
        if not self._authentic(sender, request, body, receiver):
            log.warning("%s webhook refused: bad or missing credentials", sender)
            return _answer(401, error="unauthorized")
        if receiver is not None and receiver.actions:
            return await self._act(receiver, request, body)
        virtual_repo = (
            receiver.virtual_repo
            if receiver is not None
            else self.settings.artifactory_virtual_repo
        )
        try:
            delivery = self._parse(sender, request, body, virtual_repo)
        except senders.BadDelivery as err:
            return _answer(err.status, error=str(err))
        if delivery.ignored:
            return _answer(200, msg=delivery.ignored)
        directory = self.directory()
        if directory is None:
            return _answer(503, error="Longshoreman is still starting; try again in a moment")
        warehouses = directory.all_warehouses()
        # A project's receiver refreshes that project's Warehouses only (Kargo's rule).
        only = receiver.project if receiver is not None else self.settings.namespace
        if only is not None:
            warehouses = [
                w for w in warehouses if (w.get("metadata") or {}).get("namespace") == only
            ]
        targets = warehouses_to_refresh(
            warehouses, delivery.repo_urls, delivery.qualifiers, delivery.changed_files
        )
        if not targets:
            log.info(
                "%s webhook for %s: no Warehouse subscribes; nothing refreshed",
                sender,
                delivery.describe(),
            )
            return _answer(200, msg="refreshed 0 warehouse(s)", warehouses=[])
        log.info(
            "%s webhook for %s: refreshing %s",
            sender,
            delivery.describe(),
            ", ".join(f"{ns}/{name}" for ns, name in targets),
        )
        task = asyncio.create_task(self._refresh(directory, targets))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return _answer(
            202,
            msg=f"refreshing {len(targets)} warehouse(s)",
            warehouses=[f"{ns}/{name}" for ns, name in targets],
        )

    async def _act(
        self, receiver: ProjectReceiver, request: web.Request, body: bytes
    ) -> web.Response:
        """A generic receiver's Kargo ``actions``: decide from the request, refresh what they
        select (before answering, since the answer says which refreshes were written)."""
        try:
            facts = generic_actions.Request.of(
                list(request.headers.items()), body, list(request.query.items())
            )
        except ValueError as err:
            return _answer(400, error=str(err))
        directory = self.directory()
        if directory is None:
            return _answer(503, error="Longshoreman is still starting; try again in a moment")
        warehouses = [
            w
            for w in directory.all_warehouses()
            if (w.get("metadata") or {}).get("namespace") == receiver.project
        ]
        results = generic_actions.plan(receiver.actions, facts, warehouses)
        for result in results:
            if not result.targets:
                continue
            outcomes = {}
            for namespace, name in result.targets:
                try:
                    await directory.refresh_warehouse(namespace, name)
                    self.refreshed += 1
                    outcomes[(namespace, name)] = True
                except Exception:
                    log.exception("could not refresh Warehouse %s/%s", namespace, name)
                    outcomes[(namespace, name)] = False
            result.finish(outcomes)
        status = 500 if any(r.is_error for r in results) else 200
        return _answer(status, results=[r.to_json() for r in results])

    async def _refresh(self, directory: WarehouseDirectory, targets: list[tuple[str, str]]) -> None:
        for namespace, name in targets:
            try:
                await directory.refresh_warehouse(namespace, name)
                self.refreshed += 1
            except Exception:
                # The next poll still discovers; one failed write must not stop the others.
                log.exception("could not refresh Warehouse %s/%s", namespace, name)

    async def drain(self) -> None:
        """Wait for the refresh writes already decided (shutdown, and tests)."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def close(self) -> None:
        await stop_tasks(self._pending, "Warehouse refreshes")


def setup_receivers(
    app: web.Application,
    settings: ReceiverSettings,
    directory: Callable[[], WarehouseDirectory | None],
    project_receivers: Callable[[], Mapping[str, ProjectReceiver]] = dict,
) -> Receivers:
    """Mount the enabled receivers on ``app``; their writes finish before it shuts down."""
    receivers = Receivers(settings, directory, project_receivers)
    app.router.add_routes(receivers.routes())

    async def finish(_: web.Application) -> None:
        await receivers.drain()

    app.on_shutdown.append(finish)
    return receivers
