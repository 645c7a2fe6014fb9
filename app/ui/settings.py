"""The status pages' settings: read from the environment once (through
:meth:`app.settings.Settings.from_env`), validated, failing fast with the variable's name.

``LONGSHOREMAN_PUBLIC_URL``
    Where people reach this server (``https://longshoreman.example.com``). When set, check runs'
    Details and Slack messages link to the Promotion's page here, and GitHub sign-in sends users
    back to it.
``LONGSHOREMAN_UI_AUTH``
    ``none`` (the default: anyone who reaches the server may read the pages), ``header`` (trust
    a header an authenticating proxy sets) or ``github`` (GitHub OAuth sign-in limited to an
    org).
``LONGSHOREMAN_UI_AUTH_HEADER``
    ``header`` mode: the header naming the user (``X-Forwarded-User``).
``LONGSHOREMAN_UI_GITHUB_CLIENT_ID``, ``…_CLIENT_SECRET``, ``…_ORG``
    ``github`` mode: an OAuth App's (or the GitHub App's) client credentials and the org whose
    active members may sign in.
``LONGSHOREMAN_UI_GITHUB_ACCESS``
    ``github`` mode: who reads which project. ``project`` (the default with the GitHub App):
    the same permission that lets someone act there from GitHub, write access to a repository
    mapped to it (``LONGSHOREMAN_GITHUB_REPO_PROJECTS``; the fallback project,
    ``LONGSHOREMAN_GITHUB_PROJECT``, which every other repository acts on, to every member);
    ``org`` (the default without the App, which has no repository permissions to read): every
    active member of the org reads every project.
``LONGSHOREMAN_UI_SESSION_SECRET``
    ``github`` mode: signs the session cookie (at least 32 characters; the same on every
    replica).
``LONGSHOREMAN_GITHUB_WEB_URL``
    GitHub's web root for sign-in (``https://github.com``; ``https://HOST`` for Enterprise).
``LONGSHOREMAN_ARGOCD_URL``
    Optional Argo CD UI root: Applications on the pages link to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from promoter.environment import with_new_names

AuthMode = Literal["none", "header", "github"]
Access = Literal["project", "org"]
DEFAULT_WEB_URL = "https://github.com"
DEFAULT_AUTH_HEADER = "X-Forwarded-User"
MIN_SESSION_SECRET = 32
# RFC 9110 token characters: what a header name may contain.
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_ORG = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")


class UiSettingsError(ValueError):
    """A status-page setting is missing or malformed; the message names the variable."""


# Read under these names before they took the LONGSHOREMAN_ prefix: still read, and logged at
# start as deprecated (promoter.environment).
RENAMED = ("GITHUB_WEB_URL",)


def _http_url(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    raw = (env.get(name) or "").strip() or default
    if raw is None:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UiSettingsError(f"{name}={raw!r} must be an http(s) URL such as https://host")
    if parts.username or parts.password:
        raise UiSettingsError(f"{name} must not contain credentials")
    if parts.query or parts.fragment:
        raise UiSettingsError(f"{name}={raw!r} must not have a query or fragment")
    return raw.rstrip("/")


@dataclass(frozen=True, slots=True)
class UiSettings:
    """What the status pages are configured with."""

    public_url: str | None = None
    auth: AuthMode = "none"
    auth_header: str = DEFAULT_AUTH_HEADER
    github_client_id: str | None = None
    github_client_secret: str | None = field(default=None, repr=False)
    github_org: str | None = None
    session_secret: str | None = field(default=None, repr=False)
    github_web_url: str = DEFAULT_WEB_URL
    github_api_url: str = "https://api.github.com"
    argocd_url: str | None = None
    github_access: Access = "org"

    @property
    def secure_cookies(self) -> bool:
        return bool(self.public_url and self.public_url.startswith("https://"))

    def promotion_link(self, namespace: str, name: str) -> str | None:
        if not self.public_url:
            return None
        return f"{self.public_url}/ui/promotions/{namespace}/{name}"

    @property
    def promotion_url_template(self) -> str | None:
        """The link as a ``{namespace}``/``{promotion}`` template (the form of
        LONGSHOREMAN_GITHUB_PROMOTION_URL)."""
        if not self.public_url:
            return None
        # Braces in the URL itself must survive str.format.
        base = self.public_url.replace("{", "{{").replace("}", "}}")
        return base + "/ui/promotions/{namespace}/{promotion}"

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        github_api_url: str = "https://api.github.com",
        github_app: bool = False,
    ) -> UiSettings:
        env = with_new_names(env, RENAMED)
        public_url = _http_url(env, "LONGSHOREMAN_PUBLIC_URL")
        argocd_url = _http_url(env, "LONGSHOREMAN_ARGOCD_URL")
        raw_mode = (env.get("LONGSHOREMAN_UI_AUTH") or "none").strip().lower()
        mode = {"": "none", "none": "none", "off": "none"}.get(raw_mode, raw_mode)
        if mode not in ("none", "header", "github"):
            raise UiSettingsError(
                f"LONGSHOREMAN_UI_AUTH={raw_mode!r} must be none, header or github"
            )
        header = (env.get("LONGSHOREMAN_UI_AUTH_HEADER") or DEFAULT_AUTH_HEADER).strip()
        if not _HEADER_NAME.match(header):
            raise UiSettingsError(f"LONGSHOREMAN_UI_AUTH_HEADER={header!r} is not a header name")
        web_url = _http_url(env, "LONGSHOREMAN_GITHUB_WEB_URL", DEFAULT_WEB_URL) or DEFAULT_WEB_URL
        client_id = (env.get("LONGSHOREMAN_UI_GITHUB_CLIENT_ID") or "").strip() or None
        client_secret = (env.get("LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET") or "").strip() or None
        org = (env.get("LONGSHOREMAN_UI_GITHUB_ORG") or "").strip() or None
        session_secret = env.get("LONGSHOREMAN_UI_SESSION_SECRET") or None
        if mode == "github":
            missing = [
                name
                for name, value in (
                    ("LONGSHOREMAN_UI_GITHUB_CLIENT_ID", client_id),
                    ("LONGSHOREMAN_UI_GITHUB_CLIENT_SECRET", client_secret),
                    ("LONGSHOREMAN_UI_GITHUB_ORG", org),
                    ("LONGSHOREMAN_UI_SESSION_SECRET", session_secret),
                )
                if not value
            ]
            if missing:
                raise UiSettingsError(f"LONGSHOREMAN_UI_AUTH=github needs {', '.join(missing)}")
            assert org is not None and session_secret is not None
            if not _ORG.match(org):
                raise UiSettingsError(f"LONGSHOREMAN_UI_GITHUB_ORG={org!r} is not an org login")
            if len(session_secret) < MIN_SESSION_SECRET:
                # The value is a secret: say how long it must be, never what it is.
                raise UiSettingsError(
                    f"LONGSHOREMAN_UI_SESSION_SECRET must be at least {MIN_SESSION_SECRET} "
                    "characters (try: openssl rand -hex 32)"
                )
        access = (env.get("LONGSHOREMAN_UI_GITHUB_ACCESS") or "").strip().lower()
        if access not in ("", "project", "org"):
            raise UiSettingsError(
                f"LONGSHOREMAN_UI_GITHUB_ACCESS={access!r} must be project or org"
            )
        if access == "project" and not github_app:
            raise UiSettingsError(
                "LONGSHOREMAN_UI_GITHUB_ACCESS=project reads repository permissions through the "
                "GitHub App: set LONGSHOREMAN_GITHUB_APP_ID, or choose org"
            )
        return cls(
            github_access=(access or ("project" if github_app else "org")),  # type: ignore[arg-type]
            public_url=public_url,
            auth=mode,  # type: ignore[arg-type]
            auth_header=header,
            github_client_id=client_id,
            github_client_secret=client_secret,
            github_org=org,
            session_secret=session_secret,
            github_web_url=web_url,
            github_api_url=github_api_url.rstrip("/"),
            argocd_url=argocd_url,
        )
