"""The credentials port: who may read a repository, asked by every consumer the same way.

Warehouse discovery (git remotes, image registries, Helm chart repositories and OCI charts), the
git steps and ``oci-download``/``oci-push`` ask one :class:`Credentials` for
``(project, type, repoURL)`` and get a username and password, or None (go anonymously, or with
what the operator configured for git). The project is the namespace of the Warehouse or
Promotion asking: one project's Secrets are never looked up for another.

The lookup order and Kargo's Secret format are rules (:mod:`promoter.rules.credentials`); the
implementation over the cluster's Secrets, the GitHub App and the operator's files is
``app/controller/credentials.py``. Values never appear in ``repr``, messages or logs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["NO_CREDENTIALS", "Credential", "CredentialType", "Credentials", "CredentialsError"]


class CredentialType(enum.StrEnum):
    """Kargo's credential types: the value of the ``cred-type`` label."""

    GIT = "git"
    IMAGE = "image"
    HELM = "helm"

    @classmethod
    def of_oci_reference(cls, reference: str) -> CredentialType:
        """Kargo's ``parseOCIReference``: ``oci://`` names a Helm chart, anything else an image."""
        return cls.HELM if reference.strip().startswith("oci://") else cls.IMAGE


@dataclass(frozen=True, slots=True)
class Credential:
    """A username and password (or token) for one repository, and where they came from.

    ``source`` says which Secret (``namespace/name``) or provider gave them, for messages; it
    never holds a value.
    """

    username: str
    password: str = field(repr=False)
    source: str = ""


class CredentialsError(Exception):
    """Credentials could not be looked up (the cluster refused or did not answer, a GitHub App
    Secret is malformed). The message names the repository and namespace, never a value.
    ``retry_after`` is set when trying again later may help."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Credentials(Protocol):
    """``get(project, type, repoURL)``: a credential for the repository, or None."""

    async def get(self, project: str, kind: CredentialType, repo_url: str) -> Credential | None: ...


class _None:
    async def get(self, project: str, kind: CredentialType, repo_url: str) -> Credential | None:
        return None


# Nobody has credentials: the local runner, and tests that need none.
NO_CREDENTIALS: Credentials = _None()
