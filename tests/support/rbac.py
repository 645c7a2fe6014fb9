"""Kubernetes RBAC, evaluated in tests: request attributes, rules, and an authorizing proxy.

``authorizing_proxy(api, rbac, user)`` serves an HTTP proxy on 127.0.0.1 in front of the API
server emulator. Every request through it is turned into RBAC's request attributes (verb, API
group, resource/subresource, namespace, name: what kube-apiserver's RequestInfoFactory derives
from a URL), recorded, and answered with 403 Forbidden unless ``rbac`` allows it, exactly as a
cluster with those (Cluster)Roles and bindings would. The code under test talks to the proxy
with the real Kubernetes client, so what is recorded is what the code really asks for, and a
missing permission fails the way it would in production.

    rbac = Rbac.from_objects(build(Path("deploy/overlays/example")))
    user = ServiceAccount("longshoreman", "longshoreman")
    async with authorizing_proxy(api, rbac, user) as proxy:
        kube = k.Kube(proxy.server.api_client())
        ...
    proxy.denied, proxy.attributes
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web

from tests.support.kube import RunningApiServer

# Hop-by-hop and recomputed headers that a proxy must not copy.
_SKIP_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"}
)


@dataclass(frozen=True)
class Attributes:
    """What RBAC decides on: ``resource`` includes ``/subresource`` when there is one."""

    verb: str
    group: str
    resource: str
    namespace: str | None = None
    name: str | None = None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        group = self.group or "core"
        return f"{self.verb} {self.resource}.{group}{named}{where}"


def attributes_of(method: str, path: str, query: str = "") -> Attributes | None:
    """RBAC attributes of a resource request; None for non-resource URLs (/version, /apis)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    # /namespaces/{ns}/{resource}...; but /namespaces and /namespaces/{name}[/status] are the
    # Namespace objects themselves.
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    params = parse_qs(query)
    watching = params.get("watch", [""])[0] in ("true", "1")
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    if method == "GET":
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    elif method in verbs:
        verb = verbs[method]
    else:
        verb = method.lower()
    return Attributes(verb, group, resource, namespace, name)


@dataclass(frozen=True)
class Rule:
    """One PolicyRule, scoped to a namespace when it came through a RoleBinding."""

    groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str] = frozenset()
    namespace: str | None = None  # None: every namespace (ClusterRoleBinding)

    def allows(self, a: Attributes) -> bool:
        if self.namespace is not None and a.namespace != self.namespace:
            return False
        return (
            ("*" in self.groups or a.group in self.groups)
            and ("*" in self.resources or a.resource in self.resources)
            and ("*" in self.verbs or a.verb in self.verbs)
            # resourceNames cannot restrict list/watch/create of a collection (no name).
            and (not self.names or (a.name is not None and a.name in self.names))
        )

    def grants(self) -> Iterable[tuple[str, str, str]]:
        """(group, resource, verb) triples this rule grants."""
        for group in sorted(self.groups):
            for resource in sorted(self.resources):
                for verb in sorted(self.verbs):
                    yield group, resource, verb


@dataclass(frozen=True)
class ServiceAccount:
    name: str
    namespace: str


@dataclass
class Rbac:
    """The rules that apply to one ServiceAccount, from rendered manifests."""

    rules: list[Rule]

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]], user: ServiceAccount) -> Rbac:
        objects = list(objects)
        roles: dict[tuple[str, str | None, str], list[Mapping[str, Any]]] = {}
        for obj in objects:
            if obj.get("kind") in ("Role", "ClusterRole"):
                meta = obj["metadata"]
                key = (obj["kind"], meta.get("namespace"), meta["name"])
                roles[key] = list(obj.get("rules") or [])
        rules: list[Rule] = []
        for obj in objects:
            if obj.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            if not any(
                s.get("kind") == "ServiceAccount"
                and s.get("name") == user.name
                and s.get("namespace") == user.namespace
                for s in obj.get("subjects") or ()
            ):
                continue
            scope = obj["metadata"].get("namespace") if obj["kind"] == "RoleBinding" else None
            ref = obj["roleRef"]
            role_ns = scope if ref["kind"] == "Role" else None
            found = roles.get((ref["kind"], role_ns, ref["name"]))
            if found is None:
                raise ValueError(f"{obj['kind']} {obj['metadata']['name']}: no {ref}")
            for r in found:
                rules.append(
                    Rule(
                        frozenset(r.get("apiGroups") or ()),
                        frozenset(r.get("resources") or ()),
                        frozenset(r.get("verbs") or ()),
                        frozenset(r.get("resourceNames") or ()),
                        scope,
                    )
                )
        return cls(rules)

    def allows(self, a: Attributes) -> bool:
        return any(rule.allows(a) for rule in self.rules)

    def granted(self) -> set[tuple[str, str, str]]:
        return {triple for rule in self.rules for triple in rule.grants()}


@dataclass
class AuthorizingProxy:
    """A running proxy: ``server`` reaches the emulator through it; what it saw is recorded."""

    server: RunningApiServer
    allowed: list[Attributes] = field(default_factory=list)
    denied: list[Attributes] = field(default_factory=list)
    non_resource: list[str] = field(default_factory=list)
    # Every resource request with its query string and the status it got (403 from RBAC).
    answered: list[tuple[Attributes, str, int]] = field(default_factory=list)

    def used(self) -> set[tuple[str, str, str]]:
        """(group, resource, verb) of every allowed request."""
        return {(a.group, a.resource, a.verb) for a in self.allowed}


def _forbidden(a: Attributes, user: ServiceAccount) -> web.Response:
    # kube-apiserver's wording (apierrors.NewForbidden + the RBAC authorizer's reason): the
    # group-qualified resource without its subresource, the name only when there is one.
    resource = a.resource.split("/")[0]
    qualified = f"{resource}.{a.group}" if a.group else resource
    subject = f'{qualified} "{a.name}"' if a.name else qualified
    message = (
        f'{subject} is forbidden: User "system:serviceaccount:{user.namespace}:{user.name}" '
        f'cannot {a.verb} resource "{a.resource}" in API group "{a.group}"'
        + (f' in the namespace "{a.namespace}"' if a.namespace else " at the cluster scope")
    )
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "code": 403,
    }
    return web.json_response(status, status=403)


@asynccontextmanager
async def authorizing_proxy(
    upstream: RunningApiServer, rbac: Rbac, user: ServiceAccount
) -> AsyncIterator[AuthorizingProxy]:
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
    proxy = AuthorizingProxy(server=upstream)

    async def forward(request: web.Request) -> web.StreamResponse:
        attributes = attributes_of(request.method, request.path, request.query_string)
        if attributes is None:
            proxy.non_resource.append(f"{request.method} {request.path}")
        elif not rbac.allows(attributes):
            proxy.denied.append(attributes)
            proxy.answered.append((attributes, request.query_string, 403))
            return _forbidden(attributes, user)
        else:
            proxy.allowed.append(attributes)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_HEADERS}
        body = await request.read()
        async with session.request(
            request.method,
            upstream.url + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as answer:
            if attributes is not None:
                proxy.answered.append((attributes, request.query_string, answer.status))
            response = web.StreamResponse(status=answer.status)
            for key, value in answer.headers.items():
                if key.lower() not in _SKIP_HEADERS:
                    response.headers[key] = value
            await response.prepare(request)
            # Streams chunk by chunk so watches flow through as they happen.
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    # handler_cancellation: a watch whose client went away ends its upstream watch at once.
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    proxied = dataclasses.replace(upstream, url=f"http://{host}:{port}", _clients=[])
    proxy.server = proxied
    try:
        yield proxy
    finally:
        for api in proxied._clients:
            await api.close()  # type: ignore[no-untyped-call]
        await runner.cleanup()
        await session.close()
