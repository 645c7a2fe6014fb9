"""One face for both backends of the cluster suite: kubectl, clients, CRDs, RBAC and compaction.

A test asks the ``cluster`` fixture for what it needs and never branches on the backend for
behaviour it asserts: where the two servers differ, the difference is fixed in the emulator or
listed in docs/architecture.md ("The emulator and the real API server").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from kubernetes.aio import client as aio_client

from app.apiserver.kubeconfig import write_kubeconfig
from app.controller import kube as k
from tests.support.kube import RunningApiServer
from tests.support.kubectl import kubectl_env
from tests.support.rbac import Rbac, ServiceAccount, authorizing_proxy
from tests.support.realcluster import CONTROLLER, RealApiServer

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = os.environ.get("KUBECTL", "kubectl")
# The controller's identity as deploy/overlays/example installs it.
CONTROLLER_SA = ServiceAccount("longshoreman", "longshoreman")


@dataclass
class Kubectl:
    """What one kubectl run printed."""

    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class SecretRequest:
    """A request the controller made on Secrets, as the server side saw it."""

    verb: str
    namespace: str
    query: str
    code: int


@dataclass(frozen=True)
class ResourceRequest:
    """A request the controller made on some resource, as the server side saw it."""

    verb: str
    resource: str
    namespace: str  # "" for a cluster-wide request
    code: int


class Access(Protocol):
    """Where the controller connects when it runs with its ServiceAccount's permissions."""

    kubeconfig_path: Path
    denied: list[str]

    def api_client(self) -> aio_client.ApiClient: ...

    def secret_requests(self) -> list[SecretRequest]:
        """Every request on Secrets the controller made, checked where it arrived: the real
        server's audit log, or the authorizing proxy in front of the emulator."""
        ...

    def requests_on(self, *resources: str) -> list[ResourceRequest]:
        """Every request the controller made on these resources (plural names), checked where
        it arrived (the real server audits Secrets and Argo's kinds only)."""
        ...


class Cluster:
    """A running API server (emulator or real) with an admin identity for the test itself."""

    kind: str
    kubeconfig_path: Path

    def api_client(self) -> aio_client.ApiClient:
        raise NotImplementedError  # each backend below

    def kube(self) -> k.Kube:
        return k.Kube(self.api_client())

    async def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> Kubectl:
        env = kubectl_env(self.kubeconfig_path)
        process = await asyncio.create_subprocess_exec(
            KUBECTL,
            *args,
            cwd=ROOT,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate(stdin.encode() if stdin is not None else None)
        result = Kubectl(process.returncode or 0, out.decode(), err.decode())
        if check and result.code != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.code}):\n{err.decode()}"
            )
        return result

    async def install_crds(self) -> None:
        """Our CRDs and the third-party ones, as the install guide says, then wait for them."""
        await self.kubectl("apply", "-k", "deploy/crds")
        await self.kubectl("apply", "-f", "deploy/third-party-crds")
        await self.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")

    async def compact(self) -> None:
        """Forget history: resuming a watch from before now answers 410 Gone."""
        raise NotImplementedError  # each backend below

    def controller_access(self, objects: list[dict[str, Any]] | None = None) -> Any:
        """An async context manager yielding an ``Access`` with the ServiceAccount's rights:
        those of ``objects`` (RBAC manifests), by default what deploy/overlays/example grants."""
        raise NotImplementedError  # each backend below


# The namespaces whose Secrets the example grants (deploy/overlays/example/access/<namespace>).
ACCESS_NAMESPACES = ("kargo-demo", "kargo-shared-resources")


def rbac_objects(overlay: str | Path = "deploy/overlays/example") -> list[dict[str, Any]]:
    """The RBAC objects deploy/overlays/example (or ``overlay``, built on it) installs, and the
    RoleBindings of its access kustomizations (with their namespaces), rendered with kubectl's
    kustomize."""
    import subprocess

    docs: list[dict[str, Any]] = []
    access = [f"deploy/overlays/example/access/{ns}" for ns in ACCESS_NAMESPACES]
    for directory in [str(overlay), *access]:
        rendered = subprocess.run(
            [KUBECTL, "kustomize", directory], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        docs += [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Namespace"}
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in ACCESS_NAMESPACES
    ]
    # Namespaces first: a RoleBinding can only be created in one that exists.
    found = [d for d in docs if d.get("kind") in kinds]
    return namespaces + sorted(found, key=lambda d: d["kind"] != "Namespace")


class EmulatorCluster(Cluster):
    kind = "emulator"

    def __init__(self, running: RunningApiServer) -> None:
        self.running = running
        self.kubeconfig_path = running.kubeconfig_path

    @property
    def url(self) -> str:
        return self.running.url

    def api_client(self) -> aio_client.ApiClient:
        return self.running.api_client()

    async def compact(self) -> None:
        self.running.server.store.compact()

    @asynccontextmanager
    async def controller_access(
        self, objects: list[dict[str, Any]] | None = None
    ) -> AsyncIterator[Access]:
        # The emulator has no authorizer: a proxy evaluates RBAC's rules in front of it.
        objects = objects if objects is not None else rbac_objects()
        rbac = Rbac.from_objects(objects, CONTROLLER_SA)
        # The emulator serves no RBAC kinds (the proxy enforces them); the namespace it needs.
        namespaces = [o for o in objects if o["kind"] == "Namespace"]
        await self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(namespaces))
        async with authorizing_proxy(self.running, rbac, CONTROLLER_SA) as proxy:
            yield _ProxyAccess(proxy)


class _ProxyAccess:
    def __init__(self, proxy: Any) -> None:
        self.proxy = proxy
        self.kubeconfig_path = write_kubeconfig(
            self.proxy.server.kubeconfig_path.with_name("kubeconfig-controller"),
            self.proxy.server.url,
        )

    @property
    def denied(self) -> list[str]:
        return [str(a) for a in self.proxy.denied]

    def api_client(self) -> aio_client.ApiClient:
        return self.proxy.server.api_client()  # type: ignore[no-any-return]

    def secret_requests(self) -> list[SecretRequest]:
        return [
            SecretRequest(a.verb, a.namespace or "", query, code)
            for a, query, code in self.proxy.answered
            if a.resource == "secrets"
        ]

    def requests_on(self, *resources: str) -> list[ResourceRequest]:
        return [
            ResourceRequest(a.verb, a.resource, a.namespace or "", code)
            for a, _query, code in self.proxy.answered
            if a.resource in resources
        ]


class RealCluster(Cluster):
    kind = "real"

    def __init__(self, real: RealApiServer) -> None:
        self.real = real
        self.kubeconfig_path = real.kubeconfig_path

    @property
    def url(self) -> str:
        return self.real.url

    def api_client(self) -> aio_client.ApiClient:
        return self.real.api_client()

    async def compact(self) -> None:
        # etcd forgets, but kube-apiserver's watch cache would still serve the old window from
        # memory; a restart (as in a rolling upgrade) starts the cache at the compacted revision.
        await self.real.compact()
        await self.real.restart_apiserver()

    @asynccontextmanager
    async def controller_access(
        self, objects: list[dict[str, Any]] | None = None
    ) -> AsyncIterator[Access]:
        docs = objects if objects is not None else rbac_objects()
        await self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        yield _RealAccess(self.real)


class _RealAccess:
    def __init__(self, real: RealApiServer) -> None:
        self.real = real
        self.kubeconfig_path = real.kubeconfig_for(CONTROLLER)
        # kube-apiserver logs no denials at --v=0; the controller's own log and metrics show 403s.
        self.denied: list[str] = []

    def api_client(self) -> aio_client.ApiClient:
        return self.real.api_client(CONTROLLER)

    def secret_requests(self) -> list[SecretRequest]:
        out = []
        for event in self.real.audit_events():
            if (event.get("user") or {}).get("username") != CONTROLLER.name:
                continue
            ref = event.get("objectRef") or {}
            if ref.get("resource") != "secrets":
                continue
            _, _, query = str(event.get("requestURI") or "").partition("?")
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            out.append(
                SecretRequest(str(event["verb"]), str(ref.get("namespace") or ""), query, code)
            )
        return out

    def requests_on(self, *resources: str) -> list[ResourceRequest]:
        out = []
        for event in self.real.audit_events():
            ref = event.get("objectRef") or {}
            if (event.get("user") or {}).get("username") != CONTROLLER.name:
                continue
            if ref.get("resource") not in resources:
                continue
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            out.append(
                ResourceRequest(
                    str(event["verb"]),
                    str(ref["resource"]),
                    str(ref.get("namespace") or ""),
                    code,
                )
            )
        return out


def args(*parts: str | Sequence[str]) -> list[str]:
    out: list[str] = []
    for part in parts:
        out.extend([part] if isinstance(part, str) else part)
    return out
