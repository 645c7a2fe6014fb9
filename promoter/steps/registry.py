"""Maps ``uses:`` kinds to step objects. Registering a kind is one line in ``_MODULES`` or one
call to :meth:`StepRegistry.register`."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from promoter.steps.base import Step

# Modules exposing STEPS: dict[str, Step]; imported lazily so a missing optional dependency of one
# adapter cannot break the others at import time.
_MODULES = (
    "promoter.steps.basic",
    "promoter.steps.git",
    "promoter.steps.files",
    "promoter.steps.tomlfiles",
    "promoter.steps.http",
    "promoter.steps.download",
    "promoter.steps.archive",
    # Needs the metadata port (StepServices.extra["metadata"]), which the server and the local
    # runner provide.
    "promoter.steps.metadata",
    # Needs the Freight alias port (StepServices.extra["freight-aliases"]), which the server and
    # the local runner provide.
    "promoter.steps.freight_alias",
    # Needs the Argo CD port (StepServices.extra["argocd"]), which the server provides; in the
    # local runner it errors with a message saying so.
    "promoter.steps.argocd",
    # Need the GitHub port (StepServices.extra["github"]), set when the GitHub App is configured.
    "promoter.steps.github",
)


class StepRegistry(Mapping[str, Step]):
    """A read-mostly mapping of step kinds, extended by adapters (Argo CD, GitHub) at wiring."""

    def __init__(self, steps: Mapping[str, Step] | None = None) -> None:
        self._steps: dict[str, Step] = dict(steps or {})

    def register(self, kind: str, step: Step) -> None:
        self._steps[kind] = step

    def __getitem__(self, kind: str) -> Step:
        return self._steps[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)


def builtin_registry() -> StepRegistry:
    """Every built-in step that needs no cluster or GitHub API."""
    registry = StepRegistry()
    for module_name in _MODULES:
        module = importlib.import_module(module_name)
        for kind, step in module.STEPS.items():
            registry.register(kind, step)
    return registry
