"""Kargo's repository credentials, decided purely: the Secret format, which Secret matches a
repository, and the order the sources are asked in.

**The Secret format** is Kargo's, read unchanged (``docs/docs/50-user-guide/50-security/
30-managing-secrets.md`` in akuity/kargo): a Secret labelled ``kargo.akuity.io/cred-type`` (or
our own name for the label, ``longshoreman.dev/cred-type``) with the value ``git``, ``image`` or
``helm``, whose ``data`` holds ``repoURL`` (an exact URL, or a regular expression when
``repoURLIsRegex`` is ``"true"``) and either ``username`` + ``password`` or a GitHub App:
``githubAppClientID`` or ``githubAppID``, ``githubAppPrivateKey`` and
``githubAppInstallationID`` (git only, as Kargo's ``AppCredentialProvider.Supports``).

**Which Secret** (Kargo's ``pkg/credentials/kubernetes/database.go`` and its documented
precedence): within one namespace, exact ``repoURL`` matches first, then regular-expression
matches, each group in lexical order of the Secrets' names; the first wins. URLs are compared
normalized for their type (``urls.NormalizeGit``, ``NormalizeImage``, ``NormalizeChart``); a
pattern is tried against the URL as written and normalized (Kargo #4833). Patterns are RE2, run
in linear time (:mod:`promoter.expressions.regex`); one that does not compile is skipped. A
Secret with neither a username and password nor a GitHub App gives nothing (and, as in Kargo,
the next Secret is not tried).

**Which namespaces, in what order** (:func:`lookup_order`): the project's own namespace, then
the global credentials namespace (Kargo's ``--global-credentials-namespace``, since Kargo 1.9
its shared resources namespace); then the GitHub App Longshoreman runs as, for repositories and
packages on its GitHub; then what the operator mounted (a Docker ``config.json`` for registries,
the gitconfig for git). Like Kargo (``ALLOW_CREDENTIALS_OVER_HTTP``), Secrets are never used
for a plain ``http://`` URL unless the operator allows it.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promoter.expressions.errors import ExpressionError
from promoter.expressions.regex import compile_regex
from promoter.ports.credentials import CredentialType
from promoter.warehouses.freight import (
    normalize_chart_url,
    normalize_git_url,
    normalize_image_url,
)

__all__ = [
    "LABEL_KEYS",
    "GitHubAppKey",
    "RepoSecret",
    "Source",
    "find_secret",
    "label_selectors",
    "lookup_order",
    "normalize",
    "parse_secret",
    "refused_over_http",
]

# Kargo's label first, then ours: either makes a Secret a repository credential.
LABEL_KEYS = ("kargo.akuity.io/cred-type", "longshoreman.dev/cred-type")

FIELD_REPO_URL = "repoURL"
FIELD_IS_REGEX = "repoURLIsRegex"
FIELD_USERNAME = "username"
FIELD_PASSWORD = "password"
FIELD_APP_CLIENT_ID = "githubAppClientID"
FIELD_APP_ID = "githubAppID"
FIELD_APP_KEY = "githubAppPrivateKey"
FIELD_APP_INSTALLATION = "githubAppInstallationID"


class Source(enum.StrEnum):
    """Where credentials are looked for, in :func:`lookup_order`."""

    PROJECT = "project"
    GLOBAL = "global"
    GITHUB_APP = "github-app"
    OPERATOR = "operator"


def lookup_order(project: str, global_namespace: str | None) -> tuple[tuple[Source, str], ...]:
    """The sources asked for one project's credentials, first to last, with the namespace each
    reads (``""`` for the ones that read none). The global namespace is skipped when it is
    not configured or is the project's own."""
    order: list[tuple[Source, str]] = [(Source.PROJECT, project)]
    if global_namespace and global_namespace != project:
        order.append((Source.GLOBAL, global_namespace))
    order += [(Source.GITHUB_APP, ""), (Source.OPERATOR, "")]
    return tuple(order)


def label_selectors(kind: CredentialType) -> tuple[str, ...]:
    """The label selectors that list ``kind``'s Secrets: one per label name (a selector cannot
    say "this key or that one")."""
    return tuple(f"{key}={kind.value}" for key in LABEL_KEYS)


def refused_over_http(repo_url: str, allow_http: bool) -> bool:
    """Kargo's rule: no Secret is handed out for an ``http://`` URL unless the operator allows
    credentials over plain HTTP."""
    return not allow_http and repo_url.strip().lower().startswith("http://")


def normalize(kind: CredentialType, repo_url: str) -> str:
    """The repository URL as Kargo compares it for this credential type."""
    if kind is CredentialType.GIT:
        return normalize_git_url(repo_url)
    if kind is CredentialType.HELM:
        return normalize_chart_url(repo_url)
    return normalize_image_url(repo_url)


@dataclass(frozen=True, slots=True)
class GitHubAppKey:
    """A GitHub App in a Secret: its ID (the client ID when given, as Kargo prefers), the
    installation and the PEM private key (never shown)."""

    app_id: str
    installation_id: int
    private_key: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class RepoSecret:
    """One labelled Secret, decoded. ``problem`` says why it cannot be used (named, never
    quoted) when it matches but is malformed."""

    namespace: str
    name: str
    kind: CredentialType
    repo_url: str
    is_regex: bool
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    github_app: GitHubAppKey | None = field(default=None, repr=False)
    problem: str = ""

    @property
    def where(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    @property
    def usable(self) -> bool:
        return not self.problem and (
            self.github_app is not None or bool(self.username and self.password)
        )


def _decoded(data: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue  # not ours to read; a value that does not decode is no credential
    return out


def parse_secret(obj: Mapping[str, Any]) -> RepoSecret | None:
    """A Secret as the API server returns it (``data`` base64-encoded), or None when it is not
    a repository credential (no type label, an unknown type, no ``repoURL``)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    kind: CredentialType | None = None
    for key in LABEL_KEYS:
        try:
            kind = CredentialType(str(labels.get(key) or ""))
            break
        except ValueError:
            continue
    if kind is None:
        return None
    data = _decoded(obj.get("data") or {})
    repo_url = data.get(FIELD_REPO_URL, "")
    if not repo_url:
        return None
    app: GitHubAppKey | None = None
    problem = ""
    app_id = data.get(FIELD_APP_CLIENT_ID) or data.get(FIELD_APP_ID) or ""
    installation = data.get(FIELD_APP_INSTALLATION, "")
    private_key = data.get(FIELD_APP_KEY, "")
    if kind is CredentialType.GIT and app_id and installation and private_key:
        try:
            app = GitHubAppKey(app_id.strip(), int(installation.strip()), private_key)
        except ValueError:
            problem = f"its {FIELD_APP_INSTALLATION} is not a number"
    return RepoSecret(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        kind=kind,
        repo_url=repo_url,
        is_regex=data.get(FIELD_IS_REGEX, "") == "true",
        username=data.get(FIELD_USERNAME, ""),
        password=data.get(FIELD_PASSWORD, ""),
        github_app=app,
        problem=problem,
    )


def _matches(secret: RepoSecret, kind: CredentialType, repo_url: str, normalized: str) -> bool:
    if secret.is_regex:
        try:
            pattern = compile_regex(secret.repo_url)
        except ExpressionError:
            return False
        return pattern.search(repo_url) or pattern.search(normalized)
    return normalize(kind, secret.repo_url) == normalized


def find_secret(
    secrets: Iterable[RepoSecret], kind: CredentialType, repo_url: str
) -> RepoSecret | None:
    """The Secret whose ``repoURL`` matches, by Kargo's precedence (see the module), or None.

    ``secrets`` are one namespace's; Secrets of another type are passed over. As in Kargo, the
    first match wins even when it has nothing to give (:attr:`RepoSecret.usable`): a Secret
    never falls through to the next one.
    """
    candidates = sorted((s for s in secrets if s.kind is kind), key=lambda s: s.name)
    normalized = normalize(kind, repo_url)
    ordered: Sequence[RepoSecret] = [s for s in candidates if not s.is_regex] + [
        s for s in candidates if s.is_regex
    ]
    for secret in ordered:
        if _matches(secret, kind, repo_url, normalized):
            return secret
    return None
