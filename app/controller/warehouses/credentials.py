"""Registry credentials from a docker ``config.json`` the operator mounts from a Secret.

The file is the one ``docker login`` writes (and Kubernetes' ``kubernetes.io/dockerconfigjson``
Secrets hold): ``{"auths": {"HOST": {"auth": base64("user:password")}}}``, or ``username`` and
``password`` instead of ``auth``. Keys may be a bare host (``ghcr.io``), a URL
(``https://index.docker.io/v1/``) or a host with a path; the host is what counts. The file is
re-read when its modification time changes, so a rotated Secret (which the kubelet swaps in
place) takes effect without a restart. Credentials are returned to the OCI client only; a
malformed file is reported by path, never by content.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from pathlib import Path
from typing import Any

__all__ = ["DockerConfigCredentials", "parse_docker_config"]

log = logging.getLogger(__name__)

# Docker Hub's names for itself; the OCI client asks for the registry's API host.
_DOCKER_HUB = ("index.docker.io", "docker.io", "registry-1.docker.io")


def _host_of(key: str) -> str:
    host = key.split("://", 1)[-1].split("/", 1)[0].lower()
    return "registry-1.docker.io" if host in _DOCKER_HUB else host


def parse_docker_config(data: Any) -> dict[str, tuple[str, str]]:
    """Host -> (user, password) from a parsed ``config.json``; unusable entries are skipped."""
    found: dict[str, tuple[str, str]] = {}
    auths = data.get("auths") if isinstance(data, dict) else None
    for key, entry in (auths or {}).items() if isinstance(auths, dict) else ():
        if not isinstance(entry, dict):
            continue
        user, password = str(entry.get("username") or ""), str(entry.get("password") or "")
        if entry.get("auth"):
            try:
                decoded = base64.b64decode(str(entry["auth"]), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue
            user, _, password = decoded.partition(":")
        if user or password:
            found[_host_of(str(key))] = (user, password)
    return found


class DockerConfigCredentials:
    """``OCIClient.credentials``: host -> (user, password), from the file as it is now."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: float | None = None
        self._by_host: dict[str, tuple[str, str]] = {}

    def _load(self) -> None:
        try:
            stamp = os.stat(self.path).st_mtime
        except OSError:
            log.warning("registry credentials file %s is missing; reading anonymously", self.path)
            self._stamp, self._by_host = None, {}
            return
        if stamp == self._stamp:
            return
        try:
            self._by_host = parse_docker_config(json.loads(self.path.read_text()))
        except (OSError, ValueError):
            log.warning("registry credentials file %s is not a docker config.json", self.path)
            self._by_host = {}
        self._stamp = stamp

    def __call__(self, host: str) -> tuple[str, str] | None:
        self._load()
        return self._by_host.get(_host_of(host))
