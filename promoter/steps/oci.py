"""Kargo's ``oci-download`` and ``oci-push`` steps, over the :class:`OCIRegistry` port.

* ``oci-download`` (``imageRef``, ``outPath``, ``allowOverwrite``, ``mediaType``,
  ``insecureSkipTLSVerify``) writes one layer of an OCI artifact (a Helm chart, a tarball of
  manifests, ...) to a file: the first layer, or the first of ``mediaType``. A multi-platform
  index resolves to its ``linux/amd64`` image, as go-containerregistry's ``remote.Image`` does.
  Layers over 100 MiB are refused (Kargo's limit). No output.
* ``oci-push`` (``srcRef``, ``destRef``, ``annotations``, ``insecureSkipTLSVerify``) copies an
  image or an index to a tag, in the same repository (retag) or another one (its blobs are
  copied first), setting annotations: ``index:``-prefixed keys on an index, ``manifest:``-
  prefixed and unprefixed keys on the image manifest (each child of an index). Outputs ``image``,
  ``digest`` and ``tag``. Without annotations the manifest is pushed byte for byte, so the digest
  is the source's.

Registries are reached through the port the server provides (app/controller/oci.py, over the
Warehouses' OCI client), with the Promotion's project's credentials (its ``image`` Secrets, or
``helm`` ones for an ``oci://`` chart, then the shared ones, the GitHub App, the operator's
``config.json``), never from manifests; the local runner has none, and the steps say so.
Messages and errors follow Kargo's (pkg/promotion/runner/builtin/oci_downloader.go,
oci_pusher.go).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.ports.oci import IMAGE_TYPES, Manifest, OCIRegistry
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
from promoter.steps.workdir.files import file_target
from promoter.warehouses.freight import split_registry

DOWNLOAD = "oci-download"
PUSH = "oci-push"
# Kargo's maxOCIArtifactSize.
MAX_LAYER_BYTES = 100 << 20
# The platform go-containerregistry's remote.Image picks from an index by default.
DEFAULT_PLATFORM = ("linux", "amd64")

# Kargo's schemas (oci-download-config.json imageRef, oci-push-config.json srcRef/destRef).
_REF = re.compile(r"^(oci://)?[a-zA-Z0-9._-]+(:\d+)?(/[a-zA-Z0-9._-]+)*[@:][a-zA-Z0-9._:-]+$")
_TAGGED = re.compile(r"^(oci://)?[a-zA-Z0-9._-]+(:\d+)?(/[a-zA-Z0-9._-]+)*[:][a-zA-Z0-9._-]+$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_REPOSITORY = re.compile(r"^[a-zA-Z0-9._-]+(:\d+)?(/[a-zA-Z0-9._-]+)*$")


@dataclass(frozen=True, slots=True)
class Reference:
    """``host[:port]/path`` plus a tag or a digest, as go-containerregistry parses it."""

    repository: str
    tag: str = ""
    digest: str = ""
    # Written ``oci://...``: a Helm chart, whose credentials are of type ``helm`` (Kargo's
    # parseOCIReference); anything else is an image.
    chart: bool = False

    @property
    def written(self) -> str:
        """The repository as the credentials are looked up by (``oci://`` for a chart)."""
        return f"oci://{self.repository}" if self.chart else self.repository

    @property
    def reference(self) -> str:
        return self.digest or self.tag

    def __str__(self) -> str:
        return (
            f"{self.repository}@{self.digest}" if self.digest else f"{self.repository}:{self.tag}"
        )


def parse_reference(kind: str, field_name: str, raw: str, *, tag_only: bool = False) -> Reference:
    """``registry/repo:tag`` or ``registry/repo@sha256:...`` (``oci://`` allowed, as for Helm)."""
    pattern = _TAGGED if tag_only else _REF
    if not pattern.match(raw):
        want = "registry/repository:tag" if tag_only else "registry/repository:tag or @digest"
        raise ConfigRefused(f"{kind}: config.{field_name} {raw!r} is not a reference ({want})")
    text = raw.removeprefix("oci://")
    if "@" in text:
        repository, _, digest = text.partition("@")
        if not _DIGEST.match(digest) or not _REPOSITORY.match(repository):
            raise BadReference(f"invalid digest reference {text!r}")
        return Reference(_docker_hub(repository), digest=digest, chart=raw.startswith("oci://"))
    repository, _, tag = text.rpartition(":")
    if not _REPOSITORY.match(repository) or not _TAG.match(tag):
        raise BadReference(f"invalid tag reference {text!r}")
    return Reference(_docker_hub(repository), tag=tag, chart=raw.startswith("oci://"))


class BadReference(ValueError):
    """A reference Kargo's schema lets through but go-containerregistry cannot parse."""


def _docker_hub(repository: str) -> str:
    """go-containerregistry's defaults: no registry host is Docker Hub, one name is library/."""
    host, path = split_registry(repository)
    if host and host != "docker.io":
        return repository.lower()
    if not host and "/" not in path:
        path = f"library/{path}"
    return f"index.docker.io/{path}"


def registry_port(ctx: StepContext, kind: str) -> ProjectRegistry:
    port = ctx.services.oci
    if port is None:
        raise StepError(
            f"{kind} needs the server's registry access, which this runner does not have "
            "(the local runner cannot reach registries)",
            terminal=True,
        )
    return ProjectRegistry(port, ctx.project)


@dataclass(frozen=True, slots=True)
class ProjectRegistry:
    """The registry port for one Promotion: every call reads and writes with its project's
    credentials (and only those)."""

    port: OCIRegistry
    project: str

    async def manifest(self, repository: str, reference: str, *, insecure: bool) -> Manifest:
        return await self.port.manifest(
            repository, reference, insecure=insecure, project=self.project
        )

    async def blob(self, repository: str, digest: str, limit: int, *, insecure: bool) -> bytes:
        return await self.port.blob(
            repository, digest, limit, insecure=insecure, project=self.project
        )

    async def copy_blob(
        self, source: str, destination: str, digest: str, *, insecure: bool
    ) -> None:
        await self.port.copy_blob(
            source, destination, digest, insecure=insecure, project=self.project
        )

    async def put_manifest(
        self, repository: str, reference: str, manifest: Manifest, *, insecure: bool
    ) -> None:
        await self.port.put_manifest(
            repository, reference, manifest, insecure=insecure, project=self.project
        )


# ---- oci-download -------------------------------------------------------------------------------


def _pick_platform(index: Mapping[str, Any]) -> str:
    for entry in index.get("manifests") or ():
        platform = entry.get("platform") or {}
        if (platform.get("os"), platform.get("architecture")) == DEFAULT_PLATFORM:
            return str(entry["digest"])
    raise StepError("no child with platform linux/amd64 in index", terminal=True)


def _target_layer(document: Mapping[str, Any], media_type: str) -> Mapping[str, Any]:
    layers = [layer for layer in document.get("layers") or () if isinstance(layer, Mapping)]
    if not layers:
        raise StepError("failed to find target layer: image has no layers", terminal=True)
    if not media_type:
        return layers[0]
    for layer in layers:
        if layer.get("mediaType") == media_type:
            return layer
    raise StepError(
        f'failed to find target layer: no layer found with media type "{media_type}"',
        terminal=True,
    )


def _write_file(target: Path, data: bytes, allow_overwrite: bool, raw: str) -> None:
    if target.exists() and not allow_overwrite:
        raise StepError(f"file already exists at {raw} and overwrite is not allowed", terminal=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp_name, 0o600)
        os.replace(tmp_name, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)


async def oci_download(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    cfg = Config(DOWNLOAD, config)
    cfg.only(("imageRef", "outPath", "allowOverwrite", "mediaType", "insecureSkipTLSVerify"))
    raw_ref = cfg.str("imageRef")
    try:
        ref = parse_reference(DOWNLOAD, "imageRef", raw_ref)
    except BadReference as e:
        # Kargo: Errored (resolveImage), not a refusal of the config.
        raise StepError(
            f'failed to parse image reference "{raw_ref}": {e}', terminal=True
        ) from None
    raw_out = cfg.str("outPath")
    allow_overwrite = cfg.bool("allowOverwrite")
    media_type = cfg.opt_str("mediaType") or ""
    insecure = cfg.bool("insecureSkipTLSVerify")
    target = file_target(ctx, DOWNLOAD, raw_out, "outPath")
    if target.exists() and not allow_overwrite:
        raise StepError(
            f"file already exists at {raw_out} and overwrite is not allowed", terminal=True
        )
    registry = registry_port(ctx, DOWNLOAD)
    recorded = ctx.replay.data if ctx.replay is not None else {}
    if recorded.get(LAYER_KEY):
        # A replay writes the very layer the step wrote, even if the tag has moved since.
        digest, size = recorded[LAYER_KEY], int(recorded.get(SIZE_KEY) or 0)
    else:
        try:
            manifest = await registry.manifest(ref.written, ref.reference, insecure=insecure)
            if manifest.is_index:
                child = _pick_platform(manifest.document())
                manifest = await registry.manifest(ref.written, child, insecure=insecure)
        except StepError as e:
            raise e.with_message(f'failed to resolve image "{raw_ref}": {e.message}') from None
        layer = _target_layer(manifest.document(), media_type)
        digest, size = str(layer.get("digest") or ""), int(layer.get("size") or 0)
    if size > MAX_LAYER_BYTES:
        raise StepError(
            f"layer size {size} exceeds maximum allowed size of {MAX_LAYER_BYTES} bytes",
            terminal=True,
        )
    try:
        data = await registry.blob(ref.written, digest, MAX_LAYER_BYTES, insecure=insecure)
    except StepError as e:
        raise e.with_message(f"failed to copy layer content: {e.message}") from None
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise StepError(f"failed to copy layer content: the blob does not match {digest}")
    await asyncio.to_thread(_write_file, target, data, allow_overwrite, raw_out)
    return StepResult(
        StepStatus.SUCCEEDED,
        message=f"wrote {len(data)} bytes of {ref} to {raw_out}",
        replay_data={LAYER_KEY: digest, SIZE_KEY: str(len(data))},
    )


LAYER_KEY = "layer"
SIZE_KEY = "size"


# ---- oci-push -----------------------------------------------------------------------------------


def annotation_scopes(annotations: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Kargo's parseAnnotationScopes: (on the index, on each image manifest)."""
    index: dict[str, str] = {}
    manifest: dict[str, str] = {}
    for key, value in annotations.items():
        if key.startswith("index:"):
            index[key.removeprefix("index:")] = value
        elif key.startswith("manifest:"):
            manifest[key.removeprefix("manifest:")] = value
        else:
            manifest[key] = value
    return index, manifest


def annotated(manifest: Manifest, annotations: Mapping[str, str]) -> Manifest:
    """``manifest`` with ``annotations`` merged into its own; the same bytes when none."""
    if not annotations:
        return manifest
    document = manifest.document()
    document["annotations"] = {**(document.get("annotations") or {}), **annotations}
    body = json.dumps(document, separators=(",", ":")).encode()
    return Manifest(manifest.media_type, "sha256:" + hashlib.sha256(body).hexdigest(), body)


async def _push_image(
    registry: ProjectRegistry,
    source: Reference,
    dest: Reference,
    manifest: Manifest,
    annotations: Mapping[str, str],
    reference: str,
    insecure: bool,
) -> Manifest:
    document = manifest.document()
    if source.repository != dest.repository:
        blobs = [document.get("config") or {}, *(document.get("layers") or ())]
        for blob in blobs:
            if blob.get("digest"):
                await registry.copy_blob(
                    source.written, dest.written, str(blob["digest"]), insecure=insecure
                )
    out = annotated(manifest, annotations)
    await registry.put_manifest(dest.written, reference or out.digest, out, insecure=insecure)
    return out


async def oci_push(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    cfg = Config(PUSH, config)
    cfg.only(("srcRef", "destRef", "annotations", "insecureSkipTLSVerify"))
    raw_src, raw_dest = cfg.str("srcRef"), cfg.str("destRef")
    try:
        source = parse_reference(PUSH, "srcRef", raw_src)
    except BadReference as e:
        raise ConfigRefused(f'failed to parse source reference "{raw_src}": {e}') from None
    try:
        dest = parse_reference(PUSH, "destRef", raw_dest, tag_only=True)
    except BadReference as e:
        raise ConfigRefused(f'failed to parse destination reference "{raw_dest}": {e}') from None
    raw_annotations = cfg.map("annotations")
    if any(not isinstance(v, str) for v in raw_annotations.values()):
        raise ConfigRefused(f"{PUSH}: config.annotations values must be strings")
    index_annotations, manifest_annotations = annotation_scopes(raw_annotations)
    insecure = cfg.bool("insecureSkipTLSVerify")
    registry = registry_port(ctx, PUSH)
    try:
        manifest = await registry.manifest(source.written, source.reference, insecure=insecure)
    except StepError as e:
        raise e.with_message(f'failed to get source artifact "{raw_src}": {e.message}') from None
    try:
        if manifest.media_type in IMAGE_TYPES or (
            not manifest.is_index and "layers" in manifest.document()
        ):
            pushed = await _push_image(
                registry, source, dest, manifest, manifest_annotations, dest.tag, insecure
            )
        elif manifest.is_index:
            pushed = await _push_index(
                registry, source, dest, manifest, index_annotations, manifest_annotations, insecure
            )
        else:
            raise StepError(f'unsupported media type "{manifest.media_type}"', terminal=True)
    except StepError as e:
        raise e.with_message(f'failed to push to "{dest}": {e.message}') from None
    return succeeded(
        {"image": str(dest), "digest": pushed.digest, "tag": dest.tag},
        message=f"pushed {source} to {dest} ({pushed.digest})",
    )


async def _push_index(
    registry: ProjectRegistry,
    source: Reference,
    dest: Reference,
    index: Manifest,
    index_annotations: Mapping[str, str],
    manifest_annotations: Mapping[str, str],
    insecure: bool,
) -> Manifest:
    document = index.document()
    entries = []
    changed = False
    for entry in document.get("manifests") or ():
        child = await registry.manifest(source.written, str(entry["digest"]), insecure=insecure)
        if child.is_index:
            raise StepError("nested image indexes are not supported", terminal=True)
        pushed = await _push_image(
            registry, source, dest, child, manifest_annotations, "", insecure
        )
        if pushed.digest != child.digest:
            changed = True
            entry = {**entry, "digest": pushed.digest, "size": len(pushed.body)}
        entries.append(entry)
    out = index
    if changed:
        document["manifests"] = entries
        body = json.dumps(document, separators=(",", ":")).encode()
        out = Manifest(index.media_type, "sha256:" + hashlib.sha256(body).hexdigest(), body)
    out = annotated(out, index_annotations)
    await registry.put_manifest(dest.written, dest.tag, out, insecure=insecure)
    return out


STEPS: dict[str, Step] = {
    DOWNLOAD: FunctionStep(oci_download, effect=Effect.LOCAL),
    PUSH: FunctionStep(oci_push, effect=Effect.EXTERNAL, uses_work_dir=False),
}

__all__: Sequence[str] = (
    "STEPS",
    "Reference",
    "annotation_scopes",
    "parse_reference",
)
