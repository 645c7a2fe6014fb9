"""The argocd steps' port (:class:`promoter.steps.argocd` reads and patches Applications)
over the Kubernetes API: Argo CD's Applications are custom resources, so starting a sync is a
patch with the resourceVersion precondition. Reading one comes from the controller's Application
watch when it has the object (as Kargo's cached client reads; the event that woke a waiting
Promotion is in it already), else a GET. The library's errors become the steps' own (a conflict
is retried, a missing Application ends the step)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer, NamespacedInformers
from promoter.errors import StepError
from promoter.steps.argocd import ApplicationConflict


class KubeArgoCDApps:
    """The Argo CD port of the argocd steps, over the Kubernetes API."""

    def __init__(self, kube: k.Kube, cache: Informer | NamespacedInformers | None = None) -> None:
        self.kube = kube
        self.cache = cache

    async def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        if self.cache is not None and self.cache.synced.is_set():
            cached = self.cache.get(namespace, name)
            if cached is not None:
                return cached
        try:
            return await self.kube.get(k.APPLICATIONS, namespace, name)
        except k.NotFound:
            return None
        except k.KubeError as e:
            raise StepError(f"reading Application {namespace}/{name}: {e}") from None

    async def list(self, namespace: str, label_selector: str) -> list[Mapping[str, Any]]:
        try:
            items, _ = await self.kube.list(
                k.APPLICATIONS, namespace, label_selector=label_selector
            )
        except k.KubeError as e:
            raise StepError(f"listing Applications in {namespace}: {e}") from None
        return list(items)

    async def patch(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, resource_version: str
    ) -> Mapping[str, Any]:
        try:
            written = await self.kube.patch(
                k.APPLICATIONS, namespace, name, dict(patch), resource_version=resource_version
            )
        except k.Conflict:
            raise ApplicationConflict(
                f"Application {namespace}/{name} changed while we updated it; will retry"
            ) from None
        except k.NotFound:
            raise StepError(f"Application {namespace}/{name} not found", terminal=True) from None
        except k.KubeError as e:
            raise StepError(f"updating Application {namespace}/{name}: {e}") from None
        if self.cache is not None:
            self.cache.observe(written)  # the next read must not see the copy from before
        return written
