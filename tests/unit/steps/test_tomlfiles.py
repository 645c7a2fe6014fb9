"""``toml-parse`` and ``toml-update`` (workdir/tomlfiles.py) as Kargo's tests have them
(toml_parser_test.go, toml_updater_test.go, pkg/toml/toml_test.go); inputs and expected outputs
are Kargo's, the code is ours. Steps are called directly with a rendered config, on a real
temporary work directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.steps.base import Effect, StepStatus, effect_of
from tests.support.steps import (
    STEPS,
    RefusalCase,
    assert_schema_refuses,
    run_step,
    write_files,
)


@pytest.mark.parametrize("kind", ["toml-parse", "toml-update"])
def test_toml_steps_only_touch_the_work_directory(kind: str) -> None:
    assert effect_of(STEPS[kind]) is Effect.LOCAL


TOML_PARSE_REFUSALS = [
    RefusalCase(
        "Test_tomlParser_convert/path not specified",
        {"outputs": [{"name": "output1", "fromExpression": "app.version"}]},
        "config.path is required",
    ),
    RefusalCase(
        "Test_tomlParser_convert/path is empty string",
        {"path": "", "outputs": [{"name": "output1", "fromExpression": "app.version"}]},
        "config.path must be a non-empty path",
    ),
    RefusalCase(
        "Test_tomlParser_convert/outputs field is missing",
        {"path": "valid.toml"},
        "config.outputs is required",
    ),
    RefusalCase(
        "Test_tomlParser_convert/outputs field is an empty array",
        {"path": "valid.toml", "outputs": []},
        "config.outputs must list at least one output",
    ),
    RefusalCase(
        "Test_tomlParser_convert/name is not specified",
        {"path": "valid.toml", "outputs": [{"fromExpression": "app.version"}]},
        "config.outputs[0].name is required",
    ),
    RefusalCase(
        "Test_tomlParser_convert/fromExpression is not specified",
        {"path": "valid.toml", "outputs": [{"name": "output1"}]},
        "config.outputs[0].fromExpression is required",
    ),
]


@dataclass(frozen=True)
class ParseCase:
    kargo_test: str
    content: str | None
    outputs: list[dict[str, str]]
    expected: dict[str, Any] | None = None
    error: str | None = None


TOML_PARSE_CASES = [
    ParseCase(
        "Test_tomlParser_run/successful run with outputs",
        '[app]\nversion = "1.0.0"\n\n[features]\nnewFeature = false\n',
        [
            {"name": "appVersion", "fromExpression": "app.version"},
            {"name": "featureStatus", "fromExpression": "features.newFeature"},
        ],
        expected={"appVersion": "1.0.0", "featureStatus": False},
    ),
    ParseCase(
        "Test_tomlParser_run/failed to extract outputs",
        '[app]\nversion = "1.0.0"\n',
        [{"name": "invalidField", "fromExpression": "nonexistent.path"}],
        error="config.outputs[0].fromExpression",
    ),
    ParseCase(
        "Test_tomlParser_run/handle empty TOML file",
        "",
        [{"name": "key", "fromExpression": "app.key"}],
        error="is empty",
    ),
    ParseCase(
        "Test_tomlParser_run/path is a directory instead of a file",
        None,
        [{"name": "key", "fromExpression": "app.key"}],
        error="is not a regular file",
    ),
    ParseCase(
        "Test_tomlParser_readAndParseTOML/valid TOML with nested structure",
        'title = "example"\nnum = 42\nflag = true\nitems = [1, 2]\n[app]\nversion = "1.2.3"\n',
        [
            {"name": "title", "fromExpression": "title"},
            {"name": "num", "fromExpression": "num"},
            {"name": "flag", "fromExpression": "flag"},
            {"name": "items", "fromExpression": "items"},
            {"name": "app", "fromExpression": "app"},
        ],
        expected={
            "title": "example",
            "num": 42,
            "flag": True,
            "items": [1, 2],
            "app": {"version": "1.2.3"},
        },
    ),
    ParseCase(
        "Test_tomlParser_readAndParseTOML/invalid TOML syntax",
        "title = \n",
        [{"name": "t", "fromExpression": "title"}],
        error="could not parse TOML file",
    ),
    ParseCase(
        "(ours: dates become the text TOML writes, so outputs stay JSON)",
        "released = 2024-05-01\n",
        [{"name": "released", "fromExpression": "released"}],
        expected={"released": "2024-05-01"},
    ),
]


@pytest.mark.parametrize("case", TOML_PARSE_CASES, ids=lambda c: c.kargo_test)
async def test_toml_parse(case: ParseCase, tmp_path: Path) -> None:
    if case.content is None:
        (tmp_path / "config.toml").mkdir()
    else:
        write_files(tmp_path, {"config.toml": case.content})
    config = {"path": "config.toml", "outputs": case.outputs}
    if case.error is not None:
        with pytest.raises(StepError, match=re.escape(case.error)):
            await run_step("toml-parse", tmp_path, config)
        return
    result = await run_step("toml-parse", tmp_path, config)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == case.expected


TOML_UPDATE_REFUSALS = [
    RefusalCase(
        "Test_tomlUpdater_convert/path is not specified",
        {"updates": [{"key": "a", "value": 1}]},
        "config.path is required",
    ),
    RefusalCase(
        "Test_tomlUpdater_convert/path is empty",
        {"path": "", "updates": [{"key": "a", "value": 1}]},
        "config.path must be a non-empty path",
    ),
    RefusalCase(
        "Test_tomlUpdater_convert/updates is null",
        {"path": "c.toml"},
        "config.updates is required",
    ),
    RefusalCase(
        "Test_tomlUpdater_convert/updates is empty",
        {"path": "c.toml", "updates": []},
        "config.updates must list at least one update",
    ),
    RefusalCase(
        "Test_tomlUpdater_convert/key not specified",
        {"path": "c.toml", "updates": [{"value": 1}]},
        "config.updates[0].key is required",
    ),
    RefusalCase(
        "Test_tomlUpdater_convert/key is empty",
        {"path": "c.toml", "updates": [{"key": "", "value": 1}]},
        "config.updates[0].key must not be empty",
    ),
    RefusalCase(
        "Test_tomlUpdater_convert/value not specified",
        {"path": "c.toml", "updates": [{"key": "a"}]},
        "config.updates[0].value is required",
    ),
]


@dataclass(frozen=True)
class SetCase:
    kargo_test: str
    before: str
    updates: list[tuple[str, Any]]
    after: str | None = None
    error: str | None = None


# TestSetValuesInBytes (pkg/toml/toml_test.go), run through the step.
SET_CASES = [
    SetCase("invalid TOML", "key = \n", [("key", 1)], error="error parsing input"),
    SetCase("missing key", 'title = "old"\n', [("missing", "new")], error="key path not found"),
    SetCase(
        "non scalar target",
        '[service]\nname = "api"\n',
        [("service", "other")],
        error="addresses Table instead of a scalar node",
    ),
    SetCase(
        "unsupported value type",
        'title = "old"\n',
        [("title", ["a", "b"])],
        error="value is not a TOML scalar type",
    ),
    SetCase(
        "updates scalar value",
        'title = "old"\nactive = true\n',
        [("title", "new")],
        "title = 'new'\nactive = true\n",
    ),
    SetCase(
        "updates escaped dot key",
        '"example.com/version" = "1.0.0"\n',
        [("example\\.com/version", "2.0.0")],
        "\"example.com/version\" = '2.0.0'\n",
    ),
    SetCase(
        "updates scalar under table header",
        '[package]\nversion = "1.0.0"\n',
        [("package.version", "2.0.0")],
        "[package]\nversion = '2.0.0'\n",
    ),
    SetCase(
        "updates scalar under nested table header",
        "[a.b]\nc = 1\n",
        [("a.b.c", 99)],
        "[a.b]\nc = 99\n",
    ),
    SetCase(
        "updates scalar under table header that follows other expressions",
        "threshold = 1\n\n[features]\nenabled = false\n",
        [("features.enabled", True)],
        "threshold = 1\n\n[features]\nenabled = true\n",
    ),
    SetCase(
        "updates array item", "values = [1, 2, 3]\n", [("values.1", 42)], "values = [1, 42, 3]\n"
    ),
    SetCase(
        "updates inline table item",
        'service = { name = "api", port = 8080 }\n',
        [("service.port", 9090)],
        'service = { name = "api", port = 9090 }\n',
    ),
    SetCase(
        "updates array table item",
        '[[services]]\nname = "api"\nport = 8080\n\n[[services]]\nname = "web"\nport = 8081\n',
        [("services.1.port", 9090)],
        '[[services]]\nname = "api"\nport = 8080\n\n[[services]]\nname = "web"\nport = 9090\n',
    ),
    SetCase(
        "preserves inline comments around updated value",
        'title = "old" # keep me\nactive = true\n',
        [("title", "new")],
        "title = 'new' # keep me\nactive = true\n",
    ),
    SetCase(
        "preserves standalone comment lines",
        "# header comment\nv = 1\n# footer comment\n",
        [("v", 2)],
        "# header comment\nv = 2\n# footer comment\n",
    ),
    SetCase(
        "preserves blank lines between sections",
        "[a]\nx = 1\n\n\n[b]\ny = 2\n",
        [("b.y", 99)],
        "[a]\nx = 1\n\n\n[b]\ny = 99\n",
    ),
    SetCase(
        "value grows in length",
        "v = 1\nother = true\n",
        [("v", 99999)],
        "v = 99999\nother = true\n",
    ),
    SetCase(
        "value shrinks in length", "v = 99999\nother = true\n", [("v", 1)], "v = 1\nother = true\n"
    ),
    SetCase(
        "multiple updates to different top-level keys",
        "a = 1\nb = 2\nc = 3\n",
        [("a", 10), ("c", 30)],
        "a = 10\nb = 2\nc = 30\n",
    ),
    SetCase(
        "multiple updates across top-level and table-scoped keys",
        'threshold = 1\n\n[package]\nversion = "1.0.0"\n\n[features]\nenabled = false\n',
        [("threshold", 100), ("package.version", "2.0.0"), ("features.enabled", True)],
        "threshold = 100\n\n[package]\nversion = '2.0.0'\n\n[features]\nenabled = true\n",
    ),
    SetCase(
        "multiple updates within same table",
        '[server]\nhost = "localhost"\nport = 8080\n',
        [("server.host", "0.0.0.0"), ("server.port", 9090)],
        "[server]\nhost = '0.0.0.0'\nport = 9090\n",
    ),
    SetCase("duplicate key in updates uses last value", "v = 1\n", [("v", 2), ("v", 3)], "v = 3\n"),
    SetCase(
        "(ours: a string with a quote is written as a basic string, as go-toml does)",
        'v = "a"\n',
        [("v", "it's")],
        'v = "it\'s"\n',
    ),
]


@pytest.mark.parametrize("case", SET_CASES, ids=lambda c: f"TestSetValuesInBytes/{c.kargo_test}")
async def test_toml_update_sets_values_as_kargo_does(case: SetCase, tmp_path: Path) -> None:
    write_files(tmp_path, {"c.toml": case.before})
    config = {"path": "c.toml", "updates": [{"key": k, "value": v} for k, v in case.updates]}
    if case.error is not None:
        with pytest.raises(StepError, match=re.escape(case.error)) as caught:
            await run_step("toml-update", tmp_path, config)
        assert "TOML file update failed" in caught.value.message
        assert (tmp_path / "c.toml").read_text() == case.before
        return
    await run_step("toml-update", tmp_path, config)
    assert (tmp_path / "c.toml").read_text() == case.after


async def test_toml_update_output_is_kargos_commit_message(tmp_path: Path) -> None:
    # Test_tomlUpdater_run/successful run with updates
    write_files(
        tmp_path,
        {
            "config.toml": (
                'threshold = 1\n\n[package]\nversion = "1.0.0"\n\n[features]\nnewFeature = false\n'
            )
        },
    )
    config = {
        "path": "config.toml",
        "updates": [
            {"key": "package.version", "value": "1.0.1"},
            {"key": "features.newFeature", "value": True},
            {"key": "threshold", "value": 100},
        ],
    }
    result = await run_step("toml-update", tmp_path, config)
    assert result.output == {
        "commitMessage": "Updated config.toml\n\n"
        "- package.version: '1.0.1'\n"
        "- features.newFeature: true\n"
        "- threshold: 100"
    }
    content = (tmp_path / "config.toml").read_text()
    assert "version = '1.0.1'" in content
    assert "newFeature = true" in content
    assert "threshold = 100" in content


async def test_toml_update_of_a_missing_file_errors(tmp_path: Path) -> None:
    # Test_tomlUpdater_run/failed to update file
    config = {"path": "non-existent/config.toml", "updates": [{"key": "a", "value": "1"}]}
    with pytest.raises(StepError, match="does not exist"):
        await run_step("toml-update", tmp_path, config)


TOML_REFUSALS = [
    *(("toml-parse", case) for case in TOML_PARSE_REFUSALS),
    *(("toml-update", case) for case in TOML_UPDATE_REFUSALS),
]


@pytest.mark.parametrize(("kind", "case"), TOML_REFUSALS, ids=lambda v: getattr(v, "kargo_test", v))
async def test_toml_steps_refuse_what_kargos_schemas_refuse(
    kind: str, case: RefusalCase, tmp_path: Path
) -> None:
    await assert_schema_refuses(kind, case, tmp_path)
