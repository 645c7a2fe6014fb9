"""Who may read the status pages: nobody is asked (the default), a header set by an
authenticating proxy, or GitHub sign-in limited to the active members of one org.

GitHub mode is the OAuth web flow (https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps):
``/ui/login`` redirects to ``LONGSHOREMAN_GITHUB_WEB_URL/login/oauth/authorize`` with a random
``state`` kept in a short-lived signed cookie; ``/ui/oauth/callback`` checks that state,
exchanges the code at ``/login/oauth/access_token``, asks ``GET /user`` who signed in and
``GET /user/memberships/orgs/{org}`` whether they are an active member, and then sets a signed
session cookie (HMAC-SHA256 with ``LONGSHOREMAN_UI_SESSION_SECRET``; HttpOnly, SameSite=Lax,
Secure when the public URL is https). The user's GitHub token is used for those two calls and
then forgotten: the cookie holds only the login and an expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from app.ui.settings import UiSettings
from promoter.clock import SYSTEM, Clock

log = logging.getLogger(__name__)

SESSION_COOKIE = "longshoreman_session"
STATE_COOKIE = "longshoreman_oauth"
SESSION_SECONDS = 8 * 3600
STATE_SECONDS = 600
OAUTH_TIMEOUT = aiohttp.ClientTimeout(total=10)
LOGIN_PATH = "/ui/login"
CALLBACK_PATH = "/ui/oauth/callback"
LOGOUT_PATH = "/ui/logout"


class Refused(Exception):
    """Sign-in did not let this person in; the message is safe to show them."""


# ---- signed values ----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(secret: str, payload: Mapping[str, Any]) -> str:
    body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
    mac = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


def verify(secret: str, value: str | None, now: float) -> dict[str, Any] | None:
    """The payload of a value :func:`sign` made with ``secret``, unless forged or expired."""
    if not value or value.count(".") != 1:
        return None
    body, mac = value.split(".")
    expected = _b64(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest())
    # As bytes: compare_digest refuses str with non-ASCII characters (a TypeError, a 500).
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        return None
    try:
        payload = json.loads(_unb64(body))
    except ValueError:
        return None
    if not isinstance(payload, dict) or float(payload.get("exp") or 0) <= now:
        return None
    return payload


def safe_next(value: str | None) -> str:
    """Where to go after sign-in: only our own pages, never another site."""
    if value and value.startswith("/ui/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/"


# ---- the authenticator ------------------------------------------------------------------------


class Auth:
    def __init__(self, settings: UiSettings, clock: Clock = SYSTEM) -> None:
        self.settings = settings
        self.clock = clock
        self._http: aiohttp.ClientSession | None = None

    @property
    def mode(self) -> str:
        return self.settings.auth

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def user(self, request: web.Request) -> str | None:
        """Who is asking; None when they must authenticate first (never in mode ``none``)."""
        s = self.settings
        if s.auth == "none":
            return ""
        if s.auth == "header":
            return request.headers.get(s.auth_header, "").strip() or None
        assert s.session_secret is not None
        payload = verify(s.session_secret, request.cookies.get(SESSION_COOKIE), self._now())
        if payload is None or payload.get("org") != s.github_org:
            return None
        return str(payload.get("u") or "") or None

    def unauthenticated(self, request: web.Request, *, page: bool) -> web.Response:
        """The answer to a request without a user: sign in (GitHub, pages) or 401."""
        s = self.settings
        if s.auth == "github" and page and request.method == "GET":
            target = LOGIN_PATH + "?" + urlencode({"next": request.path_qs})
            return web.Response(status=302, headers={"Location": target})
        if s.auth == "header":
            text = f"This page needs the {s.auth_header} header that the authenticating proxy sets."
        else:
            text = "Sign in first: open /ui/login."
        return web.Response(status=401, text=text + "\n", headers={"Cache-Control": "no-store"})

    # ---- GitHub OAuth ---------------------------------------------------------------------------

    def _redirect_uri(self, request: web.Request) -> str:
        base = self.settings.public_url or f"{request.scheme}://{request.host}"
        return base + CALLBACK_PATH

    def _cookie_options(self, max_age: int) -> dict[str, Any]:
        return {
            "max_age": max_age,
            "path": "/ui/",
            "httponly": True,
            "samesite": "Lax",
            "secure": self.settings.secure_cookies,
        }

    async def login(self, request: web.Request) -> web.Response:
        s = self.settings
        if s.auth != "github":
            raise web.HTTPNotFound()
        assert s.session_secret is not None and s.github_client_id is not None
        state = secrets.token_urlsafe(24)
        query = urlencode(
            {
                "client_id": s.github_client_id,
                "redirect_uri": self._redirect_uri(request),
                "scope": "read:org",
                "state": state,
                "allow_signup": "false",
            }
        )
        response = web.Response(
            status=302, headers={"Location": f"{s.github_web_url}/login/oauth/authorize?{query}"}
        )
        cookie = sign(
            s.session_secret,
            {
                "state": state,
                "next": safe_next(request.query.get("next")),
                "exp": self._now() + STATE_SECONDS,
            },
        )
        response.set_cookie(STATE_COOKIE, cookie, **self._cookie_options(STATE_SECONDS))
        return response

    async def callback(self, request: web.Request) -> tuple[str, str]:
        """The signed-in login and where to go next. Raises Refused."""
        s = self.settings
        assert s.session_secret is not None
        pending = verify(s.session_secret, request.cookies.get(STATE_COOKIE), self._now())
        state = request.query.get("state", "")
        # Only a state cookie has a state: a session cookie (same key) must not stand for one.
        expected = pending.get("state") if pending is not None else None
        if (
            pending is None
            or not isinstance(expected, str)
            or not hmac.compare_digest(expected.encode(), state.encode())
        ):
            raise Refused("This sign-in link is stale or was not started here; sign in again.")
        if request.query.get("error"):
            raise Refused("GitHub did not authorize the sign-in.")
        code = request.query.get("code", "")
        if not code:
            raise Refused("GitHub sent no authorization code; sign in again.")
        token = await self._exchange(code, self._redirect_uri(request))
        login = await self._login(token)
        await self._check_member(token, login)
        return login, safe_next(str(pending.get("next") or ""))

    def signed_in(self, login: str, next_url: str) -> web.Response:
        s = self.settings
        assert s.session_secret is not None
        response = web.Response(status=302, headers={"Location": next_url})
        session = sign(
            s.session_secret,
            {"u": login, "org": s.github_org, "exp": self._now() + SESSION_SECONDS},
        )
        response.set_cookie(SESSION_COOKIE, session, **self._cookie_options(SESSION_SECONDS))
        response.del_cookie(STATE_COOKIE, path="/ui/")
        return response

    def signed_out(self) -> web.Response:
        response = web.Response(status=303, headers={"Location": "/ui/"})
        response.del_cookie(SESSION_COOKIE, path="/ui/")
        return response

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=OAUTH_TIMEOUT)
        return self._http

    async def _exchange(self, code: str, redirect_uri: str) -> str:
        s = self.settings
        try:
            async with self._session().post(
                f"{s.github_web_url}/login/oauth/access_token",
                data={
                    "client_id": s.github_client_id or "",
                    "client_secret": s.github_client_secret or "",
                    "code": code,
                    "redirect_uri": redirect_uri,
                },
                headers={"Accept": "application/json"},
            ) as response:
                data = await response.json(content_type=None)
                status = response.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            # The exception text may quote the request; only its kind is logged.
            log.warning("GitHub sign-in: the code exchange failed (%s)", type(e).__name__)
            raise Refused("GitHub could not be reached to finish signing in; try again.") from None
        token = data.get("access_token") if isinstance(data, dict) else None
        if status != 200 or not token:
            error = data.get("error") if isinstance(data, dict) else None
            log.warning("GitHub sign-in: the code was refused (%s, %s)", status, error)
            raise Refused("GitHub refused the sign-in code; sign in again.")
        return str(token)

    async def _get(self, token: str, path: str) -> tuple[int, Any]:
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        try:
            async with self._session().get(
                self.settings.github_api_url + path, headers=headers
            ) as response:
                body = await response.json(content_type=None) if response.status == 200 else None
                return response.status, body
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            log.warning("GitHub sign-in: GET %s failed (%s)", path, type(e).__name__)
            raise Refused("GitHub could not be reached to finish signing in; try again.") from None

    async def _login(self, token: str) -> str:
        status, body = await self._get(token, "/user")
        login = body.get("login") if status == 200 and isinstance(body, dict) else None
        if not login:
            raise Refused("GitHub did not say who signed in; sign in again.")
        return str(login)

    async def _check_member(self, token: str, login: str) -> None:
        org = self.settings.github_org or ""
        status, body = await self._get(token, f"/user/memberships/orgs/{org}")
        if status == 200 and isinstance(body, dict) and body.get("state") == "active":
            return
        log.info("GitHub sign-in refused: %s is not an active member of %s", login, org)
        raise Refused(
            f"@{login} is not an active member of the {org} organization on GitHub, so may not "
            "see these pages. (If you are, grant this app access to the organization.)"
        )
