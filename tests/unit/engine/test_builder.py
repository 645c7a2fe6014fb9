"""The one builder: task inflation, aliases, var precedence and input errors (Kargo's rules)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from promoter.engine.builder import build_promotion, ensure_inflated, new_ulid, promotion_name
from promoter.errors import InvalidInput
from promoter.resources.model import (
    Promotion,
    StageSpec,
    TaskRef,
    TaskSpec,
    Var,
    parse_stage,
    parse_steps,
    parse_task,
)
from promoter.rules.limits import Limits
from tests.support import objects

FREIGHT = objects.freight("abcdef0123456789")


class Tasks:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.tasks = {(o["kind"], o["metadata"]["name"]): parse_task(o) for o in objs}

    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return self.tasks.get((ref.kind, ref.name))


def task(
    name: str, vars_: list[dict[str, Any]], steps: list[dict[str, Any]], kind: str = "PromotionTask"
) -> dict[str, Any]:
    return objects.promotion_task(name, steps, vars=vars_, kind=kind, namespace="demo")


def stage(
    steps: list[dict[str, Any]],
    vars_: list[dict[str, Any]] | None = None,
    template_vars: list[dict[str, Any]] | None = None,
) -> StageSpec:
    return parse_stage(
        objects.stage(
            "test",
            namespace="demo",
            steps=steps,
            template_vars=template_vars or [],
            vars=vars_ or [],
        )
    )


OPEN_PR = task(
    "open-pr-and-wait",
    [{"name": "repoURL"}, {"name": "sourceBranch"}, {"name": "targetBranch", "value": "main"}],
    [
        {"uses": "git-open-pr", "as": "open-pr", "config": {"repoURL": "${{ vars.repoURL }}"}},
        {"uses": "git-wait-for-pr", "config": {"prNumber": "${{ task.outputs['open-pr'].pr.id }}"}},
    ],
)


def build(st: StageSpec, tasks: Tasks | None = None, extra: tuple[Var, ...] = ()) -> Promotion:
    return build_promotion(st, FREIGHT, tasks or Tasks(), actor="tester", extra_vars=extra)


def test_default_aliases_count_from_one_as_kargo_does_and_keep_explicit_ones() -> None:
    promo = build(
        stage(
            [{"uses": "compose-output"}, {"uses": "fail", "as": "stop"}, {"uses": "compose-output"}]
        )
    )
    assert [s.alias for s in promo.steps] == ["step-1", "stop", "step-3"]


def test_task_steps_are_inlined_with_prefixed_aliases_and_vars_in_kargo_order() -> None:
    st = stage(
        [
            {"uses": "compose-output", "as": "first"},
            {
                "task": {"name": "open-pr-and-wait"},
                "vars": [
                    {"name": "repoURL", "value": "https://x/r.git"},
                    {"name": "sourceBranch", "value": "b"},
                ],
            },
        ]
    )
    promo = build(st, Tasks(OPEN_PR))
    assert [s.alias for s in promo.steps] == ["first", "task-2::open-pr", "task-2::step-2"]
    assert [s.uses for s in promo.steps] == ["compose-output", "git-open-pr", "git-wait-for-pr"]
    # task defaults, then the referencing step's vars (later wins when evaluated in order)
    assert [(v.name, v.value) for v in promo.steps[1].vars] == [
        ("targetBranch", "main"),
        ("repoURL", "https://x/r.git"),
        ("sourceBranch", "b"),
    ]


def test_task_step_own_vars_come_last() -> None:
    t = task(
        "t",
        [{"name": "x", "value": "default"}],
        [{"uses": "compose-output", "as": "c", "vars": [{"name": "x", "value": "own"}]}],
    )
    promo = build(
        stage([{"task": {"name": "t"}, "as": "deploy", "vars": [{"name": "x", "value": "ref"}]}]),
        Tasks(t),
    )
    assert [(v.name, v.value) for v in promo.steps[0].vars] == [
        ("x", "default"),
        ("x", "ref"),
        ("x", "own"),
    ]


def test_promotion_var_suppresses_task_default_and_satisfies_required_var() -> None:
    # promotion-tasks.4 in Kargo's docs: "Global vars inherited by tasks".
    st = stage(
        [{"task": {"name": "open-pr-and-wait"}, "vars": [{"name": "sourceBranch", "value": "s"}]}],
        template_vars=[
            {"name": "repoURL", "value": "https://github.com/example/repo.git"},
            {"name": "targetBranch", "value": "prod"},
        ],
    )
    promo = build(st, Tasks(OPEN_PR))
    names = [v.name for v in promo.steps[0].vars]
    assert "targetBranch" not in names  # the task default yields to the Promotion var
    assert [(v.name, v.value) for v in promo.vars][-1] == ("targetBranch", "prod")


def test_missing_required_task_var_names_var_and_task() -> None:
    st = stage(
        [{"task": {"name": "open-pr-and-wait"}, "vars": [{"name": "repoURL", "value": "u"}]}]
    )
    with pytest.raises(InvalidInput) as err:
        build(st, Tasks(OPEN_PR))
    assert "requires var 'sourceBranch'" in str(err.value)
    assert "PromotionTask 'open-pr-and-wait'" in str(err.value)


def test_cluster_promotion_task_is_looked_up_by_kind() -> None:
    t = task(
        "global-task", [], [{"uses": "compose-output", "as": "out"}], kind="ClusterPromotionTask"
    )
    promo = build(
        stage([{"task": {"name": "global-task", "kind": "ClusterPromotionTask"}, "as": "g"}]),
        Tasks(t),
    )
    assert [s.alias for s in promo.steps] == ["g::out"]
    with pytest.raises(
        InvalidInput, match="PromotionTask 'global-task' not found in namespace 'demo'"
    ):
        build(stage([{"task": {"name": "global-task"}}]), Tasks(t))


@pytest.mark.parametrize(
    ("steps", "tasks", "message"),
    [
        ([{"uses": "a", "as": "x"}, {"uses": "b", "as": "x"}], (), "duplicate alias 'x'"),
        ([{"uses": "a", "as": "step-3"}], (), "alias 'step-3' is reserved"),
        ([{"uses": "a", "as": "task-0"}], (), "alias 'task-0' is reserved"),
        ([{"uses": "a", "as": "a::b"}], (), "must not contain '::'"),
        (
            [{"task": {"name": "nested"}}],
            (task("nested", [], [{"task": {"name": "other"}}]),),
            "tasks cannot reference other tasks",
        ),
        (
            [{"task": {"name": "t"}}],
            (task("t", [], [{"uses": "a", "as": "step-1"}]),),
            "alias 'step-1' is reserved",
        ),
        ([{"task": {"name": "missing"}}], (), "PromotionTask 'missing' not found"),
        (
            [{"task": {"name": "t"}, "config": {"a": 1}}],
            (task("t", [], [{"uses": "a"}]),),
            "takes `vars`, not `config`",
        ),
    ],
)
def test_invalid_templates_are_refused_with_a_message(
    steps: list[dict[str, Any]], tasks: tuple[dict[str, Any], ...], message: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        build(stage(steps), Tasks(*tasks))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"as": "x"}, "exactly one of `uses` or `task`"),
        ({"uses": "a", "task": {"name": "t"}}, "exactly one of `uses` or `task`"),
        ({"uses": "a", "bogus": 1}, "unknown field(s) bogus"),
        (
            {"uses": "a", "retry": {"errorThreshold": 0}},
            "retry.errorThreshold: must be a whole number of at least 1",
        ),
        ({"uses": "a", "retry": {"timeout": "ten minutes"}}, "is not a duration"),
        ({"uses": "a", "config": "x"}, "config: must be a map"),
        (
            {"uses": "a", "task": None, "continueOnError": "yes"},
            "continueOnError: must be true or false",
        ),
    ],
)
def test_step_shape_errors_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        parse_steps([raw], "steps")


def test_expression_syntax_errors_are_input_errors_naming_the_step_and_field() -> None:
    with pytest.raises(InvalidInput) as err:
        build(stage([{"uses": "compose-output", "as": "out", "config": {"x": "${{ vars.a + }}"}}]))
    text = str(err.value)
    assert "(out).config" in text and "vars.a +" in text


def test_syntax_errors_in_vars_and_if_are_caught_up_front() -> None:
    with pytest.raises(InvalidInput, match=re.escape("vars[0] (a)")):
        build(stage([{"uses": "compose-output"}], vars_=[{"name": "a", "value": "${{ (1 }}"}]))
    with pytest.raises(InvalidInput, match=re.escape("(step-1).if")):
        build(stage([{"uses": "compose-output", "if": "${{ ?? }}"}]))


def test_stage_without_steps_is_refused() -> None:
    control_flow = "is a control-flow Stage (no spec.promotionTemplate.spec.steps)"
    with pytest.raises(InvalidInput, match=re.escape(control_flow)):
        build(stage([]))


def test_promotion_name_follows_kargo_scheme() -> None:
    promo = build(stage([{"uses": "compose-output"}]))
    assert re.fullmatch(r"test\.[0-9a-hjkmnp-tv-z]{26}\.abcdef0", promo.name)
    assert (
        promotion_name("s", "1234567890", "01j2w7a15cxjjgejresfyw6ysp")
        == "s.01j2w7a15cxjjgejresfyw6ysp.1234567"
    )
    # ULIDs sort by creation time, so names sort oldest first.
    assert new_ulid(1_000) < new_ulid(2_000)


def test_a_promotions_name_carries_the_time_it_was_built_at() -> None:
    """The controller builds with its clock's time, so names sort by that clock."""
    st = stage([{"uses": "compose-output"}])
    at = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    first = build_promotion(st, FREIGHT, Tasks(), actor="tester", now=at)
    later = build_promotion(st, FREIGHT, Tasks(), actor="tester", now=at + timedelta(seconds=1))
    ulid = first.name.split(".")[1]
    assert ulid[:10] == new_ulid(int(at.timestamp() * 1000))[:10]  # the time part
    assert first.name < later.name


def test_kubectl_promotion_with_only_stage_and_freight_is_inflated_from_the_stage() -> None:
    st = stage([{"task": {"name": "t"}, "as": "deploy"}], vars_=[{"name": "a", "value": "1"}])
    t = task("t", [], [{"uses": "compose-output", "as": "o"}])
    bare = Promotion(
        name="p", namespace="demo", stage="test", freight="abc", steps=(), vars=(Var("b", "2"),)
    )
    inflated = ensure_inflated(bare, st, Tasks(t))
    assert [s.alias for s in inflated.steps] == ["deploy::o"]
    # The Stage's vars replace the Promotion's own, as Kargo's webhook sets them...
    assert [(v.name, v.value) for v in inflated.vars] == [("a", "1")]
    # Inflating again is a no-op.
    assert ensure_inflated(inflated, st, Tasks(t)) == inflated
    # ...unless the operator allows Promotions their own: they come last and win.
    allowed = ensure_inflated(bare, st, Tasks(t), Limits(allow_own_steps=True))
    assert [(v.name, v.value) for v in allowed.vars] == [("a", "1"), ("b", "2")]


def test_promotion_object_round_trips() -> None:
    promo = build(
        stage(
            [
                {
                    "uses": "compose-output",
                    "as": "o",
                    "if": "${{ always() }}",
                    "continueOnError": True,
                    "retry": {"timeout": "10m", "errorThreshold": 3},
                    "config": {"a": 1},
                }
            ]
        )
    )
    again = Promotion.from_object(promo.to_object())
    assert again == promo
    assert again.steps[0].retry is not None and again.steps[0].retry.timeout == 600
