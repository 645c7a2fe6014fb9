"""The port to OCI registries that the ``oci-download`` and ``oci-push`` steps use.

The server implements it (app/controller/oci.py) over the Warehouses' OCI client, with the
credentials port's answers for the Promotion's project; nothing here talks to the network.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any, Protocol

from promoter.errors import StepError

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
IMAGE_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)


@dataclass(frozen=True, slots=True)
class Manifest:
    """A manifest as the registry stored it: its media type, digest and exact bytes."""

    media_type: str
    digest: str
    body: bytes

    def document(self) -> dict[str, Any]:
        value = json.loads(self.body)
        if not isinstance(value, dict):
            raise StepError("the registry answered a manifest that is not a JSON object")
        return value

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES or "manifests" in self.document()


def plain_http_host(host: str) -> bool:
    """Whether a registry is spoken to over plain HTTP: as go-containerregistry decides,
    localhost, ``.local``, loopback and private addresses (the Warehouses' registry client and
    the helm steps' OCI dependencies both ask this)."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host.strip("[]")
    if name == "localhost" or name.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


class OCIRegistry(Protocol):
    """The registry operations the steps need. ``repository`` is ``host[:port]/path``
    (``oci://host/path`` for a Helm chart, whose credentials are of type ``helm``); every call
    uses the credentials of ``project`` (the Promotion's namespace) and no other's. Errors are
    StepErrors whose messages never hold a credential."""

    async def manifest(
        self, repository: str, reference: str, *, insecure: bool, project: str
    ) -> Manifest:
        """A tag's or digest's manifest; StepError (terminal when it does not exist)."""
        ...

    async def blob(
        self, repository: str, digest: str, limit: int, *, insecure: bool, project: str
    ) -> bytes: ...

    async def copy_blob(
        self, source: str, destination: str, digest: str, *, insecure: bool, project: str
    ) -> None:
        """Make blob ``digest`` of ``source`` exist in ``destination`` (no-op when it does)."""
        ...

    async def put_manifest(
        self, repository: str, reference: str, manifest: Manifest, *, insecure: bool, project: str
    ) -> None: ...
