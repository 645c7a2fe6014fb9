"""The credentials port (:class:`promoter.ports.credentials.Credentials`) over the cluster.

Asked for ``(project, type, repoURL)`` by Warehouse discovery, the git steps and the oci steps,
it tries the sources of :func:`promoter.rules.credentials.lookup_order` in turn:

1. the project namespace's labelled Secrets, then the global credentials namespace's
   (``LONGSHOREMAN_GLOBAL_CREDENTIALS_NAMESPACE``): listed on every lookup, always with the
   ``cred-type`` label selector (RBAC cannot filter by label, so the client must: an unlabelled
   Secret is never read), never watched and never kept. A Secret holding a GitHub App is turned
   into an installation token scoped to the one repository (``app_tokens``, wired from
   ``handlers/``);
2. the GitHub App Longshoreman runs as (``app``): its installation token for a repository, or a
   ghcr.io package, on its GitHub;
3. the operator's files: the Docker ``config.json`` (``LONGSHOREMAN_REGISTRY_AUTH_FILE``) for
   registries. For git, None: git then uses the operator's gitconfig (``LONGSHOREMAN_GIT_CONFIG``).

Only the namespace a lookup names is read, so a project's Secret never serves another project.
Values go to ``on_secret`` (the log redactor) as they are handed out and appear nowhere else;
errors name the repository and the namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from app.controller import kube as k
from app.controller.warehouses.credentials import DockerConfigCredentials
from app.controller.warehouses.registry import RegistryError, parse_repo
from promoter.ports.credentials import Credential, Credentials, CredentialsError, CredentialType
from promoter.rules.credentials import (
    GitHubAppKey,
    RepoSecret,
    Source,
    find_secret,
    label_selectors,
    lookup_order,
    parse_secret,
    refused_over_http,
)

__all__ = ["AppTokens", "ClusterCredentials"]

log = logging.getLogger(__name__)

# A GitHub App from a Secret -> an installation token for one repository (handlers/).
AppTokens = Callable[[GitHubAppKey, str], Awaitable[Credential]]


class ClusterCredentials:
    """:class:`~promoter.ports.credentials.Credentials` over Secrets, the App and the
    operator's files (without ``kube``: the App and the files only)."""

    def __init__(
        self,
        kube: k.Kube | None,
        *,
        global_namespace: str | None = None,
        allow_http: bool = False,
        app: Credentials | None = None,
        app_tokens: AppTokens | None = None,
        docker_config: DockerConfigCredentials | None = None,
        on_secret: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.global_namespace = global_namespace
        self.allow_http = allow_http
        self.app = app
        self.app_tokens = app_tokens
        self.docker_config = docker_config
        self.on_secret = on_secret

    async def get(self, project: str, kind: CredentialType, repo_url: str) -> Credential | None:
        for source, namespace in lookup_order(project, self.global_namespace):
            if source in (Source.PROJECT, Source.GLOBAL):
                if self.kube is None or refused_over_http(repo_url, self.allow_http):
                    continue
                secret = find_secret(await self._secrets(namespace, kind, repo_url), kind, repo_url)
                if secret is None:
                    continue
                found = await self._from_secret(secret, repo_url)
            elif source is Source.GITHUB_APP:
                found = await self.app.get(project, kind, repo_url) if self.app else None
            else:
                found = self._operator(kind, repo_url)
            if found is not None:
                if self.on_secret is not None:
                    self.on_secret(found.password)
                return found
        return None

    async def _secrets(
        self, namespace: str, kind: CredentialType, repo_url: str
    ) -> list[RepoSecret]:
        """The namespace's Secrets of ``kind``: one labelled list per label name."""
        found: dict[str, RepoSecret] = {}
        assert self.kube is not None
        for selector in label_selectors(kind):
            try:
                items, _ = await self.kube.list(k.SECRETS, namespace, label_selector=selector)
            except k.KubeError as e:
                # The status and reason only (403 Forbidden: RBAC does not grant this
                # namespace's Secrets); a refusal stays one, trouble passes.
                temporary = isinstance(e, k.TemporaryError)
                why = " ".join(str(p) for p in (e.status, e.reason or type(e).__name__) if p)
                raise CredentialsError(
                    f"could not read the {kind.value} credentials for {repo_url} in namespace "
                    f"{namespace!r}: {why}",
                    retry_after=(getattr(e, "retry_after", None) or 30.0) if temporary else None,
                ) from None
            for item in items:
                secret = parse_secret(item)
                if secret is not None:
                    found.setdefault(secret.name, secret)
        return list(found.values())

    async def _from_secret(self, secret: RepoSecret, repo_url: str) -> Credential | None:
        if secret.problem:
            raise CredentialsError(f"{secret.where} matches {repo_url} but {secret.problem}")
        if secret.github_app is not None:
            if self.app_tokens is None:
                raise CredentialsError(
                    f"{secret.where} holds a GitHub App, which needs the GitHub integration"
                )
            token = await self.app_tokens(secret.github_app, repo_url)
            return Credential(token.username, token.password, secret.where)
        if not secret.usable:
            log.info("%s matches %s but has no username and password", secret.where, repo_url)
            return None
        return Credential(secret.username, secret.password, secret.where)

    def _operator(self, kind: CredentialType, repo_url: str) -> Credential | None:
        if kind is CredentialType.GIT or self.docker_config is None:
            return None
        try:
            host = parse_repo(repo_url).host
        except RegistryError:
            return None
        found = self.docker_config(host)
        if found is None:
            return None
        return Credential(found[0], found[1], f"the operator's {self.docker_config.path.name}")
