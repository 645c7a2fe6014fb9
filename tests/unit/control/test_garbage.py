"""The garbage collector's rules: Kargo's pkg/garbage tables, and what Longshoreman keeps besides.

The first cases of each table are Kargo's (``promotions_test.go``: TestCleanStagePromotions,
``freight_test.go``: TestCleanWarehouseFreight) with their numbers; Kargo's error cases (a list
or a delete that fails) are the loop's and are tested with it, through the API server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from promoter.control.garbage import (
    Doomed,
    Garbage,
    Retention,
    collect,
    freight_to_delete,
    promotions_to_delete,
)
from promoter.resources.model import format_time
from tests.support import objects

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
ZERO = timedelta(0)


def _ago(delta: timedelta) -> str:
    return format_time(NOW - delta) or ""


def _promotion(name: str, age: timedelta, phase: str | None = "Succeeded", **kw: Any) -> Any:
    return objects.promotion(name, created=_ago(age), phase=phase, **kw)


def _freight(name: str, age: timedelta, **kw: Any) -> Any:
    return objects.freight(name, created=_ago(age), **kw)


def _names(objs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def _holding(*history: Sequence[str], name: str = "test", namespace: str = "p") -> Any:
    """A Stage whose freightHistory is ``history`` (newest first), one collection per entry."""
    entries = [
        {"id": f"c{i}", "items": {f"Warehouse/w{j}": {"name": n} for j, n in enumerate(entry)}}
        for i, entry in enumerate(history)
    ]
    return objects.stage(name, namespace=namespace, status={"freightHistory": entries})


# ---- Promotions (Kargo's TestCleanStagePromotions, then ours) ------------------------------

PROMOTION_CASES = [
    pytest.param(
        Retention(max_promotions=2),
        [_promotion("a", HOUR)],
        [],
        id="kargo: fewer Promotions than the threshold",
    ),
    pytest.param(
        Retention(max_promotions=1, min_promotion_age=timedelta(minutes=1)),
        [_promotion("newer", HOUR), _promotion("older", 2 * HOUR)],
        ["older"],
        id="kargo: success, the oldest beyond the retention goes",
    ),
    pytest.param(
        Retention(max_promotions=1, min_promotion_age=3 * HOUR),
        [_promotion("newer", HOUR), _promotion("older", 2 * HOUR)],
        [],
        id="beyond the retention but younger than the minimum age: kept",
    ),
    pytest.param(
        Retention(max_promotions=2, min_promotion_age=timedelta(0)),
        [_promotion(f"p{i}", i * HOUR) for i in range(6)],
        ["p5", "p4", "p3", "p2"],
        id="the newest two kept, the rest go, oldest first",
    ),
    pytest.param(
        Retention(max_promotions=1, min_promotion_age=timedelta(0)),
        [
            _promotion("done-new", 1 * HOUR),
            _promotion("running", 2 * HOUR, phase="Running"),
            _promotion("done-mid", 3 * HOUR, phase="Failed"),
            _promotion("done-old", 4 * HOUR, phase="Aborted"),
        ],
        ["done-old"],
        id="the oldest unfinished Promotion is the boundary: one kept beyond it",
    ),
    pytest.param(
        Retention(max_promotions=0, min_promotion_age=timedelta(0)),
        [
            _promotion("pending", 1 * HOUR, phase=None),
            _promotion("running", 2 * HOUR, phase="Running"),
            _promotion("errored", 3 * HOUR, phase="Errored"),
        ],
        ["errored"],
        id="retention 0: every finished Promotion older than the unfinished ones goes",
    ),
    pytest.param(
        Retention(max_promotions=0, min_promotion_age=timedelta(0)),
        [
            _promotion("done", 1 * HOUR),
            _promotion("pending", 2 * HOUR, phase="Pending"),
        ],
        [],
        id="a finished Promotion newer than a pending one is kept",
    ),
    pytest.param(
        Retention(max_promotions=0, min_promotion_age=timedelta(0)),
        [objects.promotion("no-time", phase="Succeeded"), _promotion("dated", HOUR)],
        ["dated"],
        id="no creationTimestamp: of unknown age, kept",
    ),
]


@pytest.mark.parametrize(("retention", "promotions", "deleted"), PROMOTION_CASES)
def test_which_promotions_of_a_stage_are_deleted(
    retention: Retention, promotions: list[Any], deleted: list[str]
) -> None:
    assert _names(promotions_to_delete(promotions, retention, NOW)) == deleted


def test_promotions_of_one_second_are_told_apart_by_name() -> None:
    # creationTimestamp has whole seconds; our names embed a ULID, so they sort by time too.
    same = [_promotion(f"p-{c}", HOUR) for c in "bdac"]
    doomed = promotions_to_delete(same, Retention(max_promotions=2, min_promotion_age=HOUR), NOW)
    assert _names(doomed) == ["p-a", "p-b"]


# ---- Freight (Kargo's TestCleanWarehouseFreight, then ours) --------------------------------

FREIGHT_CASES = [
    pytest.param(
        Retention(max_freight=2),
        [_freight("a", HOUR)],
        set(),
        set(),
        [],
        id="kargo: fewer Freight than the threshold",
    ),
    pytest.param(
        Retention(max_freight=1, min_freight_age=timedelta(minutes=1)),
        [_freight("newer", HOUR), _freight("older", 2 * HOUR)],
        set(),
        set(),
        ["older"],
        id="kargo: success, none in use, the oldest beyond the retention goes",
    ),
    pytest.param(
        Retention(max_freight=1, min_freight_age=3 * HOUR),
        [_freight("newer", HOUR), _freight("older", 2 * HOUR)],
        set(),
        set(),
        [],
        id="younger than the minimum age: kept",
    ),
    pytest.param(
        Retention(max_freight=1, min_freight_age=timedelta(0)),
        [_freight(f"f{i}", i * HOUR) for i in range(5)],
        {"f2"},
        {"f2"},
        ["f4"],
        id="the oldest Freight in use is the boundary: one kept beyond it",
    ),
    pytest.param(
        Retention(max_freight=0, min_freight_age=timedelta(0)),
        [_freight(f"f{i}", i * HOUR) for i in range(5)],
        {"f0"},
        {"f0", "f3"},
        ["f4", "f2", "f1"],
        id="a protected Freight (history, a pending Promotion) beyond the boundary is kept",
    ),
    pytest.param(
        Retention(max_freight=1, min_freight_age=timedelta(0)),
        [
            {**_freight("found-late", 5 * HOUR), "discoveredAt": _ago(HOUR)},
            _freight("made-mid", 2 * HOUR),
            _freight("made-old", 3 * HOUR),
        ],
        set(),
        set(),
        ["made-old", "made-mid"],
        id="discoveredAt, when set, orders the Freight (Kargo's EffectiveDiscoveredAt)",
    ),
]


@pytest.mark.parametrize(("retention", "freight", "in_use", "protected", "deleted"), FREIGHT_CASES)
def test_which_freight_of_a_warehouse_is_deleted(
    retention: Retention,
    freight: list[Any],
    in_use: set[str],
    protected: set[str],
    deleted: list[str],
) -> None:
    doomed = freight_to_delete(
        freight,
        in_use=frozenset(in_use),
        protected=frozenset(protected),
        retention=retention,
        now=NOW,
    )
    assert _names(doomed) == deleted


# ---- one pass over everything --------------------------------------------------------------

NOTHING_KEPT = Retention(
    max_promotions=0,
    min_promotion_age=timedelta(0),
    max_freight=0,
    min_freight_age=timedelta(0),
)


def _collect(
    stages: Sequence[Any] = (),
    promotions: Sequence[Any] = (),
    freight: Sequence[Any] = (),
    retention: Retention = NOTHING_KEPT,
) -> Garbage:
    return collect(
        stages=stages, promotions=promotions, freight=freight, retention=retention, now=NOW
    )


def _doomed_names(doomed: Sequence[Doomed]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in doomed]


def test_promotions_are_counted_per_stage_and_project() -> None:
    promotions = [
        _promotion("t1", HOUR, stage_name="test"),
        _promotion("t2", 2 * HOUR, stage_name="test"),
        _promotion("u1", 3 * HOUR, stage_name="uat"),
        _promotion("q1", 4 * HOUR, stage_name="test", namespace="q"),
    ]
    retention = Retention(max_promotions=1, min_promotion_age=timedelta(0))
    garbage = _collect(promotions=promotions, retention=retention)
    assert _doomed_names(garbage.promotions) == [("p", "t2")]


def test_freight_is_counted_per_warehouse_and_project() -> None:
    freight = [
        _freight("a1", HOUR, warehouse="a"),
        _freight("a2", 2 * HOUR, warehouse="a"),
        _freight("b1", 3 * HOUR, warehouse="b"),
        _freight("q1", 4 * HOUR, warehouse="a", namespace="q"),
    ]
    garbage = _collect(freight=freight, retention=Retention(max_freight=1, min_freight_age=ZERO))
    assert _doomed_names(garbage.freight) == [("p", "a2")]


def test_a_stages_current_freight_and_history_are_never_deleted() -> None:
    freight = [_freight(f"f{i}", i * HOUR) for i in range(6)]
    stage = _holding(["f1"], ["f3"], ["f4"])  # holds f1 now, held f3 and f4 before
    garbage = _collect(stages=[stage], freight=freight)
    assert _doomed_names(garbage.freight) == [("p", "f5"), ("p", "f2")]


def test_the_freight_of_an_unfinished_promotion_is_never_deleted() -> None:
    freight = [_freight(f"f{i}", i * HOUR) for i in range(4)]
    promotions = [
        _promotion("pending", HOUR, phase=None, freight="f3"),
        _promotion("running", HOUR, phase="Running", freight="f2", stage_name="uat"),
        _promotion("done", 2 * HOUR, phase="Failed", freight="f1", stage_name="prod"),
    ]
    garbage = _collect(stages=[_holding(["f0"])], promotions=promotions, freight=freight)
    assert _doomed_names(garbage.freight) == [("p", "f1")]
    assert _doomed_names(garbage.promotions) == [("p", "done")]


def test_a_pending_promotion_naming_an_alias_keeps_the_freight_the_resolver_finds() -> None:
    # Kargo's rule (promoter.resources.freight_refs): a name wins over an alias.
    freight = [
        _freight("f0", 0 * HOUR),
        _freight("f1", 1 * HOUR, alias="frozen-tauntaun"),
        _freight("f2", 2 * HOUR, alias="f3"),
        _freight("f3", 3 * HOUR),
    ]
    promotions = [
        _promotion("by-alias", HOUR, phase=None, freight="frozen-tauntaun", stage_name="uat"),
        _promotion("by-name", HOUR, phase=None, freight="f3", stage_name="prod"),
    ]
    garbage = _collect(stages=[_holding(["f0"])], promotions=promotions, freight=freight)
    assert _doomed_names(garbage.freight) == [("p", "f2")]


def test_the_freight_of_a_stages_newest_success_is_kept_before_the_stage_says_so() -> None:
    # p2 has just succeeded; the Stage's status (f1 current) is written next.
    freight = [_freight(f"f{i}", i * HOUR) for i in range(4)]
    promotions = [
        _promotion("p3", 1 * HOUR, phase="Failed", freight="f0"),
        _promotion("p2", 2 * HOUR, freight="f3"),
        _promotion("p1", 3 * HOUR, freight="f1"),
    ]
    garbage = _collect(stages=[_holding(["f1"])], promotions=promotions, freight=freight)
    assert _doomed_names(garbage.freight) == [("p", "f2")]


def test_another_projects_stage_protects_nothing_here() -> None:
    freight = [_freight("f0", 0 * HOUR), _freight("f1", HOUR)]
    garbage = _collect(stages=[_holding(["f1"], namespace="q")], freight=freight)
    assert _doomed_names(garbage.freight) == [("p", "f1"), ("p", "f0")]


def test_a_delete_names_the_version_it_decided_on() -> None:
    promotion = _promotion("old", HOUR)
    promotion["metadata"] |= {"uid": "u-1", "resourceVersion": "42"}
    garbage = _collect(promotions=[promotion])
    assert garbage.promotions == (Doomed("p", "old", "u-1", "42"),)
    assert garbage
    assert not _collect()


def test_sixty_promotions_and_forty_freight_through_one_stage_with_retention_ten() -> None:
    # The shape of the cluster test, decided purely: what must remain.
    freight = [_freight(f"f{i:02d}", (40 - i) * HOUR) for i in range(40)]  # f39 the newest
    promotions = [
        _promotion(f"p{i:02d}", (60 - i) * HOUR, freight=f"f{min(i, 39):02d}") for i in range(60)
    ]
    history = [[f"f{i:02d}"] for i in range(39, 29, -1)]  # f39 now, nine before it
    retention = Retention(
        max_promotions=10,
        min_promotion_age=timedelta(0),
        max_freight=10,
        min_freight_age=timedelta(0),
    )
    garbage = _collect(
        stages=[_holding(*history)], promotions=promotions, freight=freight, retention=retention
    )
    assert _doomed_names(garbage.promotions) == [("p", f"p{i:02d}") for i in range(50)]
    # Kargo keeps f39 (in use) and the ten before it; f29 is the oldest of the eleven.
    assert _doomed_names(garbage.freight) == [("p", f"f{i:02d}") for i in range(29)]
