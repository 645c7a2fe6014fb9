"""Subscribers for generic subscriptions, reached over HTTP: one service per subscription type.

Kargo compiles its subscribers into the controller; a Python controller cannot take a Go
subscriber, so the operator names a service per type (``LONGSHOREMAN_SUBSCRIBERS``, such as
``s3=http://s3-subscriber.tools:8080/discover``), and discovery posts to it, once per
subscription and discovery::

    POST <url>
    {"project": "acme", "subscription": {"name": "my-sub", "subscriptionType": "s3",
     "config": {...}, "discoveryLimit": 20}}

and takes Kargo's ``DiscoveryResult`` back: ``{"artifactReferences": [{"artifactType": ...,
"version": "...", "metadata": {...}}, ...]}``, newest first (what it may contain is checked by
:func:`promoter.warehouses.generic.discovery_result`). With ``LONGSHOREMAN_SUBSCRIBER_TOKEN``
set, the request carries it as a bearer token, so the service can tell the controller from
anyone else. A service that does not answer 2xx with that JSON fails the discovery, and the
Warehouse says so in its conditions; its reply never reaches a log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from promoter.warehouses.generic import Subscriber, SubscriberError, Subscribers
from promoter.warehouses.spec import GenericSubscription

__all__ = ["HTTPSubscriber", "http_subscribers"]

# A subscriber's reply is a list of at most 100 references: a few MiB is plenty.
_MAX_REPLY_BYTES = 4 * 1024 * 1024


class HTTPSubscriber:
    """One subscription type's subscriber service."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None = None) -> None:
        self.session = session
        self.url = url
        self._token = token

    async def discover(
        self, project: str, subscription: GenericSubscription
    ) -> Sequence[Mapping[str, Any]]:
        body = {
            "project": project,
            "subscription": {
                "name": subscription.name,
                "subscriptionType": subscription.subscription_type,
                "config": dict(subscription.config),
                "discoveryLimit": subscription.discovery_limit,
            },
        }
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        where = f"subscriber for {subscription.subscription_type!r}"
        try:
            async with self.session.post(self.url, json=body, headers=headers) as response:
                raw = await response.content.read(_MAX_REPLY_BYTES + 1)
                if response.status // 100 != 2:
                    raise SubscriberError(f"{where} answered HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as err:
            raise SubscriberError(f"{where} could not be reached: {type(err).__name__}") from None
        if len(raw) > _MAX_REPLY_BYTES:
            raise SubscriberError(f"{where} answered more than {_MAX_REPLY_BYTES} bytes")
        try:
            reply: Any = json.loads(raw)
        except ValueError:
            raise SubscriberError(f"{where} did not answer JSON") from None
        if not isinstance(reply, Mapping):
            raise SubscriberError(f"{where} did not answer a JSON object")
        references = reply.get("artifactReferences")
        if references is None:
            return []
        if not isinstance(references, list):
            raise SubscriberError(f"{where}: artifactReferences must be a list")
        return references


def http_subscribers(
    session: aiohttp.ClientSession, urls: Mapping[str, str], token: str | None = None
) -> Subscribers:
    """The registry of one :class:`HTTPSubscriber` per configured type."""
    by_type: dict[str, Subscriber] = {
        kind: HTTPSubscriber(session, url, token) for kind, url in urls.items()
    }
    return Subscribers(by_type)
