"""Our kinds in Kargo's API group on a cluster: deploy/kargo-group and LONGSHOREMAN_API_GROUP.

An overlay built as docs/install.md says (the example overlay, deploy/webhooks, then
deploy/kargo-group) is rendered with kubectl's kustomize; its CRDs and its RBAC are installed,
the server runs under that RBAC with ``LONGSHOREMAN_API_GROUP=kargo.akuity.io``, and Kargo's
example project is applied with kubectl unchanged. A Promotion created with kubectl runs to
Succeeded, the Freight records where it is, and our own group is not served at all. On the real
kube-apiserver, the component's webhook configurations refuse a broken Stage in Kargo's group and
record the kubectl user who created a Promotion.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.controller import kube as k
from tests.cluster.support import KUBECTL, ROOT, Cluster, rbac_objects
from tests.cluster.test_admission_webhooks import as_jane, make_certificate, webhook_configurations
from tests.cluster.test_cli import longshoreman
from tests.support import objects
from tests.support.admission import BROKEN_STAGE_FIELDS, broken_stage
from tests.support.controller import wait_for_object, wait_terminal
from tests.support.processes import ServerProcess, server_processes
from tests.support.realcluster import ADMIN, free_port

NS = "kargo-demo"
FREIGHT = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"
KARGO_API_VERSION = "kargo.akuity.io/v1alpha1"


def overlay(tmp_path: Path) -> Path:
    """A kustomization like an operator's: the example overlay with both components."""
    directory = tmp_path / "overlay"
    directory.mkdir()

    def relative(path: str) -> str:
        # kustomize refuses absolute paths to other kustomizations.
        return os.path.relpath(ROOT / path, directory)

    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [relative("deploy/overlays/example")],
        "components": [relative("deploy/webhooks"), relative("deploy/kargo-group")],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def rendered(directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def kargos(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "apiVersion": KARGO_API_VERSION}


def quiet_stage() -> dict[str, Any]:
    """A Stage taking the Freight directly, whose one step reaches nothing outside."""
    return kargos(
        objects.stage(
            "quiet",
            namespace=NS,
            warehouse="kargo-demo",
            steps=[{"uses": "compose-output", "config": {"a": "1"}}],
        )
    )


async def install_crds(cluster: Cluster, documents: list[dict[str, Any]]) -> None:
    crds = [d for d in documents if d["kind"] == "CustomResourceDefinition"]
    assert sorted(c["spec"]["group"] for c in crds) == ["kargo.akuity.io"] * 8
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
    await cluster.kubectl("apply", "-f", "deploy/third-party-crds")
    await cluster.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")


def server_env(kubeconfig: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "KUBECONFIG": str(kubeconfig),
        "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"),
        "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
        "LONGSHOREMAN_WAREHOUSE_DISCOVERY": "false",
        "LONGSHOREMAN_API_GROUP": "kargo.akuity.io",
        **extra,
    }


async def test_kargos_example_applies_unchanged_and_a_promotion_runs_in_kargos_group(
    cluster: Cluster, tmp_path: Path
) -> None:
    directory = overlay(tmp_path)
    documents = rendered(directory)
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["LONGSHOREMAN_API_GROUP"] == "kargo.akuity.io"
    await install_crds(cluster, documents)
    async with (
        cluster.controller_access(rbac_objects(directory)) as access,
        server_processes() as servers,
    ):
        server = await ServerProcess.start(
            server_env(access.kubeconfig_path, tmp_path), tmp_path / "server.log", servers
        )
        applied = await cluster.kubectl("apply", "-f", str(PROJECT))
        assert applied.stdout.splitlines() == [
            "warehouse.kargo.akuity.io/kargo-demo created",
            f"freight.kargo.akuity.io/{FREIGHT} created",
            "promotiontask.kargo.akuity.io/update-image-and-push created",
            "stage.kargo.akuity.io/test created",
            "stage.kargo.akuity.io/uat created",
        ]
        await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(quiet_stage()))
        promotion = kargos(objects.promotion("p1", "quiet", namespace=NS, freight=FREIGHT))
        await cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump(promotion))

        kube = k.Kube(cluster.api_client(), api_group="kargo.akuity.io")
        done = await wait_terminal(kube, NS, "p1", within=30)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert done["apiVersion"] == KARGO_API_VERSION
        freight = await wait_for_object(
            kube,
            k.FREIGHT,
            NS,
            FREIGHT,
            lambda f: "quiet" in ((f.get("status") or {}).get("currentlyIn") or {}),
        )
        assert freight["apiVersion"] == KARGO_API_VERSION
        row = (await cluster.kubectl("get", "promotion", "p1", "-n", NS)).stdout.splitlines()[1]
        assert "Succeeded" in row.split(), row
        # The command line finds the group by itself.
        code, out, err = await longshoreman(
            access.kubeconfig_path, "promote", "frozen-tauntaun", "--to", "quiet", "--project", NS
        )
        assert code == 0, err
        second = await wait_terminal(kube, NS, out.split()[1], within=30)
        assert second["status"]["phase"] == "Succeeded", second["status"]
        # Never both groups: ours is not served here.
        ours = await cluster.kubectl("get", "promotions.longshoreman.dev", "-n", NS, check=False)
        assert ours.code != 0 and "doesn't have a resource type" in ours.stderr, ours
        assert access.denied == [], access.denied
        assert "forbidden" not in server.log.lower(), server.log
        await server.stop()


@pytest.fixture
async def webhooks_in_kargos_group(cluster: Cluster, tmp_path: Path) -> AsyncIterator[None]:
    if cluster.kind != "real":
        pytest.skip("webhooks are called by a real kube-apiserver only")
    documents = rendered(overlay(tmp_path))
    await install_crds(cluster, documents)
    await cluster.kubectl("create", "namespace", NS)
    certs = tmp_path / "certs"
    certs.mkdir()
    ca = make_certificate(certs)
    port = free_port()
    configurations = [
        d
        for d in documents
        if d["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]
    for configuration in configurations:
        assert configuration["webhooks"][0]["rules"][0]["apiGroups"] == ["kargo.akuity.io"]
    async with server_processes() as started:
        await ServerProcess.start(
            server_env(
                cluster.kubeconfig_path,
                tmp_path,
                LONGSHOREMAN_WEBHOOK_CERT_DIR=str(certs),
                LONGSHOREMAN_WEBHOOK_PORT=str(port),
                LONGSHOREMAN_CONTROL_PLANE_USERS=ADMIN.name,
            ),
            tmp_path / "server.log",
            started,
        )
        await cluster.kubectl(
            "apply",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(webhook_configurations(port, ca, configurations)),
        )
        yield


async def test_the_components_webhooks_admit_kargos_group(
    cluster: Cluster, webhooks_in_kargos_group: None
) -> None:
    # Kargo's example passes admission as it is.
    await cluster.kubectl("apply", "-f", str(PROJECT))
    stage = kargos(broken_stage(NS, "kargo-demo"))
    refused = await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(stage), check=False)
    assert 'The Stage "broken" is invalid' in refused.stderr, refused.stderr
    for field in BROKEN_STAGE_FIELDS:
        assert f"{field}: " in refused.stderr, refused.stderr
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(quiet_stage()))
    promotion = kargos(objects.promotion("p2", "quiet", namespace=NS, freight=FREIGHT))
    await cluster.kubectl(*as_jane("create", "-f", "-"), stdin=yaml.safe_dump(promotion))
    kube = k.Kube(cluster.api_client(), api_group="kargo.akuity.io")
    created = await kube.get(k.PROMOTIONS, NS, "p2")
    assert created["metadata"]["annotations"]["kargo.akuity.io/create-actor"] == "kubernetes:jane"
