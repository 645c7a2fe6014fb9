"""The ``set-freight-alias`` step: give a Freight of the Project a new alias.

Config ``name`` (the Freight) and ``alias``, as in Kargo; no output. It writes through the
:class:`promoter.rules.freight_alias.FreightAliases` port at
``ctx.services.extra["freight-aliases"]``
(the controller's is over the Kubernetes API, the local runner's over the loaded manifests).
A Freight that does not exist, or an alias another Freight has, ends the step ``Failed``, as in
Kargo; writing an alias the Freight already has changes nothing, so a step entered again after a
crash is harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promoter.errors import ConfigRefused, StepError
from promoter.rules.freight_alias import (
    FreightAliases,
    alias_of,
    check_alias,
    go_quote,
    needs_alias,
)
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepResult,
    succeeded,
)

KIND = "set-freight-alias"
PORT_KEY = "freight-aliases"


def _port(ctx: StepContext) -> FreightAliases:
    port = ctx.services.extra.get(PORT_KEY)
    if port is None:
        raise StepError(f"{KIND} needs a store for Freight, and none is configured", terminal=True)
    return port  # type: ignore[no-any-return]


async def set_freight_alias(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
    cfg = Config(KIND, config)
    cfg.only(("name", "alias"))
    name = cfg.str("name")
    alias = cfg.str("alias")
    for field_name, value in (("name", name), ("alias", alias)):
        if not value:
            raise ConfigRefused(f"{KIND}: config.{field_name} must not be empty")
    check_alias(KIND, alias)
    store = _port(ctx)
    freight = store.get(ctx.project, name)
    if freight is None:
        raise ConfigRefused(
            f"{KIND}: freight {go_quote(name)} not found in project {go_quote(ctx.project)}"
        )
    before = alias_of(freight)
    if needs_alias(freight, store.list(ctx.project), alias, ctx.project):
        await store.write_alias(ctx.project, name, alias)
    return succeeded(
        message=f"updated alias of Freight {go_quote(name)} from {go_quote(before)} to "
        f"{go_quote(alias)}"
    )


# Writes a cluster object: never repeated by a replay. There is nothing to verify either: a
# later step, or a person, may give the Freight another alias since, and that is theirs to do.
STEPS: dict[str, Step] = {
    KIND: FunctionStep(set_freight_alias, effect=Effect.EXTERNAL, uses_work_dir=False)
}
