"""The ``oci-download``/``oci-push`` port (:class:`promoter.ports.oci.OCIRegistry`) over the
Warehouses' OCI client.

:class:`app.controller.warehouses.registry.OCIClient` already speaks the distribution API's
auth (anonymous, Bearer challenges answered at the realm with the operator's credentials,
Basic), rate limits and plain HTTP for loopback and private registries; this adds what pushing
needs on top of it, with the same token cache: HEAD, blob uploads (a cross-repository mount
when both repositories are on one registry, else a streamed copy) and manifest PUTs, asking for
``pull,push`` scope where it writes. ``insecureSkipTLSVerify`` turns certificate checks off for
that step's requests only.

Credentials come from the credentials port for the Promotion's project (its Secrets, the global
credentials namespace, the GitHub App for ghcr.io, the operator's Docker ``config.json``), never
from manifests, and never appear in messages. Tokens got with one project's credentials are
kept for that project only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from app.controller.warehouses.registry import (
    ACCEPT,
    OCIClient,
    RateLimited,
    RegistryAuth,
    RegistryError,
    RepoRef,
    parse_repo,
)
from promoter.errors import StepError
from promoter.ports.credentials import NO_CREDENTIALS, Credentials, CredentialsError, CredentialType
from promoter.ports.oci import Manifest

_MANIFEST_LIMIT = 4 * 1024 * 1024


@dataclass
class _Client(OCIClient):
    """The Warehouses' client, plus writes; one per step run (its token cache with it)."""

    insecure: bool = False

    async def send(
        self,
        method: str,
        repo: RepoRef,
        url: str,
        who: RegistryAuth,
        *,
        push: bool = False,
        headers: Mapping[str, str] | None = None,
        data: Any = None,
        limit: int = _MANIFEST_LIMIT,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """A request with OCIClient's auth dance. A streamed body cannot be sent twice: send
        one only once a request without a body got the token (copy_blob's POST does)."""
        scope = f"repository:{repo.path}:pull,push" if push else f"repository:{repo.path}:pull"
        auth = self._auth_header(who, repo.host, scope)
        gave: list[bool] = []
        for attempt in range(2):
            sent = dict(headers or {})
            if auth:
                sent["Authorization"] = auth
            self.requests += 1
            try:
                async with self.session.request(
                    method,
                    url,
                    headers=sent,
                    data=data,
                    ssl=False if self.insecure else True,
                    allow_redirects=method in ("GET", "HEAD"),
                ) as response:
                    status, response_headers = response.status, response.headers
                    body = await response.content.read(limit + 1)
            except (aiohttp.ClientError, TimeoutError) as err:
                raise RegistryError(f"{method} {url}: {type(err).__name__}") from None
            if status == 401 and attempt == 0 and isinstance(data, bytes | None):
                challenge = response_headers.get("WWW-Authenticate", "")
                auth = await self._answer(repo, challenge, scope, who, gave)
                if auth:
                    continue
            if status == 429:
                raise RateLimited(f"{method} {url}: 429 Too Many Requests", 60.0)
            if status == 401 and not any(gave):
                raise RegistryError(
                    f"no credentials for {repo.written or repo.host + '/' + repo.path}: "
                    f"{method} {url}: 401 Unauthorized",
                    401,
                )
            if len(body) > limit:
                raise RegistryError(f"{method} {url}: response larger than {limit} bytes")
            return status, response_headers, body
        raise RegistryError(f"{method} {url}: 401 Unauthorized", 401)


def _step_error(err: RegistryError) -> StepError:
    # A missing artifact or a refusal will not pass by retrying; the rest may.
    terminal = err.status in (400, 401, 403, 404)
    return StepError(str(err), terminal=terminal, retry_after=getattr(err, "retry_after", None))


class Registries:
    """:class:`promoter.ports.oci.OCIRegistry` over the credentials port. One session and token
    cache per TLS mode, opened on first use; :meth:`close` ends them."""

    def __init__(self, credentials: Credentials = NO_CREDENTIALS) -> None:
        self.credentials = credentials
        self._clients: dict[bool, _Client] = {}

    def _who(self, project: str) -> RegistryAuth:
        """The project's credentials for whatever repository a call names."""

        async def lookup(written: str) -> tuple[str, str] | None:
            kind = CredentialType.of_oci_reference(written)
            try:
                found = await self.credentials.get(project, kind, written)
            except CredentialsError as err:
                raise RegistryError(str(err)) from None
            return (found.username, found.password) if found else None

        return RegistryAuth(project, lookup)

    @asynccontextmanager
    async def _client(self, insecure: bool) -> AsyncIterator[_Client]:
        client = self._clients.get(insecure)
        if client is None or client.session.closed:
            timeout = aiohttp.ClientTimeout(total=300, sock_read=60)
            session = aiohttp.ClientSession(timeout=timeout, trust_env=False)
            client = self._clients[insecure] = _Client(session, insecure=insecure)
        yield client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.session.close()
        self._clients.clear()

    async def manifest(
        self, repository: str, reference: str, *, insecure: bool, project: str
    ) -> Manifest:
        repo = parse_repo(repository)
        try:
            async with self._client(insecure) as client:
                status, headers, body = await client.send(
                    "GET",
                    repo,
                    f"{repo.base}/manifests/{reference}",
                    self._who(project),
                    headers={"Accept": ACCEPT},
                )
        except RegistryError as err:
            raise _step_error(err) from None
        if status != 200:
            raise _step_error(
                RegistryError(f"GET {repo.base}/manifests/{reference}: {status}", status)
            )
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        media = str(headers.get("Content-Type") or "").split(";")[0]
        try:
            media = str(json.loads(body).get("mediaType") or media)
        except (ValueError, AttributeError):
            raise StepError(f"{repository}:{reference}: the manifest is not JSON") from None
        return Manifest(media, digest, body)

    async def blob(
        self, repository: str, digest: str, limit: int, *, insecure: bool, project: str
    ) -> bytes:
        repo = parse_repo(repository)
        url = f"{repo.base}/blobs/{digest}"
        try:
            async with self._client(insecure) as client:
                status, _, body = await client.send(
                    "GET", repo, url, self._who(project), limit=limit
                )
        except RegistryError as err:
            raise _step_error(err) from None
        if status != 200:
            raise _step_error(RegistryError(f"GET {url}: {status}", status))
        return body

    async def copy_blob(
        self, source: str, destination: str, digest: str, *, insecure: bool, project: str
    ) -> None:
        src, dst = parse_repo(source), parse_repo(destination)
        who = self._who(project)
        try:
            async with self._client(insecure) as client:
                status, _, _ = await client.send(
                    "HEAD", dst, f"{dst.base}/blobs/{digest}", who, push=True
                )
                if status == 200:
                    return
                query = {"mount": digest, "from": src.path} if src.host == dst.host else {}
                uploads = f"{dst.base}/blobs/uploads/" + (f"?{urlencode(query)}" if query else "")
                status, headers, _ = await client.send("POST", dst, uploads, who, push=True)
                if status == 201:
                    return  # mounted from the source repository
                if status != 202 or "Location" not in headers:
                    raise RegistryError(f"POST {uploads}: {status}", status)
                location = _absolute(dst, headers["Location"])
                separator = "&" if "?" in location else "?"
                # The source's token first (a HEAD answers its challenge), then the stream.
                await client.send("HEAD", src, f"{src.base}/blobs/{digest}", who)
                async with client.session.get(
                    f"{src.base}/blobs/{digest}",
                    headers=_auth(client, src, who, push=False),
                    ssl=False if insecure else True,
                ) as source_blob:
                    if source_blob.status != 200:
                        raise RegistryError(
                            f"GET {src.base}/blobs/{digest}: {source_blob.status}",
                            source_blob.status,
                        )
                    status, _, _ = await client.send(
                        "PUT",
                        dst,
                        f"{location}{separator}{urlencode({'digest': digest})}",
                        who,
                        push=True,
                        headers={"Content-Type": "application/octet-stream"},
                        data=source_blob.content,
                    )
                if status != 201:
                    raise RegistryError(f"uploading {digest} to {destination}: {status}", status)
        except RegistryError as err:
            raise _step_error(err) from None

    async def put_manifest(
        self, repository: str, reference: str, manifest: Manifest, *, insecure: bool, project: str
    ) -> None:
        repo = parse_repo(repository)
        url = f"{repo.base}/manifests/{reference}"
        try:
            async with self._client(insecure) as client:
                status, _, body = await client.send(
                    "PUT",
                    repo,
                    url,
                    self._who(project),
                    push=True,
                    headers={"Content-Type": manifest.media_type},
                    data=manifest.body,
                )
        except RegistryError as err:
            raise _step_error(err) from None
        if status != 201:
            detail = _registry_error_code(body)
            raise _step_error(RegistryError(f"PUT {url}: {status}{detail}", status))


def _absolute(repo: RepoRef, location: str) -> str:
    return f"{repo.scheme}://{repo.host}{location}" if location.startswith("/") else location


def _auth(client: _Client, repo: RepoRef, who: RegistryAuth, *, push: bool) -> dict[str, str]:
    scope = f"repository:{repo.path}:pull,push" if push else f"repository:{repo.path}:pull"
    header = client._auth_header(who, repo.host, scope)
    return {"Authorization": header} if header else {}


def _registry_error_code(body: bytes) -> str:
    """The distribution API's error codes (MANIFEST_BLOB_UNKNOWN...), never its free text."""
    try:
        errors = json.loads(body).get("errors") or []
    except (ValueError, AttributeError):
        return ""
    codes = [str(e.get("code")) for e in errors if isinstance(e, Mapping) and e.get("code")]
    return f" ({', '.join(codes)})" if codes else ""
