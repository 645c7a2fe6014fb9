"""The ``set-metadata`` step: merge values into the ``status.metadata`` of Stages and Freight.

It writes through the :class:`promoter.rules.metadata.MetadataStore` port at
``ctx.services.extra["metadata"]`` (the controller's is over the Kubernetes API, the local
runner's over the loaded manifests). Every update is validated before the first is written, and
writing the same values again changes nothing, so a step entered again after a crash is harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promoter.errors import StepError
from promoter.rules.metadata import MetadataStore, parse_updates
from promoter.steps.base import Effect, FunctionStep, Step, StepContext, StepResult, succeeded

KIND = "set-metadata"
PORT_KEY = "metadata"


def metadata_port(ctx: StepContext) -> MetadataStore:
    port = ctx.services.extra.get(PORT_KEY)
    if port is None:
        raise StepError(
            f"{KIND} needs a store for Stage and Freight metadata, and none is configured",
            terminal=True,
        )
    return port  # type: ignore[no-any-return]


async def set_metadata(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    updates = parse_updates(config, KIND)
    store = metadata_port(ctx)
    for update in updates:
        # Refuse a missing object before anything is written, so a typo in the second update
        # does not leave the first applied alone. A cache may not hold an object created a
        # moment ago: an empty merge asks the store itself, which writes nothing and raises
        # MetadataObjectMissing only when the object really is missing.
        if store.get(update.kind, ctx.project, update.name) is None:
            await store.merge(update.kind, ctx.project, update.name, {})
    for update in updates:
        await store.merge(update.kind, ctx.project, update.name, update.values)
    done = ", ".join(f"{u.kind} {u.name} ({', '.join(sorted(u.values))})" for u in updates)
    return succeeded(message=f"set metadata on {done}")


# Writes cluster objects: never repeated by a replay (later steps may have changed the same keys
# since, so there is nothing to check either).
STEPS: dict[str, Step] = {
    KIND: FunctionStep(set_metadata, effect=Effect.EXTERNAL, uses_work_dir=False)
}
