"""Which Warehouses a registry or git event refreshes (Kargo's ``pkg/webhook/external``).

Every receiver reduces its sender's payload to the same two facts: the repository URLs the
event names (normalised the way Kargo normalises subscriptions, so ``docker.io/library/nginx``
and ``nginx`` are one repository) and the *qualifiers* (the pushed tags, chart versions or git
refs). :func:`warehouses_to_refresh` then applies Kargo's ``refreshWarehouses``:

* a Warehouse is a candidate when one of its subscriptions names one of the URLs;
* with no qualifier (a sender that does not say what changed) every candidate is refreshed;
* otherwise only a candidate with a subscription that would select one of the qualifiers
  (``shouldRefresh``: the image subscription's ``MatchesTag``, the chart's ``MatchesVersion``,
  the git subscription's ``MatchesRef``), so a ``v2.0.0`` push does not wake a Warehouse held
  to ``^1.0.0``.

A Warehouse whose spec does not parse is refreshed when it names the URL: its reconcile then
reports the spec error on its conditions, which is more useful than silence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from promoter.warehouses.freight import (
    normalize_chart_url,
    normalize_git_url,
    normalize_image_url,
)
from promoter.warehouses.selection import (
    branch_matches,
    git_tag_matches,
    image_tag_matches,
    paths_match,
)
from promoter.warehouses.semver import parse_version
from promoter.warehouses.spec import (
    ChartSubscription,
    GitSubscription,
    ImageSubscription,
    SpecError,
    Subscription,
    parse_subscription,
)

__all__ = [
    "WarehouseDirectory",
    "image_repo_urls",
    "subscription_urls",
    "warehouses_to_refresh",
]

# Kargo's media_types.go: what a sender's media type says the repository holds.
_CONTAINER_MEDIA_TYPES = frozenset(
    {
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.config.v1+json",
        "application/vnd.docker.container.image.v1+json",
    }
)


class WarehouseDirectory(Protocol):
    """The receivers' port: every Warehouse this replica watches, and a way to refresh one."""

    def all_warehouses(self) -> Sequence[Mapping[str, Any]]: ...

    async def refresh_warehouse(self, namespace: str, name: str) -> None: ...


def image_repo_urls(repo: str, media_type: str = "") -> list[str]:
    """``getNormalizedImageRepoURLs``: a Helm media type names a chart repository, a container
    one an image repository; an unknown one could be either, so both spellings are kept."""
    if media_type.startswith("application/vnd.cncf.helm"):
        return [normalize_chart_url(repo)]
    if media_type in _CONTAINER_MEDIA_TYPES:
        return [normalize_image_url(repo)]
    return list(dict.fromkeys([normalize_image_url(repo), normalize_chart_url(repo)]))


def _normalised(kind: str, repo_url: str) -> str:
    if kind == "git":
        return normalize_git_url(repo_url)
    if kind == "chart":
        return normalize_chart_url(repo_url)
    return normalize_image_url(repo_url)


def subscription_urls(warehouse: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(kind, normalised repoURL)`` of each subscription (Kargo's subscribed-URLs index)."""
    found = []
    for entry in (warehouse.get("spec") or {}).get("subscriptions") or ():
        if not isinstance(entry, Mapping):
            continue
        for kind in ("image", "chart", "git"):
            body = entry.get(kind)
            if isinstance(body, Mapping) and body.get("repoURL"):
                found.append((kind, _normalised(kind, str(body["repoURL"]))))
    return found


def _chart_version_matches(sub: ChartSubscription, version: str) -> bool:
    parsed = parse_version(version)
    return parsed is not None and (
        sub.semver_constraint is None or sub.semver_constraint.check(parsed)
    )


def _selects(sub: Subscription, qualifiers: Sequence[str], changed: Sequence[str]) -> bool:
    if isinstance(sub, ImageSubscription):
        return any(image_tag_matches(sub, q) for q in qualifiers)
    if isinstance(sub, ChartSubscription):
        return any(_chart_version_matches(sub, q) for q in qualifiers)
    assert isinstance(sub, GitSubscription)

    def ref_matches(ref: str) -> bool:
        if sub.tag_based:
            return ref.startswith("refs/tags/") and git_tag_matches(sub, ref)
        return branch_matches(sub, ref)

    return any(ref_matches(q) for q in qualifiers) and (not changed or paths_match(sub, changed))


def _refreshes(
    warehouse: Mapping[str, Any],
    urls: set[str],
    qualifiers: Sequence[str],
    changed: Sequence[str],
) -> bool:
    entries = (warehouse.get("spec") or {}).get("subscriptions") or ()
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            continue
        for kind in ("image", "chart", "git"):
            body = entry.get(kind)
            if not isinstance(body, Mapping) or not body.get("repoURL"):
                continue
            if _normalised(kind, str(body["repoURL"])) not in urls:
                continue
            if not qualifiers:
                return True
            try:
                sub = parse_subscription(entry, index)
            except SpecError:
                return True  # the Warehouse reports its own spec error when it reconciles
            if _selects(sub, qualifiers, changed):
                return True
    return False


def warehouses_to_refresh(
    warehouses: Iterable[Mapping[str, Any]],
    repo_urls: Iterable[str],
    qualifiers: Iterable[str] = (),
    changed_files: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """``(namespace, name)`` of each Warehouse the event refreshes, each once, in input order."""
    urls = {url for url in repo_urls if url}
    wanted = sorted({q for q in qualifiers if q})
    chosen: dict[tuple[str, str], None] = {}
    if not urls:
        return []
    for warehouse in warehouses:
        meta = warehouse.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if key not in chosen and _refreshes(warehouse, urls, wanted, changed_files):
            chosen[key] = None
    return list(chosen)
