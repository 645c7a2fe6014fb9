"""The local runner imports only what a Promotion uses.

A step module brings its libraries along (aiohttp for ``http``, ruamel for the YAML steps,
tomlkit for the TOML ones), so the registry imports one when a step of its kind first runs.
These tests run the real command line in a fresh interpreter (``sys.modules`` of this one has
everything the other tests imported) and look at what it imported: ``--help`` and a git-only
Promotion never load aiohttp, asyncio or the other steps' libraries.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promoter.steps import git as git_steps
from promoter.steps.base import loop_free_of
from promoter.steps.registry import (
    BUILTIN_KINDS,
    LOOP_FREE_KINDS,
    MODULES,
    StepRegistry,
    builtin_registry,
)
from tests.support.gitrepo import RemoteRepo, git_env, make_remote

ROOT = Path(__file__).resolve().parent.parent
REPO = "https://github.com/example/repo.git"

# Libraries and step modules a git-only Promotion has no use for.
UNUSED_BY_GIT = (
    "aiohttp",
    "yarl",
    "multidict",
    "ruamel.yaml",
    "tomlkit",
    "promoter.steps.http",
    "promoter.steps.download",
    "promoter.steps.archive",
    "promoter.steps.files",
    "promoter.steps.tomlfiles",
    "promoter.steps.argocd",
    "promoter.steps.github",
)

# Runs ``python -m promoter ARGS...`` as __main__ and writes the modules it imported to FILE.
PROBE = """
import json, os, runpy, sys
out, sys.argv = sys.argv[1], ["promoter", *sys.argv[2:]]
def leave(code):  # python -m promoter ends with os._exit: come back here instead
    raise SystemExit(code)
os._exit = leave
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


def test_help_imports_neither_the_engine_nor_any_step(tmp_path: Path) -> None:
    code, modules = imported_by(tmp_path, "--help")
    assert code == 0
    heavy = {"yaml", "asyncio", "promoter.engine", "promoter.model", "promoter.steps.base"}
    assert not modules & {*UNUSED_BY_GIT, *heavy}


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
    assert "promoter.steps.git" in modules
    assert sorted(modules & set(UNUSED_BY_GIT)) == []
    # Driven without an event loop (promoter.io_port): asyncio is never imported; and nothing
    # was logged, so neither was logging (promoter.telemetry.lazy_logger).
    assert "asyncio" not in modules
    assert "logging" not in modules
    # Records, not dataclasses (promoter/records.py), and so no inspect; hashlib's OpenSSL
    # neither (promoter/gitcmd.py).
    assert sorted(modules & {"dataclasses", "inspect", "hashlib", "_hashlib"}) == []
    assert sorted(modules & UNUSED_BY_A_LOCAL_RUN) == []
    assert [b for b in remote.branches() if b.startswith("kargo/promotion/")]


# What no local git Promotion loads: typing (promoter/lean.py), argparse for a plain command
# line (promoter.cli.plain_run_args), subprocess and threading where one thread runs
# (promoter.io_port), tempfile and shutil with --work-dir and nothing to remove.
UNUSED_BY_A_LOCAL_RUN = {
    "typing",
    "argparse",
    "gettext",
    "locale",
    "subprocess",
    "threading",
    "tempfile",
    "shutil",
    "bz2",
    "lzma",
}


def test_an_image_update_promotion_loads_no_more_than_it_needs(tmp_path: Path) -> None:
    """The Promotion bench/bench_runner.py times: clone, yaml-update, commit, push."""
    manifests = GIT_ONLY_MANIFESTS.replace(
        "      - uses: git-clear\n        config:\n          path: ./out\n",
        "      - uses: yaml-update\n        config:\n          path: ./out/app/values.yaml\n"
        "          updates:\n          - key: image.tag\n            value: v2\n",
    )
    remote, modules = run_imports(tmp_path, manifests, {"app/values.yaml": "image:\n  tag: v1\n"})
    assert {"promoter.steps.files", "promoter.steps.yamlsplice", "yaml"} <= modules
    assert sorted(modules & UNUSED_BY_A_LOCAL_RUN) == []
    assert "ruamel.yaml" not in modules
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
    # The loop-free table says of each kind what its step says of itself.
    loop_free = {
        kind
        for module in dict.fromkeys(BUILTIN_KINDS.values())
        for kind, step in importlib.import_module(module).STEPS.items()
        if loop_free_of(step)
    }
    assert loop_free == set(LOOP_FREE_KINDS)
    # Each module has its loader, and the loader gives that module's steps.
    assert set(MODULES) == set(BUILTIN_KINDS.values())
    for module, load in MODULES.items():
        assert load() is importlib.import_module(module).STEPS


def test_a_kind_resolves_to_its_modules_step_and_unknown_kinds_are_missing() -> None:
    registry = builtin_registry()
    assert list(registry) == list(BUILTIN_KINDS)
    assert registry["git-push"] is git_steps.STEPS["git-push"]
    assert registry.get("git-clone") is git_steps.STEPS["git-clone"]
    with pytest.raises(KeyError):
        registry["no-such-step"]
    assert registry.get("no-such-step") is None


def test_a_registered_step_replaces_a_builtin_one_before_and_after_its_import() -> None:
    replacement = git_steps.STEPS["git-clear"]
    registry = builtin_registry()
    registry.register("http", replacement)
    registry.register("git-push", replacement)
    assert registry["http"] is replacement
    assert registry["git-commit"] is git_steps.STEPS["git-commit"]
    assert registry["git-push"] is replacement
    assert isinstance(StepRegistry({"x": replacement})["x"], type(replacement))


def test_pyyaml_compiles_its_patterns_when_first_used(tmp_path: Path) -> None:
    """promoter.yamlio loads PyYAML without compiling the pattern of its pure-Python reader
    (libyaml's loader never uses it); the pure-Python loader still refuses what it refused."""
    probe = (
        "import re, sys\n"
        "from promoter.yamlio import LOADER, yaml\n"
        "import yaml.reader\n"
        "lazy = yaml.reader.Reader.NON_PRINTABLE\n"
        "assert not isinstance(lazy, re.Pattern) and lazy._pattern is None\n"
        "import datetime\n"
        "assert yaml.load('a: [1, 2.5, true, null, 2024-01-02]', Loader=LOADER) == "
        "{'a': [1, 2.5, True, None, datetime.date(2024, 1, 2)]}\n"
        "assert LOADER is yaml.CSafeLoader and lazy._pattern is None\n"
        "try:\n"
        "    yaml.load('a: \\x07', Loader=yaml.SafeLoader)\n"
        "except yaml.reader.ReaderError as e:\n"
        "    assert 'special characters are not allowed' in str(e)\n"
        "else:\n"
        "    raise AssertionError('a control character was read')\n"
        "assert isinstance(lazy._pattern, re.Pattern)\n"
        "assert re.compile('x') is not None and isinstance(re.compile('y'), re.Pattern)\n"
    )
    run_probe(probe)
