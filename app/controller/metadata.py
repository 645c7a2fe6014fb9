"""The metadata port of ``set-metadata`` and ``stageMetadata()``/``freightMetadata()``, and the
Freight alias port of ``set-freight-alias``, over the Kubernetes API.

Reads come from the controller's Stage and Freight informers (expression functions are
synchronous and must not wait on the network). A merge is one status merge patch with the
object's resourceVersion as a precondition: the patch is the exact difference between the
metadata read and the metadata wanted, so a value that is a map replaces the old map rather than
being merged into it, and a concurrent writer (our own Stage status writes, a verification) is
never overwritten; on a conflict the object is read again and the merge decided again. The
written object goes into the cache at once, so the next step's expressions read what this one
wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.errors import ConfigRefused, StepError
from promoter.resources.model import meta
from promoter.rules.freight_alias import alias_patch, go_quote
from promoter.rules.metadata import FREIGHT, STAGE, MetadataObjectMissing, merged, metadata_of


class KubeMetadataStore:
    """:class:`promoter.rules.metadata.MetadataStore` over Stages and Freight in the cluster."""

    def __init__(self, kube: k.Kube, *, stages: Informer, freight: Informer) -> None:
        self.kube = kube
        self._informers = {STAGE: stages, FREIGHT: freight}
        self._types = {STAGE: k.STAGES, FREIGHT: k.FREIGHT}

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        obj = self._informers[kind].get(namespace, name)
        return None if obj is None else metadata_of(obj)

    def freight_status(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        obj = self._informers[FREIGHT].get(namespace, name)
        if obj is None:
            return None
        status = obj.get("status")
        return dict(status) if isinstance(status, Mapping) else {}

    async def merge(self, kind: str, namespace: str, name: str, values: Mapping[str, Any]) -> None:
        informer, rt = self._informers[kind], self._types[kind]

        async def attempt(n: int) -> None:
            # The cache first; after a conflict (or before the cache has it), the API server.
            current = informer.get(namespace, name) if n == 0 else None
            if current is None:
                current = await self._read(kind, namespace, name)
            old = metadata_of(current)
            new = merged(old, values)
            if new == old:
                return
            patch = k.merge_patch_between({"metadata": old}, {"metadata": new})
            try:
                written = await self.kube.patch_status(
                    rt,
                    namespace,
                    name,
                    patch,
                    resource_version=str(meta(current).get("resourceVersion")),
                )
            except k.NotFound:
                raise MetadataObjectMissing(kind, namespace, name) from None
            except k.Conflict:
                raise  # changed since we read it: read again and merge again
            except k.KubeError as e:
                raise StepError(f"updating the metadata of {kind} {namespace}/{name}: {e}") from e
            informer.observe(written)

        try:
            await k.retry_on_conflict(attempt)
        except k.Conflict:
            raise StepError(
                f"{kind} {namespace}/{name} kept changing while its metadata was updated; "
                "will retry"
            ) from None

    async def _read(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        try:
            obj = await self.kube.get(self._types[kind], namespace, name)
        except k.NotFound:
            raise MetadataObjectMissing(kind, namespace, name) from None
        except k.KubeError as e:
            raise StepError(f"reading {kind} {namespace}/{name}: {e}") from e
        self._informers[kind].observe(obj)
        return obj


class KubeFreightAliases:
    """:class:`promoter.rules.freight_alias.FreightAliases` over Freight in the cluster.

    Reads come from the controller's Freight informer; the write is Kargo's one merge patch of
    the ``alias`` field and label (not status, so no resourceVersion precondition: the patch
    touches nothing another writer sets). The written object goes into the cache at once, so
    the uniqueness check of the next ``set-freight-alias`` sees it.
    """

    def __init__(self, kube: k.Kube, *, freight: Informer) -> None:
        self.kube = kube
        self._freight = freight

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._freight.get(namespace, name)

    def list(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self._freight.items(namespace)

    async def write_alias(self, namespace: str, name: str, alias: str) -> None:
        try:
            written = await self.kube.patch(k.FREIGHT, namespace, name, alias_patch(alias))
        except k.NotFound:
            raise ConfigRefused(
                f"freight {go_quote(name)} not found in project {go_quote(namespace)}"
            ) from None
        except k.KubeError as e:
            raise StepError(
                f"failed to patch alias for Freight {go_quote(name)} in project "
                f"{go_quote(namespace)}: {e}"
            ) from e
        self._freight.observe(written)
