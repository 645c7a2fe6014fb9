"""Kargo's auto-promotion selection policies and control-flow Stages' decisions
(promoter/control/selection.py), with Kargo's tables: TestSelectAutoPromotionCandidates
(pkg/api/auto_promotion_test.go) and the Stage webhook's MatchUpstream cases
(pkg/webhook/kubernetes/stage/webhook_test.go)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from promoter.control.selection import (
    candidates,
    is_control_flow,
    matches_upstream,
    next_availability,
    passes_freight_on,
    selection_problems,
    to_verify,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
WAREHOUSE = {"kind": "Warehouse", "name": "fake-warehouse"}
OTHER = {"kind": "Warehouse", "name": "other-warehouse"}


def freight(
    name: str, origin: Mapping[str, str] = WAREHOUSE, created: datetime | None = None, **status: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "fake-project"}
    if created is not None:
        meta["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": meta, "origin": dict(origin), "status": status}


def stage(*requests: Mapping[str, Any], steps: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"requestedFreight": list(requests)}
    if steps:
        spec["promotionTemplate"] = {"spec": {"steps": [{"uses": "fail"}]}}
    return {"metadata": {"name": "fake-stage", "namespace": "fake-project"}, "spec": spec}


def request(origin: Mapping[str, str] = WAREHOUSE, **sources: Any) -> dict[str, Any]:
    return {"origin": dict(origin), "sources": sources}


NEWEST = stage(request(direct=True), request(OTHER, direct=True))
MATCH = stage(
    request(stages=["upstream"], autoPromotionOptions={"selectionPolicy": "MatchUpstream"})
)


def nothing_upstream(_: str) -> Collection[str]:
    return ()


def names(picked: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {key: f["metadata"]["name"] for key, f in picked.items()}


def test_newest_freight_selected_per_origin() -> None:
    available = [
        freight("older-freight", created=NOW - timedelta(hours=1)),
        freight("newer-freight", created=NOW),
        freight("other-freight", OTHER, created=NOW - timedelta(minutes=30)),
    ]
    assert names(candidates(NEWEST, available, nothing_upstream)) == {
        "Warehouse/fake-warehouse": "newer-freight",
        "Warehouse/other-warehouse": "other-freight",
    }


def test_a_creation_time_tie_is_broken_by_the_lexically_greater_name() -> None:
    available = [freight("aaa-freight", created=NOW), freight("bbb-freight", created=NOW)]
    assert names(candidates(NEWEST, available, nothing_upstream)) == {
        "Warehouse/fake-warehouse": "bbb-freight"
    }


def upstream_has(*current: str) -> Any:
    def current_in(name: str) -> Collection[str]:
        assert name == "upstream"
        return current

    return current_in


def test_match_upstream_selects_the_single_available_freight() -> None:
    available = [freight("upstream-current-freight")]
    picked = candidates(MATCH, available, upstream_has("upstream-current-freight"))
    assert names(picked) == {"Warehouse/fake-warehouse": "upstream-current-freight"}


def test_match_upstream_skips_the_origin_when_several_freight_are_upstream() -> None:
    available = [freight("first-freight"), freight("second-freight")]
    assert candidates(MATCH, available, upstream_has("first-freight", "second-freight")) == {}


def test_match_upstream_takes_what_upstream_has_even_when_older() -> None:
    available = [freight("old", created=NOW - timedelta(days=1)), freight("new", created=NOW)]
    assert names(candidates(MATCH, available, upstream_has("old"))) == {
        "Warehouse/fake-warehouse": "old"
    }
    assert candidates(MATCH, available, upstream_has()) == {}
    assert matches_upstream(MATCH) and not matches_upstream(NEWEST)


def problems_of(**sources: Any) -> Sequence[str]:
    return selection_problems(stage(request(**sources)))


WHERE = "spec.requestedFreight[0].sources.autoPromotionOptions.selectionPolicy: "
DIRECT = (
    WHERE + "Invalid value: 'MatchUpstream': selection policy 'MatchUpstream' cannot be used "
    "when accepting Freight directly from its origin"
)
ONE = (
    WHERE + "Invalid value: 'MatchUpstream': selection policy 'MatchUpstream' requires exactly "
    "one upstream Stage to be specified"
)
MU = {"selectionPolicy": "MatchUpstream"}


@pytest.mark.parametrize(
    ("sources", "problems"),
    [
        ({"stages": ["a"], "autoPromotionOptions": MU}, []),
        ({"direct": True, "autoPromotionOptions": {"selectionPolicy": "NewestFreight"}}, []),
        ({"direct": True, "stages": ["a"], "autoPromotionOptions": MU}, [DIRECT]),
        ({"direct": True, "autoPromotionOptions": MU}, [DIRECT, ONE]),
        ({"autoPromotionOptions": MU}, [ONE]),
        ({"stages": ["a", "b"], "autoPromotionOptions": MU}, [ONE]),
        (
            {"stages": ["a"], "autoPromotionOptions": {"selectionPolicy": "Oldest"}},
            [WHERE + "Unsupported value: 'Oldest': supported values: 'NewestFreight', "
             "'MatchUpstream'"],
        ),
    ],
)  # fmt: skip
def test_the_stage_webhook_checks_match_upstream(
    sources: Mapping[str, Any], problems: list[str]
) -> None:
    assert problems_of(**sources) == problems


# --- control-flow Stages ---------------------------------------------------------------------


def test_a_stage_without_steps_is_control_flow() -> None:
    assert is_control_flow(stage(request(stages=["test"]), steps=False))
    assert is_control_flow({"spec": {"promotionTemplate": {"spec": {"steps": []}}}})
    assert not is_control_flow(stage(request(stages=["test"])))


def test_a_control_flow_stage_verifies_what_is_available_to_it() -> None:
    prod = stage(request(stages=["ab-test-a", "ab-test-b"]), steps=False)
    prod["metadata"]["name"] = "prod"
    verified = {"verifiedAt": "2026-01-01T11:00:00Z"}
    freights = [
        freight("in-a", verifiedIn={"ab-test-a": verified}),
        freight("in-b", verifiedIn={"ab-test-b": verified}),
        freight("nowhere"),
        freight("done", verifiedIn={"ab-test-a": verified, "prod": verified}),
        freight("elsewhere", OTHER, verifiedIn={"ab-test-a": verified}),
    ]
    assert to_verify(prod, freights, NOW) == ["in-a", "in-b"]


def test_a_control_flow_stage_waits_for_the_soak() -> None:
    prod = stage(request(stages=["test"], requiredSoakTime="1h"), steps=False)
    soaking = freight("f", verifiedIn={"test": {"verifiedAt": "2026-01-01T11:30:00Z"}})
    assert to_verify(prod, [soaking], NOW) == []
    assert next_availability(prod, [soaking], NOW) == datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert to_verify(prod, [soaking], NOW + timedelta(minutes=30)) == ["f"]


def test_a_stage_with_a_promotion_of_its_own_steps_is_a_regular_stage() -> None:
    bare = stage(request(stages=["test"]), steps=False)
    assert passes_freight_on(bare, [])
    # kubectl may still create a Promotion carrying its own steps (Kargo's admission refuses
    # it): it runs, and the Stage keeps a Freight history as a regular one.
    assert not passes_freight_on(bare, [{"spec": {"stage": "fake-stage", "steps": [{}]}}])
    assert not passes_freight_on(stage(request(stages=["test"])), [])
