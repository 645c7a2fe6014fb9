"""The one way an :class:`promoter.engine.engine.Runtime` is built.

A step sees the same world however its Promotion runs: on the server, while the server aborts
it, or in the local runner. Which Freight the expression functions search (the target, then what
the Stage holds from other origins), which Warehouses decide where ``imageFrom()`` looks and the
cluster-reading functions (``stageMetadata()``, ``freightMetadata()``) are derived here from the
Stage and the Freight, so the three callers cannot drift apart again (issue 33: the abort path
had passed ``freights=[freight]`` and no Warehouses).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from promoter.engine.engine import DEFAULT_RUNNING_RETRY, Runtime
from promoter.resources.model import Promotion
from promoter.resources.stages import requested_warehouses, stage_freights
from promoter.rules.metadata import metadata_functions
from promoter.steps.base import Step, StepServices
from promoter.steps.metadata import PORT_KEY as METADATA_PORT


def runtime_for(
    promotion: Promotion,
    *,
    stage: Mapping[str, Any] | None,
    freight: Mapping[str, Any],
    warehouse: Callable[[str], Mapping[str, Any] | None],
    registry: Mapping[str, Step],
    services: StepServices,
    work_dir: Path,
    clock: Callable[[], datetime],
    running_retry: float = DEFAULT_RUNNING_RETRY,
    observer: Callable[[Promotion, int], None] | None = None,
) -> Runtime:
    """The Runtime ``promotion`` runs (or is aborted) with.

    ``stage`` is the Stage object (None when it is gone: the Freight alone is searched),
    ``warehouse`` finds one of the project's Warehouses by name (None when it does not exist).
    ``services.extra`` must hold the metadata port (the server's reads the cluster, the local
    runner's its manifests).
    """
    return Runtime(
        registry=registry,
        services=services,
        work_dir=work_dir,
        freight=freight,
        freights=stage_freights(stage, freight) if stage is not None else [freight],
        warehouses=requested_warehouses(stage, warehouse) if stage is not None else None,
        extra_functions=metadata_functions(services.extra[METADATA_PORT], promotion.namespace),
        clock=clock,
        observer=observer,
        running_retry=running_retry,
    )
