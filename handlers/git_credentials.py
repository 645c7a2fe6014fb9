"""The GitHub adapter of the git steps' credentials port (``GitSettings.credentials``).

A ``repoURL`` on the configured GitHub's git host (github.com, or the Enterprise host derived
from ``GITHUB_API_URL``: :attr:`handlers.settings.GitHubSettings.git_base_url`) names
``owner/repo``; the App's installation on it is looked up with the App's JWT (``GET
/repos/{owner}/{repo}/installation``, cached for an hour by the client) and its installation
token (cached, renewed five minutes before GitHub's ``expires_at``) is handed to git as the
password of the user ``x-access-token``, as GitHub documents for Apps
(https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/
authenticating-as-a-github-app-installation#about-authentication-as-an-installation).
The git steps turn it into an ``Authorization`` header in git's environment; it is never put in
a URL, a file or a message, and it is never logged here.

Anything else (another host, ssh, a repository the App is not installed on) gets no credential:
git then uses what ``LONGSHOREMAN_GIT_CONFIG`` configures, and a private repository fails with
git's own "authentication failed".
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import gidgethub
from cachetools import TTLCache

from handlers.client import GitHubClient, step_error
from promoter.clock import SYSTEM, Clock
from promoter.errors import StepError
from promoter.steps.base import GitCredential
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

    def __init__(self, client: GitHubClient, clock: Clock = SYSTEM) -> None:
        self.client = client
        self._not_installed: TTLCache[str, bool] = TTLCache(
            maxsize=4096, ttl=NOT_INSTALLED_TTL, timer=clock.monotonic
        )

    async def __call__(self, repo_url: str) -> GitCredential | None:
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
        return GitCredential(TOKEN_USERNAME, token)


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
