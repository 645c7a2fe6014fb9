"""What an operator sees with kubectl: the CRDs install, `kubectl get` shows their printer columns,
and a bad manifest is refused with the server's own message.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app.controller import kube as k
from app.embedded import seed
from tests.cluster.support import ROOT, Cluster

NS = "kargo-demo"
PROJECT = ROOT / "examples" / "kargo-demo" / "project.yaml"


def printer_columns(crd_file: Path) -> list[str]:
    crd = yaml.safe_load(crd_file.read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("served"))
    return [
        c["name"] for c in version.get("additionalPrinterColumns") or [] if not c.get("priority")
    ]


def header(output: str) -> list[str]:
    return re.split(r"\s{2,}", output.splitlines()[0].strip())


async def test_kubectl_get_shows_each_crds_printer_columns(cluster: Cluster) -> None:
    await cluster.install_crds()
    kube = cluster.kube()
    await seed(kube, [PROJECT])
    await kube.create(
        k.PROMOTIONS,
        {
            "metadata": {"name": "p1", "namespace": NS},
            "spec": {"stage": "test", "freight": "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"},
        },
    )
    for plural, crd in (
        ("promotions", "promotions.longshoreman.dev.yaml"),
        ("stages", "stages.longshoreman.dev.yaml"),
        ("freights", "freights.longshoreman.dev.yaml"),
        ("warehouses", "warehouses.longshoreman.dev.yaml"),
    ):
        out = (await cluster.kubectl("get", plural, "-n", NS)).stdout
        expected = ["NAME", *(c.upper() for c in printer_columns(ROOT / "deploy" / "crds" / crd))]
        assert header(out) == expected, (plural, out)

    row = (await cluster.kubectl("get", "promotion", "p1", "-n", NS)).stdout.splitlines()[1]
    assert row.split()[0] == "p1"
    assert "test" in row.split() and "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b" in row.split()
    wide = (await cluster.kubectl("get", "promotions", "-n", NS, "-o", "wide")).stdout
    assert "MESSAGE" in header(wide)


async def test_a_bad_manifest_is_refused_with_the_servers_message(cluster: Cluster) -> None:
    await cluster.install_crds()
    await cluster.kubectl("create", "namespace", NS)
    bad = {
        "apiVersion": "longshoreman.dev/v1alpha1",
        "kind": "Promotion",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {"stage": 42, "freight": "abc"},
    }
    result = await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(bad), check=False)
    assert result.code != 0
    assert 'The Promotion "bad" is invalid' in result.stderr, result.stderr
    assert "spec.stage" in result.stderr and "must be of type string" in result.stderr
    missing = (await cluster.kubectl("get", "promotion", "bad", "-n", NS, check=False)).stderr
    assert 'promotions.longshoreman.dev "bad" not found' in missing
