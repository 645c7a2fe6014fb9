"""Kargo parity for the steps added after the first port: yaml-merge, tar, toml-parse,
toml-update and set-freight-alias.

Each table case names the Kargo test it comes from (pkg/promotion/runner/builtin/*_test.go, or
pkg/yaml/merge_test.go for the merge itself); inputs and expected outputs are Kargo's, the code
is ours. Steps are called directly with a rendered config, on a real temporary work directory;
set-freight-alias against the in-memory store and, once, the API server emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tarfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.controller import kube as k
from app.controller.informer import Informer
from app.controller.metadata import KubeFreightAliases
from promoter.errors import ConfigRefused, StepError
from promoter.rules.freight_alias import ALIAS_LABEL, InMemoryFreightAliases
from promoter.steps.base import Effect, StepResult, StepStatus, effect_of, uses_work_dir_of
from promoter.steps.registry import builtin_registry
from promoter.steps.workdir.tar import ArchiveLimits, _tar
from tests.support import objects
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.steps import make_context

REGISTRY = builtin_registry()


async def run(kind: str, work: Path, config: Mapping[str, Any]) -> StepResult:
    return await REGISTRY[kind].run(make_context(work, work_dir=work), config)


def write_files(work: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("kind", ["yaml-merge", "tar", "toml-parse", "toml-update"])
def test_new_steps_only_touch_the_work_directory(kind: str) -> None:
    assert effect_of(REGISTRY[kind]) is Effect.LOCAL


# --------------------------------------------------------------------------------------------
# yaml-merge
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefusalCase:
    kargo_test: str
    config: dict[str, Any]
    says: str


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
    result = await run("yaml-merge", tmp_path, {"inFiles": ["valid.yaml"], "outFile": "valid.yaml"})
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
            await run("yaml-merge", tmp_path, case.config)
        assert not (tmp_path / case.config["outFile"]).exists()
        return
    result = await run("yaml-merge", tmp_path, case.config)
    assert result.status is StepStatus.SUCCEEDED
    merged = yaml.safe_load((tmp_path / case.config["outFile"]).read_text(encoding="utf-8"))
    assert merged == case.merged
    if case.commit_message is not None:
        assert result.output["commitMessage"] == case.commit_message


async def test_yaml_merge_of_only_missing_files_writes_an_empty_file(tmp_path: Path) -> None:
    # Kargo docs: "If all input files are missing, an empty output file will be created."
    # (TestMergeFiles/no input files: the output is empty, and there is no commit message.)
    config = {"inFiles": ["gone.yaml"], "outFile": "merged.yaml", "ignoreMissingFiles": True}
    result = await run("yaml-merge", tmp_path, config)
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
    await run("yaml-merge", tmp_path, {"inFiles": ["base.yaml", "over.yaml"], "outFile": "m.yaml"})
    assert (
        tmp_path / "m.yaml"
    ).read_text() == "# Base values\nimage:\n  tag: v2 # pinned\nlist:\n- a\n"


async def test_yaml_merge_refuses_to_write_inside_git(tmp_path: Path) -> None:
    write_files(tmp_path, {"a.yaml": "a: 1\n"})
    with pytest.raises(ConfigRefused, match=r"inside a \.git directory"):
        await run("yaml-merge", tmp_path, {"inFiles": ["a.yaml"], "outFile": ".git/hooks/x"})


# --------------------------------------------------------------------------------------------
# tar
# --------------------------------------------------------------------------------------------

TAR_REFUSALS = [
    RefusalCase(
        "Test_tarCreator_convert/inPath not specified",
        {"outPath": "a.tar"},
        "config.inPath is required",
    ),
    RefusalCase(
        "Test_tarCreator_convert/inPath is empty string",
        {"inPath": "", "outPath": "a.tar"},
        "must not be empty",
    ),
    RefusalCase(
        "Test_tarCreator_convert/outPath not specified",
        {"inPath": "source_dir/"},
        "config.outPath is required",
    ),
    RefusalCase(
        "Test_tarCreator_convert/outPath is empty string",
        {"inPath": "source_dir/", "outPath": ""},
        "must not be empty",
    ),
    RefusalCase(
        "Test_tarConfig_convert/ignore is empty string",
        {"inPath": "source_dir/", "outPath": "archive.tar.gz", "ignore": ""},
        "config.ignore must not be empty",
    ),
    RefusalCase(
        "(our schema check: additionalProperties false)",
        {"inPath": "s", "outPath": "a.tar", "level": 9},
        "unknown config field",
    ),
]


def members(archive: Path) -> dict[str, bytes | str | None]:
    """Member name -> content (files), link target (symlinks) or None (directories)."""
    out: dict[str, bytes | str | None] = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.issym():
                out[member.name] = "-> " + member.linkname
            elif member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                out[member.name] = handle.read()
            else:
                out[member.name] = None
    return out


@dataclass(frozen=True)
class TarCase:
    kargo_test: str
    files: dict[str, str]
    config: dict[str, Any]
    members: dict[str, bytes | str | None] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)
    error: str | None = None


TAR_CASES = [
    TarCase(
        "Test_tarCreator_run/succeeds with basic tar creation and atomic behavior",
        {"source/file.txt": "test content"},
        {"inPath": "source", "outPath": "archive.tar", "gzip": False},
        members={"file.txt": b"test content"},
    ),
    TarCase(
        "Test_tarCreator_run/creates parent directories for nested output path",
        {"source/file.txt": "test content"},
        {"inPath": "source", "outPath": "nested/archive.tar"},
        members={"file.txt": b"test content"},
    ),
    TarCase(
        "Test_tarCreator_run/atomically replaces existing destination",
        {"source/new_file.txt": "new content", "archive.tar": "old archive content"},
        {"inPath": "source", "outPath": "archive.tar"},
        members={"new_file.txt": b"new content"},
    ),
    TarCase(
        "Test_tarCreator_run/fails with invalid input path",
        {},
        {"inPath": "nonexistent_source", "outPath": "archive.tar"},
        error="does not exist",
    ),
    TarCase(
        "Test_tarCreator_run/fails to create output directory when blocked by a file",
        {"source/file.txt": "x", "nested": "blocking file"},
        {"inPath": "source", "outPath": "nested/archive.tar"},
        error="failed to create output directory",
    ),
    TarCase(
        "Test_tarCreator_createTarball/succeeds creating simple uncompressed tar file",
        {"source/file1.txt": "test content", "source/testdir/file2.txt": "nested content"},
        {"inPath": "source", "outPath": "out.tar"},
        members={
            "file1.txt": b"test content",
            "testdir": None,  # Python's tarfile drops the trailing "/" Kargo writes
            "testdir/file2.txt": b"nested content",
        },
    ),
    TarCase(
        "Test_tarCreator_createTarball/succeeds creating gzipped tar file",
        {"source/compressed.txt": "compressed content"},
        {"inPath": "source", "outPath": "out.tar.gz", "gzip": True},
        members={"compressed.txt": b"compressed content"},
    ),
    TarCase(
        "Test_tarCreator_createTarball/handles ignore rules",
        {"source/include.txt": "include me", "source/ignore.txt": "ignore me"},
        {"inPath": "source", "outPath": "out.tar", "ignore": "ignore.txt"},
        members={"include.txt": b"include me"},
    ),
    TarCase(
        "Test_tarCreator_createTarball/handles symbolic links",
        {"source/target.txt": "target content"},
        {"inPath": "source", "outPath": "out.tar"},
        symlinks={"source/link.txt": "target.txt"},
        members={"link.txt": "-> target.txt", "target.txt": b"target content"},
    ),
    TarCase(
        "Test_tarCreator_createTarball/succeeds archiving a single file directly",
        {"dir/single_file.txt": "single file content"},
        {"inPath": "dir/single_file.txt", "outPath": "archive.tar"},
        members={"single_file.txt": b"single file content"},
    ),
    TarCase(
        "Test_tarCreator_createTarball/succeeds archiving an empty directory",
        {"empty_dir/.keep-me-out": ""},
        {"inPath": "empty_dir", "outPath": "archive.tar", "ignore": ".keep-me-out"},
        members={},
    ),
    TarCase(
        "Test_tarCreator_createTarball/skips ignored directories",
        {"source/valid.txt": "valid", "source/node_modules/secret.txt": "secret"},
        {"inPath": "source", "outPath": "archive.tar", "ignore": "node_modules/"},
        members={"valid.txt": b"valid"},
    ),
    TarCase(
        "(ours: the archive itself is never archived)",
        {"src/.git/config": "[core]", "src/a.txt": "a"},
        {"inPath": "src", "outPath": "src/out.tar"},
        members={"a.txt": b"a"},
    ),
    # Test_tarCreator_buildIgnoreMatcher, through the step: .git is the default rule, and rules
    # given replace it.
    TarCase(
        "Test_tarCreator_buildIgnoreMatcher/empty string defaults to ignoring .git",
        {"src/.git/HEAD": "ref", "src/file.txt": "f", "src/sub/.git/HEAD": "ref"},
        {"inPath": "src", "outPath": "out.tar"},
        members={"file.txt": b"f", "sub": None},
    ),
    TarCase(
        "Test_tarCreator_buildIgnoreMatcher/spaces default to ignoring .git",
        {"src/.git/HEAD": "ref", "src/file.txt": "f"},
        {"inPath": "src", "outPath": "out.tar", "ignore": "   \n  "},
        members={"file.txt": b"f"},
    ),
    TarCase(
        "Test_tarCreator_buildIgnoreMatcher/custom patterns",
        {
            "src/error.log": "e",
            "src/node_modules/x.js": "x",
            "src/src/main.go": "package main",
            "src/.git/HEAD": "ref",
        },
        {
            "inPath": "src",
            "outPath": "out.tar",
            "ignore": "\n# This is a comment\n*.log\nnode_modules/\n",
        },
        members={".git": None, ".git/HEAD": b"ref", "src": None, "src/main.go": b"package main"},
    ),
]


@pytest.mark.parametrize("case", TAR_CASES, ids=lambda c: c.kargo_test)
async def test_tar(case: TarCase, tmp_path: Path) -> None:
    write_files(tmp_path, case.files)
    for link, target in case.symlinks.items():
        os.symlink(target, tmp_path / link)
    if case.error is not None:
        with pytest.raises(StepError, match=case.error):
            await run("tar", tmp_path, case.config)
        return
    result = await run("tar", tmp_path, case.config)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {}
    archive = tmp_path / case.config["outPath"]
    assert (archive.read_bytes()[:2] == b"\x1f\x8b") is bool(case.config.get("gzip"))
    assert members(archive) == case.members
    # No temporary file is left next to the archive.
    assert [p.name for p in archive.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize(
    ("kargo_test", "limits", "says"),
    [
        (
            "Test_tarCreator_createTarball/fails with file larger than max size",
            ArchiveLimits(max_file_bytes=4),
            "exceeds the maximum allowed single file size",
        ),
        (
            "Test_tarCreator_createTarball/fails with total archive size larger than limit",
            ArchiveLimits(max_bytes=6),
            "total tar archive source size exceeds the maximum allowed size",
        ),
    ],
)
def test_tar_size_limits(kargo_test: str, limits: ArchiveLimits, says: str, tmp_path: Path) -> None:
    write_files(tmp_path, {"source/a.bin": "12345", "source/b.bin": "12345"})
    (tmp_path / "archive.tar").write_bytes(b"earlier")
    ctx = make_context(tmp_path, work_dir=tmp_path)
    with pytest.raises(StepError, match=says):
        _tar(ctx, {"inPath": "source", "outPath": "archive.tar"}, limits)
    assert (tmp_path / "archive.tar").read_bytes() == b"earlier"


async def test_what_tar_writes_untar_reads_back(tmp_path: Path) -> None:
    write_files(tmp_path, {"chart/Chart.yaml": "name: c\n", "chart/templates/a.yaml": "k: v\n"})
    await run("tar", tmp_path, {"inPath": "chart", "outPath": "c.tgz", "gzip": True})
    await run("untar", tmp_path, {"inPath": "c.tgz", "outPath": "copy"})
    assert (tmp_path / "copy/Chart.yaml").read_text() == "name: c\n"
    assert (tmp_path / "copy/templates/a.yaml").read_text() == "k: v\n"


# --------------------------------------------------------------------------------------------
# toml-parse
# --------------------------------------------------------------------------------------------

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
            await run("toml-parse", tmp_path, config)
        return
    result = await run("toml-parse", tmp_path, config)
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == case.expected


# --------------------------------------------------------------------------------------------
# toml-update
# --------------------------------------------------------------------------------------------

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
            await run("toml-update", tmp_path, config)
        assert "TOML file update failed" in caught.value.message
        assert (tmp_path / "c.toml").read_text() == case.before
        return
    await run("toml-update", tmp_path, config)
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
    result = await run("toml-update", tmp_path, config)
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
        await run("toml-update", tmp_path, config)


# --------------------------------------------------------------------------------------------
# Config refusals of the file steps (Kargo's JSON schemas: Test_*_convert)
# --------------------------------------------------------------------------------------------

SCHEMA_REFUSALS = [
    *(("yaml-merge", case) for case in YAML_MERGE_REFUSALS),
    *(("tar", case) for case in TAR_REFUSALS),
    *(("toml-parse", case) for case in TOML_PARSE_REFUSALS),
    *(("toml-update", case) for case in TOML_UPDATE_REFUSALS),
]


@pytest.mark.parametrize(
    ("kind", "case"), SCHEMA_REFUSALS, ids=lambda v: getattr(v, "kargo_test", v)
)
async def test_steps_refuse_what_kargos_schemas_refuse(
    kind: str, case: RefusalCase, tmp_path: Path
) -> None:
    # The file exists, so only the config can be what is refused.
    write_files(tmp_path, {"valid.toml": "[app]\nversion = '1'\n"})
    with pytest.raises(ConfigRefused, match=re.escape(case.says)):
        await run(kind, tmp_path, case.config)


# --------------------------------------------------------------------------------------------
# set-freight-alias
# --------------------------------------------------------------------------------------------

NS = "kargo-demo"


def _freight(name: str, alias: str) -> dict[str, Any]:
    """A Freight whose alias is in the field and in the label, as Kargo keeps them."""
    return objects.freight(
        name, namespace=NS, alias=alias, warehouse=NS, labels={ALIAS_LABEL: alias}
    )


async def run_alias(store: Any, config: Mapping[str, Any], tmp_path: Path) -> StepResult:
    ctx = make_context(tmp_path, project=NS, extra_services={"freight-aliases": store})
    return await REGISTRY["set-freight-alias"].run(ctx, config)


ALIAS_REFUSALS = [
    RefusalCase(
        "Test_setFreightAlias_convert/both name and alias are not specified",
        {},
        "config.name is required",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/name is not specified",
        {"alias": "stable"},
        "config.name is required",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/name is empty",
        {"name": "", "alias": "new-alias"},
        "config.name must not be empty",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/alias is not specified",
        {"name": "f1"},
        "config.alias is required",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/alias is empty",
        {"name": "f1", "alias": ""},
        "config.alias must not be empty",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/unknown field is not allowed",
        {"name": "f1", "alias": "new-alias", "unknownField": "x"},
        "unknown config field(s) unknownField",
    ),
    RefusalCase(
        "(ours: the alias is a label value, which the API server would refuse)",
        {"name": "f1", "alias": "not an alias!"},
        "is not a valid alias",
    ),
    RefusalCase(
        "Test_setFreightAlias_run/freight not found",
        {"name": "test-freight", "alias": "new-alias"},
        'freight "test-freight" not found in project "kargo-demo"',
    ),
    RefusalCase(
        "(Kargo's webhook: alias already used by another piece of Freight)",
        {"name": "f1", "alias": "taken"},
        'failed to patch alias for Freight "f1" in project "kargo-demo": alias "taken" already '
        'used by another piece of Freight in namespace "kargo-demo"',
    ),
]


@pytest.mark.parametrize("case", ALIAS_REFUSALS, ids=lambda c: c.kargo_test)
async def test_set_freight_alias_refusals_end_the_step_failed(
    case: RefusalCase, tmp_path: Path
) -> None:
    store = InMemoryFreightAliases([_freight("f1", "old-alias"), _freight("f2", "taken")], NS)
    with pytest.raises(ConfigRefused, match=re.escape(case.says)):
        await run_alias(store, case.config, tmp_path)
    assert store.get(NS, "f1") == _freight("f1", "old-alias")


async def test_set_freight_alias_sets_the_field_and_the_label(tmp_path: Path) -> None:
    # Test_setFreightAlias_run/successful alias update
    store = InMemoryFreightAliases([_freight("test-freight", "old-alias")], NS)
    result = await run_alias(store, {"name": "test-freight", "alias": "new-alias"}, tmp_path)
    assert result.status is StepStatus.SUCCEEDED
    assert (
        result.message == 'updated alias of Freight "test-freight" from "old-alias" to "new-alias"'
    )
    assert result.output == {}
    assert store.get(NS, "test-freight") == _freight("test-freight", "new-alias")
    # Entered again (a crash after the write): same outcome, nothing refused.
    again = await run_alias(store, {"name": "test-freight", "alias": "new-alias"}, tmp_path)
    assert again.status is StepStatus.SUCCEEDED


async def test_set_freight_alias_without_a_store_errors(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, project=NS)
    with pytest.raises(StepError, match="needs a store for Freight"):
        await REGISTRY["set-freight-alias"].run(ctx, {"name": "f1", "alias": "a"})


def test_set_freight_alias_is_external_and_needs_no_work_directory() -> None:
    step = REGISTRY["set-freight-alias"]
    assert effect_of(step) is Effect.EXTERNAL
    assert not uses_work_dir_of(step)


@pytest.fixture
async def apiserver() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[NS]) as running:
        yield running


async def test_set_freight_alias_over_the_kubernetes_api(
    apiserver: RunningApiServer, tmp_path: Path
) -> None:
    kube = k.Kube(apiserver.api_client())
    for obj in (_freight("f1", "old-alias"), _freight("f2", "taken")):
        await kube.create(k.FREIGHT, obj)
    informer = Informer(kube, k.FREIGHT, namespace=NS)
    watching = asyncio.create_task(informer.run())
    try:
        await informer.synced.wait()
        store = KubeFreightAliases(kube, freight=informer)
        with pytest.raises(ConfigRefused, match="already used"):
            await run_alias(store, {"name": "f1", "alias": "taken"}, tmp_path)
        await run_alias(store, {"name": "f1", "alias": "new-alias"}, tmp_path)
        written = await kube.get(k.FREIGHT, NS, "f1")
        assert written["alias"] == "new-alias"
        assert written["metadata"]["labels"][ALIAS_LABEL] == "new-alias"
        # The cache saw the write: the next uniqueness check knows the new alias.
        with pytest.raises(ConfigRefused, match="already used"):
            await run_alias(store, {"name": "f2", "alias": "new-alias"}, tmp_path)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await kube.close()
