"""deploy/webhooks on a real kube-apiserver: the server's admission webhooks, called by the API
server over TLS, refuse bad manifests naming every problem, refuse a Promotion of Freight not
verified upstream, and record the kubectl user who created a Promotion.

Only the real server calls webhooks (the emulator runs the same admission in-process, which
tests/integration/test_embedded_kubectl.py covers), so this module runs on the ``real``
backend only: ``LONGSHOREMAN_CLUSTER_BACKENDS=real`` (``make test-cluster``).
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.controller import kube as k
from app.embedded import seed
from tests.cluster.support import ROOT, Cluster
from tests.support import objects
from tests.support.admission import (
    BROKEN_STAGE_FIELDS,
    BROKEN_WINDOW_PROBLEMS,
    broken_project_config,
    broken_stage,
    broken_warehouse,
)
from tests.support.processes import ServerProcess, server_processes
from tests.support.realcluster import ADMIN, free_port

NS = "kargo-demo"
FREIGHT = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"


@pytest.fixture(autouse=True)
def _real_only(cluster: Cluster) -> None:
    if cluster.kind != "real":
        pytest.skip(
            "webhooks are called by a real kube-apiserver only (the emulator admits "
            "in-process: tests/integration/test_embedded_kubectl.py)"
        )


def make_certificate(directory: Path) -> bytes:
    """A CA and a serving certificate for 127.0.0.1 signed by it (tls.crt, tls.key); the CA."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "tls.key",
        "-out",
        "tls.csr",
    )
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", "san.ext", "-out", "tls.crt")  # fmt: skip
    return (directory / "ca.crt").read_bytes()


def webhook_configurations(
    port: int, ca: bytes, documents: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """deploy/webhooks' configurations (or ``documents``, as an overlay rendered them), pointed
    at the server on 127.0.0.1 (no Service here)."""
    if documents is None:
        documents = list(yaml.safe_load_all((ROOT / "deploy/webhooks/webhooks.yaml").read_text()))
    for document in documents:
        document["metadata"].pop("annotations", None)  # no cert-manager here
        for webhook in document["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca).decode(),
            }
    return documents


@pytest.fixture
async def webhooks(cluster: Cluster, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    await cluster.install_crds()
    await cluster.kubectl("create", "namespace", NS)
    certs = tmp_path / "certs"
    certs.mkdir()
    ca = make_certificate(certs)
    port = free_port()
    async with server_processes() as started:
        server = await ServerProcess.start(
            {
                "KUBECONFIG": str(cluster.kubeconfig_path),
                "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
                "LONGSHOREMAN_WEBHOOK_CERT_DIR": str(certs),
                "LONGSHOREMAN_WEBHOOK_PORT": str(port),
                # The test's admin is the server's identity here, as the ServiceAccount is
                # in a cluster; kubectl users below act as someone else.
                "LONGSHOREMAN_CONTROL_PLANE_USERS": ADMIN.name,
            },
            tmp_path / "server.log",
            started,
        )
        await cluster.kubectl(
            "apply", "-f", "-", stdin=yaml.safe_dump_all(webhook_configurations(port, ca))
        )
        kube = cluster.kube()
        await seed(kube, [PROJECT])
        yield server


def as_jane(*args: str) -> list[str]:
    return ["--as=jane", "--as-group=system:masters", *args]


async def test_bad_manifests_are_refused_by_the_webhook_naming_every_problem(
    cluster: Cluster, webhooks: ServerProcess
) -> None:
    stage = objects.served(broken_stage(NS, "kargo-demo"))
    refused = await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(stage), check=False)
    # The API server relays the webhook's Invalid status as it is: kubectl shows it as it
    # shows its own validation (and as the embedded cluster's).
    assert 'The Stage "broken" is invalid' in refused.stderr
    for field in BROKEN_STAGE_FIELDS:
        assert f"{field}: " in refused.stderr, refused.stderr
    warehouse = objects.served(broken_warehouse(NS))
    refused = await cluster.kubectl(
        "apply", "-f", "-", stdin=yaml.safe_dump(warehouse), check=False
    )
    assert "spec.subscriptions[0].image.repoURL" in refused.stderr, refused.stderr
    assert "spec.subscriptions[1].image.repoURL" in refused.stderr
    config = objects.served(broken_project_config(NS))
    refused = await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(config), check=False)
    for problem in BROKEN_WINDOW_PROBLEMS:
        assert problem in refused.stderr, refused.stderr
    missing = objects.served(objects.promotion("p0", "test", namespace=NS, freight="gone"))
    refused = await cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump(missing), check=False)
    assert 'could not find Freight "gone"' in refused.stderr, refused.stderr


async def test_a_promotion_of_unverified_freight_is_refused_and_the_creator_recorded(
    cluster: Cluster, webhooks: ServerProcess
) -> None:
    # uat requests Freight verified in test; this Freight never was.
    unverified = objects.served(objects.promotion("p1", "uat", namespace=NS, freight=FREIGHT))
    refused = await cluster.kubectl(
        *as_jane("create", "-f", "-"), stdin=yaml.safe_dump(unverified), check=False
    )
    assert refused.code != 0
    assert "spec.freight" in refused.stderr and "not available" in refused.stderr
    # A Stage taking the Freight directly, whose one step reaches nothing outside.
    kube = cluster.kube()
    quiet = objects.stage(
        "quiet",
        namespace=NS,
        warehouse="kargo-demo",
        steps=[{"uses": "compose-output", "config": {"a": "1"}}],
    )
    await kube.create(k.STAGES, quiet)
    direct = objects.served(objects.promotion("p2", "quiet", namespace=NS, freight=FREIGHT))
    await cluster.kubectl(*as_jane("create", "-f", "-"), stdin=yaml.safe_dump(direct))
    created = await kube.get(k.PROMOTIONS, NS, "p2")
    assert created["metadata"]["annotations"]["kargo.akuity.io/create-actor"] == "kubernetes:jane"
