"""Discovery for Kargo's generic subscriptions: the subscriber port and the result it makes.

A generic subscription (``{name: my-sub, s3: {config: {...}}}``, see
:mod:`promoter.warehouses.spec`) is discovered by whatever subscriber is registered for its
type. Kargo keeps a registry of subscribers compiled into its controller
(``pkg/subscription/registry.go``) and registers only git, image and chart there, so a generic
subscription discovers only where an extension registered one; with none, discovery fails with
the registry's "no matching registration found". Here the registry is :class:`Subscribers`,
filled by the wiring from the operator's settings (``app/controller/warehouses/subscribers.py``
calls an HTTP service per type).

What a subscriber returns becomes Kargo's ``DiscoveryResult`` (``status.discoveredArtifacts
.results[]``: the subscription's ``name`` and its ``artifactReferences``, newest first) by
:func:`discovery_result`, which trusts the subscriber with nothing it can check: each
reference needs a ``version``, ``metadata`` is an object, ``subscriptionName`` is the
subscription's own, and at most ``discoveryLimit`` are kept. The newest reference of each
result is what Freight carries in ``artifacts[]``
(:func:`promoter.warehouses.freight.build_freight`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from promoter.warehouses.spec import GenericSubscription

__all__ = [
    "NO_SUBSCRIBERS",
    "Subscriber",
    "SubscriberError",
    "Subscribers",
    "discovery_result",
]


class SubscriberError(Exception):
    """A generic subscription could not be discovered (a discovery failure of its Warehouse)."""


class Subscriber(Protocol):
    """Discovers one generic subscription's artifacts (Kargo's ``Subscriber.DiscoverArtifacts``)."""

    async def discover(
        self, project: str, subscription: GenericSubscription
    ) -> Sequence[Mapping[str, Any]]:
        """The artifact references found, newest first (Kargo's ``ArtifactReference`` JSON:
        ``artifactType``, ``version``, ``metadata``). Raises :class:`SubscriberError`."""
        ...


class Subscribers:
    """The subscribers by subscription type (Kargo's ``SubscriberRegistry``)."""

    def __init__(self, by_type: Mapping[str, Subscriber] | None = None) -> None:
        self._by_type = dict(by_type or {})

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_type))

    def get(self, subscription_type: str) -> Subscriber:
        found = self._by_type.get(subscription_type)
        if found is None:
            # Kargo's words (warehouses.go discoverArtifacts, component.RegistrationNotFoundError),
            # with the type named so the operator knows what to configure.
            raise SubscriberError(
                "error finding subscriber for subscription: no matching registration found "
                f"(no subscriber for subscription type {subscription_type!r})"
            )
        return found


NO_SUBSCRIBERS = Subscribers()


def discovery_result(
    subscription: GenericSubscription, references: Sequence[Any]
) -> dict[str, Any]:
    """The ``results[]`` entry of ``subscription`` from what its subscriber returned."""
    where = (
        f"subscriber for {subscription.subscription_type!r} (subscription {subscription.name!r})"
    )
    if not isinstance(references, Sequence) or isinstance(references, str | bytes):
        raise SubscriberError(f"{where}: artifactReferences must be a list")
    kept: list[dict[str, Any]] = []
    for index, ref in enumerate(references[: subscription.discovery_limit]):
        if not isinstance(ref, Mapping):
            raise SubscriberError(f"{where}: artifactReferences[{index}] must be an object")
        version = ref.get("version")
        if not isinstance(version, str) or not version:
            raise SubscriberError(f"{where}: artifactReferences[{index}].version is required")
        artifact_type = ref.get("artifactType")
        if artifact_type is not None and not isinstance(artifact_type, str):
            raise SubscriberError(
                f"{where}: artifactReferences[{index}].artifactType must be a string"
            )
        metadata = ref.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise SubscriberError(
                f"{where}: artifactReferences[{index}].metadata must be an object"
            )
        out: dict[str, Any] = {}
        if artifact_type:
            out["artifactType"] = artifact_type
        out["subscriptionName"] = subscription.name
        out["version"] = version
        if metadata is not None:
            out["metadata"] = dict(metadata)
        kept.append(out)
    return {"name": subscription.name, "artifactReferences": kept}
