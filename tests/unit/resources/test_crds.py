"""Checks of the CustomResourceDefinitions in deploy/crds.

The API server refuses a CRD whose schema is not *structural*, and silently prunes fields a schema
does not know; both only show up in a cluster. These tests catch them earlier: they check the
structural rules (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema),
the names and printer columns, and that our Kargo-style manifests (tests/fixtures/kargo) fit our
schemas once their group is changed. The manifests from Kargo's own documentation go through the
same validator in tests/conformance/test_kargo_docs_manifests.py.

jsonschema is not a dependency, so a small validator below covers the keywords our CRDs use.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from promoter.steps.base import StepStatus
from tests.support import objects
from tests.support.fixtures import kargo_manifests

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "deploy" / "crds"
GROUP = "longshoreman.dev"
KARGO_API_VERSION = "kargo.akuity.io/v1alpha1"

# kind -> (plural, scope, short names)
KINDS = {
    "Warehouse": ("warehouses", "Namespaced", ["wh"]),
    "Freight": ("freights", "Namespaced", None),
    "Stage": ("stages", "Namespaced", None),
    "Promotion": ("promotions", "Namespaced", ["promo", "promos"]),
    "PromotionTask": ("promotiontasks", "Namespaced", ["ptask"]),
    "ClusterPromotionTask": ("clusterpromotiontasks", "Cluster", ["cptask"]),
    "ProjectConfig": ("projectconfigs", "Namespaced", None),
    "ClusterConfig": ("clusterconfigs", "Cluster", None),
}
PROMOTION_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Errored", "Aborted"]


def _load_crds() -> dict[str, dict[str, Any]]:
    crds = {}
    for path in sorted(CRD_DIR.glob(f"*.{GROUP}.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(docs) == 1, f"{path.name}: one CRD per file"
        crds[docs[0]["spec"]["names"]["kind"]] = {"path": path, "doc": docs[0]}
    return crds


CRDS = _load_crds()


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["doc"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


# --- a validator for the subset of OpenAPI v3 our CRDs use ------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def validate(value: Any, schema: dict[str, Any], *, excerpt: bool = False) -> list[str]:
    """Errors of ``value`` against a CRD schema, the way the API server would see them.

    Unknown fields are errors (kubectl's default ``--validate=strict``). ``null`` counts as
    absent, because the API server prunes nulls of fields that are not ``nullable``. With
    ``excerpt`` true, ``required`` and ``minItems`` are not checked: documentation examples elide
    parts with ``# ...``.
    """
    errors: list[str] = []
    _validate(value, schema, "", errors, excerpt)
    return errors


def _validate(
    value: Any, schema: dict[str, Any], path: str, errors: list[str], excerpt: bool
) -> None:
    where = path or "<root>"
    expected = schema.get("type")
    if expected is not None:
        # bool is an int in Python; YAML `true` must not pass as an integer.
        if not isinstance(value, _TYPES[expected]) or (
            expected in ("integer", "number") and isinstance(value, bool)
        ):
            errors.append(f"{where}: expected {expected}, got {type(value).__name__}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: longer than {schema['maxLength']}")
        if schema.get("format") == "date-time" and not _DATE_TIME.match(value):
            errors.append(f"{where}: {value!r} is not an RFC 3339 date-time")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} is below {schema['minimum']}")
    if isinstance(value, list):
        if not excerpt and len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: needs at least {schema['minItems']} item(s)")
        for i, item in enumerate(value):
            if item is not None:
                _validate(item, schema.get("items", {}), f"{path}[{i}]", errors, excerpt)
    if isinstance(value, dict):
        present = {k: v for k, v in value.items() if v is not None}
        if not excerpt:
            for key in schema.get("required", []):
                if key not in present:
                    errors.append(f"{where}: {key} is required")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in present.items():
            child = f"{path}.{key}" if path else key
            if child == "metadata":
                # ObjectMeta is validated by the API server itself, not by the CRD schema.
                continue
            if key in properties:
                _validate(item, properties[key], child, errors, excerpt)
            elif isinstance(extra, dict):
                _validate(item, extra, child, errors, excerpt)
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{child}: unknown field")


# --- structural schema rules --------------------------------------------------------------------

_FORBIDDEN_KEYWORDS = {
    "$ref",
    "definitions",
    "dependencies",
    "additionalItems",
    "patternProperties",
    "id",
    "$schema",
}


def _walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or "<root>", schema
    for key, child in schema.get("properties", {}).items():
        yield from _walk(child, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{*}}")


def structural_errors(schema: dict[str, Any]) -> list[str]:
    errors = []
    for path, node in _walk(schema):
        if "type" not in node and node.get("x-kubernetes-preserve-unknown-fields") is not True:
            errors.append(f"{path}: no type and not x-kubernetes-preserve-unknown-fields")
        if "type" in node and node["type"] not in _TYPES:
            errors.append(f"{path}: unknown type {node['type']!r}")
        if "properties" in node and "additionalProperties" in node:
            errors.append(f"{path}: additionalProperties together with properties")
        if node.get("type") == "array" and not isinstance(node.get("items"), dict):
            errors.append(f"{path}: array without an items schema")
        if node.get("type") not in (None, "object") and (
            "properties" in node or "additionalProperties" in node
        ):
            errors.append(f"{path}: properties on a non-object")
        if node.get("uniqueItems") is True:
            errors.append(f"{path}: uniqueItems cannot be true")
        for keyword in _FORBIDDEN_KEYWORDS & node.keys():
            errors.append(f"{path}: {keyword} is not allowed in a CRD schema")
        for keyword in ("allOf", "anyOf", "oneOf", "not"):
            if keyword in node:
                errors.append(
                    f"{path}: {keyword} is not used here (and needs care to stay structural)"
                )
        for value in node.get("enum", []):
            if node.get("type") in _TYPES and not isinstance(value, _TYPES[node["type"]]):
                errors.append(f"{path}: enum value {value!r} is not a {node['type']}")
        if "default" in node and validate(node["default"], {**node, "default": None}):
            errors.append(f"{path}: default {node['default']!r} does not fit the schema")
    return errors


def _schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    # ".metadata.labels.a\.b/c" style paths are not used by our columns; plain dots suffice once
    # subscripts and filters ("[0]", '[?(@.type=="Ready")]') are reduced to "[]": into the items.
    for segment in re.sub(r"\[[^\]]*\]", "[]", json_path).lstrip(".").split("."):
        part, into_items = segment.removesuffix("[]"), segment.endswith("[]")
        if node is None:
            return None
        if part in node.get("properties", {}):
            node = node["properties"][part]
            if into_items:
                node = node.get("items")
        elif node.get("x-kubernetes-preserve-unknown-fields"):
            return node
        elif node.get("type") == "object" and "properties" not in node and part:
            # metadata: {type: object} stands for ObjectMeta, which the API server knows.
            return node
        else:
            return None
    return node


# --- the CRDs themselves ------------------------------------------------------------------------


def test_one_crd_per_kind() -> None:
    assert sorted(CRDS) == sorted(KINDS)


def test_kustomization_lists_every_crd() -> None:
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == sorted(c["path"].name for c in CRDS.values())


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_identity(kind: str) -> None:
    plural, scope, short_names = KINDS[kind]
    crd = CRDS[kind]["doc"]
    assert CRDS[kind]["path"].name == f"{plural}.{GROUP}.yaml"
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{GROUP}"
    spec = crd["spec"]
    assert spec["group"] == GROUP
    assert spec["scope"] == scope
    names = spec["names"]
    assert names["kind"] == kind
    assert names["listKind"] == f"{kind}List"
    assert names["plural"] == plural
    assert names["singular"] == kind.lower()
    assert names.get("shortNames") == short_names
    assert names["categories"] == ["longshoreman"]
    [version] = spec["versions"]
    assert version["name"] == "v1alpha1"
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind: str) -> None:
    schema = schema_of(kind)
    assert schema["type"] == "object"
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert structural_errors(schema) == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_printer_columns_point_into_the_schema(kind: str) -> None:
    version = CRDS[kind]["doc"]["spec"]["versions"][0]
    for column in version["additionalPrinterColumns"]:
        assert column["type"] in ("string", "integer", "number", "boolean", "date")
        assert _schema_at(schema_of(kind), column["jsonPath"]) is not None, column


def test_promotion_printer_columns() -> None:
    columns = CRDS["Promotion"]["doc"]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert columns == [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Stage", "type": "string", "jsonPath": ".spec.stage"},
        {"name": "Freight", "type": "string", "jsonPath": ".spec.freight"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    ]


def test_promotion_phases_and_step_statuses() -> None:
    status = schema_of("Promotion")["properties"]["status"]["properties"]
    assert status["phase"]["enum"] == PROMOTION_PHASES
    step_status = status["stepExecutionMetadata"]["items"]["properties"]["status"]
    # The engine writes StepStatus values; the schema must accept every one of them.
    assert sorted(step_status["enum"]) == sorted(s.value for s in StepStatus)
    assert schema_of("Promotion")["properties"]["spec"]["required"] == ["stage", "freight"]


def test_freight_contents_are_top_level() -> None:
    properties = schema_of("Freight")["properties"]
    assert "spec" not in properties
    for key in ("alias", "origin", "commits", "images", "charts"):
        assert key in properties
    assert set(properties["status"]["properties"]) >= {"verifiedIn", "approvedFor", "currentlyIn"}


def _steps_schema(kind: str) -> dict[str, Any]:
    spec = schema_of(kind)["properties"]["spec"]["properties"]
    if kind == "Stage":
        spec = spec["promotionTemplate"]["properties"]["spec"]["properties"]
    steps: dict[str, Any] = spec["steps"]["items"]
    return steps


def test_every_kind_shares_one_step_shape() -> None:
    kinds = ["Stage", "Promotion", "PromotionTask", "ClusterPromotionTask"]
    first = _steps_schema(kinds[0])
    assert set(first["properties"]) == {
        "uses", "as", "config", "vars", "if", "continueOnError", "retry", "task",
    }  # fmt: skip
    assert first["properties"]["config"]["x-kubernetes-preserve-unknown-fields"] is True
    assert first["properties"]["task"]["properties"]["kind"]["enum"] == [
        "PromotionTask",
        "ClusterPromotionTask",
    ]
    for kind in kinds[1:]:
        assert _steps_schema(kind) == first, kind


# --- the validator itself, so a passing fixture check means something --------------------------

_PROMOTION = objects.served(
    objects.promotion(
        "test.01j2w7a15cxjjgejresfyw6ysp.666209f",
        "test",
        namespace="kargo-demo",
        freight="666209fd9755a1e48bec6b27f5f447747410dd9e",
        vars=[{"name": "repo", "value": "https://github.com/example/repo.git"}],
        steps=[
            {"uses": "git-clone", "as": "clone", "config": {"checkout": [{"branch": "main"}]}},
            {"uses": "http", "retry": {"timeout": "10m", "errorThreshold": 3}, "if": "true"},
        ],
        phase="Running",
        status={
            "currentStep": 1,
            "startedAt": "2024-07-15T22:13:25Z",
            "stepExecutionMetadata": [
                {"alias": "clone", "status": "Succeeded", "errorCount": 0},
                {"alias": "step-1", "status": "Running", "startedAt": "2024-07-15T22:13:30Z"},
            ],
            "state": {"clone": {"commit": "abc"}},
            "freight": {"name": "666209f", "origin": {"kind": "Warehouse", "name": "w"}},
        },
    )
)


def test_a_complete_promotion_is_valid() -> None:
    assert validate(_PROMOTION, schema_of("Promotion")) == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda p: p["status"].update(phase="Done"), "status.phase: 'Done' is not one of"),
        (lambda p: p["spec"].pop("stage"), "spec: stage is required"),
        (lambda p: p["spec"].update(stages="test"), "spec.stages: unknown field"),
        (lambda p: p["status"].update(currentStep="1"), "status.currentStep: expected integer"),
        (lambda p: p["status"].update(currentStep=True), "status.currentStep: expected integer"),
        (lambda p: p["spec"]["steps"][1]["retry"].update(timeout="ten"), "does not match"),
        (lambda p: p["status"].update(finishedAt="yesterday"), "not an RFC 3339 date-time"),
        (lambda p: p["spec"]["steps"][0].update(task={"kind": "Task"}), "task: name is required"),
    ],
)
def test_validator_catches_mistakes(change: Any, error: str) -> None:
    promotion = yaml.safe_load(yaml.safe_dump(_PROMOTION))
    change(promotion)
    errors = validate(promotion, schema_of("Promotion"))
    assert any(error in e for e in errors), errors


# --- our Kargo-style manifests fit ---------------------------------------------------------------

OUR_MANIFESTS = kargo_manifests()


def test_our_fixtures_cover_every_kind() -> None:
    assert {doc["kind"] for _, doc in OUR_MANIFESTS} == set(KINDS)
    assert {doc["apiVersion"] for _, doc in OUR_MANIFESTS} == {KARGO_API_VERSION}


@pytest.mark.parametrize(
    ("name", "manifest"), OUR_MANIFESTS, ids=[name for name, _ in OUR_MANIFESTS]
)
def test_our_kargo_manifest_fits_our_schema(name: str, manifest: dict[str, Any]) -> None:
    ours = {**manifest, "apiVersion": f"{GROUP}/v1alpha1"}
    # Whole manifests, unlike documentation excerpts: required fields are checked too.
    assert validate(ours, schema_of(manifest["kind"])) == []
