"""The one module of Longshoreman that talks to the Kubernetes API server.

Everything else (informers, leader election, the controllers) goes through ``Kube``, which
speaks plain JSON dicts and raises errors with kinds instead of HTTP exceptions:

* ``NotFound`` and ``Conflict`` are answers a caller acts on (create it, re-read and retry);
* ``Invalid`` is permanent: sending the same request again fails the same way;
* ``TemporaryError`` (5xx, 429, dropped connections, timeouts) is worth retrying later,
  after ``retry_after`` seconds when the server said so;
* ``Gone`` ends a watch whose resourceVersion is too old: relist.

The shape follows gidgethub: request building and response interpretation are pure functions
(``resource_path``, ``error_for``, ``event_for``); ``Kube._send`` carries all the I/O. It rides
on ``kubernetes.aio``'s ``ApiClient`` for configuration, TLS and token refresh, but skips its
generated models: ``CustomObjectsApi`` would already hand us dicts for our own kinds, and raw
JSON keeps Events and Leases the same shape without a model round trip.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config
from yarl import URL

from app import fastjson
from promoter.clock import SYSTEM, Clock
from promoter.resources.annotations import GROUP, KARGO_GROUP

logger = logging.getLogger(__name__)

JsonObject = dict[str, Any]
# A JSON patch: a list of operations (named so ``Kube.list`` does not shadow ``list``).
JsonPatch = list[JsonObject]
OnRequest = Callable[[str, str, int | None], None]
PatchType = Literal["merge", "json"]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
# kube-apiserver rejects longer Event messages on events.k8s.io and kubectl truncates them
# the same way; staying under the limit keeps a long step error from losing the whole event.
_EVENT_MESSAGE_LIMIT = 1024
# Requests other than watches are bounded by an asyncio.timeout around them (see Kube._json).
_NO_TOTAL_TIMEOUT = aiohttp.ClientTimeout(total=None)


# ---------------------------------------------------------------------- resource types


@dataclass(frozen=True, slots=True)
class ResourceType:
    """Where a kind lives in the API.

    ``status_subresource`` is False for kinds whose CRD declares no ``/status`` (Argo CD
    Application, Argo Rollouts AnalysisRun): their status is written through the main resource.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def served_in(self, api_group: str) -> ResourceType:
        """This type where a cluster serving our kinds in ``api_group`` has it (others as is)."""
        return replace(self, group=api_group) if self.group == OUR_GROUP else self


# Our kinds, named in our group everywhere above this module. A cluster may have their CRDs in
# Kargo's group instead (LONGSHOREMAN_API_GROUP, deploy/kargo-group): ``Kube(api_group=...)``
# then sends the same requests there, so nothing else knows which group the cluster serves.
OUR_GROUP = GROUP
API_GROUPS = (OUR_GROUP, KARGO_GROUP)
_OURS = (OUR_GROUP, "v1alpha1")
_ARGO = ("argoproj.io", "v1alpha1")

PROMOTIONS = ResourceType(*_OURS, "promotions", "Promotion")
STAGES = ResourceType(*_OURS, "stages", "Stage")
FREIGHT = ResourceType(*_OURS, "freights", "Freight")
WAREHOUSES = ResourceType(*_OURS, "warehouses", "Warehouse")
PROMOTION_TASKS = ResourceType(*_OURS, "promotiontasks", "PromotionTask")
CLUSTER_PROMOTION_TASKS = ResourceType(
    *_OURS, "clusterpromotiontasks", "ClusterPromotionTask", namespaced=False
)
PROJECT_CONFIGS = ResourceType(*_OURS, "projectconfigs", "ProjectConfig")
CLUSTER_CONFIGS = ResourceType(*_OURS, "clusterconfigs", "ClusterConfig", namespaced=False)
APPLICATIONS = ResourceType(*_ARGO, "applications", "Application", status_subresource=False)
ANALYSIS_TEMPLATES = ResourceType(
    *_ARGO, "analysistemplates", "AnalysisTemplate", status_subresource=False
)
CLUSTER_ANALYSIS_TEMPLATES = ResourceType(
    *_ARGO,
    "clusteranalysistemplates",
    "ClusterAnalysisTemplate",
    namespaced=False,
    status_subresource=False,
)
ANALYSIS_RUNS = ResourceType(*_ARGO, "analysisruns", "AnalysisRun", status_subresource=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", status_subresource=False)
EVENTS = ResourceType("", "v1", "events", "Event", status_subresource=False)
# Read one at a time by name, for secret() and configMap() (app/controller/clusterdata.py).
NAMESPACES = ResourceType(
    "", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=False
)
SECRETS = ResourceType("", "v1", "secrets", "Secret", status_subresource=False)
CONFIG_MAPS = ResourceType("", "v1", "configmaps", "ConfigMap", status_subresource=False)


# ----------------------------------------------------------------------------- errors


class KubeError(Exception):
    """A request to the API server failed. The message names the request, never credentials."""

    def __init__(
        self, message: str, *, status: int | None = None, reason: str = "", server_message: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        # The API server's own words (the Status message), for showing to a user as they are.
        self.server_message = server_message or message


class NotFound(KubeError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class Conflict(KubeError):
    """409: a stale resourceVersion (``reason == "Conflict"``) or ``"AlreadyExists"``."""


T = TypeVar("T")

# client-go's retry.DefaultRetry: five attempts.
CONFLICT_ATTEMPTS = 5


async def retry_on_conflict(
    attempt: Callable[[int], Awaitable[T]], *, attempts: int = CONFLICT_ATTEMPTS
) -> T:
    """client-go's ``retry.RetryOnConflict``: ``attempt(n)`` (n from 0) until it does not raise
    ``Conflict``; the last ``Conflict`` propagates after ``attempts`` of them.

    An attempt reads what it writes over (the cache the first time, the API server after a
    conflict) and decides again on that, so a write never overwrites a newer object blindly.
    No pause between attempts: the conflict told us a newer version exists, and the next
    attempt reads it.
    """
    for n in range(attempts):
        try:
            return await attempt(n)
        except Conflict:
            if n + 1 == attempts:
                raise
    raise ValueError("retry_on_conflict needs attempts >= 1")


class Invalid(KubeError):
    """400/422: the request itself is wrong; retrying it cannot help."""


class TooLarge(Invalid):
    """413, or etcd's "request is too large": the object (or the request) is over the API
    server's size limit (3 MiB a request, 1.5 MiB an object in etcd; aiohttp's 1 MiB in the
    emulator). The same write can never succeed, so it is not retried."""


class Gone(KubeError):
    """410: the resourceVersion a watch (or a list continuation) asked for has expired."""


class TemporaryError(KubeError):
    """5xx, 429, a dropped connection or a timeout: try again, after ``retry_after`` if set."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retry_after: float | None = None,
        server_message: str = "",
    ) -> None:
        super().__init__(message, status=status, reason=reason, server_message=server_message)
        self.retry_after = retry_after


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = SYSTEM.now().timestamp() if now is None else now
    return max(0.0, moment.timestamp() - current)


def _status_fields(body: Any) -> tuple[str, str, JsonObject]:
    """(reason, message, details) of a ``Status`` body, tolerating non-Status bodies."""
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        details = body.get("details")
        return (
            str(body.get("reason") or ""),
            str(body.get("message") or ""),
            dict(details) if isinstance(details, Mapping) else {},
        )
    return "", "", {}


def error_for(status: int, body: Any, headers: Mapping[str, str], *, request: str) -> KubeError:
    """The ``KubeError`` for a failed response; ``request`` is e.g. ``"GET /apis/..."``."""
    reason, message, details = _status_fields(body)
    text = f"{request}: {status} {reason or 'Error'}" + (f": {message}" if message else "")
    said = {"server_message": message}
    if status == 404:
        return NotFound(text, status=status, reason=reason or "NotFound", **said)
    if status == 409:
        return Conflict(text, status=status, reason=reason or "Conflict", **said)
    if status == 410:
        return Gone(text, status=status, reason=reason or "Expired", **said)
    if status == 413 or "request is too large" in message.lower():
        return TooLarge(text, status=status, reason=reason or "RequestEntityTooLarge", **said)
    if status in (400, 422):
        return Invalid(text, status=status, reason=reason or "Invalid", **said)
    if status == 429 or status >= 500:
        retry_after = parse_retry_after(headers.get("Retry-After"))
        if retry_after is None and isinstance(details.get("retryAfterSeconds"), int | float):
            retry_after = float(details["retryAfterSeconds"])
        return TemporaryError(text, status=status, reason=reason, retry_after=retry_after, **said)
    return KubeError(text, status=status, reason=reason, **said)


# ------------------------------------------------------------------ request building


def resource_path(
    rt: ResourceType,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection, an object or an object's subresource."""
    root = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    parts = [root]
    if rt.namespaced and namespace is not None:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    elif not rt.namespaced and namespace:
        raise ValueError(f"{rt.kind} is cluster-scoped; got namespace {namespace!r}")
    parts.append(rt.plural)
    if name is not None:
        parts.append(quote(name, safe=""))
        if subresource is not None:
            parts.append(subresource)
    return "/".join(parts)


def _object_ref(obj: Mapping[str, Any]) -> tuple[str | None, str]:
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise ValueError("object has no metadata.name")
    return metadata.get("namespace"), str(name)


def _with_type(rt: ResourceType, obj: JsonObject) -> JsonObject:
    # Items of built-in lists (and some watch objects) carry no TypeMeta on the wire.
    obj.setdefault("apiVersion", rt.api_version)
    obj.setdefault("kind", rt.kind)
    return obj


_ABSENT: Any = object()


def merge_patch_between(old: Mapping[str, Any], new: Mapping[str, Any]) -> JsonObject:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: removed keys as null,
    changed values, objects recursed into; lists are replaced whole. Empty when equal.

    With a resourceVersion precondition it is exact, and it keeps writes small: the API
    server decodes, merges and validates only what changed.
    """
    patch: JsonObject = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key, _ABSENT)
        if before is _ABSENT or value is None:
            patch[key] = value
        elif before == value:
            continue
        elif isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = merge_patch_between(before, value)
        else:
            patch[key] = value
    return patch


def micro_time(moment: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds, e.g. ``...T10:00:00.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_for(
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    type: str,
    component: str,
    now: datetime,
    annotations: Mapping[str, str] | None = None,
) -> JsonObject:
    """A core/v1 Event about ``involved``, named the way client-go's recorder names them (with
    ``annotations``, as client-go's ``AnnotatedEventf`` records Kargo's event data)."""
    metadata = involved.get("metadata") or {}
    name = str(metadata.get("name") or "unknown")
    # Cluster-scoped objects get their events in "default", as client-go's recorder does.
    namespace = metadata.get("namespace") or "default"
    reference: JsonObject = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": name,
    }
    if metadata.get("namespace"):
        reference["namespace"] = metadata["namespace"]
    for source, target in (("uid", "uid"), ("resourceVersion", "resourceVersion")):
        if metadata.get(source):
            reference[target] = metadata[source]
    stamp = _time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.{int(now.timestamp() * 1e9):x}",
            "namespace": namespace,
            **({"annotations": dict(annotations)} if annotations else {}),
        },
        "involvedObject": {k: v for k, v in reference.items() if v is not None},
        "reason": reason,
        "message": message[:_EVENT_MESSAGE_LIMIT],
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


# --------------------------------------------------------------------------- client


def settle_proxy_settings(api_client: aio_client.ApiClient) -> None:
    """Look up the proxy for the API server in the environment once, not on every request.

    ``kubernetes.aio`` opens its aiohttp session with ``trust_env=True``, so aiohttp reads
    ``HTTP(S)_PROXY``/``NO_PROXY`` and ``~/.netrc`` again for every request, in two thread-pool
    hops: 40% of the controller's CPU in ``bench/bench_scale.py``. The environment does not
    change while we run, so the answer is taken once here and handed to the client as its
    explicit proxy, and the per-request lookups are turned off. A proxy from the kubeconfig
    (``proxy-url``) or an explicit ``client_session_kwargs["trust_env"]`` wins. ``~/.netrc``
    is not consulted: credentials for the API server come from the kubeconfig (client-go does
    not read it either). Does nothing once the client has sent a request.
    """
    rest = api_client.rest_client
    configuration = api_client.configuration
    if rest.pool_manager is not None:
        return
    session_kwargs = dict(getattr(configuration, "client_session_kwargs", None) or {})
    if "trust_env" in session_kwargs:
        return
    if not rest.proxy and configuration.host:
        try:
            proxy, auth = get_env_proxy_for_url(URL(configuration.host))
        except LookupError:  # no proxy configured for this host, or NO_PROXY covers it
            pass
        else:
            if auth is not None:
                # Credentials stay in the URL, where aiohttp turns them into
                # Proxy-Authorization for plain and CONNECT requests alike.
                proxy = proxy.with_user(auth.login).with_password(auth.password)
            rest.proxy = str(proxy)
    configuration.client_session_kwargs = {**session_kwargs, "trust_env": False}


_USERINFO = re.compile(r"(//)[^/@\s]+@")


def _masked(exc: BaseException) -> str:
    """The exception's text without any ``user:password@`` of a URL in it."""
    return _USERINFO.sub(r"\1***@", str(exc))


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return fastjson.loads(raw)
    except ValueError:
        return None


class Kube:
    """JSON-in, JSON-out access to the API server with typed errors.

    ``on_request(method, plural, status)`` is called once per request (status None when no
    response arrived): metrics, and counting API calls in benchmarks and tests.
    ``list_page_size`` bounds each list response; ``list`` follows the pages, which the server
    serves from one snapshot (the continue token pins the first page's resourceVersion).
    ``api_group`` is where the cluster serves our kinds (``API_GROUPS``): callers name them in
    ours (``STAGES``, ...) and objects come back with the apiVersion the cluster gave them.
    """

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        *,
        request_timeout: float = 30.0,
        on_request: OnRequest | None = None,
        list_page_size: int = 500,
        clock: Clock = SYSTEM,
        api_group: str = OUR_GROUP,
    ) -> None:
        if api_group not in API_GROUPS:
            raise ValueError(f"api_group {api_group!r}: expected one of {', '.join(API_GROUPS)}")
        settle_proxy_settings(api_client)
        self.api_group = api_group
        self.api_client = api_client
        self.clock = clock  # the time Events are stamped with
        self.request_timeout = request_timeout
        self.on_request = on_request
        self.list_page_size = list_page_size

    # ----------------------------------------------------------------- transport

    async def _send(
        self,
        method: str,
        rt: ResourceType,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout,
    ) -> Any:
        """Send one request; return the raw ``RESTResponse`` after checking its status.

        All I/O of this module funnels through here. Non-2xx answers become ``KubeError``s;
        connection failures and timeouts become ``TemporaryError``.
        """
        request = f"{method} {path}"
        status: int | None = None
        try:
            # The body goes to call_api as is: it is plain JSON already, and the generated
            # client's sanitize_for_serialization (a walk over every value, for its model
            # classes) cost ~5% of the controller's CPU.
            method_, url, headers, _, post_params = await self.api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                auth_settings=["BearerToken"],
            )
            response = await self.api_client.call_api(
                method_,
                url,
                headers,
                body,
                post_params,
                _request_timeout=client_timeout,
            )
            status = int(response.status)
            if not 200 <= status < 300:
                raw = await response.read()  # type: ignore[no-untyped-call]
                raise error_for(status, _decode(raw), response.headers, request=request)
            return response
        except KubeError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            # str(exc) of aiohttp errors names host and path at most, never headers/tokens;
            # a proxy URL's credentials are masked in case one shows up.
            raise TemporaryError(f"{request}: {type(exc).__name__}: {_masked(exc)}") from exc
        finally:
            if self.on_request is not None:
                self.on_request(method, rt.plural, status)

    async def _json(
        self,
        method: str,
        rt: ResourceType,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> JsonObject:
        try:
            # The bound on the whole exchange is an asyncio.timeout, not aiohttp's
            # ClientTimeout(total=...): aiohttp enters that timer twice per request (the
            # request, then reading the status line) and takes back one cancel per exit, so
            # when it fires in the loop pass in which the caller is cancelled, the caller's
            # cancel is lost and a stopping task (the leader elector) runs on.
            async with asyncio.timeout(self.request_timeout):
                response = await self._send(
                    method,
                    rt,
                    path,
                    query=query,
                    body=body,
                    content_type=content_type,
                    client_timeout=_NO_TOTAL_TIMEOUT,
                )
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TemporaryError(f"{method} {path}: {type(exc).__name__}: {_masked(exc)}") from exc
        decoded = _decode(raw)
        if not isinstance(decoded, dict):
            raise TemporaryError(f"{method} {path}: response is not a JSON object")
        return decoded

    # ---------------------------------------------------------------------- reads

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
        rt = rt.served_in(self.api_group)
        return _with_type(rt, await self._json("GET", rt, resource_path(rt, namespace, name)))

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> tuple[list[JsonObject], str]:
        """Every matching object (apiVersion/kind filled in) and the list's resourceVersion."""
        rt = rt.served_in(self.api_group)
        path = resource_path(rt, namespace)
        items: list[JsonObject] = []
        resource_version = ""
        continue_token = ""
        while True:
            query = [("limit", str(self.list_page_size))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if continue_token:
                query.append(("continue", continue_token))
            page = await self._json("GET", rt, path, query=query)
            metadata = page.get("metadata") or {}
            if not resource_version:
                resource_version = str(metadata.get("resourceVersion") or "")
            items.extend(_with_type(rt, item) for item in page.get("items") or [])
            continue_token = str(metadata.get("continue") or "")
            if not continue_token:
                return items, resource_version

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = 300,
        label_selector: str | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[tuple[str, JsonObject], None]:
        """Changes after ``resource_version``, as (type, object) pairs, in order.

        Ends normally when the server closes the stream (its timeout, or a restart); raises
        ``Gone`` when the resourceVersion has expired (HTTP 410 or an ERROR event carrying
        410), ``TemporaryError`` when the connection breaks mid-stream. Close the iterator
        (``contextlib.aclosing``) when stopping early so the connection is released.
        """
        rt = rt.served_in(self.api_group)
        path = resource_path(rt, namespace)
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        # No total timeout: the server ends the stream after timeoutSeconds. A read timeout a
        # little beyond that catches a connection that died silently (no FIN, no RST).
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=self.request_timeout,
            sock_read=timeout_seconds + self.request_timeout,
        )
        response = await self._send("GET", rt, path, query=query, client_timeout=timeout)
        stream = response.response
        request = f"GET {path}"
        completed = False
        try:
            buffer = b""
            try:
                async for chunk in stream.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        event = self._watch_event(rt, line, request)
                        if event is not None:
                            yield event
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise TemporaryError(f"{request}: watch broke: {type(exc).__name__}") from exc
            event = self._watch_event(rt, buffer, request)
            if event is not None:
                yield event
            completed = True
        finally:
            # A stream abandoned midway cannot go back to the pool: close its connection.
            if completed:
                stream.release()
            else:
                stream.close()

    @staticmethod
    def _watch_event(rt: ResourceType, line: bytes, request: str) -> tuple[str, JsonObject] | None:
        if not line.strip():
            return None
        decoded = _decode(line)
        if not isinstance(decoded, dict) or not isinstance(decoded.get("object"), dict):
            raise TemporaryError(f"{request}: undecodable watch event")
        kind = str(decoded.get("type"))
        obj: JsonObject = decoded["object"]
        if kind == "ERROR":
            code = obj.get("code")
            raise error_for(code if isinstance(code, int) else 500, obj, {}, request=request)
        return kind, _with_type(rt, obj)

    async def serves(self, api_group: str) -> bool:
        """Whether the cluster serves our kinds in ``api_group`` (its discovery document)."""
        rt = STAGES.served_in(api_group)
        try:
            await self._json("GET", rt, f"/apis/{rt.group}/{rt.version}")
        except NotFound:
            return False
        return True

    # --------------------------------------------------------------------- writes

    async def create(self, rt: ResourceType, obj: JsonObject) -> JsonObject:
        rt = rt.served_in(self.api_group)
        namespace = (obj.get("metadata") or {}).get("namespace")
        if rt.namespaced and not namespace:
            raise ValueError(f"a {rt.kind} needs metadata.namespace")
        body = {**obj, "apiVersion": rt.api_version, "kind": rt.kind}
        path = resource_path(rt, namespace if rt.namespaced else None)
        return _with_type(rt, await self._json("POST", rt, path, body=body))

    async def replace(self, rt: ResourceType, obj: JsonObject) -> JsonObject:
        """PUT ``obj``; its ``metadata.resourceVersion`` makes a stale write a ``Conflict``."""
        rt = rt.served_in(self.api_group)
        namespace, name = _object_ref(obj)
        if rt.namespaced and not namespace:
            raise ValueError(f"a {rt.kind} needs metadata.namespace")
        body = {**obj, "apiVersion": rt.api_version, "kind": rt.kind}
        path = resource_path(rt, namespace if rt.namespaced else None, name)
        return _with_type(rt, await self._json("PUT", rt, path, body=body))

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch: JsonObject | JsonPatch,
        *,
        patch_type: PatchType = "merge",
        resource_version: str | None = None,
    ) -> JsonObject:
        """Merge or JSON patch; with ``resource_version`` a stale write is a ``Conflict``."""
        rt = rt.served_in(self.api_group)
        return await self._patch(
            rt, resource_path(rt, namespace, name), patch, patch_type, resource_version
        )

    async def patch_status(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        status: JsonObject,
        *,
        resource_version: str | None,
    ) -> JsonObject:
        """Merge ``status`` into the object's status (via /status when the kind has it)."""
        rt = rt.served_in(self.api_group)
        subresource = "status" if rt.status_subresource else None
        path = resource_path(rt, namespace, name, subresource)
        return await self._patch(rt, path, {"status": status}, "merge", resource_version)

    async def _patch(
        self,
        rt: ResourceType,
        path: str,
        patch: JsonObject | JsonPatch,
        patch_type: PatchType,
        resource_version: str | None,
    ) -> JsonObject:
        body: JsonObject | JsonPatch
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise TypeError("a merge patch is a JSON object")
            body = dict(patch)
            if resource_version is not None:
                # A resourceVersion inside the patch is a precondition on the server side.
                body["metadata"] = {
                    **(patch.get("metadata") or {}),
                    "resourceVersion": resource_version,
                }
        else:
            if not isinstance(patch, list):
                raise TypeError("a JSON patch is a list of operations")
            body = list(patch)
            if resource_version is not None:
                # Setting (rather than "test"-ing) the resourceVersion makes the server
                # compare it like any update does, so staleness is a 409 Conflict instead of a
                # 422 failed-test that would read as a permanent error.
                body.insert(
                    0,
                    {
                        "op": "replace",
                        "path": "/metadata/resourceVersion",
                        "value": resource_version,
                    },
                )
        content_type = _PATCH_CONTENT_TYPES[patch_type]
        return _with_type(
            rt, await self._json("PATCH", rt, path, body=body, content_type=content_type)
        )

    async def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str = "",
        resource_version: str = "",
    ) -> None:
        """Delete the object; with ``uid``/``resource_version`` only that very object at that
        version (the server answers ``Conflict`` otherwise: it changed since it was read)."""
        rt = rt.served_in(self.api_group)
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        body = (
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
            if preconditions
            else None
        )
        await self._json("DELETE", rt, resource_path(rt, namespace, name), body=body)

    async def emit_event(
        self,
        involved: JsonObject,
        *,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = "longshoreman",
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Record a core/v1 Event about ``involved``. Best effort: failures are only logged."""
        try:
            event = event_for(
                involved,
                reason=reason,
                message=message,
                type=type,
                component=component,
                now=self.clock.now(),
                annotations=annotations,
            )
            await self.create(EVENTS, event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metadata = involved.get("metadata") or {}
            logger.warning(
                "could not record event %s for %s %s/%s: %s",
                reason,
                involved.get("kind"),
                metadata.get("namespace"),
                metadata.get("name"),
                exc,
            )

    async def close(self) -> None:
        await self.api_client.close()  # type: ignore[no-untyped-call]


def kubeconfig_user(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The user name of the kubeconfig's ``context`` (its current one when None), "" when the
    file or the context cannot tell: who a command line acts as, for the record."""
    try:
        contexts, current = aio_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except Exception:  # a broken kubeconfig: load_kube reports it, better
        return ""
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    return str(((chosen or {}).get("context") or {}).get("user") or "")


async def load_kube(
    kubeconfig: str | None = None,
    in_cluster: bool = False,
    *,
    context: str | None = None,
    request_timeout: float = 30.0,
    on_request: OnRequest | None = None,
    api_group: str = OUR_GROUP,
) -> Kube:
    """A ``Kube`` on its own Configuration and ApiClient (never the library's global default).

    ``in_cluster`` uses the pod's service account; otherwise ``kubeconfig`` (or the default
    ~/.kube/config when None).
    """
    configuration = aio_client.Configuration()
    if in_cluster:
        aio_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await aio_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig,
            context=context,
            client_configuration=configuration,
            # Never rewrite the operator's kubeconfig file behind their back.
            persist_config=False,
        )
    api_client = aio_client.ApiClient(configuration=configuration)
    return Kube(
        api_client, request_timeout=request_timeout, on_request=on_request, api_group=api_group
    )
