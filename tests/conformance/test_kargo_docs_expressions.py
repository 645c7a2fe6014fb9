"""Kargo's expressions documentation examples render as the documentation says.

Each example (``kargo-docs/expressions.*.yaml`` in the conformance folder) is rendered with
:mod:`promoter.expressions` in the world of
tests/unit/expressions/test_expressions_templates.py (its Freight, variables and step outputs),
and the result compared with what Kargo's documentation shows.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from promoter.expressions import Scope, freight_functions, render
from tests.support import conformance
from tests.unit.expressions.test_expressions_templates import FREIGHT, SCOPE, VARIABLES

FIXTURES = conformance.root() / "kargo-docs"


def load_fixture(number: int) -> Any:
    return yaml.safe_load((FIXTURES / f"expressions.{number}.yaml").read_text())


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1, {"message": "Hello, world!"}),
        (6, {"numField": 42, "strField": "42"}),
        (9, {"numField": 42, "strField": "42", "rawField": "string"}),
        (10, {"numField": 42, "strField": "42", "rawField": '"string"'}),
        (11, {"contents": "name: app\nports:\n    - 80\n    - 443\n"}),
        (12, {"contents": '{\n  "name": "app",\n  "ports": [\n    80,\n    443\n  ]\n}\n'}),
        (21, {"commitID": "abc123"}),
        (22, {"commitID": "abc123"}),
        (24, {"imageTag": "1.27.0"}),
        (25, {"imageTag": "1.27.0"}),
        (27, {"chartVersion": "1.2.3"}),
        (28, {"chartVersion": "1.2.3"}),
        (29, {"chartVersion": "4.5.6"}),
        (30, {"chartVersion": "4.5.6"}),
    ],
)
def test_kargo_docs_examples(number: int, expected: dict[str, Any]) -> None:
    assert render(load_fixture(number)["config"], SCOPE) == expected


def test_kargo_docs_example_7_is_the_rendered_form_of_example_6() -> None:
    assert render(load_fixture(6)["config"], SCOPE) == load_fixture(7)["config"]


def test_kargo_docs_example_5_nested_values() -> None:
    scope = Scope({"foo": {"bar": "x"}, "baz": {"qux": 1}})
    assert render(load_fixture(5)["config"], scope) == {"nested": {"value": "x"}, "other": 1}


def test_kargo_docs_example_8_promotion_template() -> None:
    spec = load_fixture(8)["promotionTemplate"]["spec"]
    variables: dict[str, Any] = {}
    for var in spec["vars"]:
        scope = Scope({**VARIABLES, "vars": variables})
        variables[var["name"]] = render(var["value"], scope, where=f"vars.{var['name']}")
    assert variables["targetBranch"] == "stage/test"
    scope = Scope({**VARIABLES, "vars": variables}, freight_functions([FREIGHT]))
    steps = [render(step.get("config", {}), scope) for step in spec["steps"]]
    assert steps[0]["checkout"][1] == {"branch": "stage/test", "create": True, "path": "./out"}
    assert steps[2]["path"] == "./src/base"
    assert steps[3] == {"path": "./src/stages/test", "outPath": "./out"}
    assert steps[4]["message"] == "Updated image"
    assert steps[6]["apps"][0] == {
        "name": "example-test",
        "sources": [
            {"repoURL": "https://github.com/example/repo.git", "desiredRevision": "deadbeef"}
        ],
    }


def test_kargo_docs_example_35_semver_bump() -> None:
    steps = load_fixture(35)
    update = render(steps[1]["config"], SCOPE)
    assert update["updates"] == [{"key": "version", "value": "1.5.0"}]


def test_kargo_docs_example_36_if_expressions() -> None:
    steps = load_fixture(36)
    # image 1.27.0 against current 1.26.1 is a Minor change: push directly, no PR.
    assert [render(step["if"], SCOPE, where="if") for step in steps] == [True, False, False]
    direct = render(steps[0]["config"], SCOPE)
    assert direct["targetBranch"] == "stage/test"
    assert direct["message"] == "Minor update of public.ecr.aws/nginx/nginx"
    major = {
        **VARIABLES,
        "outputs": {**VARIABLES["outputs"], "read-version": {"currentVersion": "0.9.0"}},
    }
    scope = Scope(major, freight_functions([FREIGHT]))
    assert [render(step["if"], scope, where="if") for step in steps] == [False, True, True]
    pr = render(steps[2]["config"], scope)
    assert pr["sourceBranch"] == "kargo/promotion/abc"
    assert pr["title"] == "Major update of public.ecr.aws/nginx/nginx"


@pytest.mark.parametrize("number", [17, 18, 19])
def test_kargo_docs_metadata_examples_with_caller_functions(number: int) -> None:
    metadata = {"category": "hotfix", "config": {"settings": {"timeoutSeconds": 60}}}
    status = {"approvedFor": {"prod": {"approvedAt": "2025-01-01T00:00:00Z"}}, "currentlyIn": {}}
    scope = Scope(
        VARIABLES,
        {
            "freightMetadata": lambda name: metadata,
            "stageMetadata": lambda name: {"aws-region": "eu-west-1", **metadata},
            "freightStatus": lambda name: status,
        },
    )
    document = load_fixture(number)
    config = (
        document["config"]
        if "config" in document
        else (document["promotionTemplate"]["spec"]["steps"][0]["config"])
    )
    rendered = render(config, scope)
    if number == 17:
        assert rendered == {"category": "hotfix", "settings": "default-settings", "nested": 60}
    elif number == 18:
        assert rendered["wasBypassed"] is True
        assert rendered["approvedFor"] == status["approvedFor"]
    else:
        assert rendered == {"region": "eu-west-1", "tier": "default-tier", "nested": 60}


@pytest.mark.parametrize(
    ("number", "functions", "expected"),
    [
        (31, {"success": lambda: True}, {"wasSuccessful": True}),
        (32, {"failure": lambda: False}, {"wasFailure": False}),
        (33, {"always": lambda: True}, {"alwaysTrue": True}),
        (34, {"status": lambda alias: "Succeeded"}, {"status": "Succeeded"}),
    ],
)
def test_kargo_docs_status_examples_with_engine_functions(
    number: int, functions: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert render(load_fixture(number)["config"], Scope(VARIABLES, functions)) == expected
