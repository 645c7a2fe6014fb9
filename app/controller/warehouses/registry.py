"""A small OCI distribution API client: tags, manifests, config blobs.

What Kargo gets from go-containerregistry, over aiohttp:

* **Tags** with pagination (``Link: <...>; rel="next"``) and conditional requests: a page we
  have seen is asked for with ``If-None-Match`` and a ``304`` costs no body.
* **Manifests**, single-platform or a multi-arch index (OCI or Docker list); for an index each
  platform's manifest is read too (the platform constraint and creation time need them).
  Manifests and blobs addressed by digest never change, so they are cached by digest.
* **Auth**: anonymous first; a ``401`` with a ``Bearer`` challenge is answered with a token from
  the challenge's realm (with Basic credentials when the credentials port has some for the
  repository, anonymous otherwise), cached until it expires; a ``Basic`` challenge is answered
  with the credentials. Every call names whose credentials it may use (:class:`RegistryAuth`:
  the project asking), and tokens, Basic answers and conditional-request caches are kept per
  project, so one project's credentials never answer for another's. Credentials and tokens
  never appear in messages or logs; a ``401`` with no credentials to give says "no credentials
  for <repoURL>".
* **Rate limits**: a ``429`` raises :class:`RateLimited` with the ``Retry-After`` delay, and the
  registry is left alone until then (later calls fail fast without a request).

Like go-containerregistry, a registry on localhost, a loopback or private address or ``.local``
is spoken to over plain HTTP; everything else over HTTPS.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urljoin

import aiohttp

from promoter.clock import SYSTEM, Clock
from promoter.expressions.regex import Regex
from promoter.ports.oci import plain_http_host
from promoter.warehouses.freight import split_registry
from promoter.warehouses.selection import SOURCE_LABELS, ImageFacts, PlatformFacts

__all__ = [
    "ANONYMOUS",
    "OCIClient",
    "RateLimited",
    "RegistryAuth",
    "RegistryError",
    "RepoRef",
    "parse_repo",
]

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
ACCEPT = ", ".join(INDEX_TYPES + MANIFEST_TYPES)
_CREATED_KEYS = ("org.opencontainers.image.created", "org.label-schema.build-date")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
# On the RE2 port: the Link header is the registry's text, and with Python's re a header of
# 8,000 "<" (aiohttp's line limit) took 0.23 s of the event loop per page, scanning from each.
_NEXT_LINK = Regex(r'<([^>]+)>\s*;\s*rel="?next"?', captures=True)
_MAX_BODY = 16 * 1024 * 1024

# ``repoURL -> (user, password)`` or None, for one project (see RegistryAuth).
Lookup = Callable[[str], Awaitable[tuple[str, str] | None]]


@dataclass(frozen=True, slots=True)
class RegistryAuth:
    """Whose credentials a call may use: ``lookup`` is asked on the registry's first challenge
    (with the repository as the caller wrote it: ``oci://`` for a chart), and what it answers,
    and the tokens got with it, are kept under ``key`` (the project) and never used under
    another key."""

    key: str = ""
    lookup: Lookup | None = None


ANONYMOUS = RegistryAuth()


class RegistryError(Exception):
    """The registry refused or failed; the message names the request, never a credential."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RateLimited(RegistryError):
    """429: try again after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, 429)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class RepoRef:
    """A repository: registry host (with port) and the repository path on it."""

    host: str
    path: str
    scheme: str
    # The repository as written (``oci://...`` for a chart): what credentials are looked up by.
    written: str = field(default="", compare=False)

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.host}/v2/{self.path}"


def parse_repo(repo_url: str) -> RepoRef:
    """``ghcr.io/acme/app``, ``localhost:5000/app``, ``nginx`` (Docker Hub), ``oci://...``."""
    repo = repo_url.strip().removeprefix("oci://").rstrip("/")
    host, path = split_registry(repo)
    host = host or "registry-1.docker.io"
    if host in ("docker.io", "index.docker.io"):
        host = "registry-1.docker.io"
    if host == "registry-1.docker.io" and "/" not in path:
        path = f"library/{path}"
    if not path:
        raise RegistryError(f"{repo_url!r} names no repository")
    scheme = "http" if plain_http_host(host) else "https"
    return RepoRef(host, path.lower(), scheme, repo_url.strip())


def _created(metadata: Mapping[str, str] | None) -> datetime | None:
    for key in _CREATED_KEYS:
        text = (metadata or {}).get(key)
        if text:
            try:
                return datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                continue
    return None


@dataclass
class _Token:
    value: str
    expires: float


@dataclass
class _Cached:
    etag: str
    value: Any


@dataclass
class OCIClient:
    """One client per process: the caches and the rate-limit gates are shared by Warehouses."""

    session: aiohttp.ClientSession
    page_size: int = 1000
    # Where the Retry-After waits are measured (the controller's clock, so tests can move it).
    clock: Clock = SYSTEM
    requests: int = 0
    # (auth key, host, scope, realm) -> token; (auth key, host) -> the Basic credentials.
    _tokens: dict[tuple[str, str, str, str], _Token] = field(default_factory=dict)
    _basic: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _by_digest: dict[str, Any] = field(default_factory=dict)
    _conditional: dict[tuple[str, str], _Cached] = field(default_factory=dict)
    _blocked_until: dict[str, float] = field(default_factory=dict)
    # cacheByTag subscriptions: (auth key, repoURL, tag) -> facts, never asked for again
    # (Kargo's imageCache: fast, and stale if someone re-points the tag: it is opt-in).
    _by_tag: dict[tuple[str, str, str], ImageFacts] = field(default_factory=dict)

    # ------------------------------------------------------------------ transport

    async def _get(
        self, repo: RepoRef, url: str, headers: Mapping[str, str], who: RegistryAuth
    ) -> tuple[int, Mapping[str, str], bytes]:
        """GET with the auth dance; returns status, headers and body (304 included)."""
        blocked = self._blocked_until.get(repo.host, 0.0) - self.clock.monotonic()
        if blocked > 0:
            raise RateLimited(f"{repo.host} asked us to wait; {blocked:.0f}s left", blocked)
        scope = f"repository:{repo.path}:pull"
        auth = self._auth_header(who, repo.host, scope)
        gave: list[bool] = []
        for attempt in range(2):
            sent = dict(headers)
            if auth:
                sent["Authorization"] = auth
            self.requests += 1
            try:
                async with self.session.get(url, headers=sent, allow_redirects=True) as response:
                    body = await read_limited(response, _MAX_BODY)
                    status, response_headers = response.status, response.headers
            except (aiohttp.ClientError, TimeoutError) as err:
                raise RegistryError(f"GET {url}: {type(err).__name__}") from None
            if status == 401 and attempt == 0:
                challenge = response_headers.get("WWW-Authenticate", "")
                auth = await self._answer(repo, challenge, scope, who, gave)
                if auth:
                    continue
            if status == 429:
                delay = _retry_after(response_headers.get("Retry-After"), self.clock.now())
                self._blocked_until[repo.host] = self.clock.monotonic() + delay
                raise RateLimited(f"GET {url}: 429 Too Many Requests", delay)
            if len(body) > _MAX_BODY:
                raise RegistryError(f"GET {url}: response larger than {_MAX_BODY} bytes")
            if status == 401 and not any(gave):
                raise RegistryError(
                    f"no credentials for {repo.written or repo.host + '/' + repo.path}: "
                    f"GET {url}: 401 Unauthorized",
                    401,
                )
            return status, response_headers, body
        raise RegistryError(f"GET {url}: 401 Unauthorized", 401)

    def _auth_header(self, who: RegistryAuth, host: str, scope: str) -> str | None:
        now = self.clock.monotonic()
        for (key, realm_host, token_scope, _), token in list(self._tokens.items()):
            if (
                key == who.key
                and realm_host == host
                and token_scope == scope
                and token.expires > now
            ):
                return f"Bearer {token.value}"
        return _basic_header(self._basic.get((who.key, host)))

    async def _credentials(self, repo: RepoRef, who: RegistryAuth) -> tuple[str, str] | None:
        if who.lookup is None:
            return None
        written = repo.written or f"{repo.host}/{repo.path}"
        try:
            return await who.lookup(written)
        except RegistryError:
            raise
        except Exception as err:  # the source's own words (CredentialsError), never a value
            raise RegistryError(f"credentials for {written}: {err}") from None

    async def _answer(
        self,
        repo: RepoRef,
        challenge: str,
        scope: str,
        who: RegistryAuth,
        gave: list[bool] | None = None,
    ) -> str | None:
        scheme, _, params_text = challenge.partition(" ")
        params = dict(_CHALLENGE_PARAM.findall(params_text))
        creds = await self._credentials(repo, who)
        if gave is not None:
            gave.append(creds is not None)
        if scheme.lower() == "basic":
            if creds is None:
                return None
            self._basic[(who.key, repo.host)] = creds
            return _basic_header(creds)
        if scheme.lower() != "bearer" or "realm" not in params:
            return None
        query = {"service": params.get("service", ""), "scope": params.get("scope") or scope}
        url = f"{params['realm']}?{urlencode({k: v for k, v in query.items() if v})}"
        headers: dict[str, str] = {}
        if creds is not None:
            headers["Authorization"] = _basic(creds)
        self.requests += 1
        try:
            async with self.session.get(url, headers=headers) as response:
                if response.status != 200:
                    prefix = (
                        f"no credentials for {repo.written or repo.host + '/' + repo.path}: "
                        if creds is None
                        else ""
                    )
                    raise RegistryError(
                        f"{prefix}token request to {params['realm']} for {scope}: "
                        f"{response.status}",
                        response.status,
                    )
                data = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            raise RegistryError(
                f"token request to {params['realm']}: {type(err).__name__}"
            ) from None
        value = str(data.get("token") or data.get("access_token") or "")
        if not value:
            raise RegistryError(f"token request to {params['realm']}: no token in the answer")
        expires_in = float(data.get("expires_in") or 60)
        self._tokens[(who.key, repo.host, scope, params["realm"])] = _Token(
            value, self.clock.monotonic() + max(expires_in - 10, 1)
        )
        return f"Bearer {value}"

    async def _get_json(
        self, repo: RepoRef, url: str, who: RegistryAuth, accept: str = "application/json"
    ) -> tuple[Any, Mapping[str, str], bytes]:
        """A JSON document, conditionally: a cached ETag is sent as If-None-Match."""
        headers = {"Accept": accept}
        cached = self._conditional.get((who.key, url))
        if cached is not None:
            headers["If-None-Match"] = cached.etag
        status, response_headers, body = await self._get(repo, url, headers, who)
        if status == 304 and cached is not None:
            value, saved_headers, raw = cached.value
            return value, saved_headers, raw
        if status == 404:
            raise RegistryError(f"GET {url}: 404 Not Found", 404)
        if status != 200:
            raise RegistryError(f"GET {url}: {status}", status)
        try:
            value = json.loads(body)
        except ValueError:
            raise RegistryError(f"GET {url}: not JSON") from None
        etag = response_headers.get("ETag")
        kept = {
            k: v
            for k, v in response_headers.items()
            if k in ("Link", "Docker-Content-Digest", "Content-Type")
        }
        if etag:
            self._conditional[(who.key, url)] = _Cached(etag, (value, kept, body))
        return value, kept, body

    # ------------------------------------------------------------------ API

    async def tags(self, repo_url: str, auth: RegistryAuth = ANONYMOUS) -> list[str]:
        """Every tag of the repository, following ``Link`` pagination."""
        repo = parse_repo(repo_url)
        url: str | None = f"{repo.base}/tags/list?n={self.page_size}"
        tags: list[str] = []
        pages = 0
        while url and pages < 10_000:
            pages += 1
            try:
                data, headers, _ = await self._get_json(repo, url, auth)
            except RegistryError as err:
                if err.status == 404 and not tags:
                    return []  # a repository nothing was pushed to yet
                raise
            tags.extend(str(t) for t in data.get("tags") or ())
            link = headers.get("Link")
            match = next(_NEXT_LINK.finditer(link), None) if link else None
            url = urljoin(url, match[1] or "") if match else None
        return tags

    async def manifest(
        self, repo_url: str, reference: str, auth: RegistryAuth = ANONYMOUS
    ) -> tuple[str, str, Any]:
        """(media type, digest, document) of a tag or digest."""
        repo = parse_repo(repo_url)
        if reference.startswith("sha256:") and reference in self._by_digest:
            media, document = self._by_digest[reference]
            return media, reference, document
        url = f"{repo.base}/manifests/{reference}"
        document, headers, body = await self._get_json(repo, url, auth, ACCEPT)
        digest = headers.get("Docker-Content-Digest") or (
            "sha256:" + hashlib.sha256(body).hexdigest()
        )
        media = str(document.get("mediaType") or headers.get("Content-Type") or "").split(";")[0]
        if not media:
            media = INDEX_TYPES[0] if "manifests" in document else MANIFEST_TYPES[0]
        self._by_digest[digest] = (media, document)
        return media, digest, document

    async def blob_json(self, repo_url: str, digest: str, auth: RegistryAuth = ANONYMOUS) -> Any:
        if digest in self._by_digest:
            return self._by_digest[digest]
        repo = parse_repo(repo_url)
        status, _, body = await self._get(repo, f"{repo.base}/blobs/{digest}", {}, auth)
        if status != 200:
            raise RegistryError(f"GET blob {digest} of {repo.host}/{repo.path}: {status}", status)
        try:
            value = json.loads(body)
        except ValueError:
            raise RegistryError(f"blob {digest} of {repo.host}/{repo.path} is not JSON") from None
        self._by_digest[digest] = value
        return value

    async def _single(
        self, repo_url: str, digest: str, document: Any, auth: RegistryAuth
    ) -> tuple[datetime | None, dict[str, str]]:
        """Creation time of one image manifest (``getCreationTime``) and its annotations, with
        the image config's OCI source labels added where the manifest lacks them
        (:data:`~promoter.warehouses.selection.SOURCE_LABELS`)."""
        annotations = {str(k): str(v) for k, v in (document.get("annotations") or {}).items()}
        created = _created(annotations)
        config_digest = (document.get("config") or {}).get("digest")
        if config_digest and any(key not in annotations for key in SOURCE_LABELS):
            # One blob read per digest, ever (blob_json keeps it): a config never changes.
            config = await self.blob_json(repo_url, str(config_digest), auth)
            labels = (config.get("config") or {}).get("Labels") or {}
            for key in SOURCE_LABELS:
                if key not in annotations and labels.get(key):
                    annotations[key] = str(labels[key])
        if created is None:
            if config_digest:
                config = await self.blob_json(repo_url, str(config_digest), auth)
                config_created = None
                if config.get("created"):
                    try:
                        config_created = datetime.fromisoformat(
                            str(config["created"]).replace("Z", "+00:00")
                        )
                    except ValueError:
                        config_created = None
                label_created = _created((config.get("config") or {}).get("Labels"))
                created = config_created
                if label_created is not None and (created is None or label_created > created):
                    created = label_created
        return created, annotations

    async def image(
        self, repo_url: str, tag: str, *, by_tag: bool = False, auth: RegistryAuth = ANONYMOUS
    ) -> ImageFacts | None:
        """Kargo's ``getImageByTag`` facts: digest, created-at, annotations, platforms.

        None when the tag does not exist (a Digest subscription's tag not pushed yet). With
        ``by_tag`` (the subscription's ``cacheByTag``) a tag seen once costs no more requests.
        """
        if by_tag and (auth.key, repo_url, tag) in self._by_tag:
            return self._by_tag[(auth.key, repo_url, tag)]
        found = await self._image(repo_url, tag, auth)
        if by_tag and found is not None:
            self._by_tag[(auth.key, repo_url, tag)] = found
        return found

    async def _image(self, repo_url: str, tag: str, auth: RegistryAuth) -> ImageFacts | None:
        try:
            media, digest, document = await self.manifest(repo_url, tag, auth)
        except RegistryError as err:
            if err.status == 404:
                return None
            raise
        if media in INDEX_TYPES or "manifests" in document:
            platforms: list[PlatformFacts] = []
            newest: datetime | None = None
            for entry in document.get("manifests") or ():
                platform = entry.get("platform") or {}
                os_, arch = platform.get("os") or "", platform.get("architecture") or ""
                if not os_ or not arch or "unknown" in (os_, arch):
                    continue  # attestations and other non-images
                entry_annotations = {
                    str(k): str(v) for k, v in (entry.get("annotations") or {}).items()
                }
                created = _created(entry_annotations)
                if created is None:
                    _, child_digest, child = await self.manifest(
                        repo_url, str(entry["digest"]), auth
                    )
                    created, _ = await self._single(repo_url, child_digest, child, auth)
                if created is not None and (newest is None or created > newest):
                    newest = created
                platforms.append(
                    PlatformFacts(os_, arch, str(platform.get("variant") or ""), entry_annotations)
                )
            if not platforms:
                raise RegistryError(
                    f"{repo_url}:{tag}: empty V2 manifest list or OCI index is not supported"
                )
            annotations = {str(k): str(v) for k, v in (document.get("annotations") or {}).items()}
            return ImageFacts(
                tag, digest, _created(annotations) or newest, annotations, tuple(platforms)
            )
        created, annotations = await self._single(repo_url, digest, document, auth)
        return ImageFacts(tag, digest, created, annotations)


async def read_limited(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, or its first ``limit + 1`` bytes when it is longer (the caller refuses it).

    ``StreamReader.read(n)`` returns what has arrived so far, not ``n`` bytes: a chunked answer
    (a registry's tags/list of thousands of tags) would be cut short and fail to parse.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)


def _basic(creds: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()


def _basic_header(creds: tuple[str, str] | None) -> str | None:
    return None if creds is None else _basic(creds)


def _retry_after(value: str | None, now: datetime) -> float:
    if not value:
        return 60.0
    try:
        return max(float(value), 1.0)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 60.0
    if moment.tzinfo is None:  # "-0000": a time in UTC whose sender did not say where it was
        moment = moment.replace(tzinfo=UTC)
    return max((moment - now).total_seconds(), 1.0)


async def gather_limited(limit: int, calls: list[Any]) -> list[Any]:
    """Run coroutines with at most ``limit`` at a time, results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Any) -> Any:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))
