"""Talking to GitHub as an App: JWTs, installation tokens, ETags, rate limits and retries.

One :class:`GitHubClient` per process holds the aiohttp session, the App's identity, a cache of
installation tokens (refreshed five minutes before they expire) and one ETag cache per
installation, so a poll of an unchanged pull request costs a ``304`` that GitHub does not count
against the rate limit. Requests go through gidgethub's ``GitHubAPI`` with two hooks filled in:

- the primary rate limit (``x-ratelimit-remaining: 0``): wait for ``x-ratelimit-reset`` when that
  is soon, otherwise raise :class:`RateLimited` so a step reports Running and comes back later;
- the secondary rate limit or ``429``: honour ``retry-after`` (GitHub's advice otherwise: wait at
  least a minute, then back off exponentially), with the same short/long split;
- ``5xx`` and connection errors: retry a bounded number of times with jittered backoff.

What to wait is decided by pure functions (:func:`retry_delay`); :func:`step_error` translates
whatever is left into the engine's error kinds, so no HTTP exception ever reaches the engine.
Tokens are sent only in ``Authorization`` headers and never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
import gidgethub
import gidgethub.aiohttp
import gidgethub.apps
from cachetools import LRUCache, TLRUCache, TTLCache

from handlers.settings import GitHubSettings
from promoter.clock import SYSTEM, Clock
from promoter.errors import StepError
from promoter.ports.telemetry import NO_TELEMETRY, Telemetry

log = logging.getLogger(__name__)

REQUESTER = "longshoreman"
# Installation tokens live an hour; refresh this long before GitHub's expires_at.
TOKEN_REFRESH_MARGIN = 300.0
# Which installation serves a repository changes only when the App is re-installed.
INSTALLATION_TTL = 3600.0
ETAG_ENTRIES_PER_INSTALLATION = 512


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long one request may wait in place before giving the wait back to its caller.

    A wait longer than ``max_wait`` is not slept in the request (it would hold a reconciler
    worker); it surfaces as :class:`RateLimited` with the delay, and steps report Running.
    """

    attempts: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_wait: float = 10.0
    # GitHub: without retry-after on a secondary limit, "wait for at least one minute".
    secondary_default: float = 60.0


class RateLimited(Exception):
    """GitHub asked us to wait longer than a request may wait in place."""

    def __init__(self, retry_after: float, message: str) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GitHubUnreachable(Exception):
    """The connection to the API failed after the bounded retries."""


# ---- pure decisions --------------------------------------------------------------------------


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.title())
    return value


def retry_delay(
    status: int,
    headers: Mapping[str, str],
    message: str,
    attempt: int,
    policy: RetryPolicy,
    now: float,
) -> float | None:
    """Seconds to wait before trying a failed request again, or None to give up.

    Follows GitHub's "Best practices for using the REST API": ``retry-after`` first, then
    ``x-ratelimit-remaining: 0`` until ``x-ratelimit-reset``, then (secondary limits) a minute
    doubling; ``5xx`` gets a short exponential backoff. ``attempt`` counts from 1.
    """
    if attempt >= policy.attempts:
        return None
    if status in (403, 429):
        retry_after = _header(headers, "retry-after")
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                return max(0.0, float(retry_after))
        if _header(headers, "x-ratelimit-remaining") == "0":
            reset = _header(headers, "x-ratelimit-reset")
            with contextlib.suppress(TypeError, ValueError):
                # GitHub's reset is in whole seconds: wait a little past it.
                return max(0.0, float(reset or "") - now) + 0.5
        if status == 429 or "secondary rate limit" in message.lower():
            return float(policy.secondary_default * 2.0 ** (attempt - 1))
        return None
    if status >= 500:
        return float(min(policy.max_backoff, policy.backoff * 2.0 ** (attempt - 1)))
    return None


def _jitter(delay: float) -> float:
    return delay * random.uniform(0.8, 1.0) if delay > 0 else 0.0


def step_error(exc: BaseException, what: str, *, clock: Clock = SYSTEM) -> StepError:
    """Translate a failure talking to GitHub into the engine's error kinds.

    Rate limits, 5xx and connection failures are temporary (``retry_after`` set); 401/403/404 and
    validation errors are terminal: retrying cannot fix a missing installation or permission.
    """
    if isinstance(exc, RateLimited):
        return StepError(f"{what}: {exc}", retry_after=exc.retry_after)
    if isinstance(exc, GitHubUnreachable | aiohttp.ClientError | TimeoutError):
        return StepError(f"{what}: GitHub is unreachable ({exc})", retry_after=30.0)
    if isinstance(exc, gidgethub.GitHubBroken):
        return StepError(
            f"{what}: GitHub answered {int(exc.status_code)} ({exc})", retry_after=30.0
        )
    if isinstance(exc, gidgethub.HTTPException):
        code = int(exc.status_code)
        if code in (403, 429):
            delay = retry_delay(
                code, exc.headers, str(exc), 1, RetryPolicy(), clock.now().timestamp()
            )
            if delay is not None:
                return StepError(f"{what}: rate limited by GitHub ({exc})", retry_after=delay)
        hint = {
            401: "the App's credentials were refused",
            403: "the App lacks a permission on this repository",
            404: "not found, or the App is not installed on this repository",
        }.get(code, "")
        detail = f"{exc}" + (f" — {hint}" if hint and hint not in str(exc) else "")
        return StepError(f"{what}: GitHub answered {code}: {detail}", terminal=True)
    if isinstance(exc, gidgethub.GitHubException):
        return StepError(f"{what}: {exc}")
    raise exc


def is_temporary(error: StepError) -> bool:
    return not error.terminal and error.retry_after is not None


# ---- the client --------------------------------------------------------------------------------


@dataclass
class _Limit:
    remaining: int | None = None
    reset: float = 0.0


class GitHubAPI(gidgethub.aiohttp.GitHubAPI):
    """gidgethub's aiohttp client with our retry policy, shared rate-limit state and counters."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        policy: RetryPolicy,
        limit: _Limit,
        clock: Callable[[], float],
        telemetry: Telemetry = NO_TELEMETRY,
        **kwargs: Any,
    ) -> None:
        super().__init__(session, REQUESTER, **kwargs)
        self._policy = policy
        self._limit = limit
        self._clock = clock
        self._telemetry = telemetry

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        attempt = 0
        while True:
            attempt += 1
            try:
                status, response_headers, data = await super()._request(method, url, headers, body)
            except (aiohttp.ClientError, TimeoutError) as e:
                self._telemetry.api_call("github", method, "error")
                delay = retry_delay(599, {}, "", attempt, self._policy, self._clock())
                if delay is None:
                    raise GitHubUnreachable(f"{method} {_path(url)}: {type(e).__name__}") from None
                await self.sleep(_jitter(delay))
                continue
            self._telemetry.api_call("github", method, str(status))
            remaining = _header(response_headers, "x-ratelimit-remaining")
            if remaining is not None:
                with contextlib.suppress(ValueError):
                    self._limit.remaining = int(remaining)
                    self._limit.reset = float(_header(response_headers, "x-ratelimit-reset") or 0)
            return status, response_headers, data

    async def manage_rate_limit(self, *, method: str, url: str) -> None:
        # Known to be exhausted: do not spend a request to be told so.
        limit = self._limit
        if limit.remaining is not None and limit.remaining <= 0:
            wait = limit.reset - self._clock()
            if wait <= 0:
                limit.remaining = None
                return
            self._telemetry.rate_limited("github", wait)
            if wait > self._policy.max_wait:
                raise RateLimited(
                    wait, f"GitHub API rate limit exhausted until {_when(limit.reset)}"
                )
            await self.sleep(wait + 0.5)
            limit.remaining = None

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: gidgethub.HTTPException, attempt: int
    ) -> bool:
        status = int(exception.status_code)
        delay = retry_delay(
            status, exception.headers, str(exception), attempt, self._policy, self._clock()
        )
        if delay is None:
            return False
        if status < 500:
            self._telemetry.rate_limited("github", delay)
        if delay > self._policy.max_wait:
            if status >= 500:
                return False
            raise RateLimited(delay, f"rate limited by GitHub ({exception}); retry in {delay:.0f}s")
        log.info(
            "GitHub answered %s to %s %s; retrying in %.2fs", status, method, _path(url), delay
        )
        await self.sleep(_jitter(delay) if status >= 500 else delay)
        return True


def _path(url: str) -> str:
    # Never log query strings (they could carry state) or hosts (Enterprise URLs are private).
    without_scheme = url.split("://", 1)[-1]
    return "/" + without_scheme.split("/", 1)[-1].split("?", 1)[0] if "/" in without_scheme else "/"


def split_repo(full_name: str) -> tuple[str, str]:
    owner, sep, repo = full_name.partition("/")
    if not sep or not owner or not repo or "/" in repo:
        raise ValueError(f"{full_name!r} is not owner/repo")
    return owner, repo


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class _Token:
    token: str = field(repr=False)
    refresh_at: float


def _parse_expiry(expires_at: str, now: float) -> float:
    try:
        return datetime.fromisoformat(expires_at.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return now + 3600.0


class GitHubClient:
    """The App's connection to GitHub: one session, tokens and ETag caches per installation."""

    def __init__(
        self,
        settings: GitHubSettings,
        *,
        session: aiohttp.ClientSession | None = None,
        policy: RetryPolicy | None = None,
        etag_cache: bool = True,
        clock: Callable[[], float] = lambda: SYSTEM.now().timestamp(),
        telemetry: Telemetry = NO_TELEMETRY,
        on_token: Callable[[str], None] | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not settings.enabled or settings.private_key is None or settings.app_id is None:
            raise ValueError("the GitHub App is not configured (LONGSHOREMAN_GITHUB_APP_ID)")
        self.settings = settings
        self.policy = policy or RetryPolicy()
        self.etag_cache = etag_cache
        self._clock = clock
        self.telemetry = telemetry
        # Told every installation token as it is issued (the server's log redactor).
        self.on_token = on_token
        # Seconds one request (with its redirects and body) may take before it is given up.
        self.timeout = timeout
        self._session = session
        self._own_session = session is None
        self._tokens: TLRUCache[int, _Token] = TLRUCache(
            maxsize=4096, ttu=lambda _k, v, _now: v.refresh_at, timer=clock
        )
        self._token_locks: dict[int, asyncio.Lock] = {}
        self._installations: TTLCache[str, int] = TTLCache(
            maxsize=4096, ttl=INSTALLATION_TTL, timer=clock
        )
        self._etags: LRUCache[int, LRUCache[str, Any]] = LRUCache(maxsize=1024)
        self._limits: dict[int | None, _Limit] = {}
        self.token_requests = 0

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
            self._own_session = True

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("GitHubClient.start() has not been called")
        return self._session

    # ---- API objects ------------------------------------------------------------------------

    def _api(self, installation: int | None, **kwargs: Any) -> GitHubAPI:
        return GitHubAPI(
            self.session,
            policy=self.policy,
            limit=self._limits.setdefault(installation, _Limit()),
            clock=self._clock,
            telemetry=self.telemetry,
            base_url=self.settings.api_url,
            **kwargs,
        )

    def app_api(self) -> GitHubAPI:
        """Authenticated as the App itself (JWT): installation lookups and tokens only."""
        assert self.settings.app_id is not None and self.settings.private_key is not None
        return self._api(None, app_id=self.settings.app_id, private_key=self.settings.private_key)

    async def installation_api(self, installation_id: int) -> GitHubAPI:
        """Authenticated as one installation, sharing its ETag cache."""
        token = await self.token(installation_id)
        cache: LRUCache[str, Any] | None = None
        if self.etag_cache:
            cache = self._etags.get(installation_id)
            if cache is None:
                cache = LRUCache(maxsize=ETAG_ENTRIES_PER_INSTALLATION)
                self._etags[installation_id] = cache
        return self._api(installation_id, oauth_token=token, cache=cache)

    async def repo_api(self, full_name: str) -> GitHubAPI:
        return await self.installation_api(await self.installation_for(full_name))

    async def installation_for(self, full_name: str) -> int:
        """The installation that serves ``owner/repo`` (cached for an hour)."""
        key = full_name.lower()
        found = self._installations.get(key)
        if found is not None:
            return found
        owner, repo = split_repo(full_name)
        data = await self.app_api().getitem(
            "/repos/{owner}/{repo}/installation", {"owner": owner, "repo": repo}
        )
        installation = int(data["id"])
        self._installations[key] = installation
        return installation

    def remember_installation(self, full_name: str, installation_id: int) -> None:
        """Webhook payloads name their installation; saves a lookup later."""
        self._installations[full_name.lower()] = installation_id

    async def token(self, installation_id: int) -> str:
        cached = self._tokens.get(installation_id)
        if cached is not None:
            return cached.token
        lock = self._token_locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(installation_id)
            if cached is not None:
                return cached.token
            assert self.settings.app_id is not None and self.settings.private_key is not None
            # get_jwt back-dates the issued-at time by 60s, so a server clock slightly ahead of
            # GitHub's does not make the JWT "issued in the future".
            response = await gidgethub.apps.get_installation_access_token(
                self.app_api(),
                installation_id=str(installation_id),
                app_id=self.settings.app_id,
                private_key=self.settings.private_key,
            )
            self.token_requests += 1
            now = self._clock()
            expires = _parse_expiry(str(response.get("expires_at", "")), now)
            entry = _Token(str(response["token"]), max(now + 1.0, expires - TOKEN_REFRESH_MARGIN))
            if self.on_token is not None:
                self.on_token(entry.token)
            self._tokens[installation_id] = entry
            return entry.token
