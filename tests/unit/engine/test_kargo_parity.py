"""Kargo's own test tables, ported: where Longshoreman claims to behave as Kargo does, this says so.

Each case names the Kargo test (or, where Kargo has none, the function) it comes from, in
akuity/kargo: inputs and expected results are Kargo's, the code under test is ours. Cases are
data; the few test functions below run them through our engine and steps. (Third-party fixture
files live in tests/conformance/; this module is our own data.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from promoter.engine import engine
from promoter.engine.builder import build_promotion
from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, evaluate_expression, freight_functions
from promoter.resources.model import (
    Phase,
    Promotion,
    StepExecution,
    StepSpec,
    TaskRef,
    TaskSpec,
    parse_stage,
)
from promoter.resources.stages import available_to, requests_origin
from promoter.rules.metadata import InMemoryMetadata, metadata_functions
from promoter.steps.base import StepResult, StepServices, StepStatus
from promoter.steps.metadata import PORT_KEY as METADATA_PORT
from promoter.steps.registry import builtin_registry
from tests.support import objects
from tests.support.steps import make_context, run_template

NOW = datetime(2024, 7, 15, 22, 0, tzinfo=UTC)
FREIGHT = objects.freight("f1", namespace="demo", images=[{"repoURL": "nginx", "tag": "1.21.0"}])


class NoTasks:
    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return None


def build(steps: list[dict[str, Any]], vars_: list[dict[str, Any]] | None = None) -> Any:
    stage = parse_stage(
        objects.stage("test", namespace="demo", steps=steps, template_vars=vars_ or None)
    )
    return build_promotion(stage, FREIGHT, NoTasks(), actor="alice")


async def run_promotion(
    steps: list[dict[str, Any]],
    work_dir: Path,
    *,
    vars_: list[dict[str, Any]] | None = None,
    services: StepServices | None = None,
    rollback: bool = False,
    freight: dict[str, Any] | None = None,
    warehouses: dict[str, Any] | None = None,
) -> Any:
    services = services or StepServices()
    port = services.extra.get(METADATA_PORT)
    return await run_template(
        steps,
        work_dir,
        freight=freight or FREIGHT,
        services=services,
        vars_=vars_ or (),
        rollback=rollback,
        warehouses=warehouses,
        extra_functions=metadata_functions(port, "demo") if port else {},
        now=NOW,
    )


# ---- default aliases ----------------------------------------------------------------------------

# api/v1alpha1/promotion_types.go, PromotionStep.GetAlias (Kargo >= 1.6 counts from 1; Kargo has
# no table test for it): (index, as, is a task step) -> alias.
GET_ALIAS = [
    (0, None, False, "step-1"),
    (1, None, False, "step-2"),
    (0, None, True, "task-1"),
    (4, None, True, "task-5"),
    (2, "deploy", False, "deploy"),
    (2, "deploy", True, "deploy"),
]


@pytest.mark.parametrize(("index", "as_", "is_task", "expected"), GET_ALIAS)
def test_get_alias(index: int, as_: str | None, is_task: bool, expected: str) -> None:
    spec = StepSpec(
        uses=None if is_task else "compose-output",
        alias=as_,
        task=TaskRef("t") if is_task else None,
    )
    assert spec.alias_at(index) == expected


async def test_outputs_and_status_of_step_1_are_the_first_steps(tmp_path: Path) -> None:
    done = await run_promotion(
        [
            {"uses": "compose-output", "config": {"n": 1}},
            {
                "uses": "compose-output",
                "as": "read",
                "config": {"n": "${{ outputs['step-1'].n }}", "s": "${{ status('step-1') }}"},
            },
        ],
        tmp_path / "work",
    )
    assert done.status.state["read"] == {"n": 1, "s": "Succeeded"}


# ---- lazy: what a step that does not run would evaluate to never matters -----------------------

# pkg/promotion/local_orchestrator.go, ExecuteSteps: a step's config is evaluated
# (StepEvaluator.BuildStepContext) only once the step runs; the Promotion's vars are evaluated
# again for each step that has an `if` or a config (StepEvaluator.Vars), so one that fails
# errors that step ("error checking if step ... should be skipped" / "failed to build step
# context") and the loop goes on: a later step whose `if` allows it still runs.
BROKEN = "${{ imageFrom('no-such-image').tag }}"


async def test_a_step_whose_if_is_false_is_never_rendered(tmp_path: Path) -> None:
    done = await run_promotion(
        [
            {
                "uses": "compose-output",
                "as": "never",
                "if": "${{ false }}",
                "config": {"t": BROKEN},
            },
            {"uses": "compose-output", "as": "after", "config": {"ok": True}},
        ],
        tmp_path / "work",
    )
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert [s.status for s in done.status.steps] == ["Skipped", "Succeeded"]


async def test_a_step_skipped_after_a_failure_is_never_rendered(tmp_path: Path) -> None:
    done = await run_promotion(
        [
            {"uses": "fail", "config": {"message": "stop"}},
            {"uses": "compose-output", "as": "skipped", "config": {"t": BROKEN}},
        ],
        tmp_path / "work",
    )
    assert [s.status for s in done.status.steps] == ["Failed", "Skipped"]
    assert done.status.phase is Phase.FAILED
    assert "no-such-image" not in done.status.message


async def test_a_promotion_var_that_fails_errors_the_step_that_needs_it_only(
    tmp_path: Path,
) -> None:
    done = await run_promotion(
        [
            {"uses": "compose-output", "as": "first", "config": {"tag": "${{ vars.tag }}"}},
            {"uses": "compose-output", "as": "skipped", "config": {"n": 1}},
            {
                "uses": "compose-output",
                "as": "cleanup",
                "if": "${{ always() }}",
                "config": {"n": 2},
            },
        ],
        tmp_path / "work",
        vars_=[{"name": "tag", "value": BROKEN}],
    )
    first, skipped, cleanup = done.status.steps
    assert first.status == "Errored"
    assert "promotion vars.tag" in first.message and "no-such-image" in first.message
    assert skipped.status == "Skipped"
    # The var fails for every step that has a config (Kargo evaluates them all per step): the
    # always() step ran its `if`, then errored on the var as well.
    assert cleanup.status == "Errored"
    assert done.status.phase is Phase.ERRORED


async def test_promotion_vars_are_evaluated_for_each_step_as_kargo_does(tmp_path: Path) -> None:
    # set-metadata changes what freightMetadata() answers; the next step's vars see the change.
    done = await run_promotion(
        [
            {"uses": "compose-output", "as": "before", "config": {"v": "${{ vars.note }}"}},
            {
                "uses": "set-metadata",
                "config": {
                    "updates": [{"kind": "Freight", "name": "f1", "values": {"note": "set"}}]
                },
            },
            {"uses": "compose-output", "as": "after", "config": {"v": "${{ vars.note }}"}},
        ],
        tmp_path / "work",
        vars_=[{"name": "note", "value": "${{ freightMetadata(ctx.targetFreight.name, 'note') }}"}],
        services=StepServices(extra={METADATA_PORT: InMemoryMetadata([FREIGHT], "demo")}),
    )
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert (done.status.state["before"]["v"], done.status.state["after"]["v"]) == (None, "set")


# pkg/promotion/evaluator_test.go, TestStepEvaluator_ShouldSkip: (case, if, skipped; None: the
# step errors with Kargo's "must evaluate to a boolean").
SHOULD_SKIP = [
    ("if condition evaluates to false - step should be skipped", "${{ false }}", True),
    ("if condition evaluates to true - step should not be skipped", "${{ true }}", False),
    ("if condition does not evaluate to a boolean", "invalid condition", None),
    ("if condition uses vars", "${{ vars.run }}", False),
]


@pytest.mark.parametrize(
    ("name", "if_", "skipped"),
    SHOULD_SKIP,
    ids=[f"TestStepEvaluator_ShouldSkip/{c[0]}" for c in SHOULD_SKIP],
)
async def test_should_skip(tmp_path: Path, name: str, if_: str, skipped: bool | None) -> None:
    done = await run_promotion(
        [{"uses": "compose-output", "if": if_, "config": {"ran": True}}],
        tmp_path / "work",
        vars_=[{"name": "run", "value": "true"}],
    )
    step = done.status.steps[0]
    if skipped is None:
        assert step.status == "Errored" and "must evaluate to a boolean" in step.message
    else:
        assert step.status == ("Skipped" if skipped else "Succeeded"), step.message


# ---- ctx ----------------------------------------------------------------------------------------


# pkg/promotion/evaluator_test.go, TestBuildCtxMap "full step context": what `ctx` holds (ours
# also names the origin's kind).
async def test_ctx_carries_kargos_fields(tmp_path: Path) -> None:
    done = await run_promotion(
        [{"uses": "compose-output", "as": "my-step", "config": {"ctx": "${{ ctx }}"}}],
        tmp_path / "work",
        services=StepServices(ui_base_url="https://kargo.example.com"),
        rollback=True,
    )
    assert done.status.state["my-step"]["ctx"] == {
        "uiBaseUrl": "https://kargo.example.com",
        "project": "demo",
        "promotion": done.name,
        "stage": "test",
        "targetFreight": {"name": "f1", "alias": "", "origin": {"kind": "Warehouse", "name": "w"}},
        "meta": {
            "promotion": {"actor": "alice", "rollback": True},
            "step": {"alias": "my-step"},
        },
    }


# pkg/promotion/evaluator_test.go, TestBuildCtxMap "empty step context": no public URL, not a
# rollback; an unnamed step's alias is its default one.
async def test_ctx_defaults(tmp_path: Path) -> None:
    done = await run_promotion(
        [{"uses": "compose-output", "config": {"a": "${{ ctx.meta.step.alias }}",
          "r": "${{ ctx.meta.promotion.rollback }}", "u": "${{ ctx.uiBaseUrl }}"}}],
        tmp_path / "work",
    )  # fmt: skip
    assert done.status.state["step-1"] == {"a": "step-1", "r": False, "u": ""}


def test_the_rollback_annotation_is_read_from_kargos_key_too() -> None:
    promotion = build([{"uses": "compose-output", "config": {"a": 1}}])
    obj = promotion.to_object()
    assert Promotion.from_object(obj).rollback is False
    obj["metadata"]["annotations"]["kargo.akuity.io/rollback"] = "true"
    assert Promotion.from_object(obj).rollback is True
    assert Promotion.from_object(replace(promotion, rollback=True).to_object()).rollback is True


# ---- origins: Kargo's freight finder ------------------------------------------------------------

# pkg/controller/freight/finder_test.go (TestFindCommit, TestFindImage, TestFindChart): the
# requested Warehouses' subscriptions decide the origin when none is given. Warehouses: name ->
# subscriptions (None: not in the namespace); Freight: (origin, collection, artifact).
O1, O2 = "test-warehouse", "some-other-warehouse"
REPO, CHART = "fake-repo-url", "fake-chart"


@dataclass(frozen=True)
class FinderCase:
    kargo_test: str
    expression: str
    warehouses: dict[str, list[dict[str, Any]] | None]
    freight: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    expected: Any = None
    error: str = ""


def _finder_cases(test: str, function: str, collection: str, kind: str) -> list[FinderCase]:
    if collection == "charts":
        art1 = {"repoURL": REPO, "name": CHART, "version": "fake-version-1"}
        art2 = {"repoURL": REPO, "name": CHART, "version": "fake-version-2"}
        sub: dict[str, Any] = {"repoURL": REPO, "name": CHART}
        other_sub: dict[str, Any] = {"repoURL": "not-the-right-repo", "name": "not-the-right-chart"}
        call = f"{function}('{REPO}', '{CHART}'"
        field, value1 = "Version", "fake-version-1"
    else:
        field = "ID" if collection == "commits" else "Tag"
        key = field.lower()
        art1 = {"repoURL": REPO, key: "fake-1"}
        art2 = {"repoURL": REPO, key: "fake-2"}
        sub, other_sub = {"repoURL": REPO}, {"repoURL": "not-the-right-repo"}
        call = f"{function}('{REPO}'"
        value1 = "fake-1"
    with_origin = f"{call}, warehouse('{O1}'))?.{field}"
    without = f"{call})?.{field}"
    cannot = "not found in referenced Freight" if collection == "charts" else ""
    return [
        FinderCase(f"{test}/desired origin specified, but not found", with_origin, {},
                   ((O2, collection, art2),), None),
        FinderCase(f"{test}/desired origin specified and found", with_origin, {},
                   ((O1, collection, art1), (O2, collection, art2)), value1),
        FinderCase(f"{test}/desired origin not specified and warehouse not found", without,
                   {O1: None}, error=f'Warehouse "{O1}" not found in namespace "demo"'),
        FinderCase(f"{test}/desired origin not specified and cannot be inferred", without,
                   {O1: [{kind: other_sub}]}, expected=None, error=cannot),
        FinderCase(f"{test}/desired origin not specified and more than one possible origin found",
                   without, {O1: [{kind: sub}], O2: [{kind: sub}]},
                   error="multiple requested Freight could potentially provide"),
        FinderCase(f"{test}/desired origin not specified and successfully inferred", without,
                   {O1: [{kind: sub}]}, ((O1, collection, art1), (O2, collection, art1)), value1),
    ]  # fmt: skip


# TestFindArtifact: a generic subscription is any subscription type but git, image and chart
# (api/v1alpha1/warehouse_types.go, WarehouseSpec.UnmarshalJSON), written as Kargo's manifests
# write it: the type as the key, the name beside it.
SUB_NAME, SUB_TYPE = "fake-sub", "fake-type"
ARTIFACT = {"subscriptionName": SUB_NAME, "version": "fake-version"}
GENERIC = {"name": SUB_NAME, SUB_TYPE: {}}
FIND_ARTIFACT = [
    FinderCase("TestFindArtifact/desired origin specified, but artifact not found",
               f"artifactFrom('{SUB_NAME}', warehouse('{O1}'))?.Version", {},
               ((O2, "artifacts", ARTIFACT),), None),
    FinderCase("TestFindArtifact/desired origin specified and artifact is found",
               f"artifactFrom('{SUB_NAME}', warehouse('{O1}'))?.Version", {},
               ((O1, "artifacts", ARTIFACT), (O2, "artifacts", ARTIFACT)), "fake-version"),
    FinderCase("TestFindArtifact/desired origin not specified and warehouse not found",
               f"artifactFrom('{SUB_NAME}')?.Version", {O1: None},
               error=f'Warehouse "{O1}" not found in namespace "demo"'),
    FinderCase("TestFindArtifact/desired origin not specified and cannot be inferred",
               f"artifactFrom('{SUB_NAME}')?.Version", {O1: [{"git": {"repoURL": "other-repo"}}]},
               ((O1, "artifacts", ARTIFACT),), None),
    FinderCase("TestFindArtifact/desired origin not specified and more than one possible origin "
               "found", f"artifactFrom('{SUB_NAME}')?.Version", {O1: [GENERIC], O2: [GENERIC]},
               error="multiple requested Freight could potentially provide"),
    FinderCase("TestFindArtifact/desired origin not specified and successfully inferred",
               f"artifactFrom('{SUB_NAME}')?.Version", {O1: [GENERIC]},
               ((O1, "artifacts", ARTIFACT),), "fake-version"),
    # Ours: a named git, image or chart subscription provides no generic artifact.
    FinderCase("(a named image subscription is not a generic one)",
               f"artifactFrom('{SUB_NAME}')?.Version", {O1: [{"name": SUB_NAME, "image": {}}]},
               ((O1, "artifacts", ARTIFACT),), None),
]  # fmt: skip


FINDER = [
    *_finder_cases("TestFindCommit", "commitFrom", "commits", "git"),
    *_finder_cases("TestFindImage", "imageFrom", "images", "image"),
    *_finder_cases("TestFindChart", "chartFrom", "charts", "chart"),
    *FIND_ARTIFACT,
]


@pytest.mark.parametrize("case", FINDER, ids=[c.kargo_test for c in FINDER])
def test_freight_finder(case: FinderCase) -> None:
    freights = [
        {"origin": {"kind": "Warehouse", "name": origin}, collection: [artifact]}
        for origin, collection, artifact in case.freight
    ]
    warehouses = {
        name: None if subs is None else {"spec": {"subscriptions": subs}}
        for name, subs in case.warehouses.items()
    }
    functions = freight_functions(freights, warehouses=warehouses, namespace="demo")
    if case.error:
        with pytest.raises(ExpressionError, match=re.escape(case.error)):
            evaluate_expression(case.expression, {}, functions)
    else:
        assert evaluate_expression(case.expression, {}, functions) == case.expected


# pkg/controller/freight/finder_test.go, TestHasAmbiguousImageRequest, through the step that
# uses it: kustomize-set-image without config.images (kustomize_image_setter.go,
# buildTargetImagesAutomatically) errors with Kargo's message.
HAS_AMBIGUOUS_IMAGE_REQUEST = [
    ("no ambiguous image request", {O1: [{"image": {"repoURL": REPO}}]}, ""),
    ("ambiguous image request",
     {O1: [{"image": {"repoURL": REPO}}], O2: [{"image": {"repoURL": REPO}}]},
     "manual configuration required due to ambiguous result: multiple requested Freight could "
     f"potentially provide a container image from repository {REPO}"),
    ("origin not found", {O1: None}, "not found in namespace"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "warehouses", "error"),
    HAS_AMBIGUOUS_IMAGE_REQUEST,
    ids=[c[0] for c in HAS_AMBIGUOUS_IMAGE_REQUEST],
)
async def test_kustomize_set_image_refuses_to_guess_between_warehouses(
    tmp_path: Path, name: str, warehouses: dict[str, list[dict[str, Any]] | None], error: str
) -> None:
    freight = {**FREIGHT, "images": [{"repoURL": REPO, "tag": "1.2.3"}]}
    done = await run_promotion(
        [
            {"uses": "file-write", "config": {"path": "kustomization.yaml", "contents": "{}\n"}},
            {"uses": "kustomize-set-image", "as": "set", "config": {"path": "."}},
        ],
        tmp_path / "work",
        freight=freight,
        warehouses={
            n: None if subs is None else {"spec": {"subscriptions": subs}}
            for n, subs in warehouses.items()
        },
    )
    step = done.status.steps[-1]
    if error:
        assert (step.status, done.status.phase) == ("Errored", Phase.ERRORED)
        assert error in step.message
    else:
        assert step.status == "Succeeded", step.message
        assert "newTag: 1.2.3" in (tmp_path / "work" / "kustomization.yaml").read_text()


async def test_image_from_without_an_origin_is_an_error_when_two_requested_warehouses_subscribe(
    tmp_path: Path,
) -> None:
    done = await run_promotion(
        [{"uses": "compose-output", "config": {"t": "${{ imageFrom('nginx').Tag }}"}}],
        tmp_path / "work",
        warehouses={
            n: {"spec": {"subscriptions": [{"image": {"repoURL": "nginx"}}]}} for n in "ab"
        },
    )
    assert done.status.phase is Phase.ERRORED
    assert (
        "multiple requested Freight could potentially provide a container image from repository "
        "nginx: please provide a Freight origin to disambiguate" in done.status.steps[0].message
    )


# ---- yaml-parse / json-parse: the document is expr-lang's environment --------------------------

# pkg/promotion/runner/builtin/json_parser_test.go Test_jsonParser_extractValues and
# yaml_parser_test.go Test_yamlParser_extractValues (the same table): document, expression,
# output (an error when it is an Exception type).
EXTRACT_VALUES = [
    ("valid expression", {"key": "value"}, "key", "value"),
    ("root list - access by index", ["first", "second", "third"], "$env[0]", "first"),
    ("root list - get length", ["first", "second", "third"], "len($env)", 3),
    ("root list of objects - access nested property",
     [{"name": "item1", "value": 10}, {"name": "item2", "value": 20}], "$env[1].name", "item2"),
    ("expression points to missing key", {"key": "value"}, "missingKey", None),
    ("expression evaluates to a nested object", {"nested": {"key": "value"}}, "nested",
     {"key": "value"}),
    ("expression evaluates to an array", {"array": [1, 2, 3]}, "array", [1, 2, 3]),
    ("expression evaluates to a string", {"key": "value"}, "key", "value"),
    ("expression evaluates to an integer", {"number": 42}, "number", 42),
    ("expression compilation error", {"key": "value"}, "(1 + 2", ExpressionError),
]  # fmt: skip


@pytest.mark.parametrize("kind", ["json-parse", "yaml-parse"])
@pytest.mark.parametrize(
    ("name", "document", "expression", "expected"),
    EXTRACT_VALUES,
    ids=[c[0] for c in EXTRACT_VALUES],
)
async def test_parse_steps_extract_values(
    tmp_path: Path, kind: str, name: str, document: Any, expression: str, expected: Any
) -> None:
    done = await run_promotion(
        [
            # JSON text is YAML too.
            {"uses": "file-write", "config": {"path": "doc", "contents": json.dumps(document)}},
            {
                "uses": kind,
                "as": "parse",
                "config": {
                    "path": "doc",
                    "outputs": [{"name": "result", "fromExpression": expression}],
                },
            },
        ],
        tmp_path / "work",
    )
    step = done.status.steps[-1]
    if expected is ExpressionError:
        assert step.status == "Errored"
        assert "(1 + 2" in step.message
    else:
        assert step.status == "Succeeded", step.message
        assert done.status.state["parse"] == {"result": expected}


# yaml_parser_test.go Test_yamlParser_readAndParseYAML "Valid YAML with scalar root": the
# whole document is $env.
async def test_yaml_parse_of_a_scalar_document(tmp_path: Path) -> None:
    done = await run_promotion(
        [
            {"uses": "file-write", "config": {"path": "doc", "contents": "simple string value\n"}},
            {
                "uses": "yaml-parse",
                "as": "parse",
                "config": {"path": "doc", "outputs": [{"name": "v", "fromExpression": "$env"}]},
            },
        ],
        tmp_path / "work",
    )
    assert done.status.state["parse"] == {"v": "simple string value"}


# ---- status() -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatusCase:
    kargo_test: str
    current: str
    executions: tuple[tuple[str, str], ...]
    arg: Any
    expected: str | None = None  # None: an error
    error: str = ""


# pkg/expressions/function/functions_test.go, Test_getStatus.
GET_STATUS = [
    StatusCase("Test_getStatus/one empty argument", "step-1", (), "", error="must not be empty"),
    StatusCase(
        "Test_getStatus/basic usage; no hit",
        "step-2",
        (("step-1", "Succeeded"),),
        "non-existent-step",
        "",
    ),
    StatusCase(
        "Test_getStatus/basic usage; hit",
        "step-2",
        (("step-1", "Succeeded"),),
        "step-1",
        "Succeeded",
    ),
    StatusCase(
        "Test_getStatus/used in a task; no alias match",
        "task-2::step-2",
        (("step-1", "Succeeded"), ("task-1::step-2", "Succeeded")),
        "step-1",
        "",
    ),
    StatusCase(
        "Test_getStatus/used in a task; no namespace match",
        "task-2::step-2",
        (("step-1", "Succeeded"), ("task-1::step-2", "Succeeded")),
        "step-1",
        "",
    ),
    StatusCase(
        "Test_getStatus/used in a task; hit",
        "task-2::step-2",
        (("task-2::step-1", "Succeeded"),),
        "step-1",
        "Succeeded",
    ),
]


@pytest.mark.parametrize("case", GET_STATUS, ids=[c.kargo_test for c in GET_STATUS])
def test_status_function(case: StatusCase) -> None:
    executions = [StepExecution(alias=a, status=s) for a, s in case.executions]
    steps = [StepSpec(uses="x", alias=a) for a, _ in case.executions]
    steps.append(StepSpec(uses="x", alias=case.current))
    executions.append(StepExecution(alias=case.current, status="Running"))
    status = engine.status_functions(steps, executions, len(steps) - 1)["status"]
    if case.expected is None:
        with pytest.raises(ExpressionError, match=case.error):
            status(case.arg)
    else:
        assert status(case.arg) == case.expected


# ---- refusals end Failed, other terminal errors Errored ----------------------------------------

# pkg/promotion/local_orchestrator.go, determineStepCompletion: a step returning Failed with a
# TerminalError (every builtin's config validation) ends Failed; a terminal error with any other
# status ends Errored; a non-terminal error counts against the error threshold.
RECORD = [
    ("refused config", ConfigRefused("file-write: config.path is required"), "Failed", True),
    ("terminal error", StepError("unauthorized", terminal=True), "Errored", True),
    ("retryable error, threshold 1", StepError("connection reset"), "Errored", True),
]


@pytest.mark.parametrize(("name", "error", "status", "done"), RECORD, ids=[r[0] for r in RECORD])
def test_terminal_errors_are_recorded_as_kargo_does(
    name: str, error: StepError, status: str, done: bool
) -> None:
    execution, finished = engine.record(
        StepSpec(uses="x", alias="a"), StepExecution(alias="a", status="Running"), error, NOW
    )
    assert (execution.status, finished, execution.message) == (status, done, error.message)


# pkg/promotion/runner/builtin/file_writer_test.go, Test_fileWriter_run: the refusals, each
# asserting StepResult{Status: Failed}; "fails when destination is directory" is Errored. Files
# that must exist first are written by an earlier step (an engine starts in a clean directory).
FILE_WRITER_RUN = [
    ("rejects executable permissions", {"path": "s.sh", "permissions": "0755"}, None, "Failed"),
    ("rejects world-writable permissions", {"path": "p", "permissions": "0666"}, None, "Failed"),
    ("fails when file exists without overwrite", {"path": "config.yaml"}, "config.yaml", "Failed"),
    ("fails when path escapes work dir", {"path": "../escape.txt"}, None, "Failed"),
    ("fails when path targets .git directory", {"path": ".git/config"}, None, "Failed"),
    ("fails when destination is directory", {"path": "config.yaml", "overwrite": True},
     "config.yaml/x", "Errored"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "config", "existing", "status"), FILE_WRITER_RUN, ids=[c[0] for c in FILE_WRITER_RUN]
)
async def test_file_write_refusals(
    tmp_path: Path, name: str, config: dict[str, Any], existing: str | None, status: str
) -> None:
    steps = [{"uses": "file-write", "as": "w", "config": {"contents": "new", **config}}]
    if existing:
        steps.insert(0, {"uses": "file-write", "config": {"path": existing, "contents": "old"}})
    done = await run_promotion(steps, tmp_path / "work")
    assert done.status.steps[-1].status == status, done.status.steps[-1].message
    assert done.status.phase is Phase(status)


# pkg/promotion/runner/builtin/kustomize_image_setter_test.go, Test_kustomizeImageSetter_convert
# "digest and tag are both specified".
async def test_kustomize_set_image_with_tag_and_digest_fails_the_promotion(tmp_path: Path) -> None:
    done = await run_promotion(
        [
            {
                "uses": "file-write",
                "config": {"path": "kustomization.yaml", "contents": "images: []\n"},
            },
            {
                "uses": "kustomize-set-image",
                "config": {
                    "path": ".",
                    "images": [{"image": "nginx", "tag": "1.21.0", "digest": "sha256:abc"}],
                },
            },
        ],
        tmp_path / "work",
    )
    assert done.status.phase is Phase.FAILED
    assert "tag and .digest are mutually exclusive" in done.status.message


# pkg/promotion/runner/builtin/schemas/compose-output-config.json: minProperties 1.
async def test_compose_output_with_an_empty_config_is_refused(tmp_path: Path) -> None:
    done = await run_promotion([{"uses": "compose-output"}], tmp_path / "work")
    assert (done.status.phase, done.status.steps[0].status) == (Phase.FAILED, "Failed")
    assert "at least one field" in done.status.message


# ---- kustomize-set-image keeps images sorted ----------------------------------------------------

# pkg/promotion/runner/builtin/kustomize_image_setter_test.go, Test_mergeImages: current images,
# images set by the step, the names in the file afterwards.
MERGE_IMAGES = [
    (
        "merge new and existing images",
        [{"name": "nginx", "newTag": "1.19.0"}],
        [{"image": "nginx", "tag": "1.21.0"}, {"image": "redis", "tag": "6.2.5"}],
        [{"name": "nginx", "newTag": "1.21.0"}, {"name": "redis", "newTag": "6.2.5"}],
    ),
    (
        "preserve existing images not in target",
        [{"name": "nginx", "newTag": "1.19.0"}, {"name": "mysql", "newTag": "8.0.0"}],
        [{"image": "nginx", "tag": "1.21.0"}],
        [{"name": "mysql", "newTag": "8.0.0"}, {"name": "nginx", "newTag": "1.21.0"}],
    ),
    (
        "handle asterisk separator",
        [{"name": "nginx", "newName": "custom-nginx", "newTag": "1.19.0"}],
        [{"image": "nginx", "newName": "*", "tag": "1.21.0"}],
        [{"name": "nginx", "newName": "custom-nginx", "newTag": "1.21.0"}],
    ),
    (
        "sort images by name",
        [{"name": "nginx", "newTag": "1.19.0"}, {"name": "mysql", "newTag": "8.0.0"}],
        [{"image": "redis", "tag": "6.2.5"}],
        [
            {"name": "mysql", "newTag": "8.0.0"},
            {"name": "nginx", "newTag": "1.19.0"},
            {"name": "redis", "newTag": "6.2.5"},
        ],
    ),
]


@pytest.mark.parametrize(
    ("name", "current", "images", "expected"), MERGE_IMAGES, ids=[c[0] for c in MERGE_IMAGES]
)
async def test_kustomize_set_image_merges_and_sorts(
    tmp_path: Path,
    name: str,
    current: list[dict[str, str]],
    images: list[dict[str, str]],
    expected: list[dict[str, str]],
) -> None:
    ctx = make_context(tmp_path, freight=FREIGHT)
    (ctx.work_dir / "kustomization.yaml").write_text(json.dumps({"images": current}))
    result = await builtin_registry()["kustomize-set-image"].run(
        ctx, {"path": ".", "images": images}
    )
    assert result.status is StepStatus.SUCCEEDED
    data = YAML(typ="safe").load((ctx.work_dir / "kustomization.yaml").read_text())
    assert data["images"] == expected


# ---- json-update --------------------------------------------------------------------------------

# pkg/promotion/runner/builtin/json_updater_test.go, Test_jsonUpdater_run, and sjson's documented
# behaviour ("Append an array value that is past the end"), which Kargo's updater is built on.
JSON_UPDATE = [
    ("Test_jsonUpdater_run/handle empty JSON file", "", "app.version", "1.0.1",
     {"app": {"version": "1.0.1"}}),
    ("Test_jsonUpdater_run/add new key to JSON", '{"settings": {}}', "settings.newKey", "added",
     {"settings": {"newKey": "added"}}),
    ("Test_jsonUpdater_run/update numeric value", '{"threshold": 10}', "threshold", 425,
     {"threshold": 425}),
    ("Test_jsonUpdater_run/update boolean value to false",
     '{"features": {"existingFeature": true}}', "features.existingFeature", False,
     {"features": {"existingFeature": False}}),
    ("sjson README: past the end of an array", '{"friends":["Andy","Carol"]}', "friends.4",
     "Sara", {"friends": ["Andy", "Carol", None, None, "Sara"]}),
    ("sjson README: append with -1", '{"friends":["Andy","Carol"]}', "friends.-1", "Sara",
     {"friends": ["Andy", "Carol", "Sara"]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "original", "key", "value", "expected"), JSON_UPDATE, ids=[c[0] for c in JSON_UPDATE]
)
async def test_json_update(
    tmp_path: Path, name: str, original: str, key: str, value: Any, expected: Any
) -> None:
    ctx = make_context(tmp_path)
    (ctx.work_dir / "config.json").write_text(original)
    result: StepResult = await builtin_registry()["json-update"].run(
        ctx, {"path": "config.json", "updates": [{"key": key, "value": value}]}
    )
    assert result.status is StepStatus.SUCCEEDED
    assert json.loads((ctx.work_dir / "config.json").read_text()) == expected


# ---- yaml-update / json-update: refused config Failed, a failed edit Errored --------------------

# pkg/sjson/split_key_test.go, TestSplitKey, through yaml-update (yaml_updater.go: SplitKey runs
# inside the edit, so a key it cannot split ends the step Errored); "empty key" is caught by the
# step's schema first (schemas/yaml-update-config.json: key minLength 1), so it ends Failed.
# (case, key, status, the values file afterwards)
SPLIT_KEY = [
    ("empty key", "", "Failed", None),
    ("starts with dot", ".foo", "Errored", None),
    ("ends with dot", "foo.", "Errored", None),
    ("double dots", "foo..bar", "Errored", None),
    ("invalid escape sequence", "foo\\nbar", "Errored", None),
    ("invalid use of colon", "foo:bar", "Errored", None),
    ("basic split", "foo.bar.bat.baz", "Succeeded", {"foo": {"bar": {"bat": {"baz": "v"}}}}),
    ("split key with escaped dots", "foo\\.bar.bat\\.baz", "Succeeded",
     {"foo.bar": {"bat.baz": "v"}}),
    ("split key with escaped colon", "foo.bar\\:bat.baz", "Succeeded",
     {"foo": {"bar:bat": {"baz": "v"}}}),
    ("split key with unescaped colon", "foo.bar.:2.baz", "Succeeded",
     {"foo": {"bar": {"2": {"baz": "v"}}}}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "key", "status", "expected"),
    SPLIT_KEY,
    ids=[f"TestSplitKey/{c[0]}" for c in SPLIT_KEY],
)
async def test_yaml_update_keys_kargo_cannot_split_error_the_step(
    tmp_path: Path, name: str, key: str, status: str, expected: Any
) -> None:
    done = await run_promotion(
        [
            {"uses": "file-write", "config": {"path": "values.yaml", "contents": "{}\n"}},
            {
                "uses": "yaml-update",
                "config": {"path": "values.yaml", "updates": [{"key": key, "value": "v"}]},
            },
        ],
        tmp_path / "work",
    )
    step = done.status.steps[-1]
    assert (step.status, done.status.phase) == (status, Phase(status)), step.message
    if expected is not None:
        values = YAML(typ="safe").load((tmp_path / "work" / "values.yaml").read_text())
        assert values == expected


# pkg/promotion/runner/builtin/json_updater.go, updateFile: isValidScalar is checked while the
# file is edited (the schema takes any value), so a map, a list or null errors the step and the
# file is left as it was; Test_jsonUpdater_convert's schema cases end Failed.
NOT_SCALAR = "must be a string, number or boolean"
JSON_UPDATE_PHASES = [
    ("value is a map", {"key": "a", "value": {"b": 1}}, "Errored", NOT_SCALAR),
    ("value is a list", {"key": "a", "value": [1]}, "Errored", NOT_SCALAR),
    ("value is null", {"key": "a", "value": None}, "Errored", NOT_SCALAR),
    ("key that cannot be split", {"key": "a..b", "value": 1}, "Errored", "empty part"),
    ("Test_jsonUpdater_convert/key is empty", {"key": "", "value": 1}, "Failed", "not be empty"),
    ("Test_jsonUpdater_convert/value not specified", {"key": "a"}, "Failed", "value is required"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "update", "status", "says"),
    JSON_UPDATE_PHASES,
    ids=[c[0] for c in JSON_UPDATE_PHASES],
)
async def test_json_update_phases(
    tmp_path: Path, name: str, update: dict[str, Any], status: str, says: str
) -> None:
    done = await run_promotion(
        [
            {"uses": "file-write", "config": {"path": "c.json", "contents": '{"a": 1}'}},
            {
                "uses": "json-update",
                "config": {"path": "c.json", "updates": [{"key": "b", "value": 2}, update]},
            },
        ],
        tmp_path / "work",
    )
    step = done.status.steps[-1]
    assert (step.status, done.status.phase) == (status, Phase(status)), step.message
    assert says in step.message
    assert (tmp_path / "work" / "c.json").read_text() == '{"a": 1}'


# ---- Freight availability and approval ----------------------------------------------------------

# api/v1alpha1/stage_types_test.go, TestStage_IsFreightAvailable (the cases without soak times,
# whose bookkeeping differs: tests/integration/test_freight_order.py covers ours), and
# TestStage_RequestsFreightFromOrigin. (case, the Stage's requestedFreight sources or None for
# none, the Freight's namespace, origin and status, available, requests the origin)
KARGO_NS, KARGO_WAREHOUSE, KARGO_STAGE = "fake-namespace", "fake-warehouse", "fake-stage"
UPSTREAM = {"stages": ["upstream-stage"]}
APPROVED = {"approvedFor": {KARGO_STAGE: {}}}
VERIFIED = {"verifiedIn": {"upstream-stage": {}}}
IS_FREIGHT_AVAILABLE = [
    ("stage and freight are in different namespaces", UPSTREAM, "wrong-namespace",
     KARGO_WAREHOUSE, APPROVED, False, True),
    ("freight is approved for stage but stage does not request freight from its origin", None,
     KARGO_NS, KARGO_WAREHOUSE, APPROVED, False, False),
    ("freight is approved for stage and stage requests freight from its origin", UPSTREAM,
     KARGO_NS, KARGO_WAREHOUSE, APPROVED, True, True),
    ("stage accepts freight direct from origin", {"direct": True}, KARGO_NS, KARGO_WAREHOUSE, {},
     True, True),
    ("freight is verified in an upstream; soak not required", UPSTREAM, KARGO_NS,
     KARGO_WAREHOUSE, VERIFIED, True, True),
    ("freight from origin not requested", UPSTREAM, KARGO_NS, "wrong-warehouse", VERIFIED, False,
     False),
    # Ours: an approval for another Stage lets nothing in here.
    ("(approved for another stage)", UPSTREAM, KARGO_NS, KARGO_WAREHOUSE,
     {"approvedFor": {"other-stage": {}}}, False, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "sources", "namespace", "origin", "status", "available", "requests"),
    IS_FREIGHT_AVAILABLE,
    ids=[f"TestStage_IsFreightAvailable/{c[0]}" for c in IS_FREIGHT_AVAILABLE],
)
def test_is_freight_available(
    name: str,
    sources: dict[str, Any] | None,
    namespace: str,
    origin: str,
    status: dict[str, Any],
    available: bool,
    requests: bool,
) -> None:
    stage = objects.stage(KARGO_STAGE, namespace=KARGO_NS, warehouse=KARGO_WAREHOUSE)
    stage["spec"]["requestedFreight"] = (
        [] if sources is None else [{"origin": {"kind": "Warehouse", "name": KARGO_WAREHOUSE},
                                     "sources": sources}]
    )  # fmt: skip
    freight = objects.freight("fake-freight", namespace=namespace, warehouse=origin, status=status)
    assert available_to(stage, freight, NOW) is available
    assert requests_origin(stage, freight) is requests
