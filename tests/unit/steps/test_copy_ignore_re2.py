"""The ``copy`` step's ``ignore`` globs go through the RE2 port: a runaway glob answers.

``ignore`` is a user's gitignore text; each line becomes a regular expression matched against
every path copied. Twenty ``**`` in a row are twenty ``.*`` in a row, which Python's ``re``
backtracks through for longer than any step may run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from promoter.errors import StepError
from promoter.steps.workdir.file_copy import STEPS
from tests.support.runaway import comes_back
from tests.support.steps import make_context


async def test_a_runaway_ignore_glob_answers_and_the_file_is_copied(tmp_path: Path) -> None:
    name = "a" * 200  # a long file name: 255 bytes is the most most file systems take
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_text("x\n")
    config = {"inPath": "src", "outPath": "out", "ignore": "**" * 20 + "y\n"}
    with comes_back("the copy step's ignore glob"):
        await STEPS["copy"].run(make_context(tmp_path, work_dir=tmp_path), config)
    assert (tmp_path / "out" / name).read_text() == "x\n"


async def test_an_ignore_glob_that_does_not_compile_fails_the_step_for_good(
    tmp_path: Path,
) -> None:
    (tmp_path / "src").mkdir()
    config = {"inPath": "src", "outPath": "out", "ignore": "[z-a]\n"}
    with pytest.raises(StepError) as failed:
        await STEPS["copy"].run(make_context(tmp_path, work_dir=tmp_path), config)
    assert failed.value.terminal
    assert "invalid character class range" in failed.value.message
