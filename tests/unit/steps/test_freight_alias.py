"""``set-freight-alias`` as Kargo's tests have it: against the in-memory store and, once, the API
server emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from app.controller.informer import Informer
from app.controller.metadata import KubeFreightAliases
from promoter.errors import ConfigRefused, StepError
from promoter.rules.freight_alias import ALIAS_LABEL, InMemoryFreightAliases
from promoter.steps.base import Effect, StepResult, StepStatus, effect_of, uses_work_dir_of
from tests.support import objects
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.steps import (
    STEPS,
    RefusalCase,
    make_context,
)

NS = "kargo-demo"


def _freight(name: str, alias: str) -> dict[str, Any]:
    """A Freight whose alias is in the field and in the label, as Kargo keeps them."""
    return objects.freight(
        name, namespace=NS, alias=alias, warehouse=NS, labels={ALIAS_LABEL: alias}
    )


async def run_alias(store: Any, config: Mapping[str, Any], tmp_path: Path) -> StepResult:
    ctx = make_context(tmp_path, project=NS, extra_services={"freight-aliases": store})
    return await STEPS["set-freight-alias"].run(ctx, config)


ALIAS_REFUSALS = [
    RefusalCase(
        "Test_setFreightAlias_convert/both name and alias are not specified",
        {},
        "config.name is required",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/name is not specified",
        {"alias": "stable"},
        "config.name is required",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/name is empty",
        {"name": "", "alias": "new-alias"},
        "config.name must not be empty",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/alias is not specified",
        {"name": "f1"},
        "config.alias is required",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/alias is empty",
        {"name": "f1", "alias": ""},
        "config.alias must not be empty",
    ),
    RefusalCase(
        "Test_setFreightAlias_convert/unknown field is not allowed",
        {"name": "f1", "alias": "new-alias", "unknownField": "x"},
        "unknown config field(s) unknownField",
    ),
    RefusalCase(
        "(ours: the alias is a label value, which the API server would refuse)",
        {"name": "f1", "alias": "not an alias!"},
        "is not a valid alias",
    ),
    RefusalCase(
        "Test_setFreightAlias_run/freight not found",
        {"name": "test-freight", "alias": "new-alias"},
        'freight "test-freight" not found in project "kargo-demo"',
    ),
    RefusalCase(
        "(Kargo's webhook: alias already used by another piece of Freight)",
        {"name": "f1", "alias": "taken"},
        'failed to patch alias for Freight "f1" in project "kargo-demo": alias "taken" already '
        'used by another piece of Freight in namespace "kargo-demo"',
    ),
]


@pytest.mark.parametrize("case", ALIAS_REFUSALS, ids=lambda c: c.kargo_test)
async def test_set_freight_alias_refusals_end_the_step_failed(
    case: RefusalCase, tmp_path: Path
) -> None:
    store = InMemoryFreightAliases([_freight("f1", "old-alias"), _freight("f2", "taken")], NS)
    with pytest.raises(ConfigRefused, match=re.escape(case.says)):
        await run_alias(store, case.config, tmp_path)
    assert store.get(NS, "f1") == _freight("f1", "old-alias")


async def test_set_freight_alias_sets_the_field_and_the_label(tmp_path: Path) -> None:
    # Test_setFreightAlias_run/successful alias update
    store = InMemoryFreightAliases([_freight("test-freight", "old-alias")], NS)
    result = await run_alias(store, {"name": "test-freight", "alias": "new-alias"}, tmp_path)
    assert result.status is StepStatus.SUCCEEDED
    assert (
        result.message == 'updated alias of Freight "test-freight" from "old-alias" to "new-alias"'
    )
    assert result.output == {}
    assert store.get(NS, "test-freight") == _freight("test-freight", "new-alias")
    # Entered again (a crash after the write): same outcome, nothing refused.
    again = await run_alias(store, {"name": "test-freight", "alias": "new-alias"}, tmp_path)
    assert again.status is StepStatus.SUCCEEDED


async def test_set_freight_alias_without_a_store_errors(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, project=NS)
    with pytest.raises(StepError, match="needs a store for Freight"):
        await STEPS["set-freight-alias"].run(ctx, {"name": "f1", "alias": "a"})


def test_set_freight_alias_is_external_and_needs_no_work_directory() -> None:
    step = STEPS["set-freight-alias"]
    assert effect_of(step) is Effect.EXTERNAL
    assert not uses_work_dir_of(step)


@pytest.fixture
async def apiserver() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[NS]) as running:
        yield running


async def test_set_freight_alias_over_the_kubernetes_api(
    apiserver: RunningApiServer, tmp_path: Path
) -> None:
    kube = k.Kube(apiserver.api_client())
    for obj in (_freight("f1", "old-alias"), _freight("f2", "taken")):
        await kube.create(k.FREIGHT, obj)
    informer = Informer(kube, k.FREIGHT, namespace=NS)
    watching = asyncio.create_task(informer.run())
    try:
        await informer.synced.wait()
        store = KubeFreightAliases(kube, freight=informer)
        with pytest.raises(ConfigRefused, match="already used"):
            await run_alias(store, {"name": "f1", "alias": "taken"}, tmp_path)
        await run_alias(store, {"name": "f1", "alias": "new-alias"}, tmp_path)
        written = await kube.get(k.FREIGHT, NS, "f1")
        assert written["alias"] == "new-alias"
        assert written["metadata"]["labels"][ALIAS_LABEL] == "new-alias"
        # The cache saw the write: the next uniqueness check knows the new alias.
        with pytest.raises(ConfigRefused, match="already used"):
            await run_alias(store, {"name": "f2", "alias": "new-alias"}, tmp_path)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await kube.close()
