"""A fake subscriber service for generic Warehouse subscriptions, over real HTTP on 127.0.0.1.

It answers what ``app/controller/warehouses/subscribers.py`` posts (the project and the
subscription) with the artifact references a test set for the subscription's name, newest
first, in Kargo's ``DiscoveryResult`` shape, and records every request it got (the body and
its ``Authorization`` header) so a test can see what the controller sent.

    async with running_fake_subscriber() as fake:
        fake.publish("bucket", "v1", metadata={"etag": "1"})
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

__all__ = ["FakeSubscriber", "running_fake_subscriber"]


@dataclass
class FakeSubscriber:
    artifact_type: str = "application/vnd.example.bucket-object"
    url: str = ""
    # Subscription name -> references, newest first.
    references: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    # Set: answer this HTTP status instead.
    failing: int | None = None

    def publish(self, subscription: str, version: str, **metadata: Any) -> None:
        """A new version of the subscription's artifact: it becomes the newest."""
        ref: dict[str, Any] = {"artifactType": self.artifact_type, "version": version}
        if metadata:
            ref["metadata"] = metadata
        self.references.setdefault(subscription, []).insert(0, ref)

    async def _discover(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append((body, request.headers.get("Authorization", "")))
        if self.failing is not None:
            return web.Response(status=self.failing, text="unavailable")
        name = body["subscription"]["name"]
        return web.json_response(
            {"name": name, "artifactReferences": self.references.get(name, [])}
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/discover", self._discover)
        return app


@asynccontextmanager
async def running_fake_subscriber() -> AsyncIterator[FakeSubscriber]:
    fake = FakeSubscriber()
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    try:
        fake.url = str(server.make_url("/discover"))
        yield fake
    finally:
        await server.close()
