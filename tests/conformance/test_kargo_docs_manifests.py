"""Kargo's own manifests, from its documentation, fit our CRD schemas once their group is changed.

A user moving from Kargo brings manifests like these; the API server would refuse a field our
schemas do not know, or prune it silently. Documentation examples elide parts (``# ...``), so
required fields may be missing (the validator's ``excerpt`` mode); types, enums, patterns and
field names must still fit.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support import conformance
from tests.unit.resources.test_crds import CRDS, GROUP, KARGO_API_VERSION, schema_of, validate


class JsonLikeLoader(yaml.SafeLoader):
    """Keeps timestamps as strings, as kubectl does when it turns YAML into JSON."""


JsonLikeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _kargo_manifests() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in conformance.files("kargo-docs", "*.yaml"):
        try:
            docs = list(yaml.load_all(path.read_text(), Loader=JsonLikeLoader))
        except yaml.YAMLError:
            continue  # a fragment, not a manifest
        for i, doc in enumerate(docs):
            if isinstance(doc, dict) and doc.get("apiVersion") == KARGO_API_VERSION:
                found.append((f"{path.name}#{i}", doc))
    return conformance.cases(found, "Kargo manifests in kargo-docs/")


KARGO_MANIFESTS = _kargo_manifests()


def test_the_examples_cover_every_kind_we_can() -> None:
    kinds = {doc["kind"] for _, doc in KARGO_MANIFESTS}
    assert {"Stage", "Warehouse", "PromotionTask", "ClusterPromotionTask"} <= kinds
    assert len(KARGO_MANIFESTS) >= 20


@pytest.mark.parametrize(
    ("name", "manifest"), KARGO_MANIFESTS, ids=[name for name, _ in KARGO_MANIFESTS]
)
def test_kargo_manifest_fits_our_schema(name: str, manifest: dict[str, Any]) -> None:
    assert manifest["kind"] in CRDS, f"{name}: no CRD for kind {manifest['kind']}"
    ours = {**manifest, "apiVersion": f"{GROUP}/v1alpha1"}
    assert validate(ours, schema_of(manifest["kind"]), excerpt=True) == []
