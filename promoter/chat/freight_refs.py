"""Which Freight a person means by what they typed: name, alias, image, commit or ``latest``.

Chat accepts more than a Promotion does: a unique prefix of a name (like a git short hash), a
commit SHA prefix, an image the Freight holds and ``latest``. A name or an alias is looked up by
the rule every part of Longshoreman shares (:func:`promoter.resources.freight_refs.find_freight`:
exact name first, then alias), so a reference means the same Freight in chat, on the pages and in
a Promotion written with kubectl. The rest is chat's own, tried only when no name or alias
matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from promoter.resources.freight_refs import freight_in
from promoter.resources.model import describe_freight, name_of
from promoter.resources.stages import available_to, freight_created
from promoter.warehouses.freight import normalize_image_url, requested_artifact_freight

MIN_PREFIX = 4
_HEX = re.compile(r"[0-9a-fA-F]{7,40}")


def image_reference(ref: str) -> tuple[str, str, str] | None:
    """``(repository, tag, digest)`` of ``repo:tag``, ``repo@digest`` or ``repo:tag@digest``;
    None when ``ref`` does not read as an image reference (neither a tag nor a digest; no
    Freight name or alias holds ``:`` or ``@``, so nothing else reads this way)."""
    repo, _, digest = ref.partition("@")
    tag = ""
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = repo.rsplit(":", 1)
    if not repo or not (tag or digest) or (digest and not digest.startswith("sha256:")):
        return None
    return repo, tag, digest


def freight_holding_image(
    ref: str,
    freights: Sequence[Mapping[str, Any]],
    stage: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Mapping[str, Any] | None:
    """The Freight that holds the image ``ref`` names, None when none does (or ``ref`` is no
    image reference). Several (the image with different commits or charts): the newest one
    available to ``stage``, else the newest."""
    parsed = image_reference(ref)
    if parsed is None:
        return None
    repo, tag, digest = parsed
    wanted = normalize_image_url(repo)
    holding = [
        f
        for f in freights
        if any(
            normalize_image_url(str(image.get("repoURL") or "")) == wanted
            and (not tag or image.get("tag") == tag)
            and (not digest or image.get("digest") == digest)
            for image in f.get("images") or ()
        )
    ]
    if stage is not None:
        holding = [f for f in holding if available_to(stage, f, now)] or holding
    return max(holding, key=lambda f: (freight_created(f), name_of(f)), default=None)


def resolve_freight(
    ref: str,
    freights: Sequence[Mapping[str, Any]],
    stage: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Mapping[str, Any]:
    """A Freight by full name, alias, an image it holds (:func:`freight_holding_image`), commit
    SHA prefix (7+ hex), a unique prefix of its name (like a git short hash) or ``latest``
    (newest available to ``stage``). Raises LookupError with a message a user can act on; an
    ambiguous prefix lists the candidates."""
    if ref == "latest":
        if stage is None:
            raise LookupError("`latest` needs a Stage")
        candidates = [f for f in freights if available_to(stage, f, now)]
        if not candidates:
            raise LookupError(f"no Freight is available to Stage {name_of(stage)!r} yet")
        return max(candidates, key=lambda f: (freight_created(f), name_of(f)))
    named = freight_in(ref, freights)
    if named is not None:
        return named
    if image_reference(ref) is not None:
        holding = freight_holding_image(ref, freights, stage, now)
        if holding is None:
            raise LookupError(f"no Freight holds the image `{ref}`")
        return holding
    matches: list[Mapping[str, Any]] = []
    if _HEX.fullmatch(ref):
        sha = ref.lower()
        matches += [
            f
            for f in freights
            if any(str(c.get("id", "")).startswith(sha) for c in f.get("commits") or ())
        ]
    if len(ref) >= MIN_PREFIX:
        matches += [f for f in freights if name_of(f).startswith(ref) and f not in matches]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(sorted(f"`{describe_freight(f)}`" for f in matches))
        raise LookupError(
            f"`{ref}` is ambiguous: it could be {names}; use an alias or a longer prefix"
        )
    raise LookupError(f"no Freight named, aliased or with a name or commit starting {ref!r}")


def requested_freight(
    ref: str,
    stage: Mapping[str, Any],
    warehouses: Sequence[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
) -> dict[str, Any] | None:
    """Freight to create on request (``freightCreationPolicy: Manual``): ``ref`` names an
    image (``repo:tag``, ``repo@digest``) or a commit SHA (7+ hex) that a Manual Warehouse the
    Stage takes Freight from directly has discovered. None when no such Warehouse did."""
    image = image_reference(ref)
    if image is None and not _HEX.fullmatch(ref):
        return None
    direct = {
        str((entry.get("origin") or {}).get("name") or "")
        for entry in (stage.get("spec") or {}).get("requestedFreight") or ()
        if isinstance(entry, Mapping) and (entry.get("sources") or {}).get("direct")
    }
    taken = [str(f.get("alias") or "") for f in freights]
    for warehouse in warehouses:
        spec = warehouse.get("spec") or {}
        if name_of(warehouse) not in direct or spec.get("freightCreationPolicy") != "Manual":
            continue
        if image is not None:
            repo, tag, digest = image
            made = requested_artifact_freight(
                warehouse, repo, tag=tag, digest=digest, alias_taken=taken
            )
        else:
            made = requested_artifact_freight(warehouse, "", commit=ref, alias_taken=taken)
        if made is not None:
            return made
    return None


def freight_for_commit(sha: str, freights: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for f in freights:
        if any(c.get("id") == sha for c in f.get("commits") or ()):
            return f
    return None
