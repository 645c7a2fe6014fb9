"""The HTTP face of the emulator: kube-apiserver's REST paths, watch streaming and discovery.

Request parsing and response rendering live here; every decision about objects is made by
``Store``. Paths follow the real server:

    /api/v1/[namespaces/<ns>/]<plural>[/<name>[/status]]
    /apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>[/status]]
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from multidict import CIMultiDict

from app import fastjson
from app.apiserver import discovery, errors, negotiation, openapi, tables
from app.apiserver.admission import Admission
from app.apiserver.errors import StatusError
from app.apiserver.faults import FaultInjector, RequestInfo
from app.apiserver.negotiation import Conversion
from app.apiserver.persistence import StateFile, load_state
from app.apiserver.resources import ResourceType
from app.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector
from app.apiserver.store import (
    DEFAULT_NAMESPACES,
    FieldValidation,
    Filters,
    PatchType,
    Store,
    StoredEvent,
    Target,
)

logger = logging.getLogger(__name__)

JsonObject = dict[str, Any]

_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_PATCH_TYPES: dict[str, PatchType] = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


@dataclass(frozen=True)
class RequestRecord:
    """One request as the emulator saw it, for tests that assert on traffic."""

    method: str
    path: str
    query: str
    status: int


class ApiServer:
    """One emulator instance: its store, fault injector, watch controls and request log."""

    def __init__(
        self,
        store: Store,
        faults: FaultInjector,
        *,
        bookmark_interval: float,
        default_watch_timeout: float,
        state_file: StateFile | None,
    ) -> None:
        self.store = store
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self.state_file = state_file
        self.requests: deque[RequestRecord] = deque(maxlen=10_000)
        self.server_address = "127.0.0.1:0"
        self.open_watches = 0
        self._watch_waiters: list[tuple[int, asyncio.Future[None]]] = []

    def close_watches(self, *, abort: bool = False) -> int:
        """End every open watch stream (``abort``: drop the connection instead)."""
        return self.store.close_watches(abort=abort)

    async def wait_for_watches(self, count: int = 1, *, seconds: float = 5.0) -> None:
        """Wait until at least ``count`` watches are open.

        A watch counts as open once its starting point is fixed, so any change made after
        this returns is delivered to it. Raises ``TimeoutError`` after ``seconds``.
        """
        if self.open_watches >= count:
            return
        waiter = (count, asyncio.get_running_loop().create_future())
        self._watch_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter[1], seconds)
        finally:
            self._watch_waiters.remove(waiter)

    def _watch_count_changed(self, delta: int) -> None:
        self.open_watches += delta
        for count, future in self._watch_waiters:
            if self.open_watches >= count and not future.done():
                future.set_result(None)

    # ------------------------------------------------------------- request parsing

    def resolve(self, request: web.Request) -> Target:
        group = request.match_info.get("group", "")
        version = request.match_info.get("version", "v1")
        segments = [s for s in request.match_info["tail"].split("/") if s]
        namespace: str | None = None
        is_namespace_subresource = (
            group == "" and len(segments) == 3 and segments[2] in {"status", "finalize"}
        )
        if len(segments) >= 3 and segments[0] == "namespaces" and not is_namespace_subresource:
            namespace, segments = segments[1], segments[2:]
        if not segments or len(segments) > 3:
            raise errors.unknown_resource()
        resource = self.store.registry.lookup(group, version, segments[0])
        if resource is None:
            raise errors.unknown_resource()
        name = segments[1] if len(segments) > 1 else None
        subresource = segments[2] if len(segments) > 2 else None
        if namespace is not None and not resource.namespaced:
            raise errors.unknown_resource()
        if resource.namespaced and name is not None and namespace is None:
            raise errors.unknown_resource()
        if subresource is not None and (
            subresource != "status" or not resource.has_status(version)
        ):
            raise errors.unknown_resource()
        return Target(resource, version, namespace, name, subresource)


def _status_response(error: StatusError) -> web.Response:
    headers = CIMultiDict(error.headers)
    return web.json_response(error.to_status(), status=error.code, headers=headers)


def _json_response(code: int, body: JsonObject, warnings: Iterable[str] = ()) -> web.Response:
    headers: CIMultiDict[str] = CIMultiDict()
    for warning in warnings:
        headers.add("Warning", f"299 - {json.dumps(warning)}")
    # As the real server writes it: compact, no spaces after separators.
    return web.Response(
        body=fastjson.dumps(body), status=code, headers=headers, content_type="application/json"
    )


def _drop_connection(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "") in _TRUE


def _number(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise errors.bad_request(f"{name}: Invalid value: {raw!r}: must be an integer") from exc


def _filters(request: web.Request, target: Target) -> Filters:
    try:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(
            request.query.get("fieldSelector", ""), target.resource.field_labels(target.version)
        )
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from exc
    return Filters(namespace=target.namespace, labels=labels, fields=fields)


def _user(request: web.Request) -> str:
    """Who is asking. The emulator authenticates nobody; a client may say who it acts as with
    kubectl's ``--as`` (the ``Impersonate-User`` header), which it trusts as it trusts all."""
    return request.headers.get("Impersonate-User", "")


def _field_validation(request: web.Request) -> FieldValidation:
    value = request.query.get("fieldValidation", "Warn")
    if value not in ("Ignore", "Warn", "Strict"):
        raise errors.bad_request(
            f"fieldValidation: Unsupported value: {value!r}: supported values: "
            f'"Ignore", "Strict", "Warn"'
        )
    return value  # type: ignore[return-value]


async def _read_body(request: web.Request, *, yaml_ok: bool = False) -> Any:
    raw = await request.read()
    if not raw:
        return None
    content_type = request.content_type
    try:
        if yaml_ok or content_type in ("application/yaml", "application/apply-patch+yaml"):
            return yaml.safe_load(raw)
        return fastjson.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"error decoding request body: {exc}") from exc


def _bookmark(
    resource: ResourceType, version: str, resource_version: int, *, initial_events_end: bool = False
) -> JsonObject:
    metadata: JsonObject = {"resourceVersion": str(resource_version)}
    if resource.builtin:
        # Typed objects serialise a zero creationTimestamp as null.
        metadata["creationTimestamp"] = None
    if initial_events_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {
        "kind": resource.kind,
        "apiVersion": resource.api_version(version),
        "metadata": metadata,
    }


def _convert_event(event: StoredEvent, filters: Filters) -> tuple[str, JsonObject] | None:
    """What a filtered watcher sees of a change (cacher.go convertToWatchEvent)."""
    if event.type == "DELETED":
        return ("DELETED", event.obj) if filters.matches(event.obj) else None
    now_passes = filters.matches(event.obj)
    before_passes = event.old is not None and filters.matches(event.old)
    if now_passes and before_passes:
        return "MODIFIED", event.obj
    if now_passes:
        return "ADDED", event.obj
    if before_passes and event.old is not None:
        # Leaving the selection reads as a deletion of the previous state at the new version.
        gone = dict(event.old)
        gone["metadata"] = {**event.old["metadata"], "resourceVersion": str(event.resource_version)}
        return "DELETED", gone
    return None


class _Handlers:
    """aiohttp handlers bound to one ``ApiServer``."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self.store = server.store

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(discovery.KUBERNETES_VERSION)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def core_versions(self, request: web.Request) -> web.Response:
        return web.json_response(discovery.api_versions(self.server.server_address))

    async def groups(self, request: web.Request) -> web.Response:
        return web.json_response(discovery.api_group_list(self.store.registry))

    async def group(self, request: web.Request) -> web.Response:
        body = discovery.api_group(self.store.registry, request.match_info["group"])
        if body is None:
            raise errors.unknown_resource()
        return web.json_response(body)

    async def resource_list(self, request: web.Request) -> web.Response:
        group = request.match_info.get("group", "")
        version = request.match_info.get("version", "v1")
        body = discovery.api_resource_list(self.store.registry, group, version)
        if body is None:
            raise errors.unknown_resource()
        return web.json_response(body)

    async def openapi_index(self, request: web.Request) -> web.Response:
        return web.json_response(openapi.v3_index(self.store.registry))

    async def openapi_group_version(self, request: web.Request) -> web.Response:
        body = openapi.v3_group_version(
            self.store.registry,
            request.match_info.get("group", ""),
            request.match_info.get("version", "v1"),
            discovery.KUBERNETES_VERSION["gitVersion"],
        )
        if body is None:
            raise errors.unknown_resource()
        return _json_response(200, body)

    async def openapi_v2(self, request: web.Request) -> web.Response:
        if not openapi.accepts_json(request.headers.get("Accept")):
            raise negotiation.not_acceptable("only application/json is served for /openapi/v2")
        document = openapi.v2_document(
            self.store.registry, discovery.KUBERNETES_VERSION["gitVersion"]
        )
        return _json_response(200, document)

    async def resource(self, request: web.Request) -> web.StreamResponse:
        target = self.server.resolve(request)
        is_watch = request.method == "GET" and target.name is None and _flag(request, "watch")
        fault = self.server.faults.decide(RequestInfo(request.method, request.path, is_watch))
        if fault == "drop":
            _drop_connection(request)
            # Never reaches the client; the request log records it as 599.
            return web.Response(status=599)
        if fault == "error":
            raise errors.internal_error("injected fault")
        if fault == "throttle":
            raise errors.too_many_requests(1)
        if fault == "conflict":
            raise errors.conflict(target.resource.ref, target.name or "")
        response = await self._dispatch(request, target, is_watch)
        if fault == "drop_after":
            _drop_connection(request)
        return response

    async def _dispatch(
        self, request: web.Request, target: Target, is_watch: bool
    ) -> web.StreamResponse:
        method = request.method
        ref = target.resource.ref
        dry_run = request.query.get("dryRun") == "All"
        if target.name is None:
            if method == "GET":
                conversion = negotiation.negotiate(request.headers.get("Accept"))
                filters = _filters(request, target)
                if is_watch:
                    return await self._watch(request, target, filters, conversion)
                limit = _number(request, "limit")
                listed = self.store.list_objects(
                    target,
                    filters,
                    limit=limit,
                    continue_token=request.query.get("continue") or None,
                )
                return _json_response(
                    200, self._render(request, target, listed, conversion, is_list=True)
                )
            if target.resource.namespaced and target.namespace is None:
                raise errors.method_not_allowed(method, ref)
            if method == "POST":
                result = self.store.create(
                    target,
                    await _read_body(request),
                    dry_run=dry_run,
                    field_validation=_field_validation(request),
                    user=_user(request),
                )
                return _json_response(result.code, result.body, result.warnings)
            if method == "DELETE":
                options = await _read_body(request) or {}
                return _json_response(
                    200,
                    self.store.delete_collection(
                        target, _filters(request, target), options, dry_run=dry_run
                    ),
                )
            raise errors.method_not_allowed(method, ref)
        if method == "GET":
            conversion = negotiation.negotiate(request.headers.get("Accept"))
            shown = self.store.get(target)
            return _json_response(
                200, self._render(request, target, shown, conversion, is_list=False)
            )
        if method == "PUT":
            result = self.store.replace(
                target,
                await _read_body(request),
                dry_run=dry_run,
                field_validation=_field_validation(request),
                user=_user(request),
            )
            return _json_response(result.code, result.body, result.warnings)
        if method == "PATCH":
            patch_type = _PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise errors.unsupported_media_type(request.content_type, sorted(_PATCH_TYPES))
            result = self.store.patch(
                target,
                patch_type,
                await _read_body(request, yaml_ok=patch_type == "apply"),
                dry_run=dry_run,
                field_manager=request.query.get("fieldManager"),
                field_validation=_field_validation(request),
                user=_user(request),
            )
            return _json_response(result.code, result.body, result.warnings)
        if method == "DELETE" and target.subresource is None:
            options = await _read_body(request) or {}
            if not isinstance(options, Mapping):
                raise errors.bad_request("DeleteOptions must be an object")
            result = self.store.delete(target, options, dry_run=dry_run)
            return _json_response(result.code, result.body)
        raise errors.method_not_allowed(method, ref)

    def _render(
        self,
        request: web.Request,
        target: Target,
        body: JsonObject,
        conversion: Conversion | None,
        *,
        is_list: bool,
    ) -> JsonObject:
        """A read's result in the representation the client negotiated (handlers/response.go)."""
        if conversion is None:
            return body
        resource = target.resource
        if conversion.kind == "Table":
            include = tables.include_object(request.query)
            return self._table(target, body, conversion, include, is_list=is_list)
        if (conversion.kind == "PartialObjectMetadataList") != is_list:
            type_name = negotiation.object_type_name(
                resource.list_kind if is_list else resource.kind,
                resource.group,
                custom=resource.custom,
                is_list=is_list,
            )
            raise negotiation.not_acceptable(
                f"you requested {conversion.kind}, but the requested object is "
                f"{'a list' if is_list else 'not a list'} ({type_name})"
            )
        if not is_list:
            return tables.partial_object_metadata(body, conversion.api_version)
        return {
            "kind": "PartialObjectMetadataList",
            "apiVersion": conversion.api_version,
            "metadata": body["metadata"],
            "items": [
                tables.partial_object_metadata(item, conversion.api_version)
                for item in body["items"]
            ],
        }

    def _table(
        self,
        target: Target,
        body: JsonObject,
        conversion: Conversion,
        include: tables.IncludeObject,
        *,
        is_list: bool,
        headers: bool = True,
    ) -> JsonObject:
        resource = target.resource
        if is_list:
            # (Items of built-in lists come without apiVersion and kind; rows show them.)
            objects = [self.store.present(resource, target.version, o) for o in body["items"]]
            metadata = body["metadata"]
        else:
            objects = [body]
            version = (body.get("metadata") or {}).get("resourceVersion")
            metadata = {"resourceVersion": version} if version else {}
        return tables.build_table(
            tables.printer_for(resource, target.version),
            objects,
            api_version=conversion.api_version,
            metadata=metadata,
            include=include,
            now=self.store.current_time(),
            headers=headers,
        )

    async def _watch(
        self,
        request: web.Request,
        target: Target,
        filters: Filters,
        conversion: Conversion | None,
    ) -> web.StreamResponse:
        server = self.server
        store = self.store
        resource = target.resource
        loop = asyncio.get_running_loop()
        timeout_param = _number(request, "timeoutSeconds")
        timeout = float(timeout_param) if timeout_param else server.default_watch_timeout
        deadline = loop.time() + timeout
        bookmarks = _flag(request, "allowWatchBookmarks")
        send_initial = _flag(request, "sendInitialEvents")
        since = "" if send_initial else request.query.get("resourceVersion")

        include = (
            tables.include_object(request.query)
            if conversion is not None and conversion.kind == "Table"
            else "Metadata"
        )
        table_headers = True

        def render(obj: JsonObject) -> JsonObject:
            # Each event's object is converted on its own (watchEmbeddedEncoder): a Table with
            # one row, column definitions in the first only; a list conversion cannot apply to
            # an object and the real server then sends the object as it is.
            nonlocal table_headers
            if conversion is None or conversion.kind == "PartialObjectMetadataList":
                return obj
            if conversion.kind == "PartialObjectMetadata":
                return tables.partial_object_metadata(obj, conversion.api_version)
            table = self._table(
                target, obj, conversion, include, is_list=False, headers=table_headers
            )
            table_headers = False
            return table

        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"},
        )

        async def send(kind: str, obj: JsonObject) -> None:
            shown = obj if kind == "ERROR" else render(obj)
            await response.write(fastjson.dumps({"type": kind, "object": shown}) + b"\n")

        subscription = store.subscribe()
        abort = counted = False
        try:
            try:
                initial, cursor = store.watch_start(target, filters, since)
                server._watch_count_changed(+1)
                counted = True
            except StatusError as exc:
                if exc.code != 410:
                    raise
                # The real server answers 200 and reports expiry as an ERROR event.
                await response.prepare(request)
                await send("ERROR", exc.to_status())
                await response.write_eof()
                return response
            await response.prepare(request)
            for event in initial:
                await send("ADDED", store.present(resource, target.version, event.obj))
            if send_initial and bookmarks:
                await send(
                    "BOOKMARK", _bookmark(resource, target.version, cursor, initial_events_end=True)
                )
            next_bookmark = loop.time() + server.bookmark_interval
            while not subscription.closed and store.has_type(resource):
                subscription.wake.clear()
                # Read the log and the current version together (no await in between) so a
                # bookmark never claims a version whose events were not yet sent.
                try:
                    events = store.events_since(resource, cursor)
                except StatusError as exc:
                    await send("ERROR", exc.to_status())
                    break
                drained_up_to = store.resource_version
                for event in events:
                    converted = _convert_event(event, filters)
                    if converted is not None:
                        await send(
                            converted[0], store.present(resource, target.version, converted[1])
                        )
                cursor = max(cursor, drained_up_to)
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    await send("BOOKMARK", _bookmark(resource, target.version, cursor))
                    next_bookmark = now + server.bookmark_interval
                wait_until = min(deadline, next_bookmark if bookmarks else math.inf, now + 1.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(subscription.wake.wait(), max(0.0, wait_until - now))
                transport = request.transport
                if transport is None or transport.is_closing():
                    return response
            abort = subscription.abort
        except ConnectionResetError:
            return response
        finally:
            store.unsubscribe(subscription)
            if counted:
                server._watch_count_changed(-1)
        if abort:
            _drop_connection(request)
            return response
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response


def _make_middleware(server: ApiServer) -> Callable[..., Any]:
    @web.middleware
    async def middleware(
        request: web.Request,
        handler: Callable[[web.Request], Any],
    ) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except StatusError as exc:
            response = _status_response(exc)
        except web.HTTPException as exc:
            if exc.status == 404:
                response = _status_response(errors.unknown_resource())
            elif exc.status == 405:
                response = _status_response(StatusError(405, "MethodNotAllowed", exc.reason))
            else:
                raise
        server.requests.append(
            RequestRecord(request.method, request.path, request.query_string, response.status)
        )
        return response

    return middleware


# libyaml's loader is ~10x faster than the pure-Python one; CRDs are big.
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MANIFEST_CACHE: dict[tuple[str, int, int], list[JsonObject]] = {}


def _crds_in_file(path: Path) -> list[JsonObject]:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _MANIFEST_CACHE:
        with path.open(encoding="utf-8") as handle:
            _MANIFEST_CACHE[key] = [
                document
                for document in yaml.load_all(handle, Loader=_YAML_LOADER)
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition"
            ]
    return copy.deepcopy(_MANIFEST_CACHE[key])


def load_crd_manifests(crd_dirs: Iterable[str | Path]) -> list[JsonObject]:
    """Every CustomResourceDefinition document in ``*.yaml``/``*.yml``/``*.json`` files."""
    crds: list[JsonObject] = []
    for directory in crd_dirs:
        root = Path(directory)
        if not root.is_dir():
            raise FileNotFoundError(f"CRD directory {root} does not exist")
        for path in sorted(root.rglob("*")):
            if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
                crds.extend(_crds_in_file(path))
    return crds


APISERVER: web.AppKey[ApiServer] = web.AppKey("apiserver", ApiServer)


def create_apiserver_app(
    *,
    crd_dirs: Iterable[str | Path] = (),
    crds: Iterable[Mapping[str, Any]] = (),
    state_file: str | Path | None = None,
    event_window: int = 1000,
    bookmark_interval: float = 60.0,
    default_watch_timeout: float = 1800.0,
    faults: FaultInjector | None = None,
    require_namespaces: bool = True,
    namespaces: Iterable[str] = DEFAULT_NAMESPACES,
    strategic_merge_for_custom_resources: bool = False,
    group_aliases: Mapping[str, str] | None = None,
    admission: Admission | None = None,
    seed: int | None = 0,
    clock: Callable[[], datetime] | None = None,
    persist_debounce: float = 0.05,
) -> web.Application:
    """Build the emulator as an aiohttp application; ``apiserver_of(app)`` gives its controls.

    ``event_window`` is how many events per resource type a watch can resume from before it
    gets 410 Expired; ``bookmark_interval`` spaces BOOKMARK events; ``require_namespaces``
    refuses namespaced writes into namespaces that do not exist (NamespaceLifecycle);
    ``strategic_merge_for_custom_resources`` relaxes the real server's 415 for strategic merge
    patches of custom resources into a plain merge; ``group_aliases`` (alias -> group) serves
    each custom resource of a group under the alias group as well (see ``ResourceRegistry``);
    ``admission`` decides writes of custom resources as webhooks would (see ``admission.py``).
    """
    store = Store(
        event_window=event_window,
        clock=clock,
        seed=seed,
        require_namespaces=require_namespaces,
        initial_namespaces=namespaces,
        strategic_merge_for_custom_resources=strategic_merge_for_custom_resources,
        group_aliases=group_aliases,
        admission=admission,
    )
    persisted: StateFile | None = None
    if state_file is not None:
        persisted = StateFile(Path(state_file), store, debounce=persist_debounce)
        load_state(persisted.path, store)
        store.add_listener(persisted.mark_dirty)
    for crd in [*load_crd_manifests(crd_dirs), *crds]:
        try:
            store.apply_crd(crd)
        except StatusError as exc:
            name = (crd.get("metadata") or {}).get("name")
            raise ValueError(f"invalid CustomResourceDefinition {name}: {exc.message}") from exc

    server = ApiServer(
        store,
        faults or FaultInjector(),
        bookmark_interval=bookmark_interval,
        default_watch_timeout=default_watch_timeout,
        state_file=persisted,
    )
    handlers = _Handlers(server)
    app = web.Application(middlewares=[_make_middleware(server)])
    app[APISERVER] = server
    router = app.router
    # The generated clients ask for "/version/", "/apis/" and the like: accept both spellings.
    discovery_routes: list[tuple[str, Callable[[web.Request], Any]]] = [
        ("/version", handlers.version),
        ("/healthz", handlers.healthz),
        ("/readyz", handlers.healthz),
        ("/livez", handlers.healthz),
        ("/api", handlers.core_versions),
        ("/api/v1", handlers.resource_list),
        ("/apis", handlers.groups),
        ("/apis/{group}", handlers.group),
        ("/apis/{group}/{version}", handlers.resource_list),
        ("/openapi/v2", handlers.openapi_v2),
        ("/openapi/v3", handlers.openapi_index),
        ("/openapi/v3/api/{version}", handlers.openapi_group_version),
        ("/openapi/v3/apis/{group}/{version}", handlers.openapi_group_version),
    ]
    for path, handler in discovery_routes:
        router.add_get(path, handler)
        router.add_get(path + "/", handler)
    router.add_route("*", "/api/v1/{tail:.+}", handlers.resource)
    router.add_route("*", "/apis/{group}/{version}/{tail:.+}", handlers.resource)

    async def on_startup(_: web.Application) -> None:
        if persisted is not None:
            persisted.mark_dirty()

    async def on_shutdown(_: web.Application) -> None:
        # Open watches would otherwise hold shutdown until their timeout.
        server.close_watches()

    async def on_cleanup(_: web.Application) -> None:
        if persisted is not None:
            await persisted.flush()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    return app


def apiserver_of(app: web.Application) -> ApiServer:
    """The controls (store, faults, watches, request log) of an emulator app."""
    return app[APISERVER]


@asynccontextmanager
async def serve_apiserver(
    app: web.Application, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Run ``app`` on ``host`` (an ephemeral port by default) and yield its base URL."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        app[APISERVER].server_address = f"{bound_host}:{bound_port}"
        yield f"http://{bound_host}:{bound_port}"
    finally:
        await runner.cleanup()
