"""Steps that only shape data: ``compose-output`` and ``fail``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promoter.errors import ConfigRefused
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    failed,
    succeeded,
)


async def compose_output(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """Publish the (rendered) config itself as the step's output."""
    if not config:
        # Kargo's compose-output-config.json: an object with minProperties 1.
        raise ConfigRefused("compose-output: config must have at least one field to output")
    return succeeded(dict(config))


async def fail(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    """End the Promotion as Failed with a message (usually behind an ``if``)."""
    message = Config("fail", config).str("message", "")
    return failed(message or "failed by the fail step")


# Both only shape data from their inputs and touch no files: nothing to rebuild, their recorded
# outputs are all a replay needs.
STEPS: dict[str, Step] = {
    "compose-output": FunctionStep(compose_output, effect=Effect.LOCAL, uses_work_dir=False),
    "fail": FunctionStep(fail, effect=Effect.LOCAL, uses_work_dir=False),
}
