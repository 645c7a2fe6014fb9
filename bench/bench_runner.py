"""Benchmark of the local runner as a whole process against plain git doing the same work.

One side is ``python -m promoter run`` on a Promotion of git-clone, yaml-update, git-commit and
git-push (``generateTargetBranch``), from start to exit: interpreter start-up, imports, manifest
loading, the engine and every git process. The other side is a shell script doing the same with
plain git: ``clone --single-branch``, edit the file, ``commit -a``, ``push``. Both reach the same
local bare repository (201 files) through the same ``url.<local>.insteadOf`` rule, each run in a
fresh directory, and every run pushes a new branch.

The two sides run in pairs, back to back, alternating which goes first, so that load from other
processes on a shared machine falls on both; the figure of merit is the median of the ten
per-pair ratios (runner / plain git). Each pair also times the same interpreter
starting and doing nothing (``python -c pass``, site-packages and all): the part of the runner
no change to the runner's own code can remove.

    .venv/bin/python bench/bench_runner.py [--pairs 10] [--files 200] [--command module|script]
        [--instructions]

``--instructions`` also runs the runner once under ``valgrind --tool=callgrind`` (git's
processes not traced) and prints how many instructions its own process executed: a figure that
does not move with the machine's load, as the times here do on a shared VM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from the repository root: make the project's packages importable without
# installing them (the Makefile installs only dependencies plus editable app packages).
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import limits  # noqa: E402
from tests.support.gitrepo import git_env, make_remote  # noqa: E402

REPO = "https://github.com/example/repo.git"
TARGET = "stages/test/kustomization.yaml"

MANIFESTS = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Freight
metadata:
  name: 7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b
  namespace: bench
alias: frozen-tauntaun
origin:
  kind: Warehouse
  name: bench
images:
- repoURL: my/image
  tag: 1.27.0
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: test
  namespace: bench
spec:
  requestedFreight:
  - origin:
      kind: Warehouse
      name: bench
    sources:
      direct: true
  promotionTemplate:
    spec:
      steps:
      - uses: git-clone
        config:
          repoURL: {repo}
          checkout:
          - branch: main
            path: ./out
      - uses: yaml-update
        as: update
        config:
          path: ./out/{target}
          updates:
          - key: images.0.newTag
            value: ${{{{ imageFrom('my/image').Tag }}}}
      - uses: git-commit
        config:
          path: ./out
          message: ${{{{ outputs.update.commitMessage }}}}
      - uses: git-push
        config:
          path: ./out
          generateTargetBranch: true
"""

# The runner's own work without interpreter start-up and imports: the same Promotion run again
# and again in one process (each in a fresh work directory), timed from the second on.
WARM_SCRIPT = """
import sys, time
from pathlib import Path
from promoter.resources.manifests import load
from promoter.local.runner import RunOptions, run_local
from promoter.steps.base import GitSettings, StepServices
manifests, gitconfig, root, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
services = StepServices(git=GitSettings(env={"GIT_CONFIG_GLOBAL": gitconfig}))
for i in range(count + 1):
    started = time.perf_counter()
    options = RunOptions(
        stage="test", freight="frozen-tauntaun", work_dir=root / f"warm-{i}", services=services
    )
    promotion = run_local(load(Path(manifests)), options)
    took = time.perf_counter() - started
    assert promotion.status.phase.value == "Succeeded", promotion.status.message
    if i:
        print(took)
"""

# The same work with plain git; $1 is a fresh directory, $2 the branch to push.
PLAIN_SCRIPT = f"""\
set -e
git clone -q --single-branch --branch main {REPO} "$1/out"
cd "$1/out"
printf 'images:\\n- name: my/image\\n  newTag: 1.27.0\\n' > {TARGET}
git commit -q -a -m "updated {TARGET}"
git push -q origin "HEAD:refs/heads/$2"
"""


def _files(count: int) -> dict[str, str | bytes | None]:
    files: dict[str, str | bytes | None] = {}
    for i in range(count):
        app = f"app{i // 10:02d}"
        files[f"apps/{app}/resource{i % 10}.yaml"] = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-{i}\n"
            f"data:\n  index: '{i}'\n" + "  filler: " + "x" * 200 + "\n"
        )
    files[TARGET] = "images:\n- name: my/image\n  newTag: v0\n"
    return files


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{args[:3]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return took


def _instructions(args: list[str], env: dict[str, str], cwd: Path) -> int:
    """Instructions the process ``args`` itself executed (its children are not traced)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *args],
        env=env, cwd=cwd, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"valgrind exited {done.returncode}:\n{done.stderr[-2000:]}")
    collected = [line for line in done.stderr.splitlines() if "Collected :" in line]
    return int(collected[-1].split(":")[-1].strip().replace(",", ""))


def main(pairs: int, file_count: int, command: str, instructions: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        root = Path(tmp)
        remote = make_remote(root, files=_files(file_count))
        git = git_env(root, {remote.url: REPO})
        gitconfig = git["GIT_CONFIG_GLOBAL"]
        manifests = root / "manifests.yaml"
        manifests.write_text(MANIFESTS.format(repo=REPO, target=TARGET), encoding="utf-8")
        home = root / "home"
        home.mkdir()
        # The plain side gets what the runner's git processes get: the gitconfig with the
        # insteadOf rule and the identity, no system config, a private HOME.
        plain_env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "LC_ALL": "C",
            **git,
        }
        # Bytecode cached as an installed package has it, in a directory of this run's own: the
        # tree stays untouched (and PYTHONDONTWRITEBYTECODE, which some shells set, would make
        # every run compile our modules again, ~0.15 s here, which users do not pay).
        runner_env = {**os.environ, "PYTHONPATH": str(ROOT)}
        runner_env.pop("PYTHONDONTWRITEBYTECODE", None)
        runner_env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        # As a user starts it: `python -m promoter`, or the `longshoreman` command pip installs.
        entry = [sys.executable, "-m", "promoter"]
        if command == "script":
            entry = [str(Path(sys.executable).parent / "longshoreman")]
        runner = [*entry, "run", "--manifests", str(manifests)]
        runner += ["--stage", "test", "--freight", "frozen-tauntaun", "--git-config", gitconfig]

        def run_runner(i: int) -> float:
            work = root / f"runner-{i}"
            return _timed([*runner, "--work-dir", str(work)], runner_env, ROOT)

        def run_floor() -> float:
            return _timed([sys.executable, "-c", "pass"], runner_env, ROOT)

        def run_plain(i: int) -> float:
            work = root / f"plain-{i}"
            work.mkdir()
            args = ["sh", "-c", PLAIN_SCRIPT, "plain", str(work), f"plain/{i}"]
            return _timed(args, plain_env, root)

        # Warm-up: page cache, the git binary, Python's bytecode caches.
        run_runner(-1)
        run_plain(-1)
        results: list[tuple[float, float]] = []
        floors: list[float] = []
        for i in range(pairs):
            if i % 2 == 0:
                r = run_runner(i)
                p = run_plain(i)
            else:
                p = run_plain(i)
                r = run_runner(i)
            results.append((r, p))
            floors.append(run_floor())
        pushed = [b for b in remote.branches() if b.startswith("kargo/promotion/")]
        assert pushed, "the runner must have pushed its generated branch"
        warm_args = [sys.executable, "-c", WARM_SCRIPT, str(manifests), gitconfig, str(root)]
        warm = subprocess.run(
            [*warm_args, str(pairs)],
            env=runner_env, cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        warm_runs = [float(line) for line in warm.stdout.split()]
        counted = None
        if instructions:
            # Warmed up above: bytecode cached, as in every timed run.
            counted = _instructions(
                [*runner, "--work-dir", str(root / "counted")], runner_env, ROOT
            )

    started = "longshoreman" if command == "script" else "python -m promoter"
    print(f"local runner ({started}) vs plain git: {pairs} pairs, {file_count + 1} files")
    print("  pair   runner ms   plain ms   ratio   python -c pass ms")
    for i, ((r, p), f) in enumerate(zip(results, floors, strict=True)):
        print(f"  {i:>4} {r * 1000:10.1f} {p * 1000:10.1f} {r / p:7.2f} {f * 1000:12.1f}")
    runner_ms = statistics.median(r for r, _ in results) * 1000
    plain_ms = statistics.median(p for _, p in results) * 1000
    floor_ms = statistics.median(floors) * 1000
    ratio = statistics.median(r / p for r, p in results)
    print(
        f"  median runner {runner_ms:.1f} ms, plain git {plain_ms:.1f} ms, "
        f"python -c pass {floor_ms:.1f} ms"
    )
    print(f"  median ratio {ratio:.2f}")
    warm_ms = statistics.median(warm_runs) * 1000
    print(
        f"  the runner's own work, in one process after a first run: median {warm_ms:.1f} ms "
        f"({warm_ms / plain_ms:.2f}x plain git); the rest is interpreter start-up and imports"
    )
    if counted is not None:
        print(f"  the runner's own process executed {counted / 1e6:.1f} M instructions (callgrind)")


if __name__ == "__main__":
    limits.bound()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument(
        "--command",
        choices=("module", "script"),
        default="module",
        help="start the runner as `python -m promoter` (module) or `longshoreman` (script)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions of the runner's own process (valgrind's callgrind)",
    )
    args = parser.parse_args()
    main(args.pairs, args.files, args.command, args.instructions)
