"""``kustomize-build`` with the kustomize built into kubectl, with the cases of Kargo's
Test_kustomizeBuilder_run and Test_kustomizeBuilder_convert
(pkg/promotion/runner/builtin/kustomize_builder_test.go), through the engine."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from promoter.resources.model import Phase
from tests.support.steps import run_template

FREIGHT = {"metadata": {"name": "f", "namespace": "demo"}, "origin": {"name": "w"}}
KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- deployment.yaml
"""
DEPLOYMENT = """\
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: test-deployment
"""


@pytest.fixture(autouse=True)
def _kubectl() -> None:
    if shutil.which("kubectl") is None:
        hint = "kustomize-build needs kubectl on PATH (the image and these machines ship it)"
        if os.environ.get("CI"):
            pytest.fail(hint)
        pytest.skip(hint)


async def build(work: Path, files: dict[str, str], config: dict[str, Any]) -> Any:
    steps: list[dict[str, Any]] = [
        {"uses": "file-write", "config": {"path": path, "contents": text}}
        for path, text in files.items()
    ]
    steps.append({"uses": "kustomize-build", "as": "build", "config": config})
    return await run_template(steps, work, freight=FREIGHT)


SIMPLE = {"kustomization.yaml": KUSTOMIZATION, "deployment.yaml": DEPLOYMENT}
# (case, files, config, file expected to hold test-deployment)
RUN = [
    ("successful build", SIMPLE, {"path": ".", "outPath": "output.yaml"}, "output.yaml"),
    ("successful build with output directory", SIMPLE, {"path": ".", "outPath": "output/"},
     "output/deployment-test-deployment.yaml"),
    ("successful build with kargo output format", SIMPLE,
     {"path": ".", "outPath": "output/", "outputFormat": "kargo"},
     "output/deployment-test-deployment.yaml"),
    ("successful build with kustomize output format", SIMPLE,
     {"path": ".", "outPath": "output/", "outputFormat": "kustomize"},
     "output/apps_v1_deployment_test-deployment.yaml"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "files", "config", "expected"),
    RUN,
    ids=[f"Test_kustomizeBuilder_run/{c[0]}" for c in RUN],
)
async def test_kustomize_build(
    tmp_path: Path, name: str, files: dict[str, str], config: dict[str, Any], expected: str
) -> None:
    done = await build(tmp_path / "w", files, config)
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    assert "test-deployment" in (tmp_path / "w" / expected).read_text()


async def test_the_single_file_is_kubectl_kustomizes_output_and_the_files_sort_keys(
    tmp_path: Path,
) -> None:
    files = {
        "kustomization.yaml": KUSTOMIZATION.replace(
            "- deployment.yaml", "- deployment.yaml\n- ns.yaml"
        )
        + "namePrefix: p-\n",
        "deployment.yaml": DEPLOYMENT + "  namespace: a\nspec:\n  replicas: 2\n",
        "ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
    }
    done = await build(tmp_path / "w", files, {"path": ".", "outPath": "all.yml"})
    assert done.status.phase is Phase.SUCCEEDED, done.status.message
    docs = list(yaml.safe_load_all((tmp_path / "w" / "all.yml").read_text()))
    assert [d["metadata"]["name"] for d in docs] == ["a", "p-test-deployment"]
    done = await build(tmp_path / "x", files, {"path": ".", "outPath": "out"})
    assert sorted(p.name for p in (tmp_path / "x" / "out").iterdir()) == [
        "a-deployment-p-test-deployment.yaml",
        "namespace-a.yaml",
    ]
    text = (tmp_path / "x" / "out" / "a-deployment-p-test-deployment.yaml").read_text()
    assert (
        text.index("apiVersion") < text.index("kind") < text.index("metadata") < text.index("spec")
    )


# "output directory rejects resource metadata that would escape it", "kustomization file not
# found", "invalid kustomization": Errored, nothing written.
ERRORS = [
    ("output directory rejects resource metadata that would escape it",
     {"kustomization.yaml": KUSTOMIZATION,
      "deployment.yaml": "apiVersion: v1\nkind: ../owned/marker\nmetadata:\n  name: written\n"},
     {"path": ".", "outPath": "output/"}, "unsafe generated resource filename"),
    ("kustomization file not found", {}, {"path": "invalid/", "outPath": "output.yaml"},
     "no such file or directory"),
    ("invalid kustomization", {"kustomization.yaml": "invalid"},
     {"path": ".", "outPath": "output.yaml"}, "invalid Kustomization"),
    ("helm charts need a helm binary",
     {"kustomization.yaml": KUSTOMIZATION.replace("resources:\n- deployment.yaml\n",
                                                  "helmCharts:\n- name: x\n  repo: http://127.0.0.1:1\n")},
     {"path": ".", "outPath": "output.yaml"}, "helm binary"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "files", "config", "message"), ERRORS, ids=[c[0] for c in ERRORS])
async def test_kustomize_build_errors(
    tmp_path: Path, name: str, files: dict[str, str], config: dict[str, Any], message: str
) -> None:
    done = await build(tmp_path / "w", files, config)
    assert done.status.phase is Phase.ERRORED
    assert message in done.status.message
    assert not (tmp_path / "w" / "output.yaml").exists()
    assert not (tmp_path / "w" / "owned").exists()
    assert str(tmp_path) not in done.status.message


# Test_kustomizeBuilder_convert: the schema's refusals (Failed) and what it accepts.
CONVERT = [
    ("path not specified", {"outPath": "o.yaml"}, "config.path is required"),
    ("outPath not specified", {"path": "."}, "config.outPath is required"),
    ("plugin.helm.apiVersions contains empty string",
     {"path": ".", "outPath": "o.yaml", "plugin": {"helm": {"apiVersions": [""]}}},
     "apiVersions must be a list of non-empty strings"),
    ("invalid outputFormat", {"path": ".", "outPath": "o.yaml", "outputFormat": "invalid"},
     "outputFormat must be one of kargo, kustomize"),
    ("valid kitchen sink", {"path": ".", "outPath": "o.yaml", "outputFormat": "kustomize",
     "plugin": {"helm": {"apiVersions": ["v1"], "kubeVersion": "1.32"}}}, None),
    ("valid config with empty helm plugin", {"path": ".", "outPath": "o.yaml",
     "plugin": {"helm": {}}}, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "config", "message"),
    CONVERT,
    ids=[f"Test_kustomizeBuilder_convert/{c[0]}" for c in CONVERT],
)
async def test_kustomize_build_config(
    tmp_path: Path, name: str, config: dict[str, Any], message: str | None
) -> None:
    done = await build(tmp_path / "w", SIMPLE, config)
    if message is None:
        assert done.status.phase is Phase.SUCCEEDED, done.status.message
    else:
        assert done.status.phase is Phase.FAILED
        assert message in done.status.message
