"""Which representation of a read the client asked for, from its ``Accept`` header.

kube-apiserver walks the header's media ranges in order of preference (q, then specificity) and
takes the first it can serve (apiserver endpoints/handlers/negotiation). Besides the object
itself, a range may ask for a conversion with ``as=<Kind>;g=meta.k8s.io;v=<v1|v1beta1>``:

- ``Table``: rows and columns for printing (``kubectl get``; see ``tables.py``);
- ``PartialObjectMetadata`` (one object, or each watch event) and ``PartialObjectMetadataList``
  (a list): only the metadata, for metadata informers.

A range asking for any other conversion is skipped; when nothing the client accepts can be
served the answer is 406 NotAcceptable. The emulator writes JSON only: a client that asks just
for protobuf, YAML or CBOR without a conversion gets JSON, as it always has from the emulator
(kube-apiserver would answer in kind, or 406 for protobuf of a custom resource). A
PartialObjectMetadataList asked of one object is the 406 of later releases, not 1.20's 500
"content is not a list".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.apiserver.errors import StatusError

ConversionKind = Literal["Table", "PartialObjectMetadata", "PartialObjectMetadataList"]

_META_GROUP = "meta.k8s.io"
_META_VERSIONS = ("v1", "v1beta1")
_KINDS: dict[str, ConversionKind] = {
    "Table": "Table",
    "PartialObjectMetadata": "PartialObjectMetadata",
    "PartialObjectMetadataList": "PartialObjectMetadataList",
}


@dataclass(frozen=True)
class Conversion:
    """A transformation of the response the client asked for (``as``, ``g``, ``v``)."""

    kind: ConversionKind
    version: str

    @property
    def api_version(self) -> str:
        return f"{_META_GROUP}/{self.version}"


@dataclass(frozen=True)
class _MediaRange:
    type: str
    subtype: str
    params: dict[str, str]
    q: float


def _media_ranges(accept: str) -> list[_MediaRange]:
    ranges = []
    for clause in accept.split(","):
        parts = [p.strip() for p in clause.split(";")]
        media_type = parts[0].lower()
        if not media_type:
            continue
        main, _, sub = media_type.partition("/")
        params: dict[str, str] = {}
        for part in parts[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        ranges.append(_MediaRange(main, sub or "*", params, q))
    # goautoneg.ParseAccept: higher q first, then specific types before wildcards.
    return sorted(ranges, key=lambda r: (-r.q, r.type == "*", r.subtype == "*"))


def not_acceptable(message: str) -> StatusError:
    return StatusError(406, "NotAcceptable", message)


def negotiate(accept: str | None) -> Conversion | None:
    """The conversion the client prefers, or None for the object itself.

    Raises 406 NotAcceptable when every range the client accepts asks for a conversion the
    server does not offer.
    """
    if not accept:
        return None
    asked_for_conversion = False
    for media in _media_ranges(accept):
        if media.q <= 0:
            continue
        if {"as", "g", "v"} & media.params.keys():
            asked_for_conversion = True
            kind = _KINDS.get(media.params.get("as", ""))
            version = media.params.get("v", "")
            if (
                kind is not None
                and (media.type, media.subtype) == ("application", "json")
                and media.params.get("g") == _META_GROUP
                and version in _META_VERSIONS
            ):
                return Conversion(kind, version)
            continue
        if media.type in ("application", "*") and media.subtype in ("json", "*"):
            return None
    if asked_for_conversion:
        # (The real server's list, though the emulator writes JSON whatever is asked.)
        raise not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf"
        )
    return None


def object_type_name(kind: str, group: str, *, custom: bool, is_list: bool) -> str:
    """The Go type kube-apiserver names in its 406 messages (``*unstructured.Unstructured``)."""
    if custom:
        return "*unstructured.UnstructuredList" if is_list else "*unstructured.Unstructured"
    package = group.split(".")[0] if group else "core"
    return f"*{package}.{kind}"
