"""GitHub App settings: read from the environment once, validated, failing fast.

``GitHubSettings.from_env(env)`` is the only place the GitHub side reads configuration; the app
layer composes it with :class:`app.settings.Settings`. Every problem names the variable. Secrets
(the private key, the webhook secret) never appear in ``repr`` or in error messages.

Variables:

``LONGSHOREMAN_GITHUB_APP_ID``
    The App's numeric ID. Setting it enables the GitHub integration.
``LONGSHOREMAN_GITHUB_PRIVATE_KEY`` / ``LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE``
    The App's PEM private key, inline (``\\n`` escapes allowed) or as a file; exactly one.
``LONGSHOREMAN_GITHUB_WEBHOOK_SECRET``
    Required when the App is enabled: unsigned webhooks are never accepted.
``LONGSHOREMAN_GITHUB_API_URL``
    REST API root; ``https://api.github.com`` by default, ``https://HOST/api/v3`` for Enterprise.
``LONGSHOREMAN_GITHUB_PROJECT``
    The Kargo project (namespace) that chat commands in any repository act on (``default``).
``LONGSHOREMAN_GITHUB_REPO_PROJECTS``
    Per-repository overrides: ``owner/repo=namespace,owner/other=namespace2``.
``LONGSHOREMAN_GITHUB_WEBHOOK_WORKERS``
    How many webhook deliveries are processed at once (8).
``LONGSHOREMAN_GITHUB_PROMOTION_URL``
    Optional link template for replies and check runs, with ``{namespace}`` and ``{promotion}``
    (a Kargo UI, a dashboard). Without it, replies link to the Promotion's check run.
``LONGSHOREMAN_GITHUB_DEPLOYMENTS``
    Which installations get GitHub Deployments for the Stages that opt in: ``all`` (the
    default), ``off``, or a comma-separated list of the accounts (organizations or users) whose
    installation may get them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from promoter.environment import with_new_names

DEFAULT_API_URL = "https://api.github.com"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class GitHubSettingsError(ValueError):
    """A GitHub setting is missing or malformed; the message names the variable."""


# Read under these names before they took the LONGSHOREMAN_ prefix: still read, and logged at
# start as deprecated (promoter.environment).
RENAMED = (
    "GITHUB_API_URL",
    "GITHUB_APP_ID",
    "GITHUB_DEPLOYMENTS",
    "GITHUB_PRIVATE_KEY",
    "GITHUB_PRIVATE_KEY_FILE",
    "GITHUB_PROJECT",
    "GITHUB_PROMOTION_URL",
    "GITHUB_REPO_PROJECTS",
    "GITHUB_WEBHOOK_SECRET",
    "GITHUB_WEBHOOK_WORKERS",
)


@dataclass(frozen=True, slots=True)
class GitHubSettings:
    """Everything the GitHub integration is configured with."""

    app_id: str | None = None
    private_key: str | None = field(default=None, repr=False)
    webhook_secret: str | None = field(default=None, repr=False)
    api_url: str = DEFAULT_API_URL
    project: str = "default"
    repo_projects: Mapping[str, str] = field(default_factory=dict)
    webhook_workers: int = 8
    promotion_url: str | None = None
    # Accounts whose installation gets Deployments (lower case); None: all; empty: none.
    deployment_accounts: frozenset[str] | None = None

    def deployments_in(self, repo_full_name: str) -> bool:
        """Whether GitHub Deployments may be written to ``owner/repo``
        (``LONGSHOREMAN_GITHUB_DEPLOYMENTS``)."""
        if self.deployment_accounts is None:
            return True
        return repo_full_name.partition("/")[0].lower() in self.deployment_accounts

    @property
    def enabled(self) -> bool:
        return self.app_id is not None

    @property
    def git_base_url(self) -> str:
        """Where this GitHub serves git over HTTPS (``scheme://host[:port]``), from the API URL.

        ``https://api.github.com`` -> ``https://github.com``; ``https://api.HOST`` (GitHub
        Enterprise Cloud with data residency) -> ``https://HOST``; otherwise (GitHub Enterprise
        Server's ``https://HOST/api/v3``, a test server) the API URL's own scheme and host.
        """
        parts = urlsplit(self.api_url)
        host = (parts.hostname or "").lower()
        if host.startswith("api."):
            host = host.removeprefix("api.")
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme.lower()}://{host}{port}"

    def project_for(self, repo_full_name: str) -> str:
        """The namespace (Kargo project) commands in ``owner/repo`` act on."""
        return self.repo_projects.get(repo_full_name.lower(), self.project)

    def link_for(self, namespace: str, promotion: str) -> str | None:
        if not self.promotion_url:
            return None
        return self.promotion_url.format(namespace=namespace, promotion=promotion)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GitHubSettings:
        env = with_new_names(os.environ if env is None else env, RENAMED)
        app_id = (env.get("LONGSHOREMAN_GITHUB_APP_ID") or "").strip() or None
        secret = env.get("LONGSHOREMAN_GITHUB_WEBHOOK_SECRET") or None
        inline_key = env.get("LONGSHOREMAN_GITHUB_PRIVATE_KEY") or None
        key_file = env.get("LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE") or None
        if app_id is None:
            stray = [
                name
                for name, value in (
                    ("LONGSHOREMAN_GITHUB_WEBHOOK_SECRET", secret),
                    ("LONGSHOREMAN_GITHUB_PRIVATE_KEY", inline_key),
                    ("LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE", key_file),
                )
                if value
            ]
            if stray:
                raise GitHubSettingsError(
                    f"{', '.join(stray)} set but LONGSHOREMAN_GITHUB_APP_ID is not: set "
                    "LONGSHOREMAN_GITHUB_APP_ID to enable "
                    "the GitHub App, or unset the others"
                )
            return _common(env)
        if not app_id.isdigit():
            raise GitHubSettingsError(
                f"LONGSHOREMAN_GITHUB_APP_ID={app_id!r} is not a numeric App ID"
            )
        if not secret:
            raise GitHubSettingsError(
                "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET is required when LONGSHOREMAN_GITHUB_APP_ID is "
                "set: the server refuses "
                "to accept unsigned webhooks"
            )
        private_key = _private_key(inline_key, key_file)
        return replace(_common(env), app_id=app_id, private_key=private_key, webhook_secret=secret)


def _private_key(inline: str | None, path: str | None) -> str:
    if inline and path:
        raise GitHubSettingsError(
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY and LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE are both "
            "set: choose one"
        )
    if not inline and not path:
        raise GitHubSettingsError(
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY or LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE is required "
            "when LONGSHOREMAN_GITHUB_APP_ID is set"
        )
    name = "LONGSHOREMAN_GITHUB_PRIVATE_KEY" if inline else "LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE"
    if inline:
        # Deployment tools often flatten a PEM into one line with literal \n.
        key = inline.replace("\\n", "\n").strip() + "\n"
    else:
        assert path is not None
        try:
            key = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as e:
            raise GitHubSettingsError(
                f"LONGSHOREMAN_GITHUB_PRIVATE_KEY_FILE={path!r}: cannot read: {e.strerror}"
            ) from None
    _check_pem(name, key)
    return key


def _check_pem(name: str, key: str) -> None:
    # Load it now so a truncated or wrong key fails at start, not at the first webhook. The key's
    # text never goes into the message.
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        loaded = load_pem_private_key(key.encode(), password=None)
    except (ValueError, TypeError):
        raise GitHubSettingsError(
            f"{name} is not an unencrypted PEM private key (download it from the App's settings)"
        ) from None
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise GitHubSettingsError(f"{name} must be an RSA key (GitHub Apps sign JWTs with RS256)")


def _common(env: Mapping[str, str]) -> GitHubSettings:
    """The settings that do not depend on the App being enabled."""
    api_url = (env.get("LONGSHOREMAN_GITHUB_API_URL") or DEFAULT_API_URL).strip().rstrip("/")
    parts = urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GitHubSettingsError(
            f"LONGSHOREMAN_GITHUB_API_URL={api_url!r} must be an http(s) URL such as "
            f"{DEFAULT_API_URL} or "
            "https://github.example.com/api/v3"
        )
    if parts.username or parts.password:
        raise GitHubSettingsError("LONGSHOREMAN_GITHUB_API_URL must not contain credentials")
    project = (env.get("LONGSHOREMAN_GITHUB_PROJECT") or "default").strip()
    if not _NAMESPACE.match(project):
        raise GitHubSettingsError(
            f"LONGSHOREMAN_GITHUB_PROJECT={project!r} is not a namespace name"
        )
    repo_projects: dict[str, str] = {}
    for entry in (env.get("LONGSHOREMAN_GITHUB_REPO_PROJECTS") or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        repo, sep, namespace = entry.partition("=")
        repo, namespace = repo.strip(), namespace.strip()
        if not sep or not _REPO.match(repo) or not _NAMESPACE.match(namespace):
            raise GitHubSettingsError(
                f"LONGSHOREMAN_GITHUB_REPO_PROJECTS entry {entry!r} must look like "
                "owner/repo=namespace"
            )
        repo_projects[repo.lower()] = namespace
    raw_workers = env.get("LONGSHOREMAN_GITHUB_WEBHOOK_WORKERS") or "8"
    try:
        workers = int(raw_workers)
    except ValueError:
        raise GitHubSettingsError(
            f"LONGSHOREMAN_GITHUB_WEBHOOK_WORKERS={raw_workers!r} is not a whole number"
        ) from None
    if workers < 1:
        raise GitHubSettingsError(
            f"LONGSHOREMAN_GITHUB_WEBHOOK_WORKERS={raw_workers!r} must be at least 1"
        )
    promotion_url = env.get("LONGSHOREMAN_GITHUB_PROMOTION_URL") or None
    if promotion_url is not None:
        try:
            promotion_url.format(namespace="ns", promotion="p")
        except (KeyError, IndexError, ValueError):
            raise GitHubSettingsError(
                f"LONGSHOREMAN_GITHUB_PROMOTION_URL={promotion_url!r} may only use {{namespace}} "
                "and {promotion}"
            ) from None
    return GitHubSettings(
        api_url=api_url,
        project=project,
        repo_projects=repo_projects,
        webhook_workers=workers,
        promotion_url=promotion_url,
        deployment_accounts=_deployment_accounts(env.get("LONGSHOREMAN_GITHUB_DEPLOYMENTS") or ""),
    )


_ACCOUNT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")


def _deployment_accounts(raw: str) -> frozenset[str] | None:
    value = raw.strip()
    if not value or value.lower() == "all":
        return None
    if value.lower() == "off":
        return frozenset()
    accounts = [a.strip() for a in value.split(",") if a.strip()]
    bad = [a for a in accounts if not _ACCOUNT.match(a)]
    if bad or not accounts:
        raise GitHubSettingsError(
            f"LONGSHOREMAN_GITHUB_DEPLOYMENTS={raw!r} must be all, off, or a comma-separated list "
            "of GitHub accounts (organizations or users)"
            f"{': ' + ', '.join(map(repr, bad)) if bad else ''}"
        )
    return frozenset(a.lower() for a in accounts)
