"""Freight made from discovered artifacts: Kargo's ID, the object, its alias.

Kargo names Freight by ``api.GenerateFreightID`` (``pkg/api/freight.go``): the SHA-1, in hex,
of ``<origin kind>/<origin name>:<parts joined by |>`` where the parts, sorted, are

* a commit: ``<normalized git URL>:<id>``, or ``<normalized git URL>:<tag>:<id>`` when a tag
  selected it (the same commit tagged again is new Freight);
* an image: ``<repoURL>:<tag>@<digest>`` (the URL as written: Kargo does not normalize it);
* a chart: ``path.Join(<normalized chart URL>, <name>):<version>``;

each followed by ``:<subscription name>`` when the subscription has one; and

* an artifact of a generic subscription: ``<artifactType>:<subscriptionName>:<version>``
  (its metadata is not part of the name). So the same artifacts
always make the same name, and a repeat is an ``AlreadyExists`` that creates nothing.

``buildFreightFromLatestArtifacts`` takes the first (newest) result of every subscription; a
subscription that found nothing means no Freight (its discovery result is reported instead).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "FreightBuildError",
    "build_freight",
    "freight_alias",
    "freight_id",
    "normalize_chart_url",
    "normalize_git_url",
    "normalize_image_url",
    "split_registry",
]


class FreightBuildError(ValueError):
    """Discovered artifacts that make no Freight (a subscription found nothing)."""


def _sanitize(url: str) -> str:
    """``urls.SanitizeURL``: drop non-printable characters (BOMs) and surrounding space."""
    printable = "".join(ch for ch in url if unicodedata.category(ch)[0] != "C")
    return printable.strip()


_SCP = re.compile(r"^((?:[\w-]+@)?[\w-]+(?:\.[\w-]+)*)(?::(.*))?$")


def normalize_git_url(repo: str) -> str:
    """``urls.NormalizeGit``: lower case, no userinfo (http/s), no trailing ``/`` or ``.git``."""
    original = repo
    repo = _sanitize(repo.lower())
    if repo.startswith(("http://", "https://", "ssh://")):
        scheme, rest = repo.split("://", 1)
        if "?" in rest:
            return original
        host, _, path = rest.partition("/")
        if scheme != "ssh":
            host = host.rsplit("@", 1)[-1]
        path = path.removesuffix("/").removesuffix(".git")
        return f"{scheme}://{host}/{path}" if path else f"{scheme}://{host}"
    match = _SCP.match(repo)
    if match is None:
        return original
    path = (match.group(2) or "").removesuffix("/").removesuffix(".git")
    return f"ssh://{match.group(1)}/{path}" if path else f"ssh://{match.group(1)}"


def split_registry(repo: str) -> tuple[str, str]:
    """``(registry host, path)`` of an image repository, the host ``""`` when none is named:
    go-containerregistry's rule, a first segment with a dot or a port, or ``localhost``, is a
    host (``ghcr.io/acme/app``, ``localhost:5000/app``); otherwise it is Docker Hub's path
    (``nginx``, ``acme/app``). Callers pick Docker Hub's spelling for the empty host."""
    first, sep, rest = repo.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "", repo


def normalize_image_url(repo: str) -> str:
    """``urls.NormalizeImage``: Docker Hub's many spellings of one repository become one."""
    repo = _sanitize(repo.lower())
    if "://" in repo:
        # go-containerregistry cannot parse a URL with a scheme; Kargo then keeps the input
        # (which is how classic https:// chart repositories end up in chart IDs).
        return repo
    registry, path = split_registry(repo)
    registry = registry or "index.docker.io"
    path = path.split("@", 1)[0]
    if ":" in path.rsplit("/", 1)[-1]:
        path = path.rsplit(":", 1)[0]
    if registry in ("docker.io", "index.docker.io", "registry-1.docker.io"):
        return path.removeprefix("library/")
    return f"{registry}/{path}"


def normalize_chart_url(repo: str) -> str:
    """``urls.NormalizeChart``: without ``oci://``, then as an image repository."""
    return normalize_image_url(_sanitize(repo).lower().removeprefix("oci://"))


def _with_name(base: str, subscription: str) -> str:
    return f"{base}:{subscription}" if subscription else base


def _commit_part(commit: Mapping[str, Any]) -> str:
    url = normalize_git_url(str(commit.get("repoURL") or ""))
    tag = str(commit.get("tag") or "")
    base = f"{url}:{tag}:{commit.get('id', '')}" if tag else f"{url}:{commit.get('id', '')}"
    return _with_name(base, str(commit.get("subscriptionName") or ""))


def _image_part(image: Mapping[str, Any]) -> str:
    base = f"{image.get('repoURL', '')}:{image.get('tag', '')}@{image.get('digest', '')}"
    return _with_name(base, str(image.get("subscriptionName") or ""))


def _chart_part(chart: Mapping[str, Any]) -> str:
    url = normalize_chart_url(str(chart.get("repoURL") or ""))
    name = str(chart.get("name") or "")
    joined = posixpath.normpath(posixpath.join(url, name)) if url or name else ""
    base = f"{joined}:{chart.get('version', '')}"
    return _with_name(base, str(chart.get("subscriptionName") or ""))


def _artifact_part(artifact: Mapping[str, Any]) -> str:
    return (
        f"{artifact.get('artifactType', '')}:{artifact.get('subscriptionName', '')}:"
        f"{artifact.get('version', '')}"
    )


def freight_id(
    origin: Mapping[str, Any],
    commits: Iterable[Mapping[str, Any]] = (),
    images: Iterable[Mapping[str, Any]] = (),
    charts: Iterable[Mapping[str, Any]] = (),
    artifacts: Iterable[Mapping[str, Any]] = (),
) -> str:
    """Kargo's ``GenerateFreightID``."""
    parts = sorted(
        [_commit_part(c) for c in commits]
        + [_image_part(i) for i in images]
        + [_chart_part(c) for c in charts]
        + [_artifact_part(a) for a in artifacts]
    )
    text = f"{origin.get('kind', '')}/{origin.get('name', '')}:{'|'.join(parts)}"
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def build_freight(
    warehouse: Mapping[str, Any], discovered: Mapping[str, Any], alias: str = ""
) -> dict[str, Any]:
    """``buildFreightFromLatestArtifacts``: the newest artifact of every subscription."""
    commits: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    charts: list[dict[str, Any]] = []
    for result in discovered.get("git") or ():
        found: Sequence[Mapping[str, Any]] = result.get("commits") or ()
        if not found:
            raise FreightBuildError(f"no commits discovered for repository {result['repoURL']!r}")
        latest = found[0]
        commit = {
            "repoURL": result["repoURL"],
            "id": latest.get("id", ""),
            "branch": latest.get("branch", ""),
            "tag": latest.get("tag", ""),
            "message": latest.get("subject", ""),
            "author": latest.get("author", ""),
            "committer": latest.get("committer", ""),
            "subscriptionName": result.get("subscriptionName", ""),
        }
        commits.append({k: v for k, v in commit.items() if v})
    for result in discovered.get("images") or ():
        refs: Sequence[Mapping[str, Any]] = result.get("references") or ()
        if not refs:
            raise FreightBuildError(f"no images discovered for repository {result['repoURL']!r}")
        latest = refs[0]
        image = {
            "repoURL": result["repoURL"],
            "tag": latest.get("tag", ""),
            "digest": latest.get("digest", ""),
            "annotations": dict(latest.get("annotations") or {}),
            "subscriptionName": result.get("subscriptionName", ""),
        }
        images.append({k: v for k, v in image.items() if v})
    for result in discovered.get("charts") or ():
        versions: Sequence[str] = result.get("versions") or ()
        if not versions:
            raise FreightBuildError(
                f"no versions discovered for chart {result.get('name', '')!r} from repository "
                f"{result['repoURL']!r}"
            )
        chart = {
            "repoURL": result["repoURL"],
            "name": result.get("name", ""),
            "version": versions[0],
            "subscriptionName": result.get("subscriptionName", ""),
        }
        charts.append({k: v for k, v in chart.items() if v})
    artifacts: list[dict[str, Any]] = []
    for result in discovered.get("results") or ():
        references: Sequence[Mapping[str, Any]] = result.get("artifactReferences") or ()
        if not references:
            raise FreightBuildError("no versions discovered for subscription")
        artifacts.append(dict(references[0]))
    if not (commits or images or charts or artifacts):
        raise FreightBuildError("no artifacts discovered")
    metadata = warehouse.get("metadata") or {}
    origin = {"kind": "Warehouse", "name": str(metadata.get("name") or "")}
    name = freight_id(origin, commits, images, charts, artifacts)
    freight_meta: dict[str, Any] = {"name": name}
    if metadata.get("namespace"):
        freight_meta["namespace"] = metadata["namespace"]
    freight: dict[str, Any] = {
        "apiVersion": str(warehouse.get("apiVersion") or "kargo.akuity.io/v1alpha1"),
        "kind": "Freight",
        "metadata": freight_meta,
        "origin": origin,
    }
    if alias:
        freight_meta["labels"] = {"kargo.akuity.io/alias": alias}
        freight["alias"] = alias
    for key, items in (
        ("commits", commits),
        ("images", images),
        ("charts", charts),
        ("artifacts", artifacts),
    ):
        if items:
            freight[key] = items
    return freight


def requested_artifact_freight(
    warehouse: Mapping[str, Any],
    repo: str,
    *,
    tag: str = "",
    digest: str = "",
    commit: str = "",
    alias_taken: Iterable[str] = (),
) -> dict[str, Any] | None:
    """The Freight a Manual Warehouse makes when someone asks for one discovered artifact.

    ``repo`` with ``tag``/``digest`` names an image (or ``tag`` a chart version), ``commit`` a
    commit SHA prefix (``repo`` empty: any git subscription). That artifact is taken for its
    subscription, and the newest discovered artifact for every other one, as Kargo's UI does
    when a user assembles Freight by hand. None when the Warehouse did not discover it.
    """
    discovered = (warehouse.get("status") or {}).get("discoveredArtifacts") or {}
    chosen: dict[str, list[dict[str, Any]]] = {
        key: [dict(result) for result in discovered.get(key) or ()]
        for key in ("git", "images", "charts", "results")
    }
    found = False
    wanted_image = normalize_image_url(repo) if repo else ""
    for result in chosen["images"]:
        if commit or normalize_image_url(str(result.get("repoURL") or "")) != wanted_image:
            continue
        for ref in result.get("references") or ():
            if (not tag or ref.get("tag") == tag) and (not digest or ref.get("digest") == digest):
                result["references"] = [ref]
                found = True
                break
    for result in chosen["charts"]:
        base = posixpath.join(
            normalize_chart_url(str(result.get("repoURL") or "")), str(result.get("name") or "")
        )
        if commit or not tag or normalize_chart_url(repo) != base.rstrip("/"):
            continue
        if tag in (result.get("versions") or ()):
            result["versions"] = [tag]
            found = True
    for result in chosen["git"]:
        if not commit:
            continue
        if repo and normalize_git_url(str(result.get("repoURL") or "")) != normalize_git_url(repo):
            continue
        for entry in result.get("commits") or ():
            if str(entry.get("id") or "").startswith(commit.lower()):
                result["commits"] = [entry]
                found = True
                break
    if not found:
        return None
    try:
        freight = build_freight(warehouse, chosen)
    except FreightBuildError:
        return None  # another subscription discovered nothing yet
    alias = freight_alias(freight["metadata"]["name"], alias_taken)
    freight["alias"] = alias
    freight["metadata"]["labels"] = {"kargo.akuity.io/alias": alias}
    return freight


# Word lists for aliases in Kargo's spirit (adjective-noun, as ``frozen-tauntaun``). Derived
# from the ID rather than drawn at random, so two replicas (or a retry) pick the same alias.
_ADJECTIVES = (
    "amber autumn bold brave bright calm clever cosmic crisp curious dapper daring eager early "
    "fancy fearless gentle giddy golden grand happy hidden humble icy jolly keen kind lively "
    "lucky mellow merry mighty misty modest nimble noble patient plucky polite proud quick "
    "quiet rapid rustic serene sharp shiny silent silver sleek snowy spry steady sunny swift "
    "tidy tranquil trusty vivid wandering warm wise witty zesty frozen"
).split()
_NOUNS = (
    "badger beacon bison canyon comet condor coyote crane dolphin eagle falcon ferret fjord "
    "gecko glacier harbor heron ibex jaguar kestrel koala lagoon lantern lemur lynx magpie "
    "marmot meadow mesa narwhal nebula ocelot orca otter owl panda pelican puffin quokka raven "
    "reef river robin salmon sequoia sparrow summit tapir tiger toucan tundra turtle valley "
    "walrus willow wombat yak zebra tauntaun"
).split()


def freight_alias(freight_name: str, taken: Iterable[str] = ()) -> str:
    """A stable ``adjective-noun`` alias for the Freight, unique among ``taken``."""
    digest = bytes.fromhex(freight_name[:8].ljust(8, "0")) if freight_name else b"\0" * 4
    alias = f"{_ADJECTIVES[digest[0] % len(_ADJECTIVES)]}-{_NOUNS[digest[1] % len(_NOUNS)]}"
    used = set(taken)
    if alias in used:
        alias = f"{alias}-{freight_name[:6]}"
    return alias
