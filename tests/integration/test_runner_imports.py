"""The local runner imports only what a Promotion uses.

A step module brings its libraries along (aiohttp for ``http``, ruamel for the YAML steps,
tomlkit for the TOML ones), so the registry imports one when a step of its kind first runs.
These tests run the real command line in a fresh interpreter (``sys.modules`` of this one has
everything the other tests imported) and look at what it imported: a git-only Promotion never
loads the server's packages (aiohttp, kubernetes, slack_bolt, gidgethub) or the other steps'
libraries.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promoter.steps import git_clear, git_clone, git_commit, git_push
from promoter.steps.registry import BUILTIN_KINDS, MODULES, StepRegistry, builtin_registry
from tests.support.gitrepo import RemoteRepo, git_env, make_remote

ROOT = Path(__file__).resolve().parents[2]
REPO = "https://github.com/example/repo.git"

# The server's packages: the local runner never needs them.
SERVER_PACKAGES = ("aiohttp", "kubernetes", "slack_bolt", "slack_sdk", "gidgethub")

# Libraries and step modules a git-only Promotion has no use for.
UNUSED_BY_GIT = (
    *SERVER_PACKAGES,
    "yarl",
    "multidict",
    "ruamel.yaml",
    "tomlkit",
    "promoter.steps.http",
    "promoter.steps.download",
    "promoter.steps.workdir.untar",
    "promoter.steps.workdir.tar",
    "promoter.steps.workdir.files",
    "promoter.steps.workdir.yaml_update",
    "promoter.steps.workdir.tomlfiles",
    "promoter.steps.argocd",
    "promoter.steps.github",
)

# Runs ``python -m promoter ARGS...`` as __main__ and writes the modules it imported to FILE.
PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["promoter", *sys.argv[2:]]
try:
    runpy.run_module("promoter", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""

GIT_ONLY_MANIFESTS = f"""\
apiVersion: kargo.akuity.io/v1alpha1
kind: Freight
metadata:
  name: 7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b
  namespace: demo
alias: frozen-tauntaun
origin:
  kind: Warehouse
  name: demo
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: test
  namespace: demo
spec:
  requestedFreight:
  - origin:
      kind: Warehouse
      name: demo
    sources:
      direct: true
  promotionTemplate:
    spec:
      steps:
      - uses: git-clone
        config:
          repoURL: {REPO}
          checkout:
          - branch: main
            path: ./out
      - uses: git-clear
        config:
          path: ./out
      - uses: git-commit
        config:
          path: ./out
          message: empty the ${{{{ ctx.stage }}}} branch
      - uses: git-push
        config:
          path: ./out
          generateTargetBranch: true
"""


def imported_by(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.exists(), done.stderr
    result = json.loads(out.read_text())
    return result["code"], set(result["modules"])


def run_imports(
    tmp_path: Path, manifests: str, files: dict[str, str]
) -> tuple[RemoteRepo, set[str]]:
    """The remote ``python -m promoter run`` of ``manifests`` pushed to, and what it imported."""
    remote = make_remote(tmp_path, files=files)
    gitconfig = git_env(tmp_path, {remote.url: REPO})["GIT_CONFIG_GLOBAL"]
    path = tmp_path / "manifests.yaml"
    path.write_text(manifests)
    code, modules = imported_by(
        tmp_path,
        "run", "--manifests", str(path), "--stage", "test", "--freight", "frozen-tauntaun",
        "--git-config", gitconfig, "--work-dir", str(tmp_path / "work"),
    )  # fmt: skip
    assert code == 0
    return remote, modules


def test_a_git_only_promotion_imports_no_other_steps_libraries(tmp_path: Path) -> None:
    remote, modules = run_imports(tmp_path, GIT_ONLY_MANIFESTS, {"a.yaml": "a: 1\n"})
    assert {"promoter.steps.git_clone", "promoter.steps.git_push"} <= modules
    assert sorted(modules & set(UNUSED_BY_GIT)) == []
    assert [b for b in remote.branches() if b.startswith("kargo/promotion/")]


def test_an_image_update_promotion_loads_no_more_than_it_needs(tmp_path: Path) -> None:
    """The Promotion bench/bench_runner.py times: clone, yaml-update, commit, push."""
    manifests = GIT_ONLY_MANIFESTS.replace(
        "      - uses: git-clear\n        config:\n          path: ./out\n",
        "      - uses: yaml-update\n        config:\n          path: ./out/app/values.yaml\n"
        "          updates:\n          - key: image.tag\n            value: v2\n",
    )
    remote, modules = run_imports(tmp_path, manifests, {"app/values.yaml": "image:\n  tag: v1\n"})
    assert {
        "promoter.steps.workdir.yaml_update",
        "promoter.steps.workdir.yamlsplice",
        "yaml",
    } <= modules
    assert sorted(modules & {*SERVER_PACKAGES, "ruamel.yaml"}) == []
    pushed = [b for b in remote.branches() if b.startswith("kargo/promotion/")]
    assert len(pushed) == 1
    assert remote.read_file(pushed[0], "app/values.yaml") == "image:\n  tag: v2\n"


def test_listing_kinds_imports_no_step_module(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from promoter.steps.registry import builtin_registry\n"
        "registry = builtin_registry()\n"
        "kinds = sorted(registry)\n"
        "assert 'http' in registry and 'nope' not in registry and len(registry) == len(kinds)\n"
        "assert not [m for m in sys.modules if m.startswith('promoter.steps.')"
        " and m not in ('promoter.steps.base', 'promoter.steps.registry')], sorted(sys.modules)\n"
        "registry['http']\n"
        "assert 'aiohttp' in sys.modules\n"
    )
    run_probe(probe)


def run_probe(probe: str) -> None:
    """Run ``probe`` in a fresh interpreter (its asserts are the test)."""
    subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
        timeout=120,
    )


def test_the_kind_table_matches_every_modules_steps() -> None:
    defined: dict[str, str] = {}
    for module in dict.fromkeys(BUILTIN_KINDS.values()):
        for kind in importlib.import_module(module).STEPS:
            defined[kind] = module
    assert defined == dict(BUILTIN_KINDS)
    # Each module has its loader, and the loader gives that module's steps.
    assert set(MODULES) == set(BUILTIN_KINDS.values())
    for module, load in MODULES.items():
        assert load() is importlib.import_module(module).STEPS


def test_a_kind_resolves_to_its_modules_step_and_unknown_kinds_are_missing() -> None:
    registry = builtin_registry()
    assert list(registry) == list(BUILTIN_KINDS)
    assert registry["git-push"] is git_push.STEPS["git-push"]
    assert registry.get("git-clone") is git_clone.STEPS["git-clone"]
    with pytest.raises(KeyError):
        registry["no-such-step"]
    assert registry.get("no-such-step") is None


def test_a_registered_step_replaces_a_builtin_one_before_and_after_its_import() -> None:
    replacement = git_clear.STEPS["git-clear"]
    registry = builtin_registry()
    registry.register("http", replacement)
    registry.register("git-push", replacement)
    assert registry["http"] is replacement
    assert registry["git-commit"] is git_commit.STEPS["git-commit"]
    assert registry["git-push"] is replacement
    assert isinstance(StepRegistry({"x": replacement})["x"], type(replacement))
