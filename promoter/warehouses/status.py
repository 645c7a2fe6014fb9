"""The Warehouse's status, decided purely: when to discover, conditions, and the Freight to make.

Follows Kargo's ``pkg/controller/warehouses`` ``syncWarehouse``:

1. a new refresh token (``kargo.akuity.io/refresh`` or ours) is recorded as
   ``status.lastHandledRefresh``;
2. discovery runs when nothing was discovered yet, the generation changed, the refresh token is
   new, or ``discoveredAt + interval`` has passed (:func:`should_discover`);
3. a failed discovery leaves the last artifacts and sets Healthy/Ready False (DiscoveryFailed);
4. every subscription must have found something (:func:`missing_artifacts`), else Ready False
   with the reason naming the subscription;
5. with the Automatic policy and the creation criteria met, Freight is built from the newest
   artifacts and created; AlreadyExists is success (``FreightCreated`` False, AlreadyExists);
   ``lastFreightID`` names it either way.

Conditions are ``metav1.Condition``s; ``lastTransitionTime`` moves only when the status does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from promoter.expressions import ExpressionError
from promoter.expressions.freight import go_artifact
from promoter.urls import without_credentials
from promoter.warehouses.freight import (
    normalize_chart_url,
    normalize_git_url,
    normalize_image_url,
)
from promoter.warehouses.selection import format_time
from promoter.warehouses.spec import WarehouseSpec

__all__ = [
    "Reason",
    "criteria_functions",
    "missing_artifacts",
    "next_discovery_in",
    "parse_time",
    "set_conditions",
    "should_discover",
]

Condition = tuple[str, str, str, str]  # type, status, reason, message


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def discovered_at(warehouse: Mapping[str, Any]) -> datetime | None:
    status = warehouse.get("status") or {}
    return parse_time((status.get("discoveredArtifacts") or {}).get("discoveredAt"))


def should_discover(
    warehouse: Mapping[str, Any], spec: WarehouseSpec, refresh: str | None, now: datetime
) -> bool:
    """Kargo's ``shouldDiscoverArtifacts``."""
    status = warehouse.get("status") or {}
    at = discovered_at(warehouse)
    generation = int((warehouse.get("metadata") or {}).get("generation") or 0)
    if at is None:
        return True
    if generation > int(status.get("observedGeneration") or 0):
        return True
    if refresh is not None and status.get("lastHandledRefresh") != refresh:
        return True
    return at + timedelta(seconds=spec.interval) < now


def next_discovery_in(
    warehouse: Mapping[str, Any], spec: WarehouseSpec, now: datetime, min_interval: float = 0.0
) -> float:
    """Seconds until the next poll (``Warehouse.GetInterval``): at least 0.1 s."""
    interval = max(spec.interval, min_interval)
    at = discovered_at(warehouse)
    if at is None:
        return interval
    remaining = (at + timedelta(seconds=interval) - now).total_seconds()
    return remaining if remaining > 0 else 0.1


def set_conditions(
    status: dict[str, Any],
    generation: int,
    now: datetime,
    *conditions: Condition,
    delete: Sequence[str] = (),
) -> None:
    """``conditions.Set`` then ``conditions.Delete`` on ``status["conditions"]``; messages (from
    git, a registry, the spec) keep no credentials a URL in them carried."""
    current = [dict(c) for c in status.get("conditions") or () if c.get("type") not in delete]
    by_type = {c.get("type"): c for c in current}
    for kind, state, reason, message in conditions:
        old = by_type.get(kind)
        new = {
            "type": kind,
            "status": state,
            "reason": reason,
            "message": without_credentials(message),
            "observedGeneration": generation,
            "lastTransitionTime": old["lastTransitionTime"]
            if old and old.get("status") == state and old.get("lastTransitionTime")
            else format_time(now),
        }
        if old is None:
            current.append(new)
            by_type[kind] = new
        else:
            old.clear()
            old.update(new)
    status["conditions"] = current


@dataclass(frozen=True, slots=True)
class Reason:
    """Why the discovered artifacts make no Freight: (healthy reason, ready reason, message)."""

    healthy: str
    ready: str
    message: str


def missing_artifacts(discovered: Mapping[str, Any] | None) -> Reason | None:
    """Kargo's ``validateDiscoveredArtifacts``: None when every subscription found something."""
    # As Kargo: generic subscriptions' results count, but one that found nothing is caught
    # when the Freight is built ("no versions discovered for subscription"), not here.
    kinds = ("git", "images", "charts", "results")
    if not discovered or not any(discovered.get(k) for k in kinds):
        return Reason("MissingArtifacts", "MissingArtifacts", "No artifacts discovered")
    for result in discovered.get("git") or ():
        if not result.get("commits"):
            return Reason(
                "NoCommitsDiscovered",
                "MissingCommits",
                f"No commits discovered for Git repository {_q(result['repoURL'])}",
            )
    for result in discovered.get("images") or ():
        if not result.get("references"):
            return Reason(
                "NoImageReferencesDiscovered",
                "MissingImageReferences",
                f"No references discovered for image repository {_q(result['repoURL'])}",
            )
    for result in discovered.get("charts") or ():
        if not result.get("versions"):
            name = f"{_q(result['name'])}" if result.get("name") else ""
            return Reason(
                "NoChartVersionsDiscovered",
                "MissingChartVersions",
                f"No versions discovered for chart {name} from repository {_q(result['repoURL'])}",
            )
    return None


def _q(text: str) -> str:
    import json

    return json.dumps(text)


def _go_commit(commit: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "ID": commit.get("id", ""),
        "Branch": commit.get("branch", ""),
        "Tag": commit.get("tag", ""),
        "Subject": commit.get("subject", ""),
        "Author": commit.get("author", ""),
        "Committer": commit.get("committer", ""),
        "CreatorDate": commit.get("creatorDate"),
    }


def _go_image(ref: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "Tag": ref.get("tag", ""),
        "Digest": ref.get("digest", ""),
        "Annotations": dict(ref.get("annotations") or {}),
        "CreatedAt": ref.get("createdAt"),
    }


def criteria_functions(discovered: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    """``DiscoveredArtifactsOperations``: ``commitFrom``, ``imageFrom``, ``chartFrom`` and
    ``artifactFrom`` (a generic subscription, by its name) over the newest discovered artifact
    of the matching subscription (nil when none), with Kargo's (Go) field names so
    ``imageFrom("x").Tag`` reads the same."""

    def commit_from(repo_url: str) -> Any:
        wanted = normalize_git_url(str(repo_url))
        for result in discovered.get("git") or ():
            if normalize_git_url(result["repoURL"]) == wanted and result.get("commits"):
                return _go_commit(result["commits"][0])
        return None

    def image_from(repo_url: str) -> Any:
        wanted = normalize_image_url(str(repo_url))
        for result in discovered.get("images") or ():
            if normalize_image_url(result["repoURL"]) == wanted and result.get("references"):
                return _go_image(result["references"][0])
        return None

    def chart_from(repo_url: str, name: str = "") -> Any:
        wanted = normalize_chart_url(str(repo_url))
        for result in discovered.get("charts") or ():
            if normalize_chart_url(result["repoURL"]) != wanted:
                continue
            if name and result.get("name") != name:
                continue
            if result.get("versions"):
                return {
                    "RepoURL": result["repoURL"],
                    "Name": result.get("name", ""),
                    "Version": result["versions"][0],
                }
        return None

    def artifact_from(subscription_name: Any) -> Any:
        # Kargo's getArtifactFromDiscoveredArtifacts: the last result of that name wins.
        if not isinstance(subscription_name, str):
            kind = type(subscription_name).__name__
            raise ExpressionError(reason=f"first argument must be string, got {kind}")
        found: Mapping[str, Any] | None = None
        for result in discovered.get("results") or ():
            if result.get("name") == subscription_name and result.get("artifactReferences"):
                found = result["artifactReferences"][0]
        return None if found is None else go_artifact(found)

    return {
        "commitFrom": commit_from,
        "imageFrom": image_from,
        "chartFrom": chart_from,
        "artifactFrom": artifact_from,
    }
