"""Kargo's own test tables, ported: where Longshoreman claims to behave as Kargo does, this says so.

Each case names the Kargo test (or, where Kargo has none, the function) it comes from, in
akuity/kargo: inputs and expected results are Kargo's, the code under test is ours. Cases are
data; the few test functions below run them through our engine and steps. (Third-party fixture
files live in tests/conformance/; this module is our own data.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from promoter import engine
from promoter.builder import build_promotion
from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError
from promoter.model import (
    Phase,
    StepExecution,
    StepSpec,
    TaskRef,
    TaskSpec,
    parse_stage,
)
from promoter.steps.base import StepResult, StepServices, StepStatus
from promoter.steps.registry import builtin_registry
from tests.support.steps import make_context

NOW = datetime(2024, 7, 15, 22, 0, tzinfo=UTC)
FREIGHT = {
    "metadata": {"name": "f1", "namespace": "demo"},
    "origin": {"kind": "Warehouse", "name": "w"},
    "images": [{"repoURL": "nginx", "tag": "1.21.0"}],
}


class NoTasks:
    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return None


def build(steps: list[dict[str, Any]]) -> Any:
    stage = parse_stage(
        {
            "kind": "Stage",
            "metadata": {"name": "test", "namespace": "demo"},
            "spec": {"promotionTemplate": {"spec": {"steps": steps}}},
        }
    )
    return build_promotion(stage, FREIGHT, NoTasks(), actor="alice")


async def run_promotion(steps: list[dict[str, Any]], work_dir: Path) -> Any:
    runtime = engine.Runtime(
        registry=builtin_registry(),
        services=StepServices(),
        work_dir=work_dir,
        freight=FREIGHT,
        clock=lambda: NOW,
    )
    return (await engine.advance(build(steps), runtime)).promotion


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
