"""``kustomize-build``: render a kustomization with the kustomize built into ``kubectl``.

Config (Kargo's): ``path`` (the kustomization's directory) and ``outPath`` (required),
``outputFormat`` (``kargo``, the default, or ``kustomize``) and ``plugin.helm`` (refused: no helm
binary ships anywhere Longshoreman runs, so charts cannot be inflated). An ``outPath`` ending in
``.yaml``/``.yml`` gets every resource in one file (``kubectl kustomize``'s output as it is);
any other is a directory with one file per resource, named ``[namespace-]kind-name.yaml``
(``kargo``) or ``[namespace_]group_version_kind_name.yaml`` (``kustomize``, as
``kustomize build -o dir/``), lower case, each document with sorted keys as Kargo's YAML
library writes them. No output.

Why kubectl: it embeds kustomize (v5.5 in kubectl 1.32), and the container image ships kubectl
(see the Dockerfile); Debian's own ``kustomize`` package is years behind. kubectl runs with an
empty environment apart from ``PATH`` and a throw-away ``HOME``, with kustomize's default load
restrictor (files a kustomization reads must be inside its own directory) and helm disabled; it
talks to no cluster. ``path`` must be inside the work directory.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from promoter.errors import ConfigRefused, StepError
from promoter.ports.io_port import IoPort
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    StepStatus,
)
from promoter.steps.workdir.files import (
    file_target,
)

KIND = "kustomize-build"
FORMATS = ("kargo", "kustomize")
TIMEOUT_SECONDS = 120.0
# kubectl kustomize's output can be large (CRDs); more than this is refused.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
# Kinds kustomize treats as cluster-scoped (api/resid/gvk.go notNamespaceableKinds, the common
# ones): they are never grouped by namespace.
CLUSTER_SCOPED = frozenset(
    {
        "APIService", "CSIDriver", "CSINode", "CertificateSigningRequest", "ClusterRole",
        "ClusterRoleBinding", "ComponentStatus", "CustomResourceDefinition",
        "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume",
        "PodSecurityPolicy", "PriorityClass", "RuntimeClass", "StorageClass",
        "ValidatingWebhookConfiguration", "VolumeAttachment",
    }
)  # fmt: skip
_SAFE_NAME = re.compile(r"^[a-z0-9._-]+\.yaml$")
_LOGGED_ERROR = re.compile(r'err="(.*)"\s*$')


def kubectl_path() -> str | None:
    return shutil.which("kubectl")


async def _kustomize(io: IoPort, directory: Path) -> bytes:
    kubectl = kubectl_path()
    if kubectl is None:
        raise StepError(
            f"{KIND} needs kubectl (its built-in kustomize) on PATH; the Longshoreman image "
            "ships it",
            terminal=True,
        )
    with tempfile.TemporaryDirectory(prefix="kustomize-home-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
        try:
            process = await io.run_process(
                [kubectl, "kustomize", str(directory)],
                cwd=directory,
                env=env,
                stdin=None,
                time_limit=TIMEOUT_SECONDS,
            )
        except TimeoutError:
            raise StepError(
                f"{KIND}: kubectl kustomize ran longer than {TIMEOUT_SECONDS:g}s"
            ) from None
    out, err = process.stdout, process.stderr
    if process.returncode != 0:
        message = _kubectl_error(err.decode("utf-8", errors="replace"), process.returncode)
        if "--enable-helm" in message:
            message = (
                "the kustomization inflates Helm charts (helmCharts), which needs a helm binary "
                "Longshoreman does not have"
            )
        # Paths in kustomize's message are the work directory's: show them relative to it.
        raise StepError(f"{KIND}: {message}".replace(f"{directory}/", ""), terminal=True)
    if len(out) > MAX_OUTPUT_BYTES:
        raise StepError(f"{KIND}: the build is larger than {MAX_OUTPUT_BYTES} bytes", terminal=True)
    return out


def _kubectl_error(stderr: str, status: int | None) -> str:
    """kustomize's own words out of kubectl's log line: ``... "command failed" err="..."``, or
    ``err=<`` followed by indented lines and `` >`` for a multi-line error."""
    lines = stderr.strip().splitlines()
    for i, line in enumerate(lines):
        logged = _LOGGED_ERROR.search(line)
        if logged:
            return logged.group(1).replace('\\"', '"')
        if line.rstrip().endswith("err=<"):
            body = [part.strip() for part in lines[i + 1 :] if part.strip() not in (">", "")]
            return " ".join(body)
    return lines[-1] if lines else f"exit status {status}"


def _name_kargo(resource: Mapping[str, Any], _: bool) -> str:
    meta = resource.get("metadata") or {}
    kind, namespace, name = resource.get("kind", ""), meta.get("namespace"), meta.get("name", "")
    if namespace:
        return f"{namespace}-{kind}-{name}.yaml".lower()
    return f"{kind}-{name}.yaml".lower()


def _name_kustomize(resource: Mapping[str, Any], multiple_namespaces: bool) -> str:
    meta = resource.get("metadata") or {}
    group, _, version = str(resource.get("apiVersion") or "").rpartition("/")
    gvk = "_".join(p for p in (group, version, str(resource.get("kind") or "")) if p)
    base = f"{gvk}_{meta.get('name', '')}.yaml".lower()
    namespace = meta.get("namespace")
    if multiple_namespaces and namespace:
        return f"{str(namespace).lower()}_{base}"
    return base


def _write_directory(out_dir: Path, text: bytes, output_format: str) -> int:
    resources = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    namespaced = [r for r in resources if r.get("kind") not in CLUSTER_SCOPED]
    namespaces = {(r.get("metadata") or {}).get("namespace") or "default" for r in namespaced}
    multiple = len(namespaces) > 1
    name_of = _name_kargo if output_format == "kargo" else _name_kustomize
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = namespaced + [r for r in resources if r.get("kind") in CLUSTER_SCOPED]
    for resource in ordered:
        file_name = name_of(resource, multiple and resource.get("kind") not in CLUSTER_SCOPED)
        if not _SAFE_NAME.match(file_name) or file_name.startswith("."):
            # Kargo's validateGeneratedResourceFilename: a name must not be a path.
            raise StepError(f"{KIND}: unsafe generated resource filename {file_name!r}")
        body = yaml.safe_dump(resource, sort_keys=True, default_flow_style=False)
        target = out_dir / file_name
        target.write_text(body, encoding="utf-8")
        os.chmod(target, 0o600)
    return len(ordered)


def _write_file(target: Path, text: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(text)
    os.chmod(target, 0o600)


def _check_plugin(plugin: Config) -> None:
    """Kargo's schema for ``plugin.helm`` (``apiVersions``, ``kubeVersion``). Accepted, as Kargo
    does; a kustomization that actually inflates a chart fails (no helm binary)."""
    plugin.only(("helm",))
    helm = plugin.map("helm")
    if not helm:
        return
    options = Config(KIND, helm, prefix=f"{plugin.prefix}.helm")
    options.only(("apiVersions", "kubeVersion"))
    versions = helm.get("apiVersions")
    if versions is not None and (
        not isinstance(versions, list) or any(not isinstance(v, str) or not v for v in versions)
    ):
        raise ConfigRefused(
            f"{KIND}: {options.prefix}.apiVersions must be a list of non-empty strings"
        )
    options.opt_str("kubeVersion")


async def kustomize_build(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    cfg = Config(KIND, config)
    cfg.only(("path", "outPath", "outputFormat", "plugin"))
    raw_path, raw_out = cfg.str("path"), cfg.str("outPath")
    output_format = cfg.opt_str("outputFormat") or "kargo"
    if output_format not in FORMATS:
        raise ConfigRefused(f"{KIND}: config.outputFormat must be one of {', '.join(FORMATS)}")
    _check_plugin(Config(KIND, cfg.map("plugin"), prefix="config.plugin"))
    directory = ctx.path(raw_path)
    if not directory.is_dir():
        raise StepError(
            f"{KIND}: config.path {raw_path!r}: no such file or directory", terminal=True
        )
    out = ctx.path(raw_out, field_name="outPath")
    if ".git" in Path(raw_out).parts:
        raise ConfigRefused(f"{KIND}: config.outPath {raw_out!r}: writing inside .git is refused")
    text = await _kustomize(ctx.services.io, directory)
    try:
        if out.suffix in (".yaml", ".yml"):
            target = file_target(ctx, KIND, raw_out, "outPath")
            await ctx.services.io.call(_write_file, target, text)
            what = f"wrote the build to {raw_out}"
        else:
            count = await ctx.services.io.call(_write_directory, out, text, output_format)
            what = f"wrote {count} resource file(s) to {raw_out}/"
    except OSError as e:
        raise StepError(
            f'{KIND}: failed to write built manifests to "{raw_out}": {e.strerror}'
        ) from None
    return StepResult(StepStatus.SUCCEEDED, message=what)


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {KIND: FunctionStep(kustomize_build, effect=Effect.LOCAL)}
