"""A project's own webhook receivers (ProjectConfig ``spec.webhookReceivers``), decided purely.

Kargo lets a project define receivers beside the operator's: each names one sender and a Secret
in the project's namespace, and listens at a hard-to-guess path that Kargo derives from the
project, the receiver's name and the Secret's values (``pkg/webhook/external/receiver.go``,
``buildWebhookPath``: ``/<sender>/<sha256(project + name + values)>``), published in the
ProjectConfig's ``status.webhookReceivers``. A request there refreshes only that project's
Warehouses. Longshoreman serves them under its receivers' prefix, ``/webhooks/<sender>/<hash>``,
beside the operator's ``/webhooks/<sender>[/<token>]``, with the same senders' authentication and
payloads (:mod:`app.receivers.senders`).

Which Secret key each sender reads (Kargo's):

- ``dockerhub``, ``quay``, ``generic``: ``secret`` (unsigned senders: the path is the secret);
- ``harbor``: ``auth-header`` (compared with ``Authorization``);
- ``gitlab``: ``secret-token`` (``X-Gitlab-Token``);
- ``artifactory``: ``secret-token`` (signs the body), and the receiver's ``virtualRepoName``;
- ``bitbucket``, ``gitea``: ``secret`` (signs the body); ``azure``: ``secret`` (the path);
- ``generic``: also its ``actions`` (Kargo's expressions,
  :mod:`promoter.warehouses.generic_actions`).

``github`` receivers are reported as not served here (a note, not an error of the
ProjectConfig: Kargo would serve them): GitHub events reach Longshoreman through its GitHub App.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MIN_SECRET_LENGTH",
    "SECRET_KEYS",
    "ProjectReceiver",
    "project_receivers",
    "receiver_path",
]

PATH_PREFIX = "/webhooks/"
SECRET_KEYS = {
    "dockerhub": "secret",
    "quay": "secret",
    "generic": "secret",
    "harbor": "auth-header",
    "gitlab": "secret-token",
    "artifactory": "secret-token",
    "bitbucket": "secret",
    "gitea": "secret",
    "azure": "secret",
}
NOT_SERVED = {
    "github": "GitHub events reach Longshoreman through its GitHub App (POST /github/webhook)",
}
SENDERS = (*SECRET_KEYS, *NOT_SERVED)


def receiver_path(project: str, sender: str, name: str, secret_values: Sequence[str]) -> str:
    """Kargo's ``buildWebhookPath`` under our prefix: the same hash, so the path changes when
    the Secret is rotated, and no one guesses it without the Secret."""
    digest = hashlib.sha256((project + name + "".join(secret_values)).encode()).hexdigest()
    return f"{PATH_PREFIX}{sender}/{digest}"


@dataclass(frozen=True, slots=True)
class ProjectReceiver:
    project: str  # the namespace whose Warehouses it refreshes
    name: str
    sender: str
    path: str
    secret: str = field(default="", repr=False)
    virtual_repo: str = ""
    # A generic receiver's Kargo ``actions`` (promoter.warehouses.generic_actions); without any,
    # it takes the repository and tags in its body as the operator's generic receiver does.
    actions: tuple[Mapping[str, Any], ...] = ()


# The shortest secret a project receiver may have unless the operator says otherwise
# (LONGSHOREMAN_WEBHOOK_MIN_SECRET_LENGTH): the same floor as the operator's own receivers.
MIN_SECRET_LENGTH = 16


def project_receivers(
    project: str,
    specs: Sequence[Mapping[str, Any]],
    secret_data: Callable[[str], Mapping[str, str] | None],
    min_secret_length: int = MIN_SECRET_LENGTH,
) -> tuple[list[ProjectReceiver], list[str], list[str]]:
    """The receivers a ProjectConfig defines, what is wrong with others (a missing Secret or
    key, a secret shorter than ``min_secret_length``: an unsigned sender's path, and every
    sender's check, is only as hard to guess as its secret), and which are not served here.

    ``secret_data(name)`` is the named Secret's decoded data in the project's namespace (None:
    there is no such Secret).
    """
    out: list[ProjectReceiver] = []
    problems: list[str] = []
    not_served: list[str] = []
    for i, spec in enumerate(specs):
        name = str(spec.get("name") or "")
        where = f"spec.webhookReceivers[{i}] ({name})"
        chosen = [s for s in SENDERS if spec.get(s) is not None]
        if len(chosen) != 1:
            problems.append(f"{where}: exactly one sender must be set")
            continue
        sender = chosen[0]
        if sender in NOT_SERVED:
            not_served.append(f"webhook receiver `{name}` is not served: {NOT_SERVED[sender]}")
            continue
        config = spec.get(sender) or {}
        secret_name = str((config.get("secretRef") or {}).get("name") or "")
        data = secret_data(secret_name) if secret_name else None
        if data is None:
            problems.append(f"{where}: Secret {secret_name!r} not found in namespace {project!r}")
            continue
        key = SECRET_KEYS[sender]
        secret = str(data.get(key) or "")
        if not secret:
            problems.append(f"{where}: Secret {secret_name!r} has no {key!r} key")
            continue
        if len(secret) < min_secret_length:
            problems.append(
                f"{where}: Secret {secret_name!r} key {key!r} is shorter than "
                f"{min_secret_length} characters: use a long random value "
                "(e.g. openssl rand -hex 32)"
            )
            continue
        out.append(
            ProjectReceiver(
                project=project,
                name=name,
                sender=sender,
                path=receiver_path(project, sender, name, [secret]),
                secret=secret,
                virtual_repo=str(config.get("virtualRepoName") or ""),
                actions=tuple(a for a in config.get("actions") or () if isinstance(a, Mapping)),
            )
        )
    return out, problems, not_served
