"""``kustomize-set-image``: set images in a ``kustomization.yaml`` (Kargo's step of that name), an
edit through the YAML round-trip editor (:mod:`promoter.steps.workdir.yamledit`); no kustomize
needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, ambiguous_image_request
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.files import (
    freight_name,
    read_text,
    write_text_atomic,
)
from promoter.steps.workdir.yamledit import RoundTripYaml, keep_style
from promoter.steps.workdir.yamlsplice import same_value

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
            f"{kind}: {where} has no tag or digest and the target Freight {freight_name(ctx)} "
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
    document = RoundTripYaml(read_text(path, kind, raw_dir), kind=kind, source=path.name)
    applied = _apply_images(kind, document, targets)
    new_text = document.text()
    changed = new_text != document.original
    if changed:
        write_text_atomic(path, new_text)
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


# It reads and writes the work directory only: a replay runs it again.
STEPS: dict[str, Step] = {
    "kustomize-set-image": FunctionStep(kustomize_set_image, effect=Effect.LOCAL)
}
