"""Helm chart repositories: a classic repository's ``index.yaml``, or an OCI repository's tags.

A classic repository publishes every chart's versions in one ``index.yaml`` (Kargo's
``httpSelector`` reads ``entries.<name>[].version``). It can be large, so it is asked for
conditionally (``If-None-Match`` with the last ETag, ``If-Modified-Since`` with the last
``Last-Modified``) and parsed only when it changed. OCI repositories are registry repositories:
their tags are the versions (:class:`~app.controller.warehouses.registry.OCIClient`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiohttp
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from app.controller.warehouses.registry import (
    OCIClient,
    RateLimited,
    RegistryError,
    _retry_after,
    read_limited,
)

__all__ = ["ChartClient"]

_MAX_INDEX = 64 * 1024 * 1024


@dataclass
class _Index:
    etag: str
    modified: str
    entries: dict[str, list[str]]


@dataclass
class ChartClient:
    session: aiohttp.ClientSession
    oci: OCIClient
    requests: int = 0
    _indexes: dict[str, _Index] = field(default_factory=dict)

    async def versions(self, repo_url: str, chart: str) -> list[str]:
        """Every version the repository lists for the chart (unfiltered, unsorted)."""
        if repo_url.startswith("oci://"):
            return await self.oci.tags(repo_url)
        return (await self._index(repo_url)).get(chart, [])

    async def _index(self, repo_url: str) -> dict[str, list[str]]:
        url = f"{repo_url.rstrip('/')}/index.yaml"
        cached = self._indexes.get(url)
        headers = {}
        if cached is not None:
            if cached.etag:
                headers["If-None-Match"] = cached.etag
            if cached.modified:
                headers["If-Modified-Since"] = cached.modified
        self.requests += 1
        try:
            async with self.session.get(url, headers=headers) as response:
                if response.status == 304 and cached is not None:
                    return cached.entries
                if response.status == 429:
                    wait = _retry_after(response.headers.get("Retry-After"), self.oci.clock.now())
                    raise RateLimited(f"GET {url}: 429", wait)
                if response.status != 200:
                    raise RegistryError(
                        f"received unexpected HTTP {response.status} when querying helm chart "
                        f"repository index at {url!r}",
                        response.status,
                    )
                body = await read_limited(response, _MAX_INDEX)
                etag = response.headers.get("ETag", "")
                modified = response.headers.get("Last-Modified", "")
        except (aiohttp.ClientError, TimeoutError) as err:
            raise RegistryError(
                f"error querying repository index at {url!r}: {type(err).__name__}"
            ) from None
        if len(body) > _MAX_INDEX:
            raise RegistryError(f"repository index at {url!r} is larger than {_MAX_INDEX} bytes")
        try:
            document: Any = YAML(typ="safe", pure=True).load(body)
        except YAMLError as err:
            raise RegistryError(
                f"error unmarshaling repository index from {url!r}: {err}"
            ) from None
        entries: dict[str, list[str]] = {}
        for name, items in ((document or {}).get("entries") or {}).items():
            entries[str(name)] = [
                str(item.get("version"))
                for item in items or ()
                if isinstance(item, dict) and item.get("version") is not None
            ]
        self._indexes[url] = _Index(etag, modified, entries)
        return entries
