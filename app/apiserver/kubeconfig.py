"""A kubeconfig pointing at an emulator: plain HTTP, no credentials.

Accepted by ``kubernetes.config.load_kube_config``, its ``kubernetes.aio`` twin and kubectl.
``impersonate`` names who kubectl says it acts as (its ``Impersonate-User`` header, the only
identity the emulator knows); the Python clients do not read it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


def kubeconfig_dict(
    url: str,
    *,
    name: str = "longshoreman-emulator",
    namespace: str = "default",
    impersonate: str = "",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        # kubectl and the Python client both want a user entry, even an empty one.
        "users": [{"name": name, "user": {"as": impersonate} if impersonate else {}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path,
    url: str,
    *,
    name: str = "longshoreman-emulator",
    namespace: str = "default",
    impersonate: str = "",
) -> Path:
    """Write a kubeconfig for ``url`` to ``path`` (mode 0600, like kubectl) and return it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    config = kubeconfig_dict(url, name=name, namespace=namespace, impersonate=impersonate)
    text = yaml.safe_dump(config, sort_keys=False)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return target
