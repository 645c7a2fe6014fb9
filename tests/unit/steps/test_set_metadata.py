"""The ``set-metadata`` step and ``stageMetadata()`` / ``freightMetadata()``.

Kargo's documentation examples run through the local runner in test_kargo_examples.py; here the
step's refusals are checked against the in-memory store, the Kubernetes store against the API
server emulator (its write precondition and conflict retry), and the whole flow end to end in the
controller, observed only through the objects on the API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from app.controller import kube as k
from app.controller.informer import Informer
from app.controller.metadata import KubeMetadataStore
from app.embedded import seed
from promoter.errors import StepError
from promoter.expressions import ExpressionError, Scope, render
from promoter.rules.metadata import MAX_VALUES_BYTES, InMemoryMetadata, metadata_functions
from promoter.steps.base import StepContext, StepServices
from promoter.steps.metadata import set_metadata
from tests.support import objects
from tests.support.controller import running_controller, wait_for_object, wait_terminal
from tests.support.kube import RunningApiServer, running_apiserver

ROOT = Path(__file__).resolve().parents[3]
NS = "kargo-demo"
FREIGHT_NAME = "7c9e6b1f3a4d5e2b8c0f1a2d3e4b5c6d7e8f9a0b"  # frozen-tauntaun in the example


def _objects() -> list[dict[str, Any]]:
    return [
        objects.stage("prod", namespace=NS),
        objects.freight("f1", namespace=NS, status={"metadata": {"old": 1}}),
    ]


def _ctx(store: Any, tmp_path: Path) -> StepContext:
    return StepContext(
        project=NS,
        stage="prod",
        promotion="p1",
        alias="meta",
        actor="alice",
        work_dir=tmp_path,
        freight={},
        state={},
        previous_output={},
        services=StepServices(extra={"metadata": store}),
        now=datetime(2025, 1, 1, tzinfo=UTC),
    )


async def test_values_merge_into_each_object_and_the_functions_read_them(tmp_path: Path) -> None:
    store = InMemoryMetadata(_objects(), NS)
    config = {
        "updates": [
            {"kind": "Stage", "name": "prod", "values": {"foo": "hello", "n": {"a": 1}}},
            {"kind": "Freight", "name": "f1", "values": {"baz": True, "old": None}},
        ]
    }
    result = await set_metadata(_ctx(store, tmp_path), config)
    assert result.status.value == "Succeeded", result.message
    # Again, with a different nested map: the key's value is replaced whole.
    config["updates"][0]["values"] = {"n": {"b": 2}}
    await set_metadata(_ctx(store, tmp_path), config)
    scope = Scope({}, metadata_functions(store, NS))
    assert render("${{ stageMetadata('prod') }}", scope) == {"foo": "hello", "n": {"b": 2}}
    # A null removed `old`.
    assert render("${{ freightMetadata('f1') }}", scope) == {"baz": True}
    assert render("${{ freightMetadata('f1', 'baz') }}", scope) is True
    assert render("${{ stageMetadata('prod')['tier'] ?? 'default' }}", scope) == "default"
    with pytest.raises(ExpressionError, match="Stage 'nope' not found in namespace 'kargo-demo'"):
        render("${{ stageMetadata('nope') }}", scope)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (
            {"kind": "Warehouse", "name": "w", "values": {"a": 1}},
            "config.updates[0].kind must be Stage or Freight, got 'Warehouse'",
        ),
        ({"kind": "Stage", "values": {"a": 1}}, "config.updates[0].name is required"),
        ({"kind": "Stage", "name": "prod"}, "config.updates[0].values is required"),
        (
            {"kind": "Stage", "name": "prod", "values": {"a": float("nan")}},
            "config.updates[0].values.a is nan, which JSON cannot hold",
        ),
        (
            {"kind": "Stage", "name": "prod", "values": {"a": {1: "x"}}},
            "config.updates[0].values.a has a non-string key 1",
        ),
        (
            {"kind": "Stage", "name": "prod", "values": {"a": "x" * MAX_VALUES_BYTES}},
            f"the limit is {MAX_VALUES_BYTES} bytes per update",
        ),
    ],
)
async def test_bad_updates_are_refused_before_anything_is_written(
    tmp_path: Path, update: dict[str, Any], message: str
) -> None:
    store = InMemoryMetadata(_objects(), NS)
    good = {"kind": "Freight", "name": "f1", "values": {"written": True}}
    with pytest.raises(StepError) as raised:
        await set_metadata(_ctx(store, tmp_path), {"updates": [good, update]})
    assert raised.value.terminal
    assert message in raised.value.message.replace("[1]", "[0]")
    assert store.get("Freight", NS, "f1") == {"old": 1}


async def test_a_missing_object_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    store = InMemoryMetadata(_objects(), NS)
    updates = [
        {"kind": "Freight", "name": "f1", "values": {"written": True}},
        {"kind": "Stage", "name": "nope", "values": {"a": 1}},
    ]
    with pytest.raises(StepError, match="Stage 'nope' not found in namespace 'kargo-demo'"):
        await set_metadata(_ctx(store, tmp_path), {"updates": updates})
    assert store.get("Freight", NS, "f1") == {"old": 1}


class _StaleCache:
    """An informer cache that keeps serving the copy it was given (a lagging watch)."""

    def __init__(self, obj: dict[str, Any] | None) -> None:
        self.obj = obj

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.obj

    def observe(self, obj: dict[str, Any]) -> bool:
        return False


@pytest.fixture
async def server() -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(namespaces=[NS]) as running:
        yield running


async def test_a_concurrent_status_write_is_kept_the_merge_retries_on_conflict(
    server: RunningApiServer,
) -> None:
    kube = k.Kube(server.api_client())
    created = await kube.create(k.STAGES, objects.stage("prod", namespace=NS))
    await kube.patch_status(
        k.STAGES, NS, "prod", {"metadata": {"a": 1, "n": {"x": 1}}}, resource_version=None
    )
    stale = await kube.get(k.STAGES, NS, "prod")
    # Someone else writes after our cache's copy: our precondition must catch it.
    await kube.patch_status(k.STAGES, NS, "prod", {"metadata": {"b": 2}}, resource_version=None)
    store = KubeMetadataStore(
        kube,
        stages=cast(Informer, _StaleCache(stale)),
        freight=cast(Informer, _StaleCache(None)),
    )
    await store.merge("Stage", NS, "prod", {"c": 3, "n": {"y": 2}})
    stage = await kube.get(k.STAGES, NS, "prod")
    assert stage["status"]["metadata"] == {"a": 1, "b": 2, "c": 3, "n": {"y": 2}}
    assert created["metadata"]["name"] == "prod"
    with pytest.raises(StepError, match="Freight 'gone' not found in namespace 'kargo-demo'"):
        await store.merge("Freight", NS, "gone", {"a": 1})
    await kube.close()


def _read_back_steps(stage: str) -> list[dict[str, Any]]:
    return [
        {
            "uses": "set-metadata",
            "as": "meta",
            "config": {
                "updates": [
                    {"kind": "Stage", "name": stage, "values": {"foo": "bar", "n": [1, 2]}},
                    {
                        "kind": "Freight",
                        "name": "${{ ctx.targetFreight.name }}",
                        "values": {"approvedBy": "${{ ctx.meta.promotion.actor }}"},
                    },
                ]
            },
        },
        {
            "uses": "compose-output",
            "as": "read",
            "config": {
                "foo": "${{ stageMetadata('" + stage + "').foo }}",
                "n": "${{ stageMetadata(ctx.stage).n }}",
                "by": "${{ freightMetadata(ctx.targetFreight.name, 'approvedBy') }}",
            },
        },
    ]


@pytest.fixture
async def seeded(server: RunningApiServer) -> AsyncIterator[k.Kube]:
    kube = k.Kube(server.api_client())
    await seed(kube, [ROOT / "examples" / "kargo-demo"])
    yield kube
    await kube.close()


async def _add_stage(kube: k.Kube, name: str, steps: list[dict[str, Any]]) -> None:
    await kube.create(
        k.STAGES, objects.stage(name, namespace=NS, warehouse="kargo-demo", steps=steps)
    )


async def _promote(kube: k.Kube, name: str, stage: str) -> None:
    await kube.create(
        k.PROMOTIONS,
        objects.promotion(name, stage, namespace=NS, freight="frozen-tauntaun", annotations={}),
    )


def _metadata(obj: Mapping[str, Any]) -> Any:
    return (obj.get("status") or {}).get("metadata")


async def test_the_controller_sets_metadata_and_the_next_step_reads_it(
    server: RunningApiServer, seeded: k.Kube, tmp_path: Path
) -> None:
    kube = seeded
    await _add_stage(kube, "meta", _read_back_steps("meta"))
    async with running_controller(server, tmp_path / "work"):
        await _promote(kube, "p1", "meta")
        done = await wait_terminal(kube, NS, "p1")
        assert done["status"]["phase"] == "Succeeded", done["status"]["message"]
        actor = done["status"]["state"]["read"]["by"]
        assert done["status"]["state"]["read"] == {"foo": "bar", "n": [1, 2], "by": actor}
        # kubectl sees it, and the Stage's own status write after the Promotion kept it.
        stage = await wait_for_object(
            kube,
            k.STAGES,
            NS,
            "meta",
            lambda s: (s.get("status") or {}).get("lastPromotion", {}).get("name") == "p1",
        )
        assert _metadata(stage) == {"foo": "bar", "n": [1, 2]}
        freight = await kube.get(k.FREIGHT, NS, FREIGHT_NAME)
        assert _metadata(freight) == {"approvedBy": actor}


async def test_in_the_controller_a_missing_stage_fails_the_step_naming_it(
    server: RunningApiServer, seeded: k.Kube, tmp_path: Path
) -> None:
    kube = seeded
    await _add_stage(kube, "meta", _read_back_steps("no-such-stage"))
    async with running_controller(server, tmp_path / "work"):
        await _promote(kube, "p1", "meta")
        done = await wait_terminal(kube, NS, "p1")
    status = done["status"]
    assert status["phase"] == "Errored"
    first = status["stepExecutionMetadata"][0]
    assert first["status"] == "Errored"
    assert "Stage 'no-such-stage' not found in namespace 'kargo-demo'" in first["message"]
    assert "no-such-stage" in status["message"]
    freight = await kube.get(k.FREIGHT, NS, FREIGHT_NAME)
    assert _metadata(freight) is None
