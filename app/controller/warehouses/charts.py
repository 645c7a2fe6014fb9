"""Helm chart repositories: a classic repository's ``index.yaml``, or an OCI repository's tags.

A classic repository publishes every chart's versions in one ``index.yaml`` (Kargo's
``httpSelector`` reads ``entries.<name>[].version``). It can be large, so it is asked for
conditionally (``If-None-Match`` with the last ETag, ``If-Modified-Since`` with the last
``Last-Modified``) and parsed only when it changed. OCI repositories are registry repositories:
their tags are the versions (:class:`~app.controller.warehouses.registry.OCIClient`).

A private classic repository answers ``401``: the index is asked for again with the project's
``helm`` credentials as Basic auth (what Helm does with a repository's username and password),
and without any the message says "no credentials for <repoURL>".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from app.controller.warehouses.registry import (
    ANONYMOUS,
    OCIClient,
    RateLimited,
    RegistryAuth,
    RegistryError,
    _basic,
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

    async def versions(
        self, repo_url: str, chart: str, auth: RegistryAuth = ANONYMOUS
    ) -> list[str]:
        """Every version the repository lists for the chart (unfiltered, unsorted)."""
        if repo_url.startswith("oci://"):
            return await self.oci.tags(repo_url, auth)
        return (await self._index(repo_url, auth)).get(chart, [])

    async def _index(self, repo_url: str, auth: RegistryAuth) -> dict[str, list[str]]:
        url = f"{repo_url.rstrip('/')}/index.yaml"
        # Kept per project: a 304 must not hand one project the index another could read.
        cached = self._indexes.get(f"{auth.key}\0{url}")
        headers: dict[str, str] = {}
        if cached is not None:
            if cached.etag:
                headers["If-None-Match"] = cached.etag
            if cached.modified:
                headers["If-Modified-Since"] = cached.modified
        gave = False
        for attempt in range(2):
            self.requests += 1
            status, answer = await self._get(url, headers, cached)
            if status == 401 and attempt == 0 and auth.lookup is not None:
                creds = await auth.lookup(repo_url)
                if creds is not None:
                    gave = True
                    headers["Authorization"] = _basic(creds)
                    continue
            break
        if status == 401 and not gave:
            raise RegistryError(
                f"no credentials for {repo_url}: received unexpected HTTP 401 when querying "
                f"helm chart repository index at {url!r}",
                401,
            )
        if isinstance(answer, dict):
            return answer
        if status != 200 or answer is None:
            raise RegistryError(
                f"received unexpected HTTP {status} when querying helm chart "
                f"repository index at {url!r}",
                status,
            )
        body, etag, modified = answer
        # A large index.yaml takes seconds of YAML parsing: off the event loop.
        return await asyncio.to_thread(self._parse, url, f"{auth.key}\0{url}", body, etag, modified)

    async def _get(
        self, url: str, headers: dict[str, str], cached: _Index | None
    ) -> tuple[int, dict[str, list[str]] | tuple[bytes, str, str] | None]:
        """The status and either the cached entries (304) or (body, ETag, Last-Modified)."""
        try:
            async with self.session.get(url, headers=headers) as response:
                if response.status == 304 and cached is not None:
                    return 304, cached.entries
                if response.status == 429:
                    wait = _retry_after(response.headers.get("Retry-After"), self.oci.clock.now())
                    raise RateLimited(f"GET {url}: 429", wait)
                if response.status != 200:
                    return response.status, None
                body = await read_limited(response, _MAX_INDEX)
                etag = response.headers.get("ETag", "")
                modified = response.headers.get("Last-Modified", "")
                return 200, (body, etag, modified)
        except (aiohttp.ClientError, TimeoutError) as err:
            raise RegistryError(
                f"error querying repository index at {url!r}: {type(err).__name__}"
            ) from None

    def _parse(
        self, url: str, key: str, body: bytes, etag: str, modified: str
    ) -> dict[str, list[str]]:
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
        self._indexes[key] = _Index(etag, modified, entries)
        return entries
