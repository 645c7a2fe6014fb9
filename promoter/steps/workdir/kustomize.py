"""Kargo's kustomize steps: ``kustomize-build`` (run with the kustomize built into ``kubectl``)
and ``kustomize-set-image`` (an edit of ``kustomization.yaml`` through the YAML round-trip
editor, no kustomize needed).

``kustomize-build``:

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, ambiguous_image_request
from promoter.ports.io_port import IoPort
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    StepStatus,
    succeeded,
)
from promoter.steps.workdir.files import (
    _freight_name,
    _read_text,
    _write_text_atomic,
    file_target,
)
from promoter.steps.workdir.yamledit import RoundTripYaml, keep_style
from promoter.steps.workdir.yamlsplice import same_value

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


# --------------------------------------------------------------------------------------------
# kustomize-set-image
# --------------------------------------------------------------------------------------------

_KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# Kargo's "keep what the kustomization already has" marker for newName/newTag/digest.
_PRESERVE = "*"
_IMAGE_FIELDS = ("name", "newName", "newTag", "digest")


@dataclass(frozen=True, slots=True)
class _ImageSetting:
    name: str
    new_name: str = ""
    new_tag: str = ""
    digest: str = ""

    def fields(self) -> dict[str, str]:
        values = {
            "name": self.name,
            "newName": self.new_name,
            "newTag": self.new_tag,
            "digest": self.digest,
        }
        return {key: value for key, value in values.items() if value}

    def reference(self) -> str:
        ref = self.new_name or self.name
        if self.new_tag:
            ref = f"{ref}:{self.new_tag}"
        if self.digest:
            ref = f"{ref}@{self.digest}"
        return ref


def _check_origin(ctx: StepContext, kind: str, item: Config) -> None:
    """``fromOrigin`` (deprecated in Kargo) picks one of several Freight; we have only one."""
    origin = item.map("fromOrigin")
    if not origin:
        return
    actual = ctx.freight.get("origin")
    actual = actual if isinstance(actual, Mapping) else {}
    if (origin.get("kind", "Warehouse"), origin.get("name")) != (
        actual.get("kind", "Warehouse"),
        actual.get("name"),
    ):
        raise StepError(
            f"{kind}: {item.prefix}.fromOrigin {origin.get('kind', 'Warehouse')}/"
            f"{origin.get('name')} does not match the target Freight's origin "
            f"{actual.get('kind', 'Warehouse')}/{actual.get('name')}",
            terminal=True,
        )


def _freight_image(ctx: StepContext, kind: str, repo_url: str, where: str) -> Mapping[str, Any]:
    images = [
        image
        for image in ctx.freight.get("images") or []
        if isinstance(image, Mapping) and image.get("repoURL") == repo_url
    ]
    if not images:
        known = sorted(
            str(image.get("repoURL"))
            for image in ctx.freight.get("images") or []
            if isinstance(image, Mapping)
        )
        raise StepError(
            f"{kind}: {where} has no tag or digest and the target Freight {_freight_name(ctx)} "
            f"has no image {repo_url!r} (Freight images: {', '.join(known) or 'none'})",
            terminal=True,
        )
    if len(images) > 1:
        raise StepError(
            f"{kind}: {where}: the target Freight has {len(images)} entries for image "
            f"{repo_url!r}; set tag or digest explicitly",
            terminal=True,
        )
    return images[0]


def _images_of_the_freight(ctx: StepContext, kind: str) -> dict[str, _ImageSetting]:
    """Kargo's buildTargetImagesAutomatically: without config.images, every image of the Freight
    collection is set, by its repoURL; when two requested Warehouses subscribe to the same
    repository (or, not knowing the Warehouses, two Freight carry it) the step cannot choose."""
    ambiguous = None
    try:
        if ctx.warehouses is not None:
            ambiguous = ambiguous_image_request(ctx.warehouses, ctx.project)
    except ExpressionError as e:
        ambiguous = str(e)
    targets: dict[str, _ImageSetting] = {}
    for freight in ctx.freights or (ctx.freight,):
        for image in freight.get("images") or []:
            if not isinstance(image, Mapping) or not image.get("repoURL"):
                continue
            repo_url = str(image["repoURL"])
            if repo_url in targets and ambiguous is None:
                ambiguous = (
                    "multiple requested Freight could potentially provide a container image "
                    f"from repository {repo_url}"
                )
            targets[repo_url] = _ImageSetting(
                repo_url, new_tag=str(image.get("tag") or ""), digest=str(image.get("digest") or "")
            )
    if ambiguous is not None:
        # Errored, not Failed, as in Kargo (the Warehouses may change); list config.images.
        raise StepError(
            f"{kind}: manual configuration required due to ambiguous result: {ambiguous}"
        )
    return targets


def _image_settings(ctx: StepContext, cfg: Config) -> dict[str, _ImageSetting]:
    kind = cfg.kind
    targets: dict[str, _ImageSetting] = {}
    items = cfg.items("images")
    if not items:
        return _images_of_the_freight(ctx, kind)
    for item in items:
        image = item.str("image")
        tag, digest = item.opt_str("tag"), item.opt_str("digest")
        use_digest = item.bool("useDigest")
        if tag and digest:
            raise ConfigRefused(f"{kind}: {item.prefix}.tag and .digest are mutually exclusive")
        if use_digest and (tag or digest):
            raise ConfigRefused(
                f"{kind}: {item.prefix}.useDigest is mutually exclusive with .tag and .digest"
            )
        _check_origin(ctx, kind, item)
        if not tag and not digest:
            found = _freight_image(ctx, kind, image, item.prefix)
            if use_digest:
                digest = str(found.get("digest") or "")
                if not digest:
                    raise StepError(
                        f"{kind}: {item.prefix}.useDigest is true but the Freight's image "
                        f"{image!r} has no digest",
                        terminal=True,
                    )
            else:
                tag = str(found.get("tag") or "")
                if not tag:
                    raise StepError(
                        f"{kind}: the Freight's image {image!r} has no tag; set "
                        f"{item.prefix}.useDigest or .digest",
                        terminal=True,
                    )
        name = item.opt_str("name") or image
        targets[name] = _ImageSetting(
            name, new_name=item.opt_str("newName") or "", new_tag=tag or "", digest=digest or ""
        )
    return targets


def _find_kustomization(ctx: StepContext, kind: str, raw_dir: str) -> Path:
    directory = ctx.path(raw_dir, field_name="path")
    if not directory.is_dir():
        raise StepError(f"{kind}: config.path {raw_dir!r} is not a directory", terminal=True)
    # Like kustomize (and Kargo), only regular files count: a symlinked kustomization is ignored.
    candidates = [
        directory / name
        for name in _KUSTOMIZATION_NAMES
        if (directory / name).is_file() and not (directory / name).is_symlink()
    ]
    if not candidates:
        raise StepError(
            f"{kind}: no {', '.join(_KUSTOMIZATION_NAMES)} in config.path {raw_dir!r}",
            terminal=True,
        )
    if len(candidates) > 1:
        raise StepError(
            f"{kind}: config.path {raw_dir!r} holds several kustomization files: "
            f"{', '.join(c.name for c in candidates)}",
            terminal=True,
        )
    return candidates[0]


def _merge_image(entry: Any, wanted: dict[str, str]) -> bool:
    """Make ``entry`` hold exactly ``wanted``, in kustomize's key order, keeping its comments."""
    changed = False
    for key in _IMAGE_FIELDS:
        if key in entry and key not in wanted:
            del entry[key]
            changed = True
    for position, key in enumerate(_IMAGE_FIELDS):
        if key not in wanted:
            continue
        if key in entry:
            if not same_value(entry[key], wanted[key]):
                entry[key] = keep_style(entry[key], wanted[key])
                changed = True
            continue
        index = sum(1 for earlier in _IMAGE_FIELDS[:position] if earlier in entry)
        entry.insert(index, key, wanted[key])
        changed = True
    return changed


def _apply_images(
    kind: str, document: RoundTripYaml, targets: dict[str, _ImageSetting]
) -> list[_ImageSetting]:
    if document.data is None:
        document.data = CommentedMap()
    if not isinstance(document.data, dict):
        raise StepError(f"{kind}: the kustomization is not a map", terminal=True)
    images = document.data.get("images")
    if images is None:
        images = CommentedSeq()
        document.data["images"] = images
    if not isinstance(images, list):
        raise StepError(f"{kind}: the kustomization's images field is not a list", terminal=True)
    existing: dict[str, Any] = {
        str(entry.get("name")): entry for entry in images if isinstance(entry, dict)
    }
    applied = []
    for name, target in targets.items():
        current = existing.get(name)
        old = current if current is not None else {}
        resolved = _ImageSetting(
            name,
            new_name=str(old.get("newName") or "")
            if target.new_name == _PRESERVE
            else target.new_name,
            new_tag=str(old.get("newTag") or "") if target.new_tag == _PRESERVE else target.new_tag,
            digest=str(old.get("digest") or "") if target.digest == _PRESERVE else target.digest,
        )
        applied.append(resolved)
        if current is None:
            entry = CommentedMap()
            _merge_image(entry, resolved.fields())
            images.append(entry)
            existing[name] = entry
        else:
            _merge_image(current, resolved.fields())
    # Kargo rewrites the list sorted by name (mergeImages), the entries it did not touch too.
    # Entries move whole, with their own comments; an already sorted list is left as it is.
    ordered = sorted(images, key=lambda e: str(e.get("name")) if isinstance(e, dict) else "")
    if any(a is not b for a, b in zip(ordered, images, strict=True)):
        del images[:]
        images.extend(ordered)
    return applied


def _kustomize_set_image(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    kind = "kustomize-set-image"
    cfg = Config(kind, config)
    raw_dir = cfg.str("path")
    path = _find_kustomization(ctx, kind, raw_dir)
    targets = _image_settings(ctx, cfg)
    if not targets:
        return succeeded(message="no images to set: config.images is empty and so is the Freight")
    document = RoundTripYaml(_read_text(path, kind, raw_dir), kind=kind, source=path.name)
    applied = _apply_images(kind, document, targets)
    new_text = document.text()
    changed = new_text != document.original
    if changed:
        _write_text_atomic(path, new_text)
    message = f"Updated {raw_dir} to use new image{'s' if len(applied) > 1 else ''}\n"
    message += "".join(
        f"\n- {image.reference()}" for image in sorted(applied, key=lambda i: i.name)
    )
    return succeeded(
        {"commitMessage": message},
        message=f"set {len(applied)} image(s) in {path.name}"
        if changed
        else f"{path.name} already up to date",
    )


async def kustomize_set_image(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    return await ctx.services.io.call(_kustomize_set_image, ctx, config)


# Both read and write the work directory only: a replay runs them again.
STEPS: dict[str, Step] = {
    KIND: FunctionStep(kustomize_build, effect=Effect.LOCAL),
    "kustomize-set-image": FunctionStep(kustomize_set_image, effect=Effect.LOCAL),
}

__all__: Sequence[str] = ("STEPS", "kustomize_build", "kustomize_set_image")
