"""Bounded work and the Stage's own steps (issue 34, findings 2 and 6), through the server on its
embedded cluster: Promotions written as kubectl writes them, outcomes read from their status,
``/healthz`` asked while the controller deals with them.

``/healthz`` is asked, never timed: the benchmark ``bench/bench_stalls.py`` measures how long the
event loop is held. The ``asyncio.timeout`` around each wait is a safety net so a regression
fails instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import ServerState, create_app, wait_started
from app.settings import Settings
from tests.support.processes import QUIET
from tests.support.projects import FREIGHT, limits_project
from tests.support.waiting import answering_healthz

NS = "limits"
TERMINAL = ("Errored", "Failed", "Succeeded", "Aborted")

PROJECT = limits_project(NS)


@asynccontextmanager
async def serving(
    tmp_path: Path, **env: str
) -> AsyncIterator[tuple[TestClient[Any, Any], ServerState]]:
    seed = tmp_path / "project.yaml"
    seed.write_text(PROJECT)
    settings = Settings.from_env({**QUIET, "LONGSHOREMAN_WORK_DIR": str(tmp_path / "work"), **env})
    settings = replace(settings, embedded_seed=(seed,), warehouse_discovery=False)
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        state = await wait_started(client.app)
        assert state.kube is not None and state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 30)
        yield client, state


def promotion(name: str, stage: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"stage": stage, "freight": FREIGHT, **spec},
    }


async def finished(
    client: TestClient[Any, Any], state: ServerState, name: str
) -> Mapping[str, Any]:
    """The Promotion's status once terminal, asking ``/healthz`` all the while."""
    assert state.controller is not None
    promotions = state.controller.promotions

    async def terminal() -> Mapping[str, Any] | None:
        status: Mapping[str, Any] = (promotions.get(NS, name) or {}).get("status") or {}
        return status if status.get("phase") in TERMINAL else None

    return await answering_healthz(client, terminal, f"Promotion {name} to finish")


async def test_a_promotion_of_ten_thousand_steps_is_refused_while_the_server_answers(
    tmp_path: Path,
) -> None:
    """kubectl's create is refused by admission (the embedded cluster runs the webhooks'
    rules in-process), naming the field and the setting, while ``/healthz`` keeps answering;
    nothing is stored, so the Stage's queue is free. A cluster without the webhooks reaches the
    controller's copy of the rule: test_a_template_that_inflates_past_the_limit_is_refused."""
    steps = [{"uses": "compose-output", "config": {"n": "1"}} for _ in range(10_000)]
    async with serving(tmp_path, LONGSHOREMAN_ALLOW_PROMOTION_STEPS="true") as (client, state):
        assert state.kube is not None
        creating = asyncio.create_task(
            state.kube.create(k.PROMOTIONS, promotion("huge", "small", steps=steps))
        )

        async def answered() -> BaseException | None:
            if not creating.done():
                return None
            return creating.exception() or AssertionError("the huge Promotion was stored")

        error = await answering_healthz(client, answered, "the huge Promotion to be answered")
        assert isinstance(error, k.Invalid), error
        assert "spec.steps" in str(error) and "more than 500 steps" in str(error)
        assert "LONGSHOREMAN_MAX_PROMOTION_STEPS" in str(error)
        with pytest.raises(k.NotFound):
            await state.kube.get(k.PROMOTIONS, NS, "huge")
        await state.kube.create(k.PROMOTIONS, promotion("next", "small"))
        assert (await finished(client, state, "next"))["phase"] == "Succeeded"


async def test_a_template_that_inflates_past_the_limit_is_refused(tmp_path: Path) -> None:
    async with serving(tmp_path) as (client, state):
        assert state.kube is not None
        await state.kube.create(k.PROMOTIONS, promotion("inflated", "tasks"))
        status = await finished(client, state, "inflated")
    assert status["phase"] == "Errored"
    assert "more than 500 steps" in status["message"], status["message"]


async def test_the_step_limit_is_a_setting(tmp_path: Path) -> None:
    async with serving(tmp_path, LONGSHOREMAN_MAX_PROMOTION_STEPS="1000") as (client, state):
        assert state.kube is not None
        await state.kube.create(k.PROMOTIONS, promotion("inflated", "tasks"))
        status = await finished(client, state, "inflated")
    assert status["phase"] == "Succeeded", status.get("message")


async def test_a_status_over_the_object_limit_ends_the_promotion_errored(tmp_path: Path) -> None:
    # The Promotions size their outputs with vars of their own.
    async with serving(tmp_path, LONGSHOREMAN_ALLOW_PROMOTION_STEPS="true") as (client, state):
        assert state.kube is not None
        big = [{"name": "size", "value": "500000"}]
        await state.kube.create(k.PROMOTIONS, promotion("big", "small", vars=big))
        status = await finished(client, state, "big")
        assert status["phase"] == "Errored"
        assert (
            "status:" in status["message"] and "LONGSHOREMAN_MAX_OBJECT_BYTES" in status["message"]
        )
        await state.kube.create(k.PROMOTIONS, promotion("next", "small"))
        assert (await finished(client, state, "next"))["phase"] == "Succeeded"


async def test_a_status_the_api_server_refuses_as_too_large_ends_the_promotion_errored(
    tmp_path: Path,
) -> None:
    """Past our own limit (raised here), the API server's refusal (413: the embedded one takes
    1 MiB a request, kube-apiserver 3 MiB) ends the Promotion instead of being retried forever,
    and the Stage's queue moves on."""
    async with serving(
        tmp_path,
        LONGSHOREMAN_MAX_OBJECT_BYTES="100000000",
        LONGSHOREMAN_ALLOW_PROMOTION_STEPS="true",
    ) as (client, state):
        assert state.kube is not None
        big = [{"name": "size", "value": "600000"}]
        await state.kube.create(k.PROMOTIONS, promotion("big", "small", vars=big))
        status = await finished(client, state, "big")
        assert status["phase"] == "Errored"
        assert "refused the status as too large" in status["message"], status["message"]
        await state.kube.create(k.PROMOTIONS, promotion("next", "small"))
        assert (await finished(client, state, "next"))["phase"] == "Succeeded"


async def test_a_promotion_that_brings_its_own_steps_runs_none_of_them(tmp_path: Path) -> None:
    own = [{"uses": "fail", "config": {"message": "ran the creator's own step"}}]
    async with serving(tmp_path) as (client, state):
        assert state.kube is not None
        await state.kube.create(k.PROMOTIONS, promotion("own", "small", steps=own))
        status = await finished(client, state, "own")
        assert status["phase"] == "Errored"
        assert "runs the steps of Stage 'small'" in status["message"]
        assert "LONGSHOREMAN_ALLOW_PROMOTION_STEPS" in status["message"]
        assert not status.get("stepExecutionMetadata")
        # Steps that are the Stage's own (as the server writes them) run.
        await state.kube.create(k.PROMOTIONS, promotion("template", "small"))
        assert (await finished(client, state, "template"))["phase"] == "Succeeded"


async def test_a_promotion_runs_with_its_stages_vars_as_kargo_sets_them(tmp_path: Path) -> None:
    """Vars of its own would change what the Stage's steps do: without steps they are replaced
    by the Stage's (Kargo's webhook does the same); beside the Stage's own steps they are
    refused, as steps of its own are."""
    huge = [{"name": "size", "value": "900000"}]
    async with serving(tmp_path) as (client, state):
        assert state.kube is not None
        await state.kube.create(k.PROMOTIONS, promotion("replaced", "small", vars=huge))
        status = await finished(client, state, "replaced")
        assert status["phase"] == "Succeeded", status.get("message")
        assert status["state"]["out"]["a"] == "x" * 10
        stored = await state.kube.get(k.PROMOTIONS, NS, "replaced")
        assert stored["spec"]["vars"] == [{"name": "size", "value": "10"}]
        steps = stored["spec"]["steps"]
        await state.kube.create(k.PROMOTIONS, promotion("brought", "small", steps=steps, vars=huge))
        status = await finished(client, state, "brought")
    assert status["phase"] == "Errored"
    assert "spec.vars" in status["message"] and "Stage 'small'" in status["message"]
    assert not status.get("stepExecutionMetadata")


async def test_the_operator_may_allow_promotions_to_bring_their_own_steps(tmp_path: Path) -> None:
    own = [{"uses": "fail", "config": {"message": "ran the creator's own step"}}]
    async with serving(tmp_path, LONGSHOREMAN_ALLOW_PROMOTION_STEPS="true") as (client, state):
        assert state.kube is not None
        await state.kube.create(k.PROMOTIONS, promotion("own", "small", steps=own))
        status = await finished(client, state, "own")
    assert status["phase"] == "Failed"
    assert "ran the creator's own step" in status["message"]
