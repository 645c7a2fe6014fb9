"""``push`` events: refresh the Warehouses that subscribe to what was pushed.

Kargo's GitHub receiver does not make Freight of a push: it refreshes every Warehouse with a git
subscription the pushed ref matters to (a branch push for NewestFromBranch on that branch, a tag
push for the tag-based strategies whose filters accept the tag, and only when the push touched
a path the subscription watches), and the Warehouse discovers with its own strategy, so a
SemVer subscription picks its newest tag and a Warehouse that also subscribes to an image
makes Freight with both. We do the same (:func:`push_refreshes`): the service's
:class:`WarehouseRefresher` writes the Warehouse's refresh annotation, and the leader's
Warehouse reconciler (``app/controller/warehouses``) discovers at once.

A service without a refresher (no Warehouse reconciler) falls back to making Freight of the
pushed head itself, but only where that is exactly what discovery would make
(:func:`freight_for_push`): a Warehouse whose one subscription is this branch, NewestFromBranch,
with no path filters. The name derives from the artifacts (:func:`freight_name`), so the same
commit never makes two Freight however often it is pushed or delivered.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from gidgethub import routing, sansio

from handlers.context import Deps, event_repo
from promoter.resources.model import name_of
from promoter.steps.git import normalize_repo_url
from promoter.warehouses.freight import normalize_git_url
from promoter.warehouses.refresh import warehouses_to_refresh

log = logging.getLogger(__name__)

router = routing.Router()

_DELETED = "0" * 40


@runtime_checkable
class WarehouseRefresher(Protocol):
    """What a PromotionService may offer: ask a Warehouse to discover now."""

    async def warehouses(self, namespace: str) -> list[Mapping[str, Any]]: ...

    async def refresh_warehouse(self, namespace: str, name: str) -> None: ...


def _pushed_urls(payload: Mapping[str, Any]) -> set[str]:
    repository = payload.get("repository") or {}
    return {
        normalize_repo_url(str(url))
        for url in (repository.get("clone_url"), repository.get("html_url"), repository.get("url"))
        if url
    }


def changed_paths(payload: Mapping[str, Any]) -> list[str]:
    """Paths the push touched, from its commits and head commit. GitHub lists at most 2048
    commits; with more the paths are unknown, and every subscription on the ref is refreshed
    (an empty list filters nothing), as Kargo's receiver does."""
    commits = [c for c in payload.get("commits") or () if isinstance(c, Mapping)]
    if len(commits) >= 2048:
        return []
    head = payload.get("head_commit")
    if isinstance(head, Mapping):
        commits.append(head)
    return sorted(
        {
            str(path)
            for commit in commits
            for key in ("added", "modified", "removed")
            for path in commit.get(key) or ()
        }
    )


def push_refreshes(warehouse: Mapping[str, Any], payload: Mapping[str, Any]) -> bool:
    """Whether the push moved a ref one of the Warehouse's git subscriptions selects from and
    touched a path it watches (Kargo's ``shouldRefresh``: ``MatchesRef`` is the subscribed
    branch, ``main``/``master`` when none is named, or a tag the tag-based strategy and its
    filters accept; then ``MatchesPaths``), decided by
    :func:`promoter.warehouses.refresh.warehouses_to_refresh` as for every other receiver."""
    repository = payload.get("repository") or {}
    urls = [
        normalize_git_url(str(url))
        for url in (
            repository.get("clone_url"),
            repository.get("ssh_url"),
            repository.get("html_url"),
            repository.get("url"),
        )
        if url
    ]
    ref = str(payload.get("ref") or "")
    return bool(warehouses_to_refresh([warehouse], urls, [ref], changed_paths(payload)))


@runtime_checkable
class FreightSink(Protocol):
    """What a PromotionService may also offer: Warehouses to read, Freight to create."""

    async def warehouses(self, namespace: str) -> list[Mapping[str, Any]]: ...

    async def create_freight(self, namespace: str, freight: Mapping[str, Any]) -> bool:
        """Create it unless a Freight of that name exists; True when created."""
        ...


def freight_name(origin: Mapping[str, Any], commits: Sequence[Mapping[str, Any]]) -> str:
    """Kargo's ``Freight.GenerateID``: SHA-1 of ``<kind>/<name>:<sorted artifacts joined by |>``,
    so the same commit from the same Warehouse always makes the same name."""
    canonical = sorted(f"{normalize_repo_url(str(c['repoURL']))}:{c['id']}" for c in commits)
    text = f"{origin.get('kind', 'Warehouse')}/{origin.get('name', '')}:{'|'.join(canonical)}"
    return hashlib.sha1(text.encode()).hexdigest()


def freight_for_push(
    warehouse: Mapping[str, Any], payload: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The Freight a Warehouse makes of a push, or None when it does not subscribe to it."""
    ref = str(payload.get("ref") or "")
    head = payload.get("head_commit") or {}
    after = str(payload.get("after") or "")
    if not ref.startswith("refs/heads/") or payload.get("deleted") or after in ("", _DELETED):
        return None
    branch = ref.removeprefix("refs/heads/")
    pushed = _pushed_urls(payload)
    subscriptions = (warehouse.get("spec") or {}).get("subscriptions") or ()
    # Kargo's Freight carries one artifact per subscription, chosen by its strategy: a head
    # commit stands for the whole Warehouse only when it is the Warehouse's one subscription and
    # that subscription takes the newest commit of this branch, whatever it touched.
    if len(subscriptions) != 1:
        return None
    for subscription in subscriptions:
        git = (subscription or {}).get("git") or {}
        if not git.get("repoURL") or normalize_repo_url(str(git["repoURL"])) not in pushed:
            continue
        if (git.get("branch") or "main") != branch:
            continue
        if git.get("commitSelectionStrategy") not in (None, "", "NewestFromBranch"):
            continue
        if git.get("includePaths") or git.get("excludePaths") or git.get("expressionFilter"):
            continue
        commit: dict[str, Any] = {
            "repoURL": str(git["repoURL"]),
            "id": after,
            "branch": branch,
            "message": str(head.get("message") or "").split("\n", 1)[0],
        }
        author = (head.get("author") or {}).get("name")
        if author:
            commit["author"] = str(author)
        origin = {"kind": "Warehouse", "name": name_of(warehouse)}
        metadata: dict[str, Any] = {"name": freight_name(origin, [commit])}
        if warehouse.get("metadata", {}).get("namespace"):
            metadata["namespace"] = warehouse["metadata"]["namespace"]
        return {
            "apiVersion": str(warehouse.get("apiVersion") or "kargo.akuity.io/v1alpha1"),
            "kind": "Freight",
            "metadata": metadata,
            "origin": origin,
            "commits": [commit],
        }
    return None


@router.register("push")
async def on_push(event: sansio.Event, deps: Deps) -> None:
    service = deps.service
    if isinstance(service, WarehouseRefresher):
        namespace = deps.namespace_for(event.data)
        for warehouse in await service.warehouses(namespace):
            if push_refreshes(warehouse, event.data):
                await service.refresh_warehouse(namespace, name_of(warehouse))
                log.info(
                    "push %s to %s: refreshing Warehouse %s",
                    str(event.data.get("after"))[:12],
                    event_repo(event.data),
                    name_of(warehouse),
                    extra={"delivery_id": event.delivery_id},
                )
        return
    if not isinstance(service, FreightSink):
        log.debug("push to %s ignored: the service cannot create Freight", event_repo(event.data))
        return
    namespace = deps.namespace_for(event.data)
    for warehouse in await service.warehouses(namespace):
        freight = freight_for_push(warehouse, event.data)
        if freight is None:
            continue
        created = await service.create_freight(namespace, freight)
        log.info(
            "push %s to %s: Freight %s for Warehouse %s %s",
            str(event.data.get("after"))[:12],
            event_repo(event.data),
            freight["metadata"]["name"][:12],
            name_of(warehouse),
            "created" if created else "already exists",
            extra={"delivery_id": event.delivery_id},
        )
