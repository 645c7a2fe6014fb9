"""The cluster suite's backends: the same tests against the emulator and a real kube-apiserver.

Every test in tests/cluster takes a ``cluster`` fixture. Which servers it runs against:

- ``emulator`` (the default, part of ``make test``): the embedded API server emulator;
- ``real`` (``make test-cluster``): kube-apiserver v1.20 with etcd, built once by
  scripts/build-kube-apiserver.sh and started per test on random 127.0.0.1 ports.

Choose with ``LONGSHOREMAN_CLUSTER_BACKENDS=emulator,real`` (comma-separated). Asking for
``real`` when the binary has not been built is an error, not a skip: a cluster run that
silently tested nothing would read as a pass.

Both backends start *empty of our CRDs*: the tests install them with ``kubectl apply`` as a user
would, so the emulator's CRD handling is exercised the same way the real server's is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.cluster.support import Cluster, EmulatorCluster, RealCluster
from tests.support.kube import running_apiserver
from tests.support.realcluster import apiserver_binary, running_real_apiserver

_KNOWN = ("emulator", "real")


def _backends() -> list[str]:
    raw = os.environ.get("LONGSHOREMAN_CLUSTER_BACKENDS", "emulator")
    chosen = [b.strip() for b in raw.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in _KNOWN]
    if unknown or not chosen:
        raise pytest.UsageError(
            f"LONGSHOREMAN_CLUSTER_BACKENDS={raw!r}: expected a comma-separated list of "
            f"{', '.join(_KNOWN)}"
        )
    if "real" in chosen and apiserver_binary() is None:
        raise pytest.UsageError(
            "LONGSHOREMAN_CLUSTER_BACKENDS asks for the real API server, but no kube-apiserver "
            "has been built: run scripts/build-kube-apiserver.sh (make test-cluster does)"
        )
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cluster" in metafunc.fixturenames:
        metafunc.parametrize("cluster", _backends(), indirect=True)


@contextlib.asynccontextmanager
async def _running(kind: str) -> AsyncIterator[Cluster]:
    if kind == "real":
        async with running_real_apiserver() as real:
            yield RealCluster(real)
    else:
        async with running_apiserver(crd_dirs=[], bookmark_interval=0.5) as emulator:
            yield EmulatorCluster(emulator)


@pytest_asyncio.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    async with _running(request.param) as running:
        yield running


@pytest_asyncio.fixture
async def second_cluster(cluster: Cluster) -> AsyncIterator[Cluster]:
    """Another API server of the same kind: a second cluster (Argo CD's, for a shard)."""
    async with _running(cluster.kind) as running:
        yield running
