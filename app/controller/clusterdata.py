"""The port of ``secret()``, ``configMap()`` and their shared forms, over the Kubernetes API.

One GET per object a step's expressions name (promoter/ports/clusterdata.py fetches on demand and
keeps
the answer for the step), never a watch: a Secret informer would hold every Secret of every
watched namespace in this process. A Secret's values are handed to ``on_secret`` (the log
redactor) as they are read, so no log line shows them; errors name the object, never a value.
"""

from __future__ import annotations

from collections.abc import Callable

from app.controller import kube as k
from promoter.expressions import ExpressionError
from promoter.ports.clusterdata import (
    CONFIG_MAP,
    SECRET,
    DataObject,
    config_map_object,
    secret_object,
)

_TYPES = {SECRET: k.SECRETS, CONFIG_MAP: k.CONFIG_MAPS}


class KubeClusterData:
    """:class:`promoter.ports.clusterdata.ClusterData` over the API server."""

    def __init__(self, kube: k.Kube, *, on_secret: Callable[[str], None] | None = None) -> None:
        self.kube = kube
        self.on_secret = on_secret

    async def read(self, kind: str, namespace: str, name: str) -> DataObject | None:
        try:
            obj = await self.kube.get(_TYPES[kind], namespace, name)
        except k.NotFound:
            return None
        except k.KubeError as e:
            # e.g. 403: the service account may not read this namespace's Secrets (RBAC in the
            # operator guide). The status and reason only: the body is the server's, not ours.
            raise ExpressionError(
                reason=f"reading {kind} {namespace}/{name}: "
                f"{e.status or ''} {e.reason or type(e).__name__}".strip()
            ) from None
        if kind != SECRET:
            return config_map_object(obj)
        found = secret_object(obj)
        if self.on_secret is not None:
            for value in found.data.values():
                self.on_secret(value)
        return found
