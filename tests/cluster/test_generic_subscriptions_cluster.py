"""Generic subscriptions' fields survive the API server, on both backends: the CRDs keep a
Warehouse's generic subscription and its ``status.discoveredArtifacts.results``, and a
Freight's ``artifacts[]`` with nested metadata, none of it pruned."""

from __future__ import annotations

from app.controller import kube as k
from tests.cluster.support import Cluster
from tests.support import objects

NS = "team-generic"
SUBSCRIPTION = {"name": "bucket", "s3": {"config": {"bucket": "b", "nested": {"a": [1]}}}}
ARTIFACT = {
    "artifactType": "application/gzip",
    "subscriptionName": "bucket",
    "version": "v1",
    "metadata": {"etag": "e1", "parts": [{"n": 1}]},
}


async def test_generic_subscription_fields_are_kept(cluster: Cluster) -> None:
    await cluster.install_crds()
    await cluster.kubectl("create", "namespace", NS)
    kube = cluster.kube()
    await kube.create(
        k.WAREHOUSES, objects.warehouse("w", namespace=NS, subscriptions=[SUBSCRIPTION])
    )
    results = [{"name": "bucket", "artifactReferences": [ARTIFACT]}]
    await kube.patch_status(
        k.WAREHOUSES,
        NS,
        "w",
        {"discoveredArtifacts": {"discoveredAt": "2026-01-01T00:00:00Z", "results": results}},
        resource_version=None,
    )
    warehouse = await kube.get(k.WAREHOUSES, NS, "w")
    assert warehouse["spec"]["subscriptions"] == [SUBSCRIPTION]
    assert warehouse["status"]["discoveredArtifacts"]["results"] == results

    await kube.create(k.FREIGHT, {**objects.freight("f", namespace=NS), "artifacts": [ARTIFACT]})
    assert (await kube.get(k.FREIGHT, NS, "f"))["artifacts"] == [ARTIFACT]
