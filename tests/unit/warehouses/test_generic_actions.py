"""Kargo's generic webhook receiver actions (promoter/warehouses/generic_actions.py), with the
cases of pkg/webhook/external/generic_test.go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from promoter.warehouses.generic_actions import Request, plan

PUSH = Request.of(
    [("X-Event-Type", "push")],
    b'{"repository": {"url": "http://github.com/example/repo.git"}}',
)


def warehouse(name: str, labels: Mapping[str, str], repo: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "test-project", "labels": dict(labels)},
        "spec": {"subscriptions": [{"git": {"repoURL": repo}}]},
    }


WAREHOUSES = [
    warehouse("api-warehouse", {"foo": "bar", "tier": "backend"}, "http://github.com/example/repo"),
    warehouse("failure-warehouse", {"foo": "bar", "tier": "frontend"}, "http://github.com/example/repo.git"),
    warehouse("other-label", {"foo": "baz", "tier": "backend"}, "http://github.com/example/repo"),
    warehouse("other-repo", {"foo": "bar", "tier": "backend"}, "https://github.com/example/other"),
]  # fmt: skip


def refresh(when: str, *criteria: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"action": "Refresh", "whenExpression": when, **extra,
            "targetSelectionCriteria": list(criteria)}  # fmt: skip


@pytest.mark.parametrize(
    ("when", "summary"),
    [
        ('{x!kj"}', "Error evaluating whenExpression"),
        ("foo()", "Error evaluating whenExpression"),
        ("request.header('X-Event-Type')", "Error evaluating whenExpression"),
    ],
)
def test_a_when_expression_that_fails_is_an_error(when: str, summary: str) -> None:
    [result] = plan([refresh(when)], PUSH, WAREHOUSES)
    assert (result.matched, result.result, result.summary) == (False, "Error", summary)
    assert result.is_error


def test_a_request_that_does_not_match_is_not_applicable() -> None:
    [result] = plan([refresh("request.header('X-Event-Type') == 'pull_request'")], PUSH, [])
    assert (result.matched, result.result) == (False, "NotApplicable")
    assert result.summary == "Request did not match whenExpression"
    assert not result.is_error


def test_labels_and_the_subscribed_urls_index_select_warehouses() -> None:
    criterion = {
        "kind": "Warehouse",
        "labelSelector": {
            "matchLabels": {"foo": "bar"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["backend", "frontend"]}
            ],
        },
        "indexSelector": {
            "matchIndices": [
                {
                    "key": "subscribedURLs",
                    "operator": "Equals",
                    "value": "${{ normalizeGit(request.body.repository.url) }}",
                }
            ]
        },
    }
    action = refresh(
        "request.header('X-Event-Type') == 'push'", criterion, parameters={"foo": "bar"}
    )
    [result] = plan([action], PUSH, WAREHOUSES)
    assert result.matched
    assert result.targets == [
        ("test-project", "api-warehouse"),
        ("test-project", "failure-warehouse"),
    ]
    result.finish({("test-project", "api-warehouse"): True})
    answer = result.to_json()
    assert answer["selectedTargets"] == [
        {"namespace": "test-project", "name": "api-warehouse", "success": True},
        {"namespace": "test-project", "name": "failure-warehouse", "success": False},
    ]
    assert (answer["result"], answer["summary"]) == (
        "PartialSuccess",
        "Refreshed 1 of 2 selected resources",
    )
    assert answer["parameters"] == {"foo": "bar"} and answer["matchedWhenExpression"] is True
    result.finish(
        {("test-project", "api-warehouse"): True, ("test-project", "failure-warehouse"): True}
    )
    assert (result.result, result.summary) == ("Success", "Refreshed 2 of 2 selected resources")


def test_names_params_and_query_parameters_are_expressions() -> None:
    request = Request.of([], b"", [("warehouse", "other-repo")])
    criterion = {"kind": "Warehouse", "name": "${{ request.params('warehouse') }}"}
    [by_query] = plan([refresh("true", criterion)], request, WAREHOUSES)
    assert by_query.targets == [("test-project", "other-repo")]
    criterion = {"kind": "Warehouse", "name": "${{ params.which }}"}
    action = refresh("params.which != ''", criterion, parameters={"which": "other-label"})
    [by_param] = plan([action], request, WAREHOUSES)
    assert by_param.targets == [("test-project", "other-label")]


def test_selection_errors_and_promotion_targets() -> None:
    bad = {"kind": "Warehouse", "name": "${{ request.body.nope.deeper }}"}
    [result] = plan([refresh("true", bad)], PUSH, WAREHOUSES)
    assert (result.matched, result.result) == (True, "Error")
    assert result.summary == "Error evaluating targetSelectionCriteria"
    [promotions] = plan([refresh("true", {"kind": "Promotion"})], PUSH, WAREHOUSES)
    assert promotions.result == "Error"


def test_a_body_that_is_not_json_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid request body"):
        Request.of([], b"{nope")
