"""``python -m promoter demo``: the example Promotion against a throwaway local git remote.

Creates a bare repository seeded from ``examples/gitops-repo``, points Kargo's example GitOps URL
at it with a git ``url.<base>.insteadOf`` rule (the same mechanism an operator would use for a
mirror), and runs the ``test`` Stage of ``examples/kargo-demo`` through the local runner.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TextIO

from promoter.local.cli import EXIT_OK, Progress, report
from promoter.local.runner import RunOptions, run_promotion
from promoter.resources.manifests import load
from promoter.steps.base import GitSettings, StepServices

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO_REPO_URL = "https://github.com/example/kargo-demo.git"


def _git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def make_remote(root: Path) -> tuple[Path, Path, dict[str, str]]:
    """Seed a bare repo from examples/gitops-repo; return (bare, gitconfig, env)."""
    bare = root / "kargo-demo.git"
    seed = root / "seed"
    gitconfig = root / "gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Longshoreman demo\n\temail = demo@localhost\n"
        "[init]\n\tdefaultBranch = main\n"
        f'[url "{bare.as_uri()}"]\n\tinsteadOf = {DEMO_REPO_URL}\n'
    )
    env = {
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    _git("init", "--bare", "-q", str(bare), cwd=root, env=env)
    shutil.copytree(EXAMPLES / "gitops-repo", seed)
    _git("init", "-q", "-b", "main", cwd=seed, env=env)
    _git("add", "-A", cwd=seed, env=env)
    _git("commit", "-q", "-m", "Initial GitOps content", cwd=seed, env=env)
    _git("push", "-q", str(bare), "main", cwd=seed, env=env)
    return bare, gitconfig, env


def run_demo(stdout: TextIO, stderr: TextIO) -> int:
    with tempfile.TemporaryDirectory(prefix="longshoreman-demo-") as tmp:
        root = Path(tmp)
        bare, gitconfig, env = make_remote(root)
        print(f"Local GitOps remote: {bare} (stands in for {DEMO_REPO_URL})", file=stdout)
        manifests = load(EXAMPLES / "kargo-demo")
        options = RunOptions(
            stage="test",
            freight="frozen-tauntaun",
            services=StepServices(git=GitSettings(env={"GIT_CONFIG_GLOBAL": str(gitconfig)})),
            work_dir=root / "work",
            actor="demo",
        )
        progress = Progress(stdout)
        print("Promoting Freight frozen-tauntaun to Stage test ...", file=stdout)
        promotion = asyncio.run(
            run_promotion(manifests, options, observer=progress.step, on_wait=progress.wait)
        )
        code = report(promotion, "text", stdout, stdout)
        if code == EXIT_OK:
            print("\nstage/test in the remote now holds:", file=stdout)
            print(_git("log", "--oneline", "stage/test", cwd=bare, env=env).rstrip(), file=stdout)
            print(
                _git("show", "stage/test:manifests/kustomization.yaml", cwd=bare, env=env).rstrip(),
                file=stdout,
            )
            summary = promotion.status.state.get("summary", {}).get("message")
            if summary:
                print(f"\n{summary}", file=stdout)
        return code
