"""The projects this install serves, kept current by an informer of Namespaces.

A project is a namespace labelled so (``promoter.control.projects``); its labels feed the
ClusterConfig's ``projectSelector`` and the operator's project selection, its annotations the
chat front ends' routing. A namespace that gains or loses the label, or whose labels start or
stop matching the selection, wakes its Stages: they are reconciled from then on, or left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.controller import kube as k
from app.controller.informer import Informer
from promoter.control.projects import Project, ProjectSelection, project_of
from promoter.resources.model import name_of


class ServedProjects:
    """Which namespaces are served, and the projects chat can reach, with their routing."""

    def __init__(
        self,
        kube: k.Kube,
        selection: ProjectSelection,
        *,
        namespace: str | None = None,
    ) -> None:
        self.selection = selection
        # With one watched namespace, only that one is ever served.
        self.only = namespace
        self.namespaces = Informer(kube, k.NAMESPACES, on_event=self._on_namespace)
        # Called with a namespace that became served: its Stages and Warehouses are woken.
        self.on_change: list[Callable[[str], None]] = []

    def serves(self, namespace: str) -> bool:
        """Whether the controller reconciles the Stages of this namespace."""
        if self.only is not None and namespace != self.only:
            return False
        return self.selection.serves_namespace(namespace, self.namespaces.get(None, namespace))

    def labels(self, namespace: str) -> Mapping[str, str]:
        obj = self.namespaces.get(None, namespace) or {}
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return {str(key): str(value) for key, value in labels.items()}

    def projects(self) -> list[Project]:
        """The projects chat can reach, by name, each with its routing."""
        out = []
        for obj in self.namespaces.items():
            name = name_of(obj)
            if (self.only is None or name == self.only) and self.selection.reachable(obj):
                out.append(project_of(obj))
        return sorted(out, key=lambda p: p.name)

    def _on_namespace(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        before = old is not None and self.selection.serves_namespace(name_of(old), old)
        after = kind != "DELETED" and self.selection.serves_namespace(name_of(obj), obj)
        if after and not before:
            for wake in self.on_change:
                wake(name_of(obj))
