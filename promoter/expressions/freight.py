"""Kargo's Freight functions: ``warehouse()``, ``commitFrom()``, ``imageFrom()``, ``chartFrom()``
and ``artifactFrom()`` (artifacts of Kargo's generic subscriptions, by subscription name).

Mirrors Kargo's ``pkg/expressions/function`` and ``pkg/controller/freight/finder.go``:

* Without an origin argument, the origin is the one requested Warehouse that can provide the
  artifact. Kargo decides that from the subscriptions of the Warehouses the Stage requests
  Freight from; we do the same when the caller passes ``warehouses`` (name -> Warehouse object
  or spec, None for one that does not exist: Kargo's "Warehouse ... not found" error), and
  otherwise (a local run without the Warehouse manifests) infer it from which Freight carry the
  artifact. More than one candidate is Kargo's "multiple requested Freight could potentially
  provide ..." error, naming them and asking for ``warehouse(...)``.
* Not found is nil for commits and images (so ``?.`` and ``??`` work), as in Kargo. For charts
  Kargo returns an *error* when no candidate origin could provide the chart at all, and nil when
  the origin is known but its Freight lacks the chart; we follow it.
* Results are Kargo's structs (``GitCommit``, ``Image``, ``Chart``, ``FreightOrigin``) as
  :class:`KargoObject`: they render as Kargo renders them, through ``encoding/json`` with the
  structs' JSON names and empty fields left out (``{"repoURL": ..., "tag": ...}``), in
  templates, ``toJSON``, ``asJSON``, ``asYAML`` and step outputs; and expressions read them by
  Go's field names as in Kargo (``.ID``, ``.Tag``, ``.Version``), where an empty field is ""
  (Go's zero value), not nil. The JSON names read too (``.tag``), which Kargo does not allow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from promoter.expressions.errors import ExpressionError

# JSON name -> Go field name, from Kargo's api/v1alpha1 (freight_types.go, stage_types.go).
# Every field is `json:",omitempty"`.
_COMMIT_FIELDS = {
    "repoURL": "RepoURL", "id": "ID", "branch": "Branch", "tag": "Tag", "message": "Message",
    "author": "Author", "committer": "Committer", "subscriptionName": "SubscriptionName",
}  # fmt: skip
_IMAGE_FIELDS = {
    "repoURL": "RepoURL", "tag": "Tag", "digest": "Digest", "annotations": "Annotations",
    "subscriptionName": "SubscriptionName",
}  # fmt: skip
_CHART_FIELDS = {
    "repoURL": "RepoURL", "name": "Name", "version": "Version",
    "subscriptionName": "SubscriptionName",
}  # fmt: skip
_ORIGIN_FIELDS = {"kind": "Kind", "name": "Name"}


class KargoObject(dict[str, Any]):
    """A Kargo API struct as an expression value: a dict of its JSON form (what Kargo renders),
    that also answers Go's field names (what Kargo expressions read).

    ``GO_FIELDS`` maps each Go field name to its JSON name; a Go name whose JSON field is
    absent (omitted because empty) reads as Go's zero value, "" or an empty map.
    """

    GO_FIELDS: dict[str, str] = {}
    ZERO: dict[str, Any] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        json_name = self.GO_FIELDS.get(key) if isinstance(key, str) else None
        if json_name is None:
            return default
        if dict.__contains__(self, json_name):
            return dict.__getitem__(self, json_name)
        return self.ZERO.get(json_name, "")

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (isinstance(key, str) and key in self.GO_FIELDS)


def _kargo_class(name: str, fields: Mapping[str, str]) -> type[KargoObject]:
    zero: dict[str, Any] = {"annotations": {}} if "annotations" in fields else {}
    namespace = {"GO_FIELDS": {go: js for js, go in fields.items()}, "ZERO": zero}
    return type(name, (KargoObject,), namespace)


GitCommit = _kargo_class("GitCommit", _COMMIT_FIELDS)
Image = _kargo_class("Image", _IMAGE_FIELDS)
Chart = _kargo_class("Chart", _CHART_FIELDS)
FreightOrigin = _kargo_class("FreightOrigin", _ORIGIN_FIELDS)


_RESULT_TYPES: dict[str, type[KargoObject]] = {
    "warehouse": FreightOrigin,
    "commitFrom": GitCommit,
    "imageFrom": Image,
    "chartFrom": Chart,
}


def revive_result(function: str, value: Any) -> Any:
    """``value``, a Freight function's result read back from JSON, as the function returns it.

    A replay answers ``imageFrom(...)`` with the result recorded as JSON; without its class a
    recorded image would no longer answer ``.Tag``. Results recorded with Go's field names (as
    before Kargo's JSON names were used) keep working: their keys are read as they are.
    """
    kind = _RESULT_TYPES.get(function)
    if kind is None or not isinstance(value, Mapping) or isinstance(value, KargoObject):
        return value
    return kind(value)


def kargo_object(kind: type[KargoObject], artifact: Mapping[str, Any]) -> KargoObject:
    """``artifact`` (a Freight's commit, image or chart, by JSON names) as Kargo's struct:
    only the struct's fields, empty ones left out as ``omitempty`` does."""
    json_names = kind.GO_FIELDS.values()
    return kind({name: artifact[name] for name in json_names if artifact.get(name)})


def _normalize_url(url: str, *, strip_git: bool) -> str:
    """Compare-friendly repo URL: trimmed, no trailing "/" (or ".git"), lower-case host."""
    text = url.strip()
    for _ in range(2):
        text = text.rstrip("/")
        if strip_git and text.endswith(".git"):
            text = text[: -len(".git")]
    if "://" not in text:
        return text  # scp-like git@host:path: leave as written
    try:
        parts = urlsplit(text)
        return urlunsplit(
            (parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, parts.fragment)
        )
    except ValueError:
        return text


def _git_key(url: str) -> str:
    return _normalize_url(url, strip_git=True)


def _image_key(url: str) -> str:
    # Image references are lower-case by the OCI spec; tolerate stray case and slashes.
    return url.strip().rstrip("/").lower()


def _chart_key(url: str) -> str:
    return _normalize_url(url, strip_git=False)


def _origin_of(freight: Mapping[str, Any]) -> tuple[str, str]:
    origin = freight.get("origin") or {}
    return (str(origin.get("kind") or "Warehouse"), str(origin.get("name") or ""))


def _origin_arg(function: str, value: Any) -> tuple[str, str]:
    if (
        not isinstance(value, Mapping)
        or not isinstance(value.get("name"), str)
        or "kind" not in value
    ):
        raise ExpressionError(
            reason=f'{function}(): the origin argument must come from warehouse("name")'
        )
    return (str(value.get("kind") or "Warehouse"), value["name"])


def _string_arg(function: str, value: Any, position: str) -> str:
    if not isinstance(value, str):
        raise ExpressionError(reason=f"{function}(): {position} argument must be a string")
    return value


def _describe(origins: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{kind} {name!r}" for kind, name in origins)


def _subscriptions(warehouse: Any) -> list[Mapping[str, Any]]:
    if not isinstance(warehouse, Mapping):
        return []
    spec = warehouse.get("spec", warehouse)
    subscriptions = spec.get("subscriptions") if isinstance(spec, Mapping) else None
    return [s for s in subscriptions or [] if isinstance(s, Mapping)]


# Kargo's warehouse_types.go (WarehouseSpec.UnmarshalJSON): a subscription has one key naming
# its type besides an optional "name"; any type but these three is a generic subscription, whose
# artifacts Freight carry in artifacts[] under the subscription's name.
_TYPED_SUBSCRIPTIONS = frozenset({"git", "image", "chart"})
_SUBSCRIPTION_NAME_KEY = "name"


def _is_generic(subscription: Mapping[str, Any]) -> bool:
    types = [key for key in subscription if key != _SUBSCRIPTION_NAME_KEY]
    return len(types) == 1 and types[0] not in _TYPED_SUBSCRIPTIONS


def go_artifact(artifact: Mapping[str, Any]) -> dict[str, Any]:
    """An ``artifacts[]`` entry as ``artifactFrom()`` returns it: Go's field names (Kargo's
    expressionFriendlyArtifactReference has no JSON tags), its metadata as a map."""
    metadata = artifact.get("metadata")
    return {
        "ArtifactType": str(artifact.get("artifactType") or ""),
        "SubscriptionName": str(artifact.get("subscriptionName") or ""),
        "Version": str(artifact.get("version") or ""),
        "Metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
    }


def _warehouse_not_found(name: str, namespace: str) -> ExpressionError:
    return ExpressionError(reason=f'Warehouse "{name}" not found in namespace "{namespace}"')


def ambiguous_image_request(warehouses: Mapping[str, Any], namespace: str = "") -> str | None:
    """Kargo's ``HasAmbiguousImageRequest``: the message when two requested Warehouses subscribe
    to the same image repository (a step that picks images by itself cannot choose), else None.
    Raises ExpressionError for a requested Warehouse that does not exist."""
    seen: set[str] = set()
    for name, warehouse in warehouses.items():
        if warehouse is None:
            raise _warehouse_not_found(str(name), namespace)
        for subscription in _subscriptions(warehouse):
            image = subscription.get("image")
            if not isinstance(image, Mapping):
                continue
            repo_url = str(image.get("repoURL") or "")
            if repo_url in seen:
                return (
                    "multiple requested Freight could potentially provide a container image "
                    f"from repository {repo_url}"
                )
            seen.add(repo_url)
    return None


# Kargo's messages (pkg/controller/freight/finder.go), by collection.
_AMBIGUOUS = {
    "commits": "multiple requested Freight could potentially provide a commit from repo {url}; "
    "please update promotion steps to disambiguate",
    "images": "multiple requested Freight could potentially provide a container image from "
    "repository {url}: please provide a Freight origin to disambiguate",
    "charts": "multiple requested Freight could potentially provide a chart from repository "
    "{url}: please provide a Freight origin to disambiguate",
    "artifacts": "error finding artifact from subscription {url}: multiple requested Freight "
    'could potentially provide a "{url}" artifact; please update promotion steps to '
    "disambiguate",
}


def freight_functions(
    freights: Sequence[Mapping[str, Any]],
    *,
    warehouses: Mapping[str, Any] | None = None,
    namespace: str = "",
) -> dict[str, Callable[..., Any]]:
    """``warehouse``, ``commitFrom``, ``imageFrom`` and ``chartFrom`` bound to ``freights``.

    ``freights`` are Kargo Freight objects (dicts) available to the promotion; ``warehouses``
    optionally maps the requested Warehouses' names to their objects (None: not found in
    ``namespace``), letting origin resolution use subscriptions exactly as Kargo does.
    """

    def candidates_from_warehouses(
        kind: str, matches: Callable[[Mapping[str, Any]], bool]
    ) -> list[tuple[str, str]]:
        """The requested Warehouses with a subscription of ``kind`` that ``matches``; for
        ``subscription`` (Kargo's generic ones) ``matches`` sees the whole entry (its name)."""
        assert warehouses is not None
        found = []
        for name, warehouse in warehouses.items():
            if warehouse is None:
                raise _warehouse_not_found(str(name), namespace)
            for s in _subscriptions(warehouse):
                if kind == "subscription":
                    hit = _is_generic(s) and matches(s)
                else:
                    hit = isinstance(s.get(kind), Mapping) and matches(s[kind])
                if hit:
                    found.append(("Warehouse", str(name)))
                    break
        return found

    def find(
        function: str,
        collection: str,
        subscription_kind: str,
        matches: Callable[[Mapping[str, Any]], bool],
        origin: tuple[str, str] | None,
        url: str,
    ) -> tuple[Mapping[str, Any] | None, bool]:
        """The first matching artifact and whether any origin could provide it at all."""
        if origin is None:
            if warehouses is not None:
                candidates = candidates_from_warehouses(subscription_kind, matches)
            else:
                candidates = []
                for freight in freights:
                    if any(matches(a) for a in freight.get(collection) or []):
                        if _origin_of(freight) not in candidates:
                            candidates.append(_origin_of(freight))
            if len(candidates) > 1:
                raise ExpressionError(
                    reason=f"{function}(): {_AMBIGUOUS[collection].format(url=url)} (it could "
                    f'come from {_describe(candidates)}: pass warehouse("name") as the origin)'
                )
            if not candidates:
                return None, False
            origin = candidates[0]
        for freight in freights:
            if _origin_of(freight) != origin:
                continue
            for artifact in freight.get(collection) or []:
                if isinstance(artifact, Mapping) and matches(artifact):
                    return artifact, True
        return None, True

    def warehouse(name: Any) -> KargoObject:
        if not isinstance(name, str) or not name:
            raise ExpressionError(reason="warehouse(): name must be a non-empty string")
        return FreightOrigin({"kind": "Warehouse", "name": name})

    def commit_from(repo_url: Any, origin: Any = None) -> KargoObject | None:
        wanted = _git_key(_string_arg("commitFrom", repo_url, "first"))
        desired = None if origin is None else _origin_arg("commitFrom", origin)
        artifact, _ = find(
            "commitFrom",
            "commits",
            "git",
            lambda c: _git_key(str(c.get("repoURL", ""))) == wanted,
            desired,
            str(repo_url),
        )
        return None if artifact is None else kargo_object(GitCommit, artifact)

    def image_from(repo_url: Any, origin: Any = None) -> KargoObject | None:
        wanted = _image_key(_string_arg("imageFrom", repo_url, "first"))
        desired = None if origin is None else _origin_arg("imageFrom", origin)
        artifact, _ = find(
            "imageFrom",
            "images",
            "image",
            lambda i: _image_key(str(i.get("repoURL", ""))) == wanted,
            desired,
            str(repo_url),
        )
        return None if artifact is None else kargo_object(Image, artifact)

    def chart_from(repo_url: Any, *rest: Any) -> KargoObject | None:
        if len(rest) > 2:
            raise ExpressionError(
                reason=f"chartFrom() expects 1 to 3 arguments, got {len(rest) + 1}"
            )
        url = _string_arg("chartFrom", repo_url, "first")
        name = ""
        desired = None
        if rest and isinstance(rest[0], str):
            name = rest[0]
            if len(rest) == 2:
                desired = _origin_arg("chartFrom", rest[1])
        elif len(rest) == 1:
            desired = _origin_arg("chartFrom", rest[0])
        elif rest:
            raise ExpressionError(
                reason="chartFrom(): when using three arguments, the second must be the chart name"
            )
        wanted = _chart_key(url)
        wanted_full = _chart_key(f"{url.rstrip('/')}/{name}") if name else wanted

        def matches(chart: Mapping[str, Any]) -> bool:
            repo = _chart_key(str(chart.get("repoURL", "")))
            chart_name = str(chart.get("name") or "")
            if repo == wanted and chart_name == name:
                return True
            # OCI charts: Kargo keeps the chart name inside the repo URL; accept either spelling
            # ("oci://reg/chart" alone, or "oci://reg" plus name "chart").
            joined = _chart_key(f"{repo}/{chart_name}") if chart_name else repo
            return joined == wanted_full

        artifact, possible = find("chartFrom", "charts", "chart", matches, desired, url)
        if not possible:
            what = f'chart "{name}" from repo {url}' if name else f"chart from repo {url}"
            raise ExpressionError(reason=f"chartFrom(): {what} not found in referenced Freight")
        return None if artifact is None else kargo_object(Chart, artifact)

    def artifact_from(*args: Any) -> dict[str, Any] | None:
        # Kargo's artifactFrom(subscriptionName[, origin]): an artifact of a generic
        # subscription, with Go's field names (Kargo's expressionFriendlyArtifactReference has
        # no JSON tags); its metadata as a map.
        if not 1 <= len(args) <= 2:
            raise ExpressionError(reason=f"artifactFrom(): expected 1-2 arguments, got {len(args)}")
        name = _string_arg("artifactFrom", args[0], "first")
        desired = None
        if len(args) == 2:
            if not isinstance(args[1], Mapping) or "kind" not in args[1]:
                raise ExpressionError(
                    reason="artifactFrom(): second argument must be FreightOrigin "
                    '(from warehouse("name"))'
                )
            desired = _origin_arg("artifactFrom", args[1])
        if desired is None and warehouses is not None:
            candidates = candidates_from_warehouses("subscription", lambda s: s.get("name") == name)
            if len(candidates) > 1:
                raise ExpressionError(
                    reason=f"artifactFrom(): {_AMBIGUOUS['artifacts'].format(url=name)}"
                )
            if not candidates:
                return None
            desired = candidates[0]
        artifact, _ = find(
            "artifactFrom",
            "artifacts",
            "subscription",
            lambda a: a.get("subscriptionName") == name,
            desired,
            name,
        )
        return None if artifact is None else go_artifact(artifact)

    return {
        "artifactFrom": artifact_from,
        "warehouse": warehouse,
        "commitFrom": commit_from,
        "imageFrom": image_from,
        "chartFrom": chart_from,
    }
