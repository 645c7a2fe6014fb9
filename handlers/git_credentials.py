"""The GitHub App as a source of the credentials port (:mod:`promoter.ports.credentials`).

A ``repoURL`` on the configured GitHub's git host (github.com, or the Enterprise host derived
from ``LONGSHOREMAN_GITHUB_API_URL``: :attr:`handlers.settings.GitHubSettings.git_base_url`) names
``owner/repo``; the App's installation on it is looked up with the App's JWT (``GET
/repos/{owner}/{repo}/installation``, cached for an hour by the client) and its installation
token (cached, renewed five minutes before GitHub's ``expires_at``) is handed to git as the
password of the user ``x-access-token``, as GitHub documents for Apps
(https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/
authenticating-as-a-github-app-installation#about-authentication-as-an-installation).
Git gets it from our credential helper (:func:`promoter.ports.gitcmd.credential_env`); it is
never put in a URL, a file or a message, and it is never logged here. Images and OCI charts on
ghcr.io get the token of the package's repository (:meth:`GitHubGitCredentials.get`).

This is the third source of :func:`promoter.rules.credentials.lookup_order`, after the
project's Secrets and the global credentials namespace. Anything else (another host, ssh, a
repository the App is not installed on) gets no credential here: git then uses what
``LONGSHOREMAN_GIT_CONFIG`` configures.

:class:`SecretAppTokens` is the other way a GitHub App reaches git: one named in a project's
Secret (``githubAppID``/``githubAppClientID``, ``githubAppPrivateKey``,
``githubAppInstallationID``), whose installation token is minted scoped to the one repository
asked for, on the GitHub the repository URL names, as Kargo's ``AppCredentialProvider`` does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

import aiohttp
import gidgethub
import gidgethub.aiohttp
import gidgethub.apps
from cachetools import TTLCache

from handlers.client import TOKEN_REFRESH_MARGIN, GitHubClient, step_error
from handlers.settings import GitHubSettings
from promoter.clock import SYSTEM, Clock
from promoter.errors import StepError
from promoter.ports.credentials import Credential, CredentialsError, CredentialType
from promoter.rules.credentials import GitHubAppKey
from promoter.steps.github import repo_full_name

log = logging.getLogger(__name__)

# GitHub's documented username for an installation token over HTTPS.
TOKEN_USERNAME = "x-access-token"
# A repository the App is not installed on is asked about again after this long (an install
# takes effect then without a restart), not before every git step.
NOT_INSTALLED_TTL = 600.0


def github_repo(repo_url: str, git_base_url: str) -> str | None:
    """``owner/repo`` when ``repo_url`` is an http(s) URL on ``git_base_url``'s host, else None.

    Scheme, host and port must all match: a token for ``https://github.com`` is never offered
    to ``http://github.com`` or to a look-alike host.
    """
    url = repo_url.strip()
    base = urlsplit(git_base_url)
    try:
        parts = urlsplit(url)
        port, base_port = parts.port, base.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or parts.scheme.lower() != base.scheme:
        return None
    if not parts.hostname or parts.hostname.lower() != (base.hostname or "").lower():
        return None
    if port != base_port or parts.username or parts.password:
        return None
    try:
        return repo_full_name(url)
    except StepError:
        return None


class GitHubGitCredentials:
    """``GitSettings.credentials`` over the App's installations: one token per installation."""

    def __init__(
        self,
        client: GitHubClient,
        clock: Clock = SYSTEM,
        registries: tuple[str, ...] = ("ghcr.io",),
    ) -> None:
        self.client = client
        # The App's container registries (ghcr.io): images and OCI charts there get tokens.
        self.registries = registries
        self._not_installed: TTLCache[str, bool] = TTLCache(
            maxsize=4096, ttl=NOT_INSTALLED_TTL, timer=clock.monotonic
        )

    async def get(self, project: str, kind: CredentialType, repo_url: str) -> Credential | None:
        """The credentials port: a git repository on the App's GitHub, or a ghcr.io package
        (its repository's installation). The App serves every project alike."""
        if kind is CredentialType.GIT:
            return await self(repo_url)
        host, _, path = repo_url.strip().removeprefix("oci://").partition("/")
        found = await GitHubRegistryCredentials(self, self.registries)(host, path)
        return Credential(found[0], found[1], "the GitHub App") if found else None

    async def __call__(self, repo_url: str) -> Credential | None:
        full_name = github_repo(repo_url, self.client.settings.git_base_url)
        if full_name is None or full_name.lower() in self._not_installed:
            return None
        try:
            installation = await self.client.installation_for(full_name)
        except gidgethub.BadRequest as e:
            if int(e.status_code) == 404:
                log.info("the GitHub App is not installed on %s: git gets no token", full_name)
                self._not_installed[full_name.lower()] = True
                return None
            raise step_error(e, f"finding the App's installation on {full_name}") from None
        except Exception as e:
            raise step_error(e, f"finding the App's installation on {full_name}") from None
        try:
            token = await self.client.token(installation)
        except Exception as e:
            raise step_error(e, f"getting an installation token for {full_name}") from None
        return Credential(TOKEN_USERNAME, token, "the GitHub App")


# GitHub's container registry (images and OCI charts), served by github.com's App tokens.
GITHUB_REGISTRIES = ("ghcr.io",)


class GitHubRegistryCredentials:
    """The Warehouse discovery's token source for ghcr.io: ``(host, repository path) ->
    (user, token)`` or None.

    A package ``ghcr.io/OWNER/NAME[/...]`` is read with the App's installation token for
    ``OWNER/NAME`` (GitHub links a package to the repository that publishes it, usually of the
    same name), the same lookup and token cache as git's. GHCR takes an installation token as
    the password of its token request when the App has *Packages: read*. Another host, or a
    package whose repository the App is not installed on, gets None: it is read anonymously.
    """

    def __init__(self, git: GitHubGitCredentials, hosts: tuple[str, ...] = GITHUB_REGISTRIES):
        self.git = git
        self.hosts = tuple(h.lower() for h in hosts)

    async def __call__(self, host: str, path: str) -> tuple[str, str] | None:
        parts = path.split("/")
        if host.lower() not in self.hosts or len(parts) < 2 or not all(parts[:2]):
            return None
        base = self.git.client.settings.git_base_url
        credential = await self.git(f"{base}/{parts[0]}/{parts[1]}")
        return (credential.username, credential.password) if credential else None


def _private_key(text: str) -> str:
    """The PEM key, also when the Secret holds it base64-encoded (Kargo once required that)."""
    if "-----BEGIN" in text:
        return text
    try:
        decoded = base64.b64decode(text.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return text
    return decoded if "-----BEGIN" in decoded else text


def app_api_url(repo_url: str, configured: GitHubSettings | None) -> str:
    """Where the REST API of the GitHub hosting ``repo_url`` is: the configured GitHub's when
    the repository is on it, ``https://api.github.com`` for github.com, else GitHub Enterprise
    Server's ``scheme://host/api/v3`` (go-githubauth's ``WithEnterpriseURL``, which Kargo uses)."""
    parts = urlsplit(repo_url.strip())
    base = f"{parts.scheme.lower()}://{parts.netloc.lower().rpartition('@')[2]}"
    if configured is not None and configured.git_base_url == base:
        return configured.api_url
    if (parts.hostname or "").lower() == "github.com":
        return "https://api.github.com"
    return f"{base}/api/v3"


class SecretAppTokens:
    """Installation tokens of GitHub Apps named in credential Secrets, each scoped to the one
    repository asked for (``repositories: [name]``, as Kargo scopes them), cached until five
    minutes before GitHub's ``expires_at`` under a hash of the App, installation, key and
    repository (never the key itself)."""

    def __init__(
        self,
        *,
        configured: GitHubSettings | None = None,
        clock: Clock = SYSTEM,
        on_token: Callable[[str], None] | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.configured = configured
        self.clock = clock
        self.on_token = on_token
        self._session = session
        self._tokens: dict[str, tuple[str, float]] = {}
        self.minted = 0

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __call__(self, app: GitHubAppKey, repo_url: str) -> Credential:
        parts = urlsplit(repo_url.strip())
        name = parts.path.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]
        if parts.scheme.lower() not in ("http", "https") or not name or parts.path.count("/") < 2:
            raise CredentialsError(f"{repo_url} is not a GitHub repository URL for a GitHub App")
        key = hashlib.sha256(
            f"{app.app_id}:{app.installation_id}:{app.private_key}:{repo_url}".encode()
        ).hexdigest()
        now = self.clock.monotonic()
        cached = self._tokens.get(key)
        if cached is not None and cached[1] > now:
            return Credential(SECRET_APP_USERNAME, cached[0])
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        api = gidgethub.aiohttp.GitHubAPI(
            self._session, "longshoreman", base_url=app_api_url(repo_url, self.configured)
        )
        what = f"an installation token of GitHub App {app.app_id} for {repo_url}"
        try:
            pem = _private_key(app.private_key)
            jwt = gidgethub.apps.get_jwt(app_id=app.app_id, private_key=pem)
        except Exception as e:  # a key that does not load: say so, never show it
            raise CredentialsError(
                f"{what}: the private key is not usable ({type(e).__name__})"
            ) from None
        try:
            answer = await api.post(
                "/app/installations/{id}/access_tokens",
                {"id": str(app.installation_id)},
                data={"repositories": [name]},
                jwt=jwt,
            )
        except gidgethub.BadRequest as e:
            raise CredentialsError(f"{what}: GitHub answered {int(e.status_code)}") from None
        except (gidgethub.GitHubException, aiohttp.ClientError, TimeoutError) as e:
            raise CredentialsError(f"{what}: {type(e).__name__}", retry_after=30.0) from None
        token = str(answer["token"])
        self.minted += 1
        if self.on_token is not None:
            self.on_token(token)
        expires = _seconds_left(str(answer.get("expires_at") or ""), self.clock)
        self._tokens[key] = (token, now + max(1.0, expires - TOKEN_REFRESH_MARGIN))
        return Credential(SECRET_APP_USERNAME, token)


# GitHub's documented username for an installation token (Kargo sends "kargo", which GitHub
# happens to accept too).
SECRET_APP_USERNAME = TOKEN_USERNAME


def _seconds_left(expires_at: str, clock: Clock) -> float:
    try:
        moment = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return 3600.0
    return (moment - clock.now()).total_seconds()
