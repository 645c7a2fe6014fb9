"""helm-template through its step object, on real charts in a temporary work directory, with
Helm's Go SDK (helm-python-sdk) rendering.

Ported from Kargo's pkg/promotion/runner/builtin/helm_template_runner_test.go: the convert table
(config validation), the run table (whole runs on small charts) and the writeOutput table (hooks,
layouts, appends), the latter on charts whose templates produce the release Kargo's table builds
by hand. Dependency builds run against a chart repository served over HTTP on 127.0.0.1 and
Debian's docker-registry as an OCI registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from promoter.errors import ConfigRefused, StepError
from promoter.ports.credentials import Credential, CredentialType
from promoter.steps.base import StepContext, StepStatus
from promoter.steps.helm_template import STEPS
from tests.support.helmcharts import (
    chart_archive,
    serving_chart_repository,
    write_files,
)
from tests.support.registry import running_registry
from tests.support.steps import make_context

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

STEP = STEPS["helm-template"]

TEST_CHART = """apiVersion: v1
name: test-chart
version: 0.1.0"""
# Kargo's run table's template and what it renders to, with one data line or two.
TEMPLATE_HEAD = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-configmap
  namespace: {{ .Release.Namespace }}
data:
"""
RENDERED_HEAD = """---
# Source: test-chart/templates/test.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: test-release-configmap
  namespace: test-namespace
data:
"""
CONFIGMAP = TEMPLATE_HEAD + "  value: {{ .Values.key }}\n"
RENDERED = RENDERED_HEAD + "  value: value\n"


def chart_with(template: str) -> dict[str, str]:
    return {
        "charts/test-chart/Chart.yaml": TEST_CHART,
        "charts/test-chart/templates/test.yaml": template,
    }


def ctx_for(tmp_path: Path, files: Mapping[str, str] | None = None) -> StepContext:
    work = tmp_path / "work"
    write_files(work, files or {})
    return make_context(tmp_path, project="test-project", work_dir=work)


async def run(ctx: StepContext, config: Mapping[str, Any]) -> Any:
    return await STEP.run(ctx, config)


async def error(ctx: StepContext, config: Mapping[str, Any]) -> StepError:
    with pytest.raises(StepError) as caught:
        await run(ctx, config)
    return caught.value


# --- Test_helmTemplateRunner_convert ----------------------------------------------------------

BASE = {"outPath": "/output/path", "path": "/chart/path", "releaseName": "my-release"}


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, "config.outPath is required"),
        ({"outPath": ""}, "config.outPath must not be empty"),
        ({"outPath": "/output/path"}, "config.path is required"),
        ({"outPath": "/output/path", "path": ""}, "config.path must not be empty"),
        ({"outPath": "/output/path", "path": "/chart/path"}, "config.releaseName is required"),
        ({**BASE, "releaseName": ""}, "config.releaseName must not be empty"),
        (
            {"namespace": "default"},
            "config.outPath is required; config.path is required; config.releaseName is required",
        ),
        ({**BASE, "valuesFiles": ["values.yaml", ""]}, "config.valuesFiles.1 must be a non-empty"),
        ({**BASE, "setValues": [{"value": "some-value"}]}, "config.setValues.0.key is required"),
        (
            {**BASE, "setValues": [{"key": "", "value": "some-value"}]},
            "config.setValues.0.key must not be empty",
        ),
        ({**BASE, "setValues": [{"key": "image.tag"}]}, "config.setValues.0.value is required"),
        ({**BASE, "apiVersions": ["v1", ""]}, "config.apiVersions.1 must be a non-empty"),
        ({**BASE, "outLayout": "tree"}, "config.outLayout must be one of helm, flat"),
        ({**BASE, "values": {"a": 1}}, "unknown config field(s) values"),
    ],
)
async def test_invalid_configs_are_refused(
    tmp_path: Path, config: Mapping[str, Any], problem: str
) -> None:
    err = await error(ctx_for(tmp_path), config)
    assert isinstance(err, ConfigRefused)
    assert problem in str(err)


VALID = [
    {"outPath": "out", "path": "chart", "releaseName": "my-release"},
    {
        "outPath": "out", "path": "chart", "releaseName": "my-release", "useReleaseName": True,
        "buildDependencies": True, "includeCRDs": True, "disableHooks": True, "skipTests": True,
    },
    {"outPath": "out", "path": "chart", "releaseName": "r", "namespace": "production",
     "kubeVersion": "1.28.0"},
    {"outPath": "out", "path": "chart", "releaseName": "r",
     "valuesFiles": ["values.yaml", "values-prod.yaml"], "ignoreMissingValueFiles": True},
    {"outPath": "out", "path": "chart", "releaseName": "r", "setValues": [
        {"key": "image.tag", "value": "v1.2.3"}, {"key": "replicaCount", "value": "3"},
        {"key": "service.type", "value": ""}]},
    {"outPath": "out", "path": "chart", "releaseName": "r", "setValues": [
        {"key": "image.tag", "value": "v1.2.3", "literal": True},
        {"key": "replicaCount", "value": "3"}]},
    {"outPath": "out", "path": "chart", "releaseName": "r",
     "apiVersions": ["v1", "apps/v1", "networking.k8s.io/v1"]},
    {"outPath": "out", "path": "chart", "releaseName": "my-application", "useReleaseName": True,
     "namespace": "production", "valuesFiles": ["values.yaml"], "ignoreMissingValueFiles": True,
     "setValues": [{"key": "image.repository", "value": "myregistry.com/myapp"},
                   {"key": "ingress.enabled", "value": "true"}],
     "buildDependencies": True, "includeCRDs": True, "disableHooks": False, "skipTests": True,
     "kubeVersion": "1.29.0", "outLayout": "flat",
     "apiVersions": ["v1", "apps/v1", "networking.k8s.io/v1", "cert-manager.io/v1"]},
]  # fmt: skip


@pytest.mark.parametrize("config", VALID)
async def test_valid_configs_render(tmp_path: Path, config: Mapping[str, Any]) -> None:
    ctx = ctx_for(
        tmp_path,
        {"chart/Chart.yaml": TEST_CHART, "chart/templates/test.yaml": CONFIGMAP,
         "values.yaml": "key: value"},
    )  # fmt: skip
    result = await run(ctx, config)
    assert result.status is StepStatus.SUCCEEDED
    assert (ctx.work_dir / "out").is_dir()


# --- Test_helmTemplateRunner_run --------------------------------------------------------------


async def test_successful_run(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"values.yaml": "key: value", "charts/test-chart/Chart.yaml": TEST_CHART,
         "charts/test-chart/templates/test.yaml": CONFIGMAP},
    )  # fmt: skip
    result = await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["values.yaml"], "outPath": "output.yaml",
         "releaseName": "test-release", "namespace": "test-namespace"},
    )  # fmt: skip
    assert result.status is StepStatus.SUCCEEDED
    assert result.output == {}
    assert (ctx.work_dir / "output.yaml").read_text() == RENDERED


async def test_successful_run_with_flat_layout(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {
            "values.yaml": "key: value",
            "charts/test-chart/Chart.yaml": TEST_CHART,
            "charts/test-chart/templates/configmap.yaml": (
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: test-configmap\n"
                "  namespace: test-namespace\ndata:\n  value: {{ .Values.key }}\n---\n"
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: test-secret\n"
                "  namespace: test-namespace\ndata:\n  secret: dGVzdA==\n"
            ),
        },
    )
    await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["values.yaml"], "outPath": "output",
         "outLayout": "flat", "releaseName": "test-release", "namespace": "test-namespace"},
    )  # fmt: skip
    out = ctx.work_dir / "output"
    assert sorted(p.name for p in out.iterdir()) == [
        "configmap-test-namespace-test-configmap.yaml",
        "secret-test-namespace-test-secret.yaml",
    ]
    configmap = (out / "configmap-test-namespace-test-configmap.yaml").read_text()
    assert "kind: ConfigMap" in configmap and "name: test-configmap" in configmap
    secret = (out / "secret-test-namespace-test-secret.yaml").read_text()
    assert "kind: Secret" in secret and "name: test-secret" in secret


MULTI = TEMPLATE_HEAD + "  value1: {{ .Values.key1 }}\n  value2: {{ .Values.key2 }}\n"
MULTI_RENDERED = RENDERED_HEAD + "  value1: value1\n  value2: value2\n"


async def test_successful_run_with_multiple_values(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"values1.yaml": "key1: value1", "values2.yaml": "key2: value2",
         **chart_with(MULTI)},
    )  # fmt: skip
    await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["values1.yaml", "values2.yaml"],
         "outPath": "output.yaml", "releaseName": "test-release", "namespace": "test-namespace"},
    )  # fmt: skip
    assert (ctx.work_dir / "output.yaml").read_text() == MULTI_RENDERED


async def test_successful_run_with_set_values(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"values.yaml": "key1: value1", "charts/test-chart/Chart.yaml": TEST_CHART,
         "charts/test-chart/templates/test.yaml": MULTI},
    )  # fmt: skip
    await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["values.yaml"],
         "setValues": [{"key": "key2", "value": "value2"}], "outPath": "output.yaml",
         "releaseName": "test-release", "namespace": "test-namespace"},
    )  # fmt: skip
    assert (ctx.work_dir / "output.yaml").read_text() == MULTI_RENDERED


async def test_successful_run_with_literal_set_values(tmp_path: Path) -> None:
    template = (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-configmap\n"
        "data:\n  literalValue: {{ .Values.literalKey }}\n  normalValue: {{ .Values.normalKey }}\n"
        "  typed: {{ .Values.count }}\n  literalTyped: {{ kindOf .Values.literalCount }}\n"
    )
    ctx = ctx_for(
        tmp_path,
        {**chart_with(template)},
    )  # fmt: skip
    await run(
        ctx,
        {
            "path": "charts/test-chart",
            "setValues": [
                {"key": "literalKey", "value": "foo,bar,baz", "literal": True},
                {"key": "normalKey", "value": "normal-string", "literal": False},
                {"key": "count", "value": "3"},
                {"key": "literalCount", "value": "3", "literal": True},
            ],
            "outPath": "output.yaml",
            "releaseName": "test-release",
            "namespace": "test-namespace",
        },
    )
    content = (ctx.work_dir / "output.yaml").read_text()
    assert "literalValue: foo,bar,baz" in content
    assert "normalValue: normal-string" in content
    assert "typed: 3" in content
    assert "literalTyped: string" in content


async def test_successful_run_with_output_directory_helm_layout(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"values.yaml": "key: value", "charts/test-chart/Chart.yaml": TEST_CHART,
         "charts/test-chart/templates/test.yaml": CONFIGMAP},
    )  # fmt: skip
    await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["values.yaml"], "outPath": "output/",
         "releaseName": "test-release", "namespace": "test-namespace"},
    )  # fmt: skip
    written = ctx.work_dir / "output" / "test-chart" / "templates" / "test.yaml"
    assert written.read_text() == RENDERED


async def test_successful_run_with_use_release_name(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"values.yaml": "key: value", "charts/test-chart/Chart.yaml": TEST_CHART,
         "charts/test-chart/templates/test.yaml": CONFIGMAP},
    )  # fmt: skip
    await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["values.yaml"], "outPath": "output/",
         "releaseName": "test-release", "useReleaseName": True, "namespace": "test-namespace"},
    )  # fmt: skip
    written = ctx.work_dir / "output/test-release/test-chart/templates/test.yaml"
    assert written.read_text() == RENDERED


async def test_missing_values_file(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {"chart/Chart.yaml": TEST_CHART})
    config = {"path": "chart", "valuesFiles": ["non-existent.yaml"], "outPath": "output.yaml",
              "releaseName": "r"}  # fmt: skip
    err = await error(ctx, config)
    assert "failed to compose values" in str(err)
    assert not (ctx.work_dir / "output.yaml").exists()
    # Kargo's ignoreMissingValueFiles skips it instead.
    result = await run(ctx, {**config, "ignoreMissingValueFiles": True})
    assert result.status is StepStatus.SUCCEEDED


async def test_ignore_missing_value_files_keeps_the_files_that_exist(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"base.yaml": "key1: base\nkey2: base", "prod.yaml": "key2: prod",
         **chart_with(MULTI)},
    )  # fmt: skip
    await run(
        ctx,
        {"path": "charts/test-chart", "valuesFiles": ["base.yaml", "missing.yaml", "prod.yaml"],
         "ignoreMissingValueFiles": True, "outPath": "o.yaml", "releaseName": "r"},
    )  # fmt: skip
    content = (ctx.work_dir / "o.yaml").read_text()
    assert "value1: base" in content and "value2: prod" in content


async def test_invalid_chart(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    err = await error(ctx, {"path": "./", "outPath": "output.yaml", "releaseName": "r"})
    assert "failed to load chart" in str(err)
    assert not (ctx.work_dir / "output.yaml").exists()


async def test_an_invalid_kube_version_fails_before_rendering(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {"charts/test-chart/Chart.yaml": TEST_CHART})
    err = await error(
        ctx,
        {"path": "charts/test-chart", "kubeVersion": "invalid", "outPath": "output.yaml",
         "releaseName": "r"},
    )  # fmt: skip
    assert "failed to initialize Helm action config" in str(err)
    assert not (ctx.work_dir / "output.yaml").exists()


async def test_template_rendering_error(tmp_path: Path) -> None:
    broken = (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-configmap\n"
        "data:\n  value: {{ .Values.nonexistent | quote }}}\n"
    )
    ctx = ctx_for(
        tmp_path,
        {**chart_with(broken)},
    )  # fmt: skip
    err = await error(
        ctx, {"path": "charts/test-chart", "outPath": "output.yaml", "releaseName": "r"}
    )
    assert "failed to render chart" in str(err)
    assert err.terminal
    assert not (ctx.work_dir / "output.yaml").exists()


async def test_values_are_checked_against_the_charts_schema_and_library_charts_refused(
    tmp_path: Path,
) -> None:
    ctx = ctx_for(
        tmp_path,
        {
            **chart_with(CONFIGMAP),
            "charts/test-chart/values.schema.json": (
                '{"type": "object", "properties": {"key": {"type": "integer"}}}'
            ),
            "lib/Chart.yaml": "apiVersion: v2\nname: lib\nversion: 0.1.0\ntype: library\n",
        },
    )
    err = await error(
        ctx,
        {"path": "charts/test-chart", "outPath": "o.yaml", "releaseName": "r",
         "setValues": [{"key": "key", "value": "text", "literal": True}]},
    )  # fmt: skip
    assert "failed to render chart" in str(err) and "want integer" in str(err)
    err = await error(ctx, {"path": "lib", "outPath": "o.yaml", "releaseName": "r"})
    assert "library charts are not installable" in str(err)


async def test_invalid_output_path(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {"output.yaml/foo": "", "chart/Chart.yaml": TEST_CHART,
         "chart/templates/test.yaml": CONFIGMAP.replace("{{ .Values.key }}", "x")},
    )  # fmt: skip
    err = await error(ctx, {"path": "./chart/", "outPath": "output.yaml", "releaseName": "r"})
    assert "failed to write rendered chart" in str(err)
    assert not (ctx.work_dir / "output.yaml").is_file()


async def test_paths_outside_the_work_directory_are_refused(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {"chart/Chart.yaml": TEST_CHART})
    for config in (
        {"path": "../chart", "outPath": "o.yaml", "releaseName": "r"},
        {"path": "chart", "outPath": "../o.yaml", "releaseName": "r"},
        {"path": "chart", "outPath": "o.yaml", "releaseName": "r", "valuesFiles": ["/etc/x"]},
    ):
        assert isinstance(await error(ctx, config), ConfigRefused)


# --- Test_helmTemplateRunner_writeOutput, on charts that render Kargo's releases ---------------

HOOK = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  annotations:
    "helm.sh/hook": {events}
"""
MAIN = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: main\n"


def hooks_chart(tmp_path: Path, **hooks: str) -> StepContext:
    files = {
        "c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0",
        "c/templates/main.yaml": MAIN,
    }
    for name, events in hooks.items():
        files[f"c/templates/{name}.yaml"] = HOOK.format(name=name, events=events)
    return ctx_for(tmp_path, files)


def hook_text(name: str, events: str) -> str:
    return (
        f"---\n# Source: c/templates/{name}.yaml\n{HOOK.format(name=name, events=events).strip()}\n"
    )


async def test_hooks_are_written_to_their_own_files(tmp_path: Path) -> None:
    ctx = hooks_chart(tmp_path, hook1="pre-install", hook2="post-install")
    await run(ctx, {"path": "c", "outPath": "output", "releaseName": "r"})
    templates = ctx.work_dir / "output" / "c" / "templates"
    assert (templates / "hook1.yaml").read_text() == hook_text("hook1", "pre-install")
    assert (templates / "hook2.yaml").read_text() == hook_text("hook2", "post-install")
    assert (
        (templates / "main.yaml").read_text().startswith("---\n# Source: c/templates/main.yaml\n")
    )


async def test_manifests_and_hooks_in_the_flat_layout(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {
            "c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0",
            "c/templates/all.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: test-configmap\n"
                "  namespace: test-ns\n---\napiVersion: v1\nkind: Secret\nmetadata:\n"
                "  name: test-secret\n  namespace: test-ns\n"
            ),
            "c/templates/job.yaml": (
                "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: test-job\n"
                "  namespace: test-ns\n  annotations:\n    helm.sh/hook: pre-install\n"
            ),
        },
    )
    await run(ctx, {"path": "c", "outPath": "output", "outLayout": "flat", "releaseName": "r"})
    assert sorted(p.name for p in (ctx.work_dir / "output").iterdir()) == [
        "batch-job-test-ns-test-job.yaml",
        "configmap-test-ns-test-configmap.yaml",
        "secret-test-ns-test-secret.yaml",
    ]


async def test_the_flat_layout_refuses_metadata_that_would_escape_the_output(
    tmp_path: Path,
) -> None:
    ctx = ctx_for(
        tmp_path,
        {
            "outside/.keep": "",
            "c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0",
            "c/templates/evil.yaml": (
                "apiVersion: v1\nkind: ../outside/marker\nmetadata:\n  name: written\n"
            ),
        },
    )
    err = await error(
        ctx, {"path": "c", "outPath": "output", "outLayout": "flat", "releaseName": "r"}
    )
    assert "unsafe generated resource filename" in str(err)
    assert not (ctx.work_dir / "outside" / "marker-written.yaml").exists()


async def test_skip_tests_leaves_out_test_hooks(tmp_path: Path) -> None:
    ctx = hooks_chart(tmp_path, hook1="pre-install", test="test")
    await run(ctx, {"path": "c", "outPath": "output", "releaseName": "r", "skipTests": True})
    templates = ctx.work_dir / "output" / "c" / "templates"
    assert (templates / "hook1.yaml").read_text() == hook_text("hook1", "pre-install")
    assert not (templates / "test.yaml").exists()


async def test_hooks_follow_the_manifests_in_a_single_file(tmp_path: Path) -> None:
    ctx = hooks_chart(tmp_path, hook1="pre-install", hook2="post-install")
    await run(ctx, {"path": "c", "outPath": "output.yaml", "releaseName": "r"})
    assert (ctx.work_dir / "output.yaml").read_text() == (
        f"---\n# Source: c/templates/main.yaml\n{MAIN}"
        + hook_text("hook1", "pre-install")
        + hook_text("hook2", "post-install")
    )


async def test_disable_hooks(tmp_path: Path) -> None:
    ctx = hooks_chart(tmp_path, hook1="pre-install")
    await run(ctx, {"path": "c", "outPath": "output", "releaseName": "r", "disableHooks": True})
    assert not (ctx.work_dir / "output" / "c" / "templates" / "hook1.yaml").exists()
    assert (ctx.work_dir / "output" / "c" / "templates" / "main.yaml").exists()


async def test_a_hook_is_appended_to_an_existing_file(tmp_path: Path) -> None:
    ctx = hooks_chart(tmp_path, hook1="pre-install")
    write_files(ctx.work_dir, {"output/c/templates/hook1.yaml": "existing content\n"})
    await run(ctx, {"path": "c", "outPath": "output", "releaseName": "r"})
    assert (ctx.work_dir / "output/c/templates/hook1.yaml").read_text() == (
        "existing content\n" + hook_text("hook1", "pre-install")
    )


async def test_use_release_name_puts_hooks_under_the_release(tmp_path: Path) -> None:
    ctx = hooks_chart(tmp_path, hook1="pre-install")
    await run(
        ctx, {"path": "c", "outPath": "output", "releaseName": "my-release", "useReleaseName": True}
    )
    written = ctx.work_dir / "output/my-release/c/templates/hook1.yaml"
    assert written.read_text() == hook_text("hook1", "pre-install")


# --- What Helm's engine decides: capabilities, CRDs, order ------------------------------------


async def test_kube_version_api_versions_and_crds(tmp_path: Path) -> None:
    ctx = ctx_for(
        tmp_path,
        {
            "c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0",
            "c/crds/foo.yaml": (
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
                "metadata:\n  name: foos.example.com\n"
            ),
            "c/templates/cm.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n"
                '  kube: "{{ .Capabilities.KubeVersion.Version }}"\n'
                '  cert: "{{ .Capabilities.APIVersions.Has "cert-manager.io/v1" }}"\n'
            ),
        },
    )
    await run(
        ctx,
        {"path": "c", "outPath": "plain.yaml", "releaseName": "r", "kubeVersion": "1.29.0",
         "apiVersions": ["cert-manager.io/v1"]},
    )  # fmt: skip
    plain = (ctx.work_dir / "plain.yaml").read_text()
    assert 'kube: "v1.29.0"' in plain and 'cert: "true"' in plain
    assert "CustomResourceDefinition" not in plain
    await run(ctx, {"path": "c", "outPath": "crds.yaml", "releaseName": "r", "includeCRDs": True})
    with_crds = (ctx.work_dir / "crds.yaml").read_text()
    assert with_crds.startswith("---\n# Source: c/crds/foo.yaml\napiVersion: apiextensions")
    await run(ctx, {"path": "c", "outPath": "dir", "releaseName": "r", "includeCRDs": True,
                    "useReleaseName": True})  # fmt: skip
    assert (ctx.work_dir / "dir/c/crds/foo.yaml").is_file()
    assert (ctx.work_dir / "dir/r/c/templates/cm.yaml").is_file()


KINDS = ["Deployment", "Service", "Namespace", "ConfigMap", "Widget", "Ingress", "Secret",
         "ServiceAccount", "Gadget", "Job", "ClusterRole", "ValidatingWebhookConfiguration",
         "PriorityClass", "CustomResourceDefinition"]  # fmt: skip


def documents(manifest: str) -> list[tuple[str, str]]:
    """(source, content) of each ``---\\n# Source: ...`` block, content without surrounding
    blank lines."""
    out = []
    for block in manifest.split("---\n# Source: ")[1:]:
        source, _, content = block.partition("\n")
        out.append((source, content.strip()))
    return out


async def test_the_order_is_helms_own(tmp_path: Path) -> None:
    """Helm's install action (client-only dry run, what ``helm template`` runs) sorts the same
    chart: its manifest is the oracle for our order. (Helm 4 keeps the blank lines that end a
    template's last document; Kargo, on Helm 3, trims them, and so do we.)"""
    files = {"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0"}
    for i, kind in enumerate(KINDS):
        files[f"c/templates/{chr(ord('z') - i)}.yaml"] = (
            f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: a{i}\n---\n"
            f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: b{i}\n\n"
        )
    files["c/templates/NOTES.txt"] = "thanks"
    files["c/templates/_helpers.tpl"] = '{{- define "x" }}y{{ end }}'
    ctx = ctx_for(tmp_path, files)
    await run(ctx, {"path": "c", "outPath": "out.yaml", "releaseName": "r", "namespace": "n"})
    config = helm_python.Config()
    chart = helm_python.Chart.load(ctx.work_dir / "c")
    release = config.install(chart, "r", {}, namespace="n", dry_run="client")
    ours = (ctx.work_dir / "out.yaml").read_text()
    assert documents(ours) == documents(release["manifest"])
    assert "\n\n" not in ours


# --- Dependencies ---------------------------------------------------------------------------

UMBRELLA = """apiVersion: v2
name: umbrella
version: 1.0.0
dependencies:
- name: dep
  version: ">=0.1.0"
  repository: {repository}
"""
DEP_FILES = {
    "Chart.yaml": "apiVersion: v2\nname: dep\nversion: 0.2.0\n",
    "templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep-{{ .Release.Name }}\n"
    ),
}


class RecordedCredentials:
    def __init__(self, **by_url: Credential) -> None:
        self.by_url = by_url
        self.asked: list[tuple[str, CredentialType, str]] = []

    async def get(self, project: str, kind: CredentialType, repo_url: str) -> Credential | None:
        self.asked.append((project, kind, repo_url))
        return self.by_url.get(repo_url)


def with_credentials(ctx: StepContext, credentials: RecordedCredentials) -> StepContext:
    git = replace(ctx.services.git, credentials=credentials)
    return replace(ctx, services=replace(ctx.services, git=git))


async def test_dependencies_are_missing_without_build_dependencies(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {"u/Chart.yaml": UMBRELLA.format(repository="https://x.invalid")})
    err = await error(ctx, {"path": "u", "outPath": "o.yaml", "releaseName": "r"})
    assert "missing chart dependencies: dep (missing)" in str(err)


async def test_build_dependencies_from_a_chart_repository_over_http(tmp_path: Path) -> None:
    archive = chart_archive(tmp_path / "dep", DEP_FILES)
    async with serving_chart_repository([archive], basic=("robot", "s3cret")) as repo:
        ctx = ctx_for(tmp_path, {"u/Chart.yaml": UMBRELLA.format(repository=repo.url)})
        credentials = RecordedCredentials(
            **{repo.url: Credential("robot", "s3cret", "demo/charts")}
        )
        ctx = with_credentials(ctx, credentials)
        await run(
            ctx, {"path": "u", "outPath": "o.yaml", "releaseName": "r", "buildDependencies": True}
        )
    assert credentials.asked == [("test-project", CredentialType.HELM, repo.url)]
    assert "name: dep-r" in (ctx.work_dir / "o.yaml").read_text()
    assert (ctx.work_dir / "u/charts/dep-0.2.0.tgz").is_file()
    # Without a Chart.lock, Helm resolves the range and writes one (Kargo: "may be updated").
    assert "version: 0.2.0" in (ctx.work_dir / "u/Chart.lock").read_text()


async def test_a_repository_refusing_the_credentials_fails_without_showing_them(
    tmp_path: Path,
) -> None:
    archive = chart_archive(tmp_path / "dep", DEP_FILES)
    async with serving_chart_repository([archive], basic=("robot", "right")) as repo:
        ctx = ctx_for(tmp_path, {"u/Chart.yaml": UMBRELLA.format(repository=repo.url)})
        ctx = with_credentials(
            ctx, RecordedCredentials(**{repo.url: Credential("robot", "wrong-pw")})
        )
        err = await error(
            ctx, {"path": "u", "outPath": "o.yaml", "releaseName": "r", "buildDependencies": True}
        )
    assert "failed to build chart dependencies" in str(err)
    assert "wrong-pw" not in str(err)


async def test_build_dependencies_from_an_oci_registry(tmp_path: Path) -> None:
    archive = chart_archive(tmp_path / "dep", DEP_FILES)
    async with running_registry(tmp_path) as registry:
        await registry.push_chart_archive("charts/dep", "0.2.0", archive.read_bytes())
        repository = f"oci://{registry.host}/charts"
        ctx = ctx_for(
            tmp_path,
            {"u/Chart.yaml": UMBRELLA.format(repository=repository).replace(">=0.1.0", "0.2.0")},
        )
        await run(
            ctx, {"path": "u", "outPath": "o.yaml", "releaseName": "r", "buildDependencies": True}
        )
    assert "name: dep-r" in (ctx.work_dir / "o.yaml").read_text()
    assert (ctx.work_dir / "u/charts/dep-0.2.0.tgz").is_file()


async def test_a_local_dependency_outside_the_work_directory_is_refused(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {"u/Chart.yaml": UMBRELLA.format(repository="file://../../elsewhere")})
    err = await error(
        ctx, {"path": "u", "outPath": "o.yaml", "releaseName": "r", "buildDependencies": True}
    )
    assert "dependency path is outside the work directory" in str(err)


async def test_dependencies_needing_different_credentials_are_refused(tmp_path: Path) -> None:
    two = UMBRELLA.format(repository="https://a.example") + (
        '- name: other\n  version: "1.0.0"\n  repository: https://b.example\n'
    )
    ctx = ctx_for(tmp_path, {"u/Chart.yaml": two})
    ctx = with_credentials(
        ctx,
        RecordedCredentials(**{"https://a.example": Credential("a", "pw-of-a", "ns/a"),
                            "https://b.example": Credential("b", "pw-of-b", "ns/b")}),
    )  # fmt: skip
    err = await error(
        ctx, {"path": "u", "outPath": "o.yaml", "releaseName": "r", "buildDependencies": True}
    )
    assert "need different credentials (ns/a, ns/b)" in str(err)
    assert "pw-of" not in str(err)
