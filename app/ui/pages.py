"""The status pages' routes on the server's aiohttp application, and their live updates.

Pages read the controller's informer caches (every replica keeps them warm, so any replica
serves the same pages and no request reaches the API server). Each page is a fragment inside
a layout; ``…/events`` streams the same fragment, re-rendered, as server-sent events whenever
a Promotion of the project changes (the controller's Promotion listeners wake the streams), and
at least every :data:`STREAM_REFRESH_SECONDS` so Stage health and verification show up too.
Only changed fragments are sent. The Freight page shows what the Freight would change
(:func:`app.ui.freight.diff_bases`); its commit ranges are fetched before each render through
the GitHub App's cache (:attr:`Pages.diffs`, wired in by the app; without it: versions only).

Routes: ``/ui/`` (projects, i.e. namespaces with Stages), ``/ui/projects/{ns}``,
``/ui/stages/{ns}/{name}``, ``/ui/promotions/{ns}/{name}``, each with ``/events``; the action
forms' ``POST /ui/act/{ns}`` (:mod:`app.ui.actions`); and for GitHub sign-in ``/ui/login``,
``/ui/oauth/callback``, ``/ui/logout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp_jinja2
import jinja2
from aiohttp import web
from cachetools import LRUCache

from app.ui import html as h
from app.ui.actions import (
    ACT_PATH,
    PageActions,
    freight_actions,
    project_actions,
    promotion_actions,
    stage_actions,
)
from app.ui.auth import CALLBACK_PATH, LOGIN_PATH, LOGOUT_PATH, Auth, Refused
from app.ui.freight import diff_bases, freight_page
from app.ui.settings import UiSettings
from app.ui.views import (
    Masker,
    PromotionItem,
    project_view,
    promotion_items,
    promotion_page,
    stage_view,
    window_text,
)
from promoter.chat.diff import RangeFacts, RangeKey, RangeSource, freight_diff, ranges_to_fetch
from promoter.clock import SYSTEM, Clock
from promoter.control.policies import ClusterConfig, ProjectConfig
from promoter.resources.freight_refs import FreightList, find_freight
from promoter.resources.model import Phase, name_of, namespace_of
from promoter.resources.stages import phase_of


class Cache(Protocol):
    """One kind's objects as the controller's informers hold them."""

    def items(self, namespace: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class Caches(Protocol):
    """What the pages read: the caches every replica keeps warm (the controller provides them;
    the pages never import it, so they stay a front end like handlers/ and slack/)."""

    @property
    def stages(self) -> Cache: ...

    @property
    def promotions(self) -> Cache: ...

    @property
    def freight(self) -> Cache: ...

    def synced(self) -> bool: ...

    def configs(self, namespace: str) -> tuple[ProjectConfig | None, ClusterConfig | None]:
        """The project's ProjectConfig and the ClusterConfig (deep links), as in force."""
        ...


log = logging.getLogger(__name__)

# The pages' Jinja2 environment on the server's application (aiohttp-jinja2 keeps it there).
TEMPLATES = web.AppKey("longshoreman_ui_templates", jinja2.Environment)

STREAM_REFRESH_SECONDS = 5.0
KEEPALIVE_SECONDS = 15.0
ANY_NAMESPACE = "*"


@dataclass(frozen=True, slots=True)
class Rendered:
    title: str
    fragment: str
    crumbs: tuple[tuple[str, str | None], ...]
    watch: str  # the namespace whose Promotion changes wake this page's stream


class PageEvents:
    """Wakes the pages' event streams when a Promotion changes (a controller listener)."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Event] = {}
        self.closed = asyncio.Event()

    def on_promotion(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        # Called synchronously by the informer: wake and return, never block.
        for key in (namespace_of(obj) or "default", ANY_NAMESPACE):
            event = self._waiting.pop(key, None)
            if event is not None:
                event.set()

    async def wait(self, namespace: str, at_most: float) -> None:
        """Until a Promotion of ``namespace`` changes, the server stops, or ``at_most`` s."""
        event = self._waiting.setdefault(namespace, asyncio.Event())
        changed = asyncio.ensure_future(event.wait())
        closing = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait((changed, closing), timeout=at_most, return_when="FIRST_COMPLETED")
        finally:
            for task in (changed, closing):
                task.cancel()

    def close(self) -> None:
        self.closed.set()


class NotFound(Exception):
    """The page's object does not exist; the message is safe to show."""


# Whether a signed-in login may read a project's pages (LONGSHOREMAN_UI_GITHUB_ACCESS=project:
# the GitHub front end's rule for who may act there).
Readers = Callable[[str, str], Awaitable[bool]]
# The projects the index may list for this request's user (absent: every project).
_READABLE = web.RequestKey("readable", frozenset)


class Pages:
    def __init__(
        self,
        ui: UiSettings,
        caches: Callable[[], Caches | None],
        *,
        secrets: Iterable[str | None],
        clock: Clock = SYSTEM,
        readers: Readers | None = None,
    ) -> None:
        self.ui = ui
        self.readers = readers
        self.controller = caches
        self.clock = clock
        self.auth = Auth(ui, clock)
        self.events = PageEvents()
        self.actions = PageActions(ui, self.auth, self._message)
        # Every secret the server holds, so no page can echo one (a step's message may quote
        # a URL with a token in it).
        self.masker = Masker([*secrets, ui.github_client_secret, ui.session_secret])
        self.templates = h.DEFAULT  # until setup() gives the application's own
        # Where the Freight page's commits come from (the GitHub App's cache, set by the app),
        # and what it said, for the renders, which do no I/O.
        self.diffs: RangeSource | None = None
        self._ranges: LRUCache[RangeKey, RangeFacts] = LRUCache(maxsize=1024)

    def on_promotion(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.events.on_promotion(obj, old)

    def setup(self, app: web.Application) -> None:
        # No default helpers: the templates build their URLs themselves (app.ui.html), and the
        # application's routes are not theirs to name.
        env = aiohttp_jinja2.setup(
            app, app_key=TEMPLATES, loader=h.LOADER, default_helpers=False, **h.OPTIONS
        )
        self.templates = h.configure(env)
        r = app.router
        r.add_get("/ui", _to_index)
        pages: list[tuple[str, Callable[[web.Request], Rendered]]] = [
            ("/ui/", self._index),
            ("/ui/projects/{namespace}", self._project),
            ("/ui/stages/{namespace}/{name}", self._stage),
            ("/ui/promotions/{namespace}/{name}", self._promotion),
            ("/ui/freight/{namespace}/{name}", self._freight),
        ]
        for path, render in pages:
            events = path.rstrip("/") + "/events"
            prepare = self._fetch_ranges if render == self._freight else None
            r.add_get(path, self._page(render, events_of=events, prepare=prepare))
            r.add_get(events, self._stream(render, prepare=prepare))
        r.add_post(ACT_PATH, self.actions.handle)
        r.add_get(LOGIN_PATH, self.auth.login)
        r.add_get(CALLBACK_PATH, self._callback)
        r.add_post(LOGOUT_PATH, self._logout)

        async def shutdown(_: web.Application) -> None:
            self.events.close()  # open streams end, so shutdown does not wait on them

        async def cleanup(_: web.Application) -> None:
            await self.auth.close()

        app.on_shutdown.append(shutdown)
        app.on_cleanup.append(cleanup)

    # ---- rendering --------------------------------------------------------------------------

    def _controller(self) -> Caches:
        controller = self.controller()
        if controller is None or not controller.synced():
            raise web.HTTPServiceUnavailable(
                text="Longshoreman is starting; this page will be ready in a moment.\n",
                headers={"Retry-After": "2"},
            )
        return controller

    def _index(self, request: web.Request) -> Rendered:
        c = self._controller()
        readable = request.get(_READABLE)
        namespaces = sorted(
            ns
            for ns in {namespace_of(s) or "default" for s in c.stages.items()}
            if readable is None or ns in readable
        )
        projects = []
        for ns in namespaces:
            running = sum(1 for p in c.promotions.items(ns) if phase_of(p) is Phase.RUNNING)
            projects.append((ns, len(c.stages.items(ns)), running))
        return Rendered(
            "Projects", h.index_fragment(projects, env=self.templates), (("Projects", None),), "*"
        )

    def _project(self, request: web.Request) -> Rendered:
        c = self._controller()
        ns = request.match_info["namespace"]
        stages = c.stages.items(ns)
        if not stages:
            raise NotFound(f"No project {ns!r}: that namespace has no Stages.")
        # Warehouses are optional: a controller without a Warehouse informer has no such cache,
        # and the graph then knows Warehouses by the names Stages request them by.
        warehouses: Cache | None = getattr(c, "warehouses", None)
        if not callable(getattr(warehouses, "items", None)):
            warehouses = None  # something else by that name, not an informer's cache
        view = project_view(
            ns,
            stages,
            c.promotions.items(ns),
            c.freight.items(ns),
            masker=self.masker,
            warehouses=warehouses.items(ns) if warehouses is not None else None,
            now=self.clock.now(),
        )
        return Rendered(
            f"Project {ns}",
            h.project_fragment(
                view,
                actions=project_actions(ns, view.timeline, self.actions.context(request)),
                env=self.templates,
            ),
            (("Projects", "/ui/"), (ns, None)),
            ns,
        )

    def _stage(self, request: web.Request) -> Rendered:
        c = self._controller()
        ns, name = request.match_info["namespace"], request.match_info["name"]
        stage = c.stages.get(ns, name)
        if stage is None:
            raise NotFound(f"No Stage {name!r} in project {ns!r}.")
        project, cluster = c.configs(ns)
        view = stage_view(
            stage,
            c.promotions.items(ns),
            c.freight.items(ns),
            masker=self.masker,
            project=project,
            cluster=cluster,
        )
        actions = stage_actions(
            ns,
            stage,
            c.freight.items(ns),
            self.actions.context(request),
            frozen=view.card.window,
            now=self.clock.now(),
        )
        return Rendered(
            f"Stage {name}",
            h.stage_fragment(view, actions=actions, env=self.templates),
            (("Projects", "/ui/"), (ns, h.project_path(ns)), (name, None)),
            ns,
        )

    def _freight(self, request: web.Request) -> Rendered:
        c = self._controller()
        ns, ref = request.match_info["namespace"], request.match_info["name"]
        freights = FreightList.of(c.freight.items(ns))
        freight = find_freight(ref, freights)
        if freight is None:
            raise NotFound(f"No Freight {ref!r} in project {ns!r}.")
        stages = c.stages.items(ns)
        promotions = c.promotions.items(ns)
        order = sorted(name_of(s) for s in stages)
        windows = {
            name_of(s): window_text((s.get("status") or {}).get("promotionWindowStatus"))
            for s in stages
        }
        view = freight_page(
            ns,
            freight,
            stages,
            promotions,
            freights,
            order=order,
            windows=windows,
            now=self.clock.now(),
            mask=self.masker.text,
        )
        name = name_of(freight)
        mine: list[PromotionItem] = promotion_items(
            [
                p
                for p in promotions
                if str((p.get("spec") or {}).get("freight") or "") in (name, view.alias)
            ],
            freights,
        )
        actions = freight_actions(
            ns, freight, view.promotable, view.approvable, self.actions.context(request)
        )
        diffs = [
            freight_diff(stage, current, freight, self._ranges)
            for stage, current in diff_bases(freight, stages, freights)
        ]
        changes = h.changes_fragment(ns, diffs, env=self.templates) if diffs else ""
        return Rendered(
            f"Freight {view.alias or name}",
            h.freight_fragment(view, mine, actions=actions, changes=changes, env=self.templates),
            (("Projects", "/ui/"), (ns, h.project_path(ns)), (view.alias or name, None)),
            ns,
        )

    async def _fetch_ranges(self, request: web.Request) -> None:
        """The commit ranges the Freight page's diffs show, fetched (I/O) before it renders."""
        controller = self.controller()
        if self.diffs is None or controller is None or not controller.synced():
            return
        ns, ref = request.match_info["namespace"], request.match_info["name"]
        freights = FreightList.of(controller.freight.items(ns))
        freight = find_freight(ref, freights)
        if freight is None:
            return
        keys = {
            key
            for _, current in diff_bases(freight, controller.stages.items(ns), freights)
            for key in ranges_to_fetch(current, freight)
            if key not in self._ranges
        }
        if keys:
            self._ranges.update(await self.diffs.facts(keys))

    def _promotion(self, request: web.Request) -> Rendered:
        c = self._controller()
        ns, name = request.match_info["namespace"], request.match_info["name"]
        promotion = c.promotions.get(ns, name)
        if promotion is None:
            raise NotFound(f"No Promotion {name!r} in project {ns!r}.")
        stage_name = str((promotion.get("spec") or {}).get("stage") or "")
        view = promotion_page(
            promotion,
            now=self.clock.now(),
            stage=c.stages.get(ns, stage_name),
            freights=c.freight.items(ns),
            masker=self.masker,
            argocd_url=self.ui.argocd_url,
        )
        return Rendered(
            f"Promotion {name}",
            h.promotion_fragment(
                view,
                actions=promotion_actions(ns, promotion, self.actions.context(request), view.core),
                env=self.templates,
            ),
            (
                ("Projects", "/ui/"),
                (ns, h.project_path(ns)),
                (stage_name, h.stage_path(ns, stage_name)),
                (name, None),
            ),
            ns,
        )

    def _footer(self, user: str) -> str:
        ui = self.ui
        return h.footer(
            ui.auth,
            user,
            header=ui.auth_header,
            org=ui.github_org or "",
            logout_path=LOGOUT_PATH,
            env=self.templates,
        )

    def _message(self, title: str, body: str, status: int) -> web.Response:
        """A page of its own around ``body`` (HTML): what an action did, or asks."""
        nonce = secrets.token_urlsafe(16)
        page = h.layout(
            title,
            f"<h1>{html.escape(title)}</h1>{body}",
            crumbs=(("Projects", "/ui/"),),
            nonce=nonce,
            env=self.templates,
        )
        return self._html(page, nonce, status=status)

    def _html(self, body: str, nonce: str, status: int = 200) -> web.Response:
        return web.Response(
            status=status,
            text=body,
            content_type="text/html",
            headers=self._security_headers(nonce),
        )

    @staticmethod
    def _security_headers(nonce: str) -> Mapping[str, str]:
        return {
            # Only our inline script and style run; nothing is loaded from elsewhere.
            "Content-Security-Policy": (
                f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                "form-action 'self'; frame-ancestors 'none'"
            ),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        }

    # ---- handlers ---------------------------------------------------------------------------

    def _page(
        self,
        render: Callable[[web.Request], Rendered],
        *,
        events_of: str,
        prepare: Callable[[web.Request], Awaitable[None]] | None = None,
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            user = self.auth.user(request)
            if user is None:
                return self.auth.unauthenticated(request, page=True)
            nonce = secrets.token_urlsafe(16)
            footer = self._footer(user)
            try:
                await self._check_readable(request, user)
                if prepare is not None:
                    await prepare(request)
                page = render(request)
            except NotFound as e:
                body = h.message_page(
                    "Not found", str(e), footer=footer, nonce=nonce, env=self.templates
                )
                return self._html(body, nonce, status=404)
            events = _events_path(request.rel_url.raw_path)
            body = h.layout(
                page.title,
                page.fragment,
                crumbs=page.crumbs,
                events=events,
                footer=footer,
                nonce=nonce,
                env=self.templates,
            )
            return self._html(body, nonce)

        return handler

    def _stream(
        self,
        render: Callable[[web.Request], Rendered],
        *,
        prepare: Callable[[web.Request], Awaitable[None]] | None = None,
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            user = self.auth.user(request)
            if user is None:
                return self.auth.unauthenticated(request, page=False)
            try:
                await self._check_readable(request, user)
                if prepare is not None:
                    await prepare(request)
                first = render(request)
            except NotFound as e:
                raise web.HTTPNotFound(text=f"{e}\n") from None
            response = web.StreamResponse(
                headers={
                    "Content-Type": "text/event-stream",
                    "Cache-Control": "no-store",
                    # Proxies (nginx) must pass events through as they come.
                    "X-Accel-Buffering": "no",
                }
            )
            await response.prepare(request)
            clock = self.clock
            last: str | None = None
            quiet_since = clock.monotonic()
            page: Rendered | None = first
            with contextlib.suppress(ConnectionResetError):
                await response.write(b"retry: 2000\n\n")
                while not self.events.closed.is_set():
                    if page is None:
                        await response.write(_event("gone", "deleted"))
                        break
                    if page.fragment != last:
                        await response.write(_event("update", page.fragment))
                        last, quiet_since = page.fragment, clock.monotonic()
                    elif clock.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                        await response.write(b": keepalive\n\n")
                        quiet_since = clock.monotonic()
                    await self.events.wait(first.watch, STREAM_REFRESH_SECONDS)
                    if self.auth.user(request) is None:
                        break  # the session expired: the browser reconnects and gets a 401
                    try:
                        if prepare is not None:
                            await prepare(request)
                        page = render(request)
                    except NotFound:
                        page = None
                    except web.HTTPServiceUnavailable:
                        page = Rendered("", last or "", (), first.watch)
            return response

        return handler

    async def _check_readable(self, request: web.Request, user: str) -> None:
        """Per-project access: a project this user may not read is one that does not exist
        (NotFound, so its name is not confirmed either); the index lists only readable ones."""
        if self.readers is None or self.ui.auth != "github":
            return
        namespace = request.match_info.get("namespace")
        if namespace is not None:
            if not await self.readers(user, namespace):
                raise NotFound(f"No project {namespace!r}: that namespace has no Stages.")
            return
        c = self._controller()
        names = {namespace_of(s) or "default" for s in c.stages.items()}
        request[_READABLE] = frozenset([ns for ns in names if await self.readers(user, ns)])

    async def _callback(self, request: web.Request) -> web.StreamResponse:
        if self.ui.auth != "github":
            raise web.HTTPNotFound()
        nonce = secrets.token_urlsafe(16)
        try:
            login, next_url = await self.auth.callback(request)
        except Refused as e:
            body = h.message_page(
                "Sign-in refused",
                str(e),
                footer=f'<a href="{LOGIN_PATH}">Sign in again</a>',
                nonce=nonce,
                env=self.templates,
            )
            return self._html(body, nonce, status=403)
        log.info("signed in to the status pages", extra={"user": login})
        return self.auth.signed_in(login, next_url)

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        return self.auth.signed_out()


async def _to_index(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/ui/")


def _events_path(path: str) -> str:
    return path.rstrip("/") + "/events"


def _event(name: str, data: str) -> bytes:
    # One data: line per line of the payload, as the SSE format requires. CR and CRLF end a
    # line there too: left in (from a step's output or message) they would end the event early
    # and let the rest read as fields and events of its own. HTML reads them as LF anyway.
    data = data.replace("\r\n", "\n").replace("\r", "\n")
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {name}\n{lines}\n".encode()


def setup_pages(
    app: web.Application,
    ui: UiSettings,
    caches: Callable[[], Caches | None],
    *,
    secrets: Iterable[str | None],
    clock: Clock = SYSTEM,
    readers: Readers | None = None,
) -> Pages:
    """Mount the status pages; feed :meth:`Pages.on_promotion` from the controller."""
    pages = Pages(ui, caches, secrets=secrets, clock=clock, readers=readers)
    pages.setup(app)
    return pages
