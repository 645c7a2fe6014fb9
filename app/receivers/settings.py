"""The registry webhook receivers' secrets: read from the environment once, validated.

Each receiver is mounted only when its secret is set, so an operator turns on exactly the
senders they use. A secret shorter than 16 characters (or
``LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH``) is refused at start (the URL tokens of
unsigned senders are only as strong as the secret behind them). Secrets never appear in
``repr``, logs or error messages.

Variables:

``LONGSHOREMAN_DOCKERHUB_WEBHOOK_SECRET``
    Docker Hub (unsigned): the webhook URL is ``/webhooks/dockerhub/<token>``, the token being
    the SHA-256 of the secret in hex.
``LONGSHOREMAN_QUAY_WEBHOOK_SECRET``
    Quay (unsigned): ``/webhooks/quay/<token>``.
``LONGSHOREMAN_HARBOR_WEBHOOK_AUTH``
    Harbor: the policy's "Auth Header", compared with ``Authorization``; ``/webhooks/harbor``.
``LONGSHOREMAN_GITLAB_WEBHOOK_TOKEN``
    GitLab: the hook's "Secret token" (``X-Gitlab-Token``); ``/webhooks/gitlab``.
``LONGSHOREMAN_ARTIFACTORY_WEBHOOK_SECRET``
    Artifactory: the webhook's secret token, which signs the body (``X-Jfrog-Event-Auth``);
    ``/webhooks/artifactory``.
``LONGSHOREMAN_ARTIFACTORY_VIRTUAL_REPO``
    Optional: the virtual repository Warehouses pull through, used instead of the event's
    local ``repo_key`` (Kargo's ``virtualRepoName``).
``LONGSHOREMAN_GENERIC_WEBHOOK_SECRET``
    The generic receiver (CI jobs, scripts): ``/webhooks/generic/<token>``.
``LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH``
    Optional: the shortest secret a receiver may have, the operator's above and every
    project's own (ProjectConfig ``webhookReceivers``) alike; 16 by default, never less.
``LONGSHOREMAN_WEBHOOK_NAMESPACE``
    Optional: refresh only Warehouses of this namespace (Kargo's receivers are per project);
    empty: every namespace this replica watches.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# The floor, shared with the projects' own receivers; LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH
# may raise it.
from promoter.warehouses.project_receivers import MIN_SECRET_LENGTH

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

# receiver -> the variable holding its secret (the order the docs list them in)
SECRET_VARIABLES = {
    "dockerhub": "LONGSHOREMAN_DOCKERHUB_WEBHOOK_SECRET",
    "quay": "LONGSHOREMAN_QUAY_WEBHOOK_SECRET",
    "harbor": "LONGSHOREMAN_HARBOR_WEBHOOK_AUTH",
    "gitlab": "LONGSHOREMAN_GITLAB_WEBHOOK_TOKEN",
    "artifactory": "LONGSHOREMAN_ARTIFACTORY_WEBHOOK_SECRET",
    "generic": "LONGSHOREMAN_GENERIC_WEBHOOK_SECRET",
}


# The senders that cannot sign or add a header: their secret travels in the URL, as a token.
TOKEN_SENDERS = ("dockerhub", "quay", "generic")


def path_token(secret: str) -> str:
    """The URL token of an unsigned sender: SHA-256 of the secret in hex, so the URL (which
    proxies and the sender's settings page show) does not carry the secret itself."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ReceiverSettingsError(ValueError):
    """A receiver setting is malformed; the message names the variable, never the value."""


@dataclass(frozen=True, slots=True)
class ReceiverSettings:
    """The secret of each enabled receiver, by receiver name."""

    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    artifactory_virtual_repo: str = ""
    namespace: str | None = None
    # The shortest secret any receiver may have, the operator's and the projects' own.
    min_secret_length: int = MIN_SECRET_LENGTH

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(name for name in SECRET_VARIABLES if self.secrets.get(name))

    def secret(self, receiver: str) -> str | None:
        return self.secrets.get(receiver) or None

    def path_tokens(self) -> dict[str, str]:
        """The URL token of each enabled unsigned sender (a credential too: never logged)."""
        return {
            name: path_token(self.secrets[name]) for name in TOKEN_SENDERS if name in self.secrets
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReceiverSettings:
        env = os.environ if env is None else env
        secrets: dict[str, str] = {}
        raw = {
            "dockerhub": env.get("LONGSHOREMAN_DOCKERHUB_WEBHOOK_SECRET"),
            "quay": env.get("LONGSHOREMAN_QUAY_WEBHOOK_SECRET"),
            "harbor": env.get("LONGSHOREMAN_HARBOR_WEBHOOK_AUTH"),
            "gitlab": env.get("LONGSHOREMAN_GITLAB_WEBHOOK_TOKEN"),
            "artifactory": env.get("LONGSHOREMAN_ARTIFACTORY_WEBHOOK_SECRET"),
            "generic": env.get("LONGSHOREMAN_GENERIC_WEBHOOK_SECRET"),
        }
        minimum = _min_secret_length(env)
        for receiver, value in raw.items():
            if not value:
                continue
            if len(value.strip()) < minimum:
                raise ReceiverSettingsError(
                    f"{SECRET_VARIABLES[receiver]} is shorter than {minimum} "
                    "characters: use a long random value (e.g. openssl rand -hex 32)"
                )
            secrets[receiver] = value.strip()
        namespace = (env.get("LONGSHOREMAN_WEBHOOK_NAMESPACE") or "").strip() or None
        if namespace is not None and not _NAMESPACE.match(namespace):
            raise ReceiverSettingsError(
                f"LONGSHOREMAN_WEBHOOK_NAMESPACE={namespace!r} is not a namespace name"
            )
        virtual_repo = env.get("LONGSHOREMAN_ARTIFACTORY_VIRTUAL_REPO") or ""
        return cls(
            secrets=secrets,
            artifactory_virtual_repo=virtual_repo.strip(),
            namespace=namespace,
            min_secret_length=minimum,
        )


def _min_secret_length(env: Mapping[str, str]) -> int:
    raw = (env.get("LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH") or "").strip()
    if not raw:
        return MIN_SECRET_LENGTH
    if not raw.isdigit() or int(raw) < MIN_SECRET_LENGTH:
        raise ReceiverSettingsError(
            f"LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH={raw!r} is not a whole number of at least "
            f"{MIN_SECRET_LENGTH}"
        )
    return int(raw)
