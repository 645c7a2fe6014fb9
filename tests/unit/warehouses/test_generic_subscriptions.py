"""Kargo's generic subscriptions in the pure Warehouse core: Kargo's test tables, ported.

Each case names the Kargo Go test it comes from (akuity/kargo, paths relative to the
repository): the spec's parsing (``api/v1alpha1/warehouse_types_test.go``), the warehouse
webhook's rules for names and the generic subscriptions' common fields
(``pkg/webhook/kubernetes/warehouse/webhook_test.go``), Freight built from their results
(``pkg/controller/warehouses/warehouses_test.go``), its ID (``pkg/api/freight.go``) and
``artifactFrom()`` over discovered artifacts (``pkg/expressions/function/functions_test.go``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.admission import Facts, validate
from promoter.expressions import ExpressionError, evaluate_expression
from promoter.resources.model import freight_reference
from promoter.warehouses.freight import FreightBuildError, build_freight, freight_id
from promoter.warehouses.generic import SubscriberError, Subscribers, discovery_result
from promoter.warehouses.spec import (
    GenericSubscription,
    SpecError,
    parse_spec,
    parse_subscription,
)
from promoter.warehouses.status import criteria_functions, missing_artifacts
from tests.support import objects


# TestWarehouseSpecUnmarshalValidation: each subscription on its own (the webhook's name rules
# are the next table).
@pytest.mark.parametrize(
    ("json_data", "error"),
    [
        ('{"subscriptions":[{"git":{"repoURL":"https://github.com/example/repo.git"}}]}', ""),
        ('{"subscriptions":[{"image":{"repoURL":"nginx"}}]}', ""),
        ('{"subscriptions":[{"chart":{"repoURL":"https://charts.example.com","name":"c"}}]}', ""),
        ('{"subscriptions":[{"s3":{"kind":"s3","name":"my-bucket"}}]}', ""),
        (
            '{"subscriptions":[{"git":{"repoURL":"https://github.com/example/repo.git"}},'
            '{"image":{"repoURL":"nginx"}},{"s3":{"kind":"s3","name":"bucket"}}]}',
            "",
        ),
        (
            '{"subscriptions":[{"name":"fake-sub","git":'
            '{"repoURL":"https://github.com/example/repo.git"}}]}',
            "",
        ),
        ('{"subscriptions":[{"name":"fake-sub","s3":{"config":{"bucket":"fake-bucket"}}}]}', ""),
        ('{"subscriptions":[{}]}', "must have exactly one top-level field naming its type"),
        (
            '{"subscriptions":[{"name":"fake-sub"}]}',
            "must have exactly one top-level field naming its type",
        ),
        (
            '{"subscriptions":[{"git":{"repoURL":"https://github.com/example/repo.git"},'
            '"image":{"repoURL":"nginx"}}]}',
            "must have exactly one top-level field naming its type",
        ),
        (
            '{"subscriptions":[{"name":"fake-sub","git":'
            '{"repoURL":"https://github.com/example/repo.git"},"image":{"repoURL":"nginx"}}]}',
            "must have exactly one top-level field naming its type",
        ),
        ('{"subscriptions":["not an object"]}', "must be an object"),
        (
            '{"subscriptions":[[{"git":{"repoURL":"https://github.com/example/repo.git"}}]]}',
            "must be an object",
        ),
    ],
)
def test_each_subscription_parses_as_kargo_unmarshals_it(json_data: str, error: str) -> None:
    entries = json.loads(json_data)["subscriptions"]
    if not error:
        for index, entry in enumerate(entries):
            parse_subscription(entry, index)
        return
    with pytest.raises(SpecError, match=error):
        for index, entry in enumerate(entries):
            parse_subscription(entry, index)


def test_a_generic_subscription_is_typed_by_its_key_and_keeps_name_config_and_limit() -> None:
    # TestWarehouseSpecMarshalUnmarshal: "generic subscription with config", "named generic
    # subscription"; the webhook's Default: a discovery limit of 20 when none is given.
    spec = parse_spec(
        {
            "subscriptions": [
                {"name": "fake-sub", "http": {"config": {"url": "https://example.com"}}},
                {"name": "other", "s3": {"discoveryLimit": 5}},
            ]
        }
    )
    first, second = spec.subscriptions
    assert first == GenericSubscription(
        "http", name="fake-sub", config={"url": "https://example.com"}, discovery_limit=20
    )
    assert second == GenericSubscription("s3", name="other", discovery_limit=5)


def test_a_generic_subscriptions_config_must_be_an_object() -> None:
    with pytest.raises(SpecError, match=r"spec\.subscriptions\[0\]\.s3\.config: must be an object"):
        parse_subscription({"name": "x", "s3": {"config": ["a"]}}, 0)


# Admission with nothing in the cluster.
NOTHING_STORED = Facts(
    lookup=lambda kind, namespace, name: None,
    step_kinds=frozenset(),
    now=datetime(2026, 1, 1, tzinfo=UTC),
)


def _refused(subscriptions: list[dict[str, Any]]) -> list[tuple[str, str]]:
    warehouse = objects.warehouse(subscriptions=subscriptions)
    return [(p.field, p.message) for p in validate(warehouse, None, NOTHING_STORED)]


# Test_webhook_ValidateCreate and Test_webhook_validateSpec: the names, and the generic
# subscriptions' common elements.
@pytest.mark.parametrize(
    ("subscriptions", "field", "words"),
    [
        (
            [
                {"name": "alpha", "image": {"repoURL": "fake-url-1"}},
                {"name": "alpha", "image": {"repoURL": "fake-url-2"}},
            ],
            "spec.subscriptions[1].name",
            'subscription name "alpha" already used at "spec.subscriptions[0].name"',
        ),
        (
            [{"name": "Not A Valid Name", "image": {"repoURL": "fake-url"}}],
            "spec.subscriptions[0].name",
            "must consist of lower case alphanumeric characters",
        ),
        (
            [{"name": "a" * 64, "image": {"repoURL": "fake-url"}}],
            "spec.subscriptions[0].name",
            "must be no more than 63 characters",
        ),
        (
            [{"fake-type": {"discoveryLimit": 20}}],
            "spec.subscriptions[0].name",
            "Required value",
        ),
        (
            [{"name": "a", "fake": {"discoveryLimit": 1000}}],
            "spec.subscriptions[0].fake.discoveryLimit",
            "must be <= 100",
        ),
        (
            [{"name": "a", "fake": {"discoveryLimit": -1}}],
            "spec.subscriptions[0].fake.discoveryLimit",
            "must be >= 1",
        ),
    ],
)
def test_names_and_generic_fields_are_refused_as_kargos_webhook_refuses_them(
    subscriptions: list[dict[str, Any]], field: str, words: str
) -> None:
    problems = _refused(subscriptions)
    assert [f for f, _ in problems] == [field]
    assert words in problems[0][1]


def test_a_named_generic_subscription_beside_the_typed_ones_is_accepted() -> None:
    assert (
        _refused(
            [
                {"name": "app", "image": {"repoURL": "ghcr.io/acme/app"}},
                {"name": "bucket", "s3": {"config": {"bucket": "b"}}},
            ]
        )
        == []
    )


def test_the_controller_refuses_what_the_webhook_refuses() -> None:
    # Without the admission webhook installed, the Warehouse still says why it does nothing.
    with pytest.raises(SpecError, match=r"spec\.subscriptions\[0\]\.name: Required value"):
        parse_spec({"subscriptions": [{"s3": {}}]})


def _sub(limit: int = 20) -> GenericSubscription:
    return GenericSubscription("s3", name="fake-sub", discovery_limit=limit)


def test_a_subscribers_references_become_kargos_discovery_result() -> None:
    # The subscriber's references, newest first, cut at the discovery limit, each named by the
    # subscription (whatever the subscriber wrote there).
    refs = [
        {"artifactType": "s3", "version": "v3", "metadata": {"etag": "3"}, "subscriptionName": "x"},
        {"version": "v2"},
        {"version": "v1"},
    ]
    assert discovery_result(_sub(limit=2), refs) == {
        "name": "fake-sub",
        "artifactReferences": [
            {
                "artifactType": "s3",
                "subscriptionName": "fake-sub",
                "version": "v3",
                "metadata": {"etag": "3"},
            },
            {"subscriptionName": "fake-sub", "version": "v2"},
        ],
    }
    assert discovery_result(_sub(), []) == {"name": "fake-sub", "artifactReferences": []}


@pytest.mark.parametrize(
    ("refs", "words"),
    [
        ({"version": "v1"}, "must be a list"),
        (["v1"], r"artifactReferences\[0\] must be an object"),
        ([{"version": ""}], r"artifactReferences\[0\]\.version is required"),
        ([{"version": "v1", "metadata": []}], "metadata must be an object"),
        ([{"version": "v1", "artifactType": 1}], "artifactType must be a string"),
    ],
)
def test_what_a_subscriber_returns_is_checked(refs: Any, words: str) -> None:
    with pytest.raises(SubscriberError, match=words):
        discovery_result(_sub(), refs)


def test_a_type_with_no_subscriber_fails_discovery_in_kargos_words() -> None:
    # warehouses.go discoverArtifacts with an empty registry (Kargo OSS registers none).
    with pytest.raises(SubscriberError, match=r"no matching registration found.*'s3'"):
        Subscribers().get("s3")


def test_freight_carries_the_newest_artifact_of_each_generic_subscription() -> None:
    # TestBuildFreightFromLatestArtifacts "success" (the generic results).
    warehouse = {"metadata": {"name": "w", "namespace": "demo"}}
    discovered = {
        "images": [{"repoURL": "ghcr.io/x/y", "references": [{"tag": "2", "digest": "sha256:2"}]}],
        "results": [
            {
                "name": "fake-sub",
                "artifactReferences": [
                    {"artifactType": "s3", "subscriptionName": "fake-sub", "version": "v2"},
                    {"artifactType": "s3", "subscriptionName": "fake-sub", "version": "v1"},
                ],
            }
        ],
    }
    freight = build_freight(warehouse, discovered)
    assert freight["artifacts"] == [
        {"artifactType": "s3", "subscriptionName": "fake-sub", "version": "v2"}
    ]
    assert freight["metadata"]["name"] == freight_id(
        freight["origin"], images=freight["images"], artifacts=freight["artifacts"]
    )


def test_no_freight_while_a_generic_subscription_found_nothing() -> None:
    # TestBuildFreightFromLatestArtifacts "no generic artifacts discovered".
    discovered = {
        "git": [{"repoURL": "fake-repo", "commits": [{"id": "fake-commit"}]}],
        "results": [{"name": "fake-sub", "artifactReferences": []}],
    }
    with pytest.raises(FreightBuildError, match="no versions discovered for subscription"):
        build_freight({"metadata": {"name": "w"}}, discovered)


def test_an_artifacts_part_of_the_freight_id_is_type_subscription_and_version() -> None:
    # pkg/api/freight.go artifactHashPart: metadata is not part of the name.
    origin = {"kind": "Warehouse", "name": "w"}
    artifact = {"artifactType": "s3", "subscriptionName": "sub", "version": "v1"}
    expected = hashlib.sha1(b"Warehouse/w:s3:sub:v1").hexdigest()
    assert freight_id(origin, artifacts=[artifact]) == expected
    assert freight_id(origin, artifacts=[{**artifact, "metadata": {"a": 1}}]) == expected
    assert freight_id(origin, artifacts=[{**artifact, "version": "v2"}]) != expected


def test_generic_results_alone_are_artifacts_discovered() -> None:
    # validateDiscoveredArtifacts counts results; an empty one fails when Freight is built.
    assert missing_artifacts({"results": [{"name": "s", "artifactReferences": []}]}) is None
    assert missing_artifacts({"results": []}) is not None


# Test_getArtifactFromDiscoveredArtifacts, through the criteria expression that uses it.
DISCOVERED = {
    "results": [
        {
            "name": "fake-sub",
            "artifactReferences": [
                {"subscriptionName": "fake-sub", "version": "v1.0.0", "metadata": {"k": "v"}},
                {"subscriptionName": "fake-sub", "version": "v1.1.0"},
            ],
        }
    ]
}


@pytest.mark.parametrize(
    ("discovered", "expression", "expected"),
    [
        (DISCOVERED, 'artifactFrom("fake-sub").Version', "v1.0.0"),
        (DISCOVERED, 'artifactFrom("fake-sub").Metadata.k', "v"),
        (DISCOVERED, 'artifactFrom("fake-sub").SubscriptionName', "fake-sub"),
        ({}, 'artifactFrom("fake-sub") == nil', True),
        (DISCOVERED, 'artifactFrom("wrong-sub") == nil', True),
    ],
)
def test_artifact_from_reads_the_newest_discovered_artifact(
    discovered: dict[str, Any], expression: str, expected: Any
) -> None:
    functions = criteria_functions(discovered)
    assert evaluate_expression(expression, {}, functions, where="criteria") == expected


@pytest.mark.parametrize("expression", ['artifactFrom("one", "two")', "artifactFrom(1)"])
def test_artifact_from_refuses_wrong_arguments(expression: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate_expression(expression, {}, criteria_functions(DISCOVERED), where="criteria")


def test_a_freights_artifacts_are_immutable_and_travel_in_its_references() -> None:
    # Kargo's freight webhook (artifacts compared by DeepEquals) and FreightReference.Artifacts,
    # which Stages' freightHistory and Promotions' status.freight carry.
    artifact = {"artifactType": "s3", "subscriptionName": "bucket", "version": "v1"}
    freight = {**objects.freight(), "artifacts": [artifact]}
    changed = {**freight, "artifacts": [{**artifact, "version": "v2"}]}
    problems = validate(changed, freight, NOTHING_STORED)
    assert [(p.field, "Freight is immutable" in p.message) for p in problems] == [
        ("artifacts", True)
    ]
    assert freight_reference(freight)["artifacts"] == [artifact]
