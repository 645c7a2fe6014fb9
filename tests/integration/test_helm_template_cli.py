"""helm-template from the local runner's command line (``python -m promoter run``): a chart the
Promotion writes is rendered by Helm's SDK; and where helm-python-sdk cannot be imported, the
step fails saying how to install it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

CHART = "apiVersion: v2\nname: hello\nversion: 0.1.0\n"
TEMPLATE = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Values.who }}\n"
    "  namespace: {{ .Release.Namespace }}\n"
)


def manifests(tmp_path: Path) -> Path:
    steps: list[dict[str, Any]] = [
        {"uses": "file-write", "config": {"path": "chart/Chart.yaml", "contents": CHART}},
        {"uses": "file-write", "config": {"path": "chart/values.yaml", "contents": "who: all\n"}},
        {
            "uses": "file-write",
            "config": {"path": "chart/templates/cm.yaml", "contents": TEMPLATE},
        },
        {
            "uses": "helm-template",
            "config": {
                "path": "chart",
                "releaseName": "${{ ctx.stage }}",
                "setValues": [{"key": "who", "value": "${{ ctx.targetFreight.name }}"}],
                "outPath": "out/manifests.yaml",
            },
        },
    ]
    documents = [
        {
            "apiVersion": "kargo.akuity.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "test", "namespace": "demo"},
            "spec": {
                "requestedFreight": [
                    {"origin": {"kind": "Warehouse", "name": "w"}, "sources": {"direct": True}}
                ],
                "promotionTemplate": {"spec": {"steps": steps}},
            },
        },
        {
            "apiVersion": "kargo.akuity.io/v1alpha1",
            "kind": "Freight",
            "metadata": {"name": "f1", "namespace": "demo"},
            "origin": {"kind": "Warehouse", "name": "w"},
        },
    ]
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path


def promotion_dir(tmp_path: Path) -> Path:
    """The Promotion's own directory under --work-dir."""
    [only] = (tmp_path / "work").iterdir()
    return only


def run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promoter", "run", "--manifests", str(manifests(tmp_path)),
         "--stage", "test", "--freight", "f1", "--work-dir", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_the_local_runner_renders_a_chart(tmp_path: Path) -> None:
    pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    done = run(tmp_path, dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    rendered = (promotion_dir(tmp_path) / "out" / "manifests.yaml").read_text()
    assert rendered == (
        "---\n# Source: hello/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        "  name: test-f1\n  namespace: demo\n"
    )


def test_without_helm_python_sdk_the_step_says_how_to_install_it(tmp_path: Path) -> None:
    # A helm_python that cannot be imported, first on the path: what a machine without the
    # optional dependency (or with a broken one) looks like to the step.
    stub = tmp_path / "no-helm" / "helm_python"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named helm_python')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub.parent), str(ROOT)])}
    done = run(tmp_path, env)
    assert done.returncode == 1
    assert "helm-template: Helm's SDK for Python (helm-python-sdk) is not installed" in done.stdout
    assert "pip install 'longshoreman[helm]'" in done.stdout
    assert not (promotion_dir(tmp_path) / "out").exists()


def test_without_helm_python_sdk_helm_update_chart_edits_chart_yaml_only(tmp_path: Path) -> None:
    stub = tmp_path / "no-helm" / "helm_python"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named helm_python')\n")
    chart = (
        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n"
        "- name: dep\n  version: 1.0.0\n  repository: https://charts.example.com\n"
    )
    steps = [
        {"uses": "file-write", "config": {"path": "chart/Chart.yaml", "contents": chart}},
        {
            "uses": "helm-update-chart",
            "config": {
                "path": "chart",
                "charts": [
                    {"repository": "https://charts.example.com", "name": "dep", "version": "1.1.0"}
                ],
            },
        },
    ]
    path = manifests(tmp_path)
    documents = list(yaml.safe_load_all(path.read_text()))
    documents[0]["spec"]["promotionTemplate"]["spec"]["steps"] = steps
    path.write_text(yaml.safe_dump_all(documents))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub.parent), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "promoter", "run", "--manifests", str(path),
         "--stage", "test", "--freight", "f1", "--work-dir", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    chart_dir = promotion_dir(tmp_path) / "chart"
    assert "version: 1.1.0" in (chart_dir / "Chart.yaml").read_text()
    assert not (chart_dir / "Chart.lock").exists()
    assert "Chart.lock and charts/ were not refreshed" in done.stdout
