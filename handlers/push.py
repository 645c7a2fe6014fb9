"""``push`` events: Freight for Warehouses that subscribe to a git branch.

A push to a branch a Warehouse subscribes to (``spec.subscriptions[].git{repoURL, branch}``)
becomes one Freight for the pushed head commit, named deterministically from its artifacts
(:func:`freight_name`), so the same commit never makes two Freight however often it is pushed or
delivered. Creating Freight is not part of the :class:`~promoter.chatops.PromotionService` port;
the service provides it when it implements :class:`FreightSink`, and pushes are only logged
otherwise.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from gidgethub import routing, sansio

from handlers.context import Deps, event_repo
from promoter.model import name_of
from promoter.steps.git import normalize_repo_url

log = logging.getLogger(__name__)

router = routing.Router()

_DELETED = "0" * 40


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
    repository = payload.get("repository") or {}
    pushed = {
        normalize_repo_url(str(url))
        for url in (repository.get("clone_url"), repository.get("html_url"), repository.get("url"))
        if url
    }
    for subscription in (warehouse.get("spec") or {}).get("subscriptions") or ():
        git = (subscription or {}).get("git") or {}
        if not git.get("repoURL") or normalize_repo_url(str(git["repoURL"])) not in pushed:
            continue
        if (git.get("branch") or "main") != branch:
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
