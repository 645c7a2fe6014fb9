"""Kargo's ``helm-template`` step: render a chart in the work directory with Helm's own engine.

Config (Kargo's schema, ``helm-template-config.json``): ``path``, ``outPath`` and
``releaseName`` (required, not empty); ``outLayout`` (``helm``, the default, or ``flat``),
``useReleaseName``, ``namespace`` (default: the project), ``valuesFiles[]`` (merged in order),
``ignoreMissingValueFiles``, ``setValues[]{key, value, literal}`` (``--set``, or
``--set-literal`` when ``literal``), ``buildDependencies``, ``includeCRDs``, ``disableHooks``,
``skipTests``, ``kubeVersion``, ``apiVersions[]``. No output.

Rendering goes through Helm's Go SDK (:mod:`promoter.ports.helm`); where it is not installed
the step fails with how to install it. What ``helm template`` writes from the rendered
templates (order, ``# Source:`` separators, hooks, layouts) is :mod:`promoter.rules.helm_template`.
With ``buildDependencies`` the chart's dependencies are built from Chart.lock (or resolved and
locked when there is none) with the project's ``helm`` credentials
(:mod:`promoter.steps.helm_dependencies`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from promoter.errors import ConfigRefused, StepError
from promoter.ports import helm as helm_port
from promoter.rules import helm_template as rules
from promoter.steps import helm_dependencies
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    StepStatus,
)

KIND = "helm-template"
FIELDS = (
    "path", "outPath", "outLayout", "releaseName", "useReleaseName", "namespace", "valuesFiles",
    "ignoreMissingValueFiles", "setValues", "buildDependencies", "includeCRDs", "disableHooks",
    "skipTests", "kubeVersion", "apiVersions",
)  # fmt: skip
# Helm's chartutil.ParseKubeVersion: a semantic version, ``v`` optional, minor and patch too.
_KUBE_VERSION = re.compile(
    r"^v?(0|[1-9]\d*)(\.(0|[1-9]\d*))?(\.(0|[1-9]\d*))?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
)


def _strings(cfg: Config, key: str) -> tuple[str, ...]:
    items = cfg.list(key)
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise ConfigRefused(f"{KIND}: config.{key}.{i} must be a non-empty string")
    return tuple(items)


def _set_values(cfg: Config) -> tuple[rules.SetValue, ...]:
    out = []
    for i, item in enumerate(cfg.list("setValues")):
        entry = Config(KIND, item, prefix=f"config.setValues.{i}")
        entry.only(("key", "value", "literal"))
        key = entry.str("key")
        if not key:
            raise ConfigRefused(f"{KIND}: config.setValues.{i}.key must not be empty")
        if "value" not in entry.data or not isinstance(entry.data["value"], str):
            raise ConfigRefused(f"{KIND}: config.setValues.{i}.value is required (a string)")
        out.append(rules.SetValue(key, entry.data["value"], entry.bool("literal")))
    return tuple(out)


class _Settings:
    """The rendered config, checked as Kargo's schema checks it."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = Config(KIND, config)
        cfg.only(FIELDS)
        required = ("outPath", "path", "releaseName")
        problems = [
            f"config.{key} is required" if not cfg.has(key) else f"config.{key} must not be empty"
            for key in required
            if not cfg.has(key) or cfg.str(key) == ""
        ]
        if problems:
            # Every missing or empty field at once, as Kargo's schema validation reports them.
            raise ConfigRefused(f"{KIND}: {'; '.join(problems)}")
        self.out_path, self.path, self.release_name = (cfg.str(key) for key in required)
        layout = cfg.opt_str("outLayout") or "helm"
        if layout not in rules.LAYOUTS:
            raise ConfigRefused(f"{KIND}: config.outLayout must be one of helm, flat")
        self.namespace = cfg.opt_str("namespace") or ""
        self.values_files = _strings(cfg, "valuesFiles")
        self.ignore_missing = cfg.bool("ignoreMissingValueFiles")
        self.set_values = _set_values(cfg)
        self.build_dependencies = cfg.bool("buildDependencies")
        self.include_crds = cfg.bool("includeCRDs")
        self.kube_version = cfg.opt_str("kubeVersion") or ""
        self.api_versions = _strings(cfg, "apiVersions")
        self.output = rules.OutputOptions(
            out_path=self.out_path,
            layout=layout,
            release_name=self.release_name,
            use_release_name=cfg.bool("useReleaseName"),
            disable_hooks=cfg.bool("disableHooks"),
            skip_tests=cfg.bool("skipTests"),
        )


def _read_values(path: Path, shown: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StepError(
            f"{KIND}: failed to compose values: open {shown}: no such file or directory",
            terminal=True,
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise StepError(
            f"{KIND}: failed to compose values: failed to parse {shown}: {e}", terminal=True
        ) from None
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise StepError(
            f"{KIND}: failed to compose values: failed to parse {shown}: not a map", terminal=True
        )
    return dict(document)


def compose_values(ctx: StepContext, helm: helm_port.Helm, settings: _Settings) -> dict[str, Any]:
    """Helm's values.Options.MergeValues: the files in order, then each ``--set``."""
    documents = []
    for raw in settings.values_files:
        path = ctx.path(raw, field_name="valuesFiles")
        if settings.ignore_missing and not path.exists():
            continue
        documents.append(_read_values(path, raw))
    for item in settings.set_values:
        documents.append(helm.parse_set(item.expression, literal=item.literal))
    return rules.merge_all(documents)


def _write(ctx: StepContext, writes: Sequence[rules.Write], shown: str) -> None:
    for write in writes:
        target = ctx.path(write.path, field_name="outPath")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = "a" if write.append and target.exists() else "w"
            with target.open(mode, encoding="utf-8", newline="") as out:
                out.write(write.content)
        except OSError as e:
            raise StepError(
                f"{KIND}: failed to write rendered chart to {shown!r}: {e.strerror}",
                terminal=True,
            ) from None


async def helm_template(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    settings = _Settings(config)
    if ".git" in re.split(r"[/\\]+", settings.out_path):
        raise ConfigRefused(f"{KIND}: config.outPath: writing inside a .git directory is refused")
    if settings.kube_version and not _KUBE_VERSION.match(settings.kube_version):
        raise StepError(
            f"{KIND}: failed to initialize Helm action config: failed to parse Kubernetes "
            f"version {settings.kube_version!r}",
            terminal=True,
        )
    helm = helm_port.load(KIND)
    io = ctx.services.io
    values = await io.call(compose_values, ctx, helm, settings)
    chart = ctx.path(settings.path)
    if not (chart / "Chart.yaml").is_file():
        raise StepError(
            f"{KIND}: failed to load chart from {settings.path!r}: Chart.yaml file is missing",
            terminal=True,
        )
    if settings.build_dependencies:
        await helm_dependencies.build(KIND, ctx, helm, chart)
    missing = await io.call(helm.missing_dependencies, chart)
    if missing:
        raise StepError(
            f"{KIND}: missing chart dependencies: {', '.join(missing)} (set buildDependencies, "
            "or commit charts/)",
            terminal=True,
        )
    kube_version = settings.kube_version
    options = helm_port.RenderOptions(
        release_name=settings.release_name,
        namespace=settings.namespace or ctx.project,
        kube_version=kube_version
        if kube_version.startswith("v") or not kube_version
        else f"v{kube_version}",
        api_versions=settings.api_versions,
    )
    rendered = await io.call(helm.render, chart, values, options)
    try:
        release = rules.sort_release(
            rendered.templates, rendered.crds, include_crds=settings.include_crds
        )
        writes = rules.plan_output(settings.output, release)
    except rules.UnsafeFilename as e:
        raise StepError(f"{KIND}: failed to write rendered chart: {e}", terminal=True) from None
    except ValueError as e:
        raise StepError(f"{KIND}: failed to render chart: {e}", terminal=True) from None
    await io.call(_write, ctx, writes, settings.out_path)
    return StepResult(
        StepStatus.SUCCEEDED,
        message=f"rendered chart {rendered.name} to {settings.out_path}",
    )


STEPS: Mapping[str, Step] = {KIND: FunctionStep(helm_template, effect=Effect.LOCAL)}
