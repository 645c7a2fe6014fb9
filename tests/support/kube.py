"""Test helpers: start the Kubernetes API server emulator and talk to it with the real client.

    from tests.support.kube import running_apiserver

    async def test_something(tmp_path):
        async with running_apiserver(namespaces=["team-a"]) as kube:
            api = kube.api_client()                 # kubernetes.aio ApiClient, closed for you
            crs = CustomObjectsApi(api)
            kube.faults.add("error", methods="PATCH")  # next PATCH answers 500
            kube.close_watches()                       # every open watch ends now

Or register the fixtures once in a conftest: ``pytest_plugins = ["tests.support.kube"]`` and
take ``kube`` (a ``RunningApiServer``) or ``kube_api`` (an ``ApiClient``) as arguments.
By default the emulator loads deploy/crds and deploy/third-party-crds.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_asyncio
from kubernetes.aio import client as aio_client

from app.apiserver import (
    ApiServer,
    FaultInjector,
    RequestRecord,
    apiserver_of,
    create_apiserver_app,
    serve_apiserver,
    write_kubeconfig,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
OUR_CRDS = REPO_ROOT / "deploy" / "crds"
THIRD_PARTY_CRDS = REPO_ROOT / "deploy" / "third-party-crds"


def namespaced_crd(
    group: str, kind: str, schema: Mapping[str, Any], **version: Any
) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition served and stored as ``v1`` (its plural is the kind in
    lower case plus "s"): ``schema`` is its openAPIV3Schema, ``version`` more fields of that one
    version (``subresources``, ``additionalPrinterColumns``)."""
    plural = f"{kind.lower()}s"
    served = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [{**served, **version}],
        },
    }


def default_crd_dirs() -> list[Path]:
    """deploy/third-party-crds, plus deploy/crds once it holds any CRD files."""
    dirs = [THIRD_PARTY_CRDS]
    if OUR_CRDS.is_dir() and any(OUR_CRDS.glob("*.y*ml")):
        dirs.append(OUR_CRDS)
    return dirs


@dataclass
class RunningApiServer:
    """A started emulator: where it is, how to reach it, and its test controls."""

    url: str
    kubeconfig_path: Path
    server: ApiServer
    _clients: list[aio_client.ApiClient] = field(default_factory=list)

    @property
    def faults(self) -> FaultInjector:
        return self.server.faults

    @property
    def requests(self) -> list[RequestRecord]:
        return list(self.server.requests)

    def configuration(self) -> aio_client.Configuration:
        return aio_client.Configuration(host=self.url)

    def api_client(self) -> aio_client.ApiClient:
        """A fresh ``kubernetes.aio`` ApiClient for this server, closed when the server stops."""
        api = aio_client.ApiClient(configuration=self.configuration())
        self._clients.append(api)
        return api

    def close_watches(self, *, abort: bool = False) -> int:
        """End every open watch (``abort=True`` drops the connections instead)."""
        return self.server.close_watches(abort=abort)

    def objects(self, group: str, plural: str) -> list[dict[str, Any]]:
        """Stored objects of one type, straight from the store (no HTTP, no faults)."""
        resource = self.server.store.registry.get(group, plural)
        if resource is None:
            raise KeyError(f"{plural}.{group} is not served")
        return self.server.store.objects(resource)


@asynccontextmanager
async def running_apiserver(
    crd_dirs: Iterable[str | Path] | None = None,
    *,
    crds: Iterable[Mapping[str, Any]] = (),
    namespaces: Iterable[str] = (),
    kubeconfig_path: str | Path | None = None,
    faults: FaultInjector | None = None,
    **options: Any,
) -> AsyncIterator[RunningApiServer]:
    """Start an emulator on 127.0.0.1:<ephemeral> and write a kubeconfig for it.

    ``crd_dirs`` defaults to ``default_crd_dirs()``; ``namespaces`` are created in addition to
    default/kube-system/kube-public/kube-node-lease; other keyword arguments go to
    ``create_apiserver_app`` (``event_window``, ``bookmark_interval``, ``state_file``, ...).
    """
    dirs = default_crd_dirs() if crd_dirs is None else list(crd_dirs)
    app = create_apiserver_app(crd_dirs=dirs, crds=crds, faults=faults, **options)
    server = apiserver_of(app)
    for namespace in namespaces:
        server.store.ensure_namespace(namespace)
    with tempfile.TemporaryDirectory(prefix="kube-emulator-") as scratch:
        async with serve_apiserver(app) as url:
            path = write_kubeconfig(kubeconfig_path or Path(scratch) / "kubeconfig", url)
            running = RunningApiServer(url=url, kubeconfig_path=path, server=server)
            try:
                yield running
            finally:
                for api in running._clients:
                    await api.close()  # type: ignore[no-untyped-call]


@pytest_asyncio.fixture
async def kube() -> AsyncIterator[RunningApiServer]:
    """An emulator with the default CRDs and short bookmark interval, one per test."""
    async with running_apiserver(bookmark_interval=0.2) as running:
        yield running


@pytest_asyncio.fixture
async def kube_api(kube: RunningApiServer) -> aio_client.ApiClient:
    """A ``kubernetes.aio`` ApiClient connected to the ``kube`` emulator."""
    return kube.api_client()
