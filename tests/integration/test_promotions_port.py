"""The chat front ends' cluster port held to one contract, on both sides of it.

The front-end tests talk to :class:`tests.support.promotions.FakePromotions`; the server talks to
``app.controller.promotions.ClusterPromotions`` over the cluster. Each request below goes to
both (the real one over the API server emulator, with the controller's informers), and both
must answer with the same kind of error in the same words, or the same reading: what a GitHub
or Slack user is told depends on nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from app.controller import kube as k
from app.controller.promotions import ClusterPromotions
from promoter.chat.port import PromotionService
from promoter.errors import InvalidInput, NotFound, Refused
from promoter.resources import annotations as ann
from promoter.resources.model import name_of
from tests.support import objects
from tests.support.controller import running_cluster, running_controller
from tests.support.promotions import FakePromotions

NS = "chat-port"
ELSEWHERE = "chat-port-other"
FREIGHT = "f" * 40
ACTOR = "slack:T/U1"
STEPS = [{"uses": "compose-output", "as": "note", "config": {"done": "yes"}}]


def project() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """test takes the Warehouse's Freight directly; uat only once test verified it; bare has
    nothing to run."""
    stages = [
        objects.stage("test", namespace=NS, steps=STEPS),
        objects.stage("uat", namespace=NS, upstream=["test"], steps=STEPS),
        objects.stage("bare", namespace=NS),  # no promotion template
        objects.stage("test", namespace=ELSEWHERE, steps=STEPS),
    ]
    freight = [
        objects.freight(FREIGHT, namespace=NS, alias="frozen-tauntaun"),
        objects.freight("e" * 40, namespace=ELSEWHERE),
    ]
    return stages, freight


@pytest.fixture(params=["fake", "cluster"])
async def port(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[PromotionService]:
    stages, freight = project()
    if request.param == "fake":
        yield FakePromotions(NS, stages=stages, freight=freight)
        return
    async with running_cluster(tmp_path, [NS, ELSEWHERE]) as cluster:
        for stage in stages:
            await cluster.kube.create(k.STAGES, stage)
        for item in freight:
            await cluster.kube.create(k.FREIGHT, item)
        # Created before the informers start: synced caches hold them all.
        async with running_controller(cluster.server, cluster.work) as controller:
            yield ClusterPromotions(cluster.kube, controller)


Request = Callable[[PromotionService], Awaitable[object]]

REFUSALS: list[tuple[str, Request, type[Exception], str]] = [
    (
        "promote into a missing Stage",
        lambda s: s.promote(NS, "nope", FREIGHT, actor=ACTOR),
        NotFound,
        f"Stage 'nope' not found in namespace '{NS}'",
    ),
    (
        "promote missing Freight",
        lambda s: s.promote(NS, "test", "0" * 40, actor=ACTOR),
        NotFound,
        f"Freight '{'0' * 40}' not found in namespace '{NS}'",
    ),
    (
        "promote Freight the Stage may not take yet",
        lambda s: s.promote(NS, "uat", FREIGHT, actor=ACTOR),
        Refused,
        "Freight `frozen-tauntaun` is not available to Stage `uat` yet",
    ),
    (
        "promote into a Stage with nothing to run",
        lambda s: s.promote(NS, "bare", FREIGHT, actor=ACTOR),
        InvalidInput,
        "Stage 'bare' is a control-flow Stage (no spec.promotionTemplate.spec.steps): Freight is "
        "not promoted to it; it passes Freight on to the Stages after it as soon as it is "
        "available",
    ),
    (
        "promote across projects",
        lambda s: s.promote(ELSEWHERE, "test", FREIGHT, actor=ACTOR),
        NotFound,
        f"Freight '{FREIGHT}' not found in namespace '{ELSEWHERE}'",
    ),
    (
        "abort a missing Promotion",
        lambda s: s.abort(NS, "test.nope", actor=ACTOR),
        NotFound,
        f"Promotion 'test.nope' not found in namespace '{NS}'",
    ),
    (
        "re-verify a missing Stage",
        lambda s: s.reverify(NS, "nope", actor=ACTOR),
        NotFound,
        f"Stage 'nope' not found in namespace '{NS}'",
    ),
    (
        "record front-end state on a missing Promotion",
        lambda s: s.annotate(NS, "test.nope", "longshoreman.dev/slack-message", "{}"),
        NotFound,
        f"Promotion 'test.nope' not found in namespace '{NS}'",
    ),
]


@pytest.mark.parametrize(
    ("request_", "error", "words"),
    [pytest.param(r, e, w, id=name) for name, r, e, w in REFUSALS],
)
async def test_both_sides_refuse_with_the_same_kind_and_words(
    port: PromotionService, request_: Request, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as raised:
        await request_(port)
    assert str(raised.value).startswith(words), str(raised.value)


async def test_both_sides_read_one_project_at_a_time(port: PromotionService) -> None:
    snapshot = await port.snapshot(NS)
    assert sorted(name_of(s) for s in snapshot.stages) == ["bare", "test", "uat"]
    assert [name_of(f) for f in snapshot.freight] == [FREIGHT]
    assert snapshot.promotions == []
    assert port.is_leader()


async def test_both_sides_create_a_pending_promotion_of_the_stages_steps_by_its_actor(
    port: PromotionService,
) -> None:
    ref = await port.promote(NS, "test", FREIGHT, actor=ACTOR)
    assert (ref.namespace, ref.stage, ref.freight, ref.phase) == (NS, "test", FREIGHT, "Pending")
    # Readable at once (the next command sees it), with the Stage's steps and who asked.
    [created] = [p for p in (await port.snapshot(NS)).promotions if name_of(p) == ref.name]
    assert [(s["uses"], s["as"]) for s in created["spec"]["steps"]] == [("compose-output", "note")]
    assert ann.created_by(created) == ACTOR
