"""Benchmark of a typical git promotion: clone -> edit a YAML file -> commit -> push.

Builds a local bare repository with ~200 files, maps ``https://github.com/example/repo.git`` to it
with ``url.<local>.insteadOf`` (as tests and operators do), and runs the steps N times, each in a
fresh work directory like a new Promotion. Reports the median wall time of each step and of the
whole sequence, and how much of it was spent inside git subprocesses (what the steps report
through ``Telemetry.git_call``).

    .venv/bin/python bench/bench_git.py [--runs 20] [--files 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from the repository root: make the project's packages importable without
# installing them (the Makefile installs only dependencies plus editable app packages).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import limits
from promoter.steps import git_clone, git_commit, git_push
from tests.support.gitrepo import git_env, make_remote
from tests.support.steps import make_context
from tests.support.telemetry import RecordingTelemetry

REPO = "https://github.com/example/repo.git"
STEP_NAMES = ("git-clone", "edit", "git-commit", "git-push")


def _files(count: int) -> dict[str, str | bytes | None]:
    files: dict[str, str | bytes | None] = {}
    for i in range(count):
        app = f"app{i // 10:02d}"
        files[f"apps/{app}/resource{i % 10}.yaml"] = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-{i}\n"
            f"data:\n  index: '{i}'\n" + "  filler: " + "x" * 200 + "\n"
        )
    files["stages/test/kustomization.yaml"] = "images:\n- name: my/image\n  newTag: v0\n"
    return files


async def _one_run(root: Path, env: dict[str, str], run: int) -> dict[str, float]:
    telemetry = RecordingTelemetry()
    ctx = make_context(
        root,
        git_env=env,
        promotion=f"test.run{run:03d}",
        work_dir=root / f"w{run}",
        telemetry=telemetry,
    )
    timings: dict[str, float] = {}

    started = time.perf_counter()
    await git_clone.STEPS["git-clone"].run(
        ctx, {"repoURL": REPO, "checkout": [{"branch": "main", "path": "./out"}]}
    )
    timings["git-clone"] = time.perf_counter() - started

    mark = time.perf_counter()
    target = ctx.work_dir / "out/stages/test/kustomization.yaml"
    target.write_text(
        f"images:\n- name: my/image\n  newTag: bench{run + 1:03d}\n", encoding="utf-8"
    )
    timings["edit"] = time.perf_counter() - mark

    mark = time.perf_counter()
    await git_commit.STEPS["git-commit"].run(
        ctx, {"path": "./out", "message": f"bump to bench{run + 1:03d}"}
    )
    timings["git-commit"] = time.perf_counter() - mark

    mark = time.perf_counter()
    await git_push.STEPS["git-push"].run(ctx, {"path": "./out"})
    timings["git-push"] = time.perf_counter() - mark

    timings["total"] = time.perf_counter() - started
    timings["in_git"] = telemetry.git_seconds
    timings["git_calls"] = telemetry.git_calls.total()
    return timings


async def main(runs: int, file_count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-git-") as tmp:
        root = Path(tmp)
        remote = make_remote(root, files=_files(file_count))
        env = git_env(root, {remote.url: REPO})
        await _one_run(root, env, -1)  # warm-up: page cache, git binary
        results = [await _one_run(root, env, i) for i in range(runs)]
        assert len(remote.log("main")) == runs + 2, "every run must have pushed one commit"
        fs_ms = _fs_baseline(root / "fs-baseline", file_count + 1)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    print(f"git steps: {runs} runs, {file_count + 1} files, git {await _git_version()}")
    print(f"  (file-system baseline: Python writes {file_count + 1} files in {fs_ms:.1f} ms)")
    for name in STEP_NAMES:
        print(f"  {name:<11} median {med(name) * 1000:7.1f} ms")
    total, in_git = med("total"), statistics.median(r["in_git"] for r in results)
    share = statistics.median(r["in_git"] / r["total"] for r in results)
    print(f"  {'total':<11} median {total * 1000:7.1f} ms")
    print(
        f"  in git subprocesses: median {in_git * 1000:.1f} ms ({share:.0%} of total), "
        f"{int(med('git_calls'))} git calls per run"
    )


def _fs_baseline(directory: Path, count: int) -> float:
    """Milliseconds to create ``count`` small files: the floor under any checkout here."""
    started = time.perf_counter()
    for i in range(count):
        sub = directory / f"d{i // 10}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.yaml").write_text("x" * 300, encoding="utf-8")
    return (time.perf_counter() - started) * 1000


async def _git_version() -> str:
    proc = await asyncio.create_subprocess_exec("git", "--version", stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return out.decode().strip().removeprefix("git version ")


if __name__ == "__main__":
    limits.bound()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.files))
