"""``yaml-merge`` (workdir/yaml_merge.py) as Kargo's tests have it: Test_yamlMerger_convert
and pkg/yaml/merge_test.go's cases; inputs and expected outputs are Kargo's, the code is ours.
The step is called directly with a rendered config, on a real temporary work directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from promoter.errors import ConfigRefused, StepError
from promoter.steps.base import Effect, StepStatus, effect_of
from tests.support.steps import (
    STEPS,
    RefusalCase,
    assert_schema_refuses,
    run_step,
    write_files,
)


def test_yaml_merge_only_touches_the_work_directory() -> None:
    assert effect_of(STEPS["yaml-merge"]) is Effect.LOCAL


YAML_MERGE_REFUSALS = [
    RefusalCase(
        "Test_yamlMerger_convert/inFiles not specified (missing path field)",
        {"outFile": "valid.yaml"},
        "config.inFiles is required",
    ),
    RefusalCase(
        "Test_yamlMerger_convert/inFiles field is an empty array",
        {"inFiles": [], "outFile": "valid.yaml"},
        "config.inFiles must list at least one file",
    ),
    RefusalCase(
        "Test_yamlMerger_convert/outFile not specified (missing path field)",
        {"inFiles": ["valid.yaml"]},
        "config.outFile is required",
    ),
    RefusalCase(
        "Test_yamlMerger_convert/outFile is empty string",
        {"inFiles": ["valid.yaml"], "outFile": ""},
        "config.outFile must be a non-empty path",
    ),
    RefusalCase(
        "(our schema check: additionalProperties false)",
        {"inFiles": ["valid.yaml"], "outFile": "o.yaml", "extra": 1},
        "unknown config field(s) extra",
    ),
]


async def test_yaml_merge_accepts_kargos_valid_configuration(tmp_path: Path) -> None:
    # Test_yamlMerger_convert/valid configuration (inFiles + outFile present)
    write_files(tmp_path, {"valid.yaml": "a: 1\n"})
    result = await run_step(
        "yaml-merge", tmp_path, {"inFiles": ["valid.yaml"], "outFile": "valid.yaml"}
    )
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {"commitMessage": "Wrote valid.yaml to valid.yaml"}


@dataclass(frozen=True)
class MergeCase:
    kargo_test: str
    files: dict[str, str]
    config: dict[str, Any]
    error: str | None = None
    merged: Any = None
    commit_message: str | None = None


MERGE_CASES = [
    MergeCase(
        "Test_YAMLMerger_run/input file not found with ignoreMissingFiles false",
        {},
        {"inFiles": ["non-existent.yaml"], "outFile": "merged.yaml"},
        error="input file 'non-existent.yaml' not found",
    ),
    MergeCase(
        "Test_YAMLMerger_run/error merging files",
        {"invalid.yaml": ":"},
        {"inFiles": ["invalid.yaml"], "outFile": "merged.yaml"},
        error="error merging YAML files",
    ),
    MergeCase(
        "Test_YAMLMerger_run/successful merge",
        {"base.yaml": "version: 1.0.0", "overlay.yaml": "version: 2.0.0"},
        {
            "inFiles": ["base.yaml", "overlay.yaml", "non-existent.yaml"],
            "outFile": "merged.yaml",
            "ignoreMissingFiles": True,
        },
        merged={"version": "2.0.0"},
        commit_message="Merged 2 YAML files to merged.yaml\n- base.yaml\n- overlay.yaml",
    ),
    MergeCase(
        "TestMergeFiles/successful merge (pkg/yaml/merge_test.go)",
        {
            "empty.yaml": "",
            "base.yaml": (
                "\ncharacter:\n  name: Vader\n  ability: Force\n  affiliation: Empire\n"
                "  saberColor: red\nvehicles:\n- Star Destroyer"
            ),
            "overlay.yaml": (
                "\ncharacter:\n  name: Luke # Alters character.name from the base\n"
                "  # ability: Force  # Should be inherited from the base without alteration\n"
                "  affiliation: Rebel Alliance # Alters character.affiliation from the base\n"
                "  saberColor: blue # Alters character.saberColor from the base\n"
                "  siblings: # A completely new field that the base does not have\n"
                "  - Leia\n"
                "vehicles: # Completely replaces vehicles list from the base\n"
                "- Millennium Falcon"
            ),
        },
        {"inFiles": ["empty.yaml", "base.yaml", "overlay.yaml"], "outFile": "merged.yaml"},
        merged={
            "character": {
                "name": "Luke",
                "ability": "Force",
                "affiliation": "Rebel Alliance",
                "saberColor": "blue",
                "siblings": ["Leia"],
            },
            "vehicles": ["Millennium Falcon"],
        },
        commit_message=(
            "Merged 3 YAML files to merged.yaml\n- empty.yaml\n- base.yaml\n- overlay.yaml"
        ),
    ),
    MergeCase(
        "TestMergeFiles/input file does not exist (pkg/yaml/merge_test.go)",
        {},
        {"inFiles": ["non-existent.yaml"], "outFile": "merged.yaml"},
        error="not found",
    ),
    MergeCase(
        "(Kargo docs yaml-merge.md: the three values files example)",
        {
            "src/values.yaml": "service:\n  enabled: false\n",
            "src/qa/values.yaml": "service:\n  enabled: true\n",
            "src/qa/cluster-a/values.yaml": "service:\n  type: LoadBalancer\n",
        },
        {
            "inFiles": ["src/values.yaml", "src/qa/values.yaml", "src/qa/cluster-a/values.yaml"],
            "outFile": "out/charts/my-chart/values.yaml",
        },
        merged={"service": {"enabled": True, "type": "LoadBalancer"}},
    ),
    MergeCase(
        "(Kargo docs yaml-merge.md: a null in a later file removes the key)",
        {"a.yaml": "keep: 1\ndrop: {x: 1}\n", "b.yaml": "drop: null\n"},
        {"inFiles": ["a.yaml", "b.yaml"], "outFile": "merged.yaml"},
        merged={"keep": 1},
    ),
]


@pytest.mark.parametrize("case", MERGE_CASES, ids=lambda c: c.kargo_test)
async def test_yaml_merge(case: MergeCase, tmp_path: Path) -> None:
    write_files(tmp_path, case.files)
    if case.error is not None:
        with pytest.raises(StepError, match=case.error):
            await run_step("yaml-merge", tmp_path, case.config)
        assert not (tmp_path / case.config["outFile"]).exists()
        return
    result = await run_step("yaml-merge", tmp_path, case.config)
    assert result.status is StepStatus.SUCCEEDED
    merged = yaml.safe_load((tmp_path / case.config["outFile"]).read_text(encoding="utf-8"))
    assert merged == case.merged
    if case.commit_message is not None:
        assert result.output["commitMessage"] == case.commit_message


async def test_yaml_merge_of_only_missing_files_writes_an_empty_file(tmp_path: Path) -> None:
    # Kargo docs: "If all input files are missing, an empty output file will be created."
    # (TestMergeFiles/no input files: the output is empty, and there is no commit message.)
    config = {"inFiles": ["gone.yaml"], "outFile": "merged.yaml", "ignoreMissingFiles": True}
    result = await run_step("yaml-merge", tmp_path, config)
    assert (tmp_path / "merged.yaml").read_bytes() == b""
    assert result.output == {}


async def test_yaml_merge_writes_kyaml_layout_and_keeps_the_bases_comments(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {
            "base.yaml": "# Base values\nimage:\n  tag: v1 # pinned\nlist:\n- a\n",
            "over.yaml": "image:\n  tag: v2\n",
        },
    )
    await run_step(
        "yaml-merge", tmp_path, {"inFiles": ["base.yaml", "over.yaml"], "outFile": "m.yaml"}
    )
    assert (
        tmp_path / "m.yaml"
    ).read_text() == "# Base values\nimage:\n  tag: v2 # pinned\nlist:\n- a\n"


async def test_yaml_merge_refuses_to_write_inside_git(tmp_path: Path) -> None:
    write_files(tmp_path, {"a.yaml": "a: 1\n"})
    with pytest.raises(ConfigRefused, match=r"inside a \.git directory"):
        await run_step("yaml-merge", tmp_path, {"inFiles": ["a.yaml"], "outFile": ".git/hooks/x"})


@pytest.mark.parametrize("case", YAML_MERGE_REFUSALS, ids=lambda c: c.kargo_test)
async def test_yaml_merge_refuses_what_kargos_schema_refuses(
    case: RefusalCase, tmp_path: Path
) -> None:
    await assert_schema_refuses("yaml-merge", case, tmp_path)
