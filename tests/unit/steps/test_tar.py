"""``tar`` (workdir/tar.py) as Kargo's tests have it (tar_creator_test.go's cases; inputs and
expected outputs are Kargo's, the code is ours), on a real temporary work directory.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import StepError
from promoter.steps.base import Effect, StepStatus, effect_of
from promoter.steps.workdir.tar import ArchiveLimits, _tar
from tests.support.steps import (
    STEPS,
    RefusalCase,
    assert_schema_refuses,
    make_context,
    run_step,
    write_files,
)


def test_tar_only_touches_the_work_directory() -> None:
    assert effect_of(STEPS["tar"]) is Effect.LOCAL


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
            await run_step("tar", tmp_path, case.config)
        return
    result = await run_step("tar", tmp_path, case.config)
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
    await run_step("tar", tmp_path, {"inPath": "chart", "outPath": "c.tgz", "gzip": True})
    await run_step("untar", tmp_path, {"inPath": "c.tgz", "outPath": "copy"})
    assert (tmp_path / "copy/Chart.yaml").read_text() == "name: c\n"
    assert (tmp_path / "copy/templates/a.yaml").read_text() == "k: v\n"


@pytest.mark.parametrize("case", TAR_REFUSALS, ids=lambda c: c.kargo_test)
async def test_tar_refuses_what_kargos_schema_refuses(case: RefusalCase, tmp_path: Path) -> None:
    await assert_schema_refuses("tar", case, tmp_path)
