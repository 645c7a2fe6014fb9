"""The local runner's early clone (``promoter/earlyclone.py``).

``python -m promoter run`` starts the first git-clone of one branch before the engine loads, and
the git-clone step takes it over only when it would make the very same clone. These tests run
the real command line with a ``git`` on PATH that records every call, so they see from outside
which clones ran and where, and that whatever the step does not take leaves nothing behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from promoter.earlyclone import STAGING_PREFIX, start
from promoter.gitcmd import EARLY_CLONE_PORT
from promoter.manifests import load
from promoter.model import Phase
from promoter.runner import RunOptions, run_local
from promoter.steps.base import GitSettings, StepServices
from tests.support.gitrepo import RemoteRepo, git_env, make_remote, record_git

ROOT = Path(__file__).resolve().parent.parent
REPO = "https://github.com/example/repo.git"
TARGET = "stages/test/values.yaml"


def manifests(clone: dict[str, Any], *, stage_vars: list[dict[str, str]] | None = None) -> str:
    """A Freight and a Stage whose template starts with ``clone`` and then changes a file,
    commits and pushes a branch of its own."""
    stage: dict[str, Any] = {
        "apiVersion": "kargo.akuity.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "test", "namespace": "demo"},
        "spec": {
            "requestedFreight": [
                {"origin": {"kind": "Warehouse", "name": "demo"}, "sources": {"direct": True}}
            ],
            "promotionTemplate": {
                "spec": {
                    "vars": stage_vars or [],
                    "steps": [
                        clone,
                        {
                            "uses": "yaml-update",
                            "as": "update",
                            "config": {
                                "path": f"./out/{TARGET}",
                                "updates": [{"key": "image.tag", "value": "1.27.0"}],
                            },
                        },
                        {
                            "uses": "git-commit",
                            "config": {"path": "./out", "message": "image 1.27.0"},
                        },
                        {
                            "uses": "git-push",
                            "config": {"path": "./out", "generateTargetBranch": True},
                        },
                    ],
                }
            },
        },
    }
    freight = {
        "apiVersion": "kargo.akuity.io/v1alpha1",
        "kind": "Freight",
        "metadata": {"name": "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b", "namespace": "demo"},
        "alias": "frozen-tauntaun",
        "origin": {"kind": "Warehouse", "name": "demo"},
    }
    return yaml.safe_dump_all([freight, stage])


def clone_step(repo_url: str = REPO, branch: str = "main") -> dict[str, Any]:
    return {
        "uses": "git-clone",
        "config": {"repoURL": repo_url, "checkout": [{"branch": branch, "path": "./out"}]},
    }


class Run:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.remote: RemoteRepo = make_remote(
            tmp_path, files={TARGET: "image:\n  tag: 1.26.0\n", "README.md": "demo\n"}
        )
        self.gitconfig = git_env(tmp_path, {self.remote.url: REPO})["GIT_CONFIG_GLOBAL"]
        self.path, self.log = record_git(tmp_path)
        self.work = tmp_path / "work"

    def cli(
        self,
        text: str,
        *extra: str,
        path: Path | None = None,
        work_dir: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        if path is None:
            path = self.tmp / "manifests.yaml"
            path.write_text(text, encoding="utf-8")
        args = [sys.executable, "-m", "promoter", "run", "--manifests", str(path)]
        args += ["--stage", "test", "--freight", "frozen-tauntaun", "--git-config", self.gitconfig]
        if work_dir:
            args += ["--work-dir", str(self.work)]
        full_env = {**os.environ, "PATH": self.path, "PYTHONPATH": str(ROOT), **(env or {})}
        return subprocess.run(
            [*args, *extra],
            env=full_env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def clones(self) -> list[str]:
        """The arguments of every ``git clone`` that ran, in order."""
        if not self.log.exists():
            return []
        calls = [line.partition("\t")[2] for line in self.log.read_text().splitlines()]
        return [c for c in calls if " clone " in f" {c} "]

    def leftovers(self) -> list[str]:
        if not self.work.exists():
            return []
        return [p.name for p in self.work.iterdir() if p.name.startswith(STAGING_PREFIX)]

    def pushed(self) -> list[str]:
        return [b for b in self.remote.branches() if b.startswith("kargo/promotion/")]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def test_the_first_clone_starts_early_and_the_step_takes_it(run: Run) -> None:
    done = run.cli(manifests(clone_step()))
    assert done.returncode == 0, done.stdout + done.stderr
    # One clone ran, and it was the early one (made in the staging directory)...
    clones = run.clones()
    assert len(clones) == 1 and STAGING_PREFIX in clones[0], clones
    # ...which the step moved into the Promotion's work directory, where the later steps
    # found it theirs: they changed the file, committed and pushed.
    (branch,) = run.pushed()
    assert run.remote.read_file(branch, TARGET) == "image:\n  tag: 1.27.0\n"
    assert run.remote.read_file(branch, "README.md") == "demo\n"
    assert run.remote.log(branch)[1] == run.remote.log("main")[0], "based on main's tip"
    (promotion,) = [p for p in run.work.iterdir()]
    assert (promotion / "out" / "README.md").read_text() == "demo\n"
    assert run.leftovers() == []


def test_without_a_work_dir_the_early_clone_is_taken_and_nothing_is_left_behind(
    run: Run,
) -> None:
    """The staging directory goes where the runner's temporary work directory goes."""
    tmpdir = run.tmp / "tmpdir"
    tmpdir.mkdir()
    done = run.cli(manifests(clone_step()), work_dir=False, env={"TMPDIR": str(tmpdir)})
    assert done.returncode == 0, done.stdout + done.stderr
    clones = run.clones()
    assert len(clones) == 1 and f"{tmpdir}/{STAGING_PREFIX}" in clones[0], clones
    assert len(run.pushed()) == 1
    assert list(tmpdir.iterdir()) == []


def test_a_manifest_directory_is_read_file_by_file(run: Run) -> None:
    """The Stage is found among the files the early reader can read; one it cannot (a
    multi-line value) is left to the engine, which reads them all."""
    freight, stage = manifests(clone_step()).split("---\n")
    folder = run.tmp / "manifests"
    (folder / "stages").mkdir(parents=True)
    (folder / "freight.yaml").write_text(freight)
    (folder / "stages" / "test.yaml").write_text(stage)
    (folder / "notes.yml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n  namespace: demo\n"
        "data:\n  text: |\n    two\n    lines\n"
    )
    done = run.cli("", path=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    clones = run.clones()
    assert len(clones) == 1 and STAGING_PREFIX in clones[0], clones
    assert len(run.pushed()) == 1


def test_a_repo_url_from_a_var_is_cloned_early_with_the_var_the_promotion_gets(
    run: Run,
) -> None:
    """Kargo's examples name the repository with ``${{ vars.X }}``: the Stage's var, unless
    the command line's ``--var`` says otherwise (as the Promotion's vars are made)."""
    clone = clone_step(repo_url="${{ vars.repo }}")
    stage_vars = [{"name": "repo", "value": "https://github.com/example/not-this-one.git"}]
    done = run.cli(manifests(clone, stage_vars=stage_vars), "--var", f"repo={REPO}")
    assert done.returncode == 0, done.stdout + done.stderr
    clones = run.clones()
    assert len(clones) == 1 and STAGING_PREFIX in clones[0] and REPO in clones[0], clones
    assert len(run.pushed()) == 1


def test_a_first_step_with_any_other_expression_clones_in_the_step_as_before(run: Run) -> None:
    clone = clone_step(repo_url="${{ vars.base }}/repo.git")
    done = run.cli(
        manifests(clone, stage_vars=[{"name": "base", "value": "https://github.com/example"}])
    )
    assert done.returncode == 0, done.stdout + done.stderr
    clones = run.clones()
    assert len(clones) == 1 and STAGING_PREFIX not in clones[0], clones
    assert len(run.pushed()) == 1


@pytest.mark.parametrize(
    ("clone", "refusal"),
    [
        pytest.param(clone_step(repo_url="file:///etc"), "uses scheme 'file'", id="file-url"),
        pytest.param(
            clone_step(branch="--upload-pack=touch pwned"), "must not start with '-'", id="option"
        ),
        pytest.param(clone_step(repo_url="ext::sh -c touch% pwned"), "whitespace", id="ext"),
    ],
)
def test_a_value_the_step_refuses_never_reaches_git(
    run: Run, clone: dict[str, Any], refusal: str
) -> None:
    done = run.cli(manifests(clone))
    assert done.returncode == 1, done.stdout + done.stderr
    assert refusal in done.stdout
    assert run.clones() == []
    assert not (ROOT / "pwned").exists() and not (run.tmp / "pwned").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(("--freight", "nope"), "Freight 'nope' not found", id="unknown-freight"),
        pytest.param(("--output", "xml"), "invalid choice: 'xml'", id="bad-option-value"),
    ],
)
def test_input_refused_after_the_early_start_leaves_nothing_behind(
    run: Run, extra: tuple[str, ...], message: str
) -> None:
    done = run.cli(manifests(clone_step()), *extra)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    # The clone had started (it starts before anything is checked) and was ended unused.
    assert [c for c in run.clones() if STAGING_PREFIX in c]
    assert run.leftovers() == []
    assert run.pushed() == []


def test_an_early_clone_that_is_not_the_steps_clone_is_ended_and_the_step_clones(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the runner's API: the same manifests, but GitSettings that make the step's
    clone differ from the early one (another identity for the checkout): the step does not
    take it, and what the Promotion commits carries the step's identity."""
    monkeypatch.setenv("PATH", run.path)
    path = run.tmp / "manifests.yaml"
    path.write_text(manifests(clone_step()), encoding="utf-8")
    argv = ["run", "--manifests", str(path), "--stage", "test", "--freight", "frozen-tauntaun"]
    early = start([*argv, "--git-config", run.gitconfig, "--work-dir", str(run.work)])
    assert early is not None and early.pending
    git = GitSettings(author_name="Someone Else", env={"GIT_CONFIG_GLOBAL": run.gitconfig})
    options = RunOptions(
        stage="test",
        freight="frozen-tauntaun",
        work_dir=run.work,
        services=StepServices(git=git, extra={EARLY_CLONE_PORT: early}),
    )
    try:
        promotion = run_local(load(path), options)
    finally:
        early.discard()
    assert promotion.status.phase is Phase.SUCCEEDED, promotion.status.message
    # The step made its own clone (the early one may have been ended before git even began).
    assert len([c for c in run.clones() if STAGING_PREFIX not in c]) == 1, run.clones()
    assert not early.pending and not Path(early.staging).exists()
    (branch,) = run.pushed()
    author = run.remote.git("log", "-1", "--format=%an", branch)
    assert author.strip() == "Someone Else"
