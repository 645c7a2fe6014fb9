"""The limits and the own-steps rule, decided purely (promoter/rules/limits.py): an object in,
problems naming the field (and the setting) out. Admission and the controller call the same."""

from __future__ import annotations

from typing import Any

import pytest

from promoter.rules.limits import (
    Limits,
    object_size_problems,
    own_steps_problem,
    promotion_problems,
    size_of,
    too_many_steps,
)

SMALL = Limits(max_steps=3, max_object_bytes=2_000)


def promotion(steps: int, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "demo"},
        "spec": {"stage": "s", "freight": "f", "steps": [{"uses": "x"}] * steps},
    }
    if status:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("steps", "problems"),
    [
        (0, []),
        (3, []),
        (4, ["spec.steps: more than 3 steps (LONGSHOREMAN_MAX_PROMOTION_STEPS)"]),
    ],
)
def test_steps_over_the_limit_are_a_problem_of_spec_steps(steps: int, problems: list[str]) -> None:
    got = promotion_problems(promotion(steps), SMALL)
    assert [p.split(";")[0] for p in got] == problems


def test_a_promotion_without_steps_is_measured_by_its_size_only() -> None:
    obj = promotion(0)
    del obj["spec"]["steps"]
    assert promotion_problems(obj, SMALL) == []


def test_the_size_names_the_status_when_the_status_is_what_grew() -> None:
    grown = promotion(1, phase="Running", message="x" * 3_000)
    (problem,) = object_size_problems(grown, SMALL, "Promotion p")
    assert problem.startswith("Promotion p: status: ")
    assert "more than the 2000 allowed (LONGSHOREMAN_MAX_OBJECT_BYTES)" in problem
    big_spec = promotion(1)
    big_spec["spec"]["vars"] = [{"name": "v", "value": "y" * 3_000}]
    (problem,) = object_size_problems(big_spec, SMALL)
    assert problem.startswith("the object: ")
    assert size_of({"a": 1}) == len('{"a":1}')


def test_the_step_count_is_fine_up_to_the_limit() -> None:
    assert too_many_steps(3, SMALL) is None
    problem = too_many_steps(4, SMALL, "Stage s: spec.promotionTemplate.spec.steps")
    assert problem is not None and problem.startswith("Stage s: spec.promotionTemplate")


def test_a_promotion_runs_its_stages_steps_unless_the_operator_allows_its_own() -> None:
    template = ("clone", "push")
    assert own_steps_problem(template, template, "prod", SMALL) is None
    refusal = own_steps_problem(("fail",), template, "prod", SMALL)
    assert refusal is not None
    assert "Stage 'prod'" in refusal and "LONGSHOREMAN_ALLOW_PROMOTION_STEPS" in refusal
    allowed = Limits(allow_own_steps=True)
    assert own_steps_problem(("fail",), template, "prod", allowed) is None


def test_a_promotion_runs_with_its_stages_vars_unless_the_operator_allows_its_own() -> None:
    template, stage_vars = ("clone", "push"), ("size=10",)
    assert own_steps_problem(template, template, "prod", SMALL, stage_vars, stage_vars) is None
    refusal = own_steps_problem(template, template, "prod", SMALL, ("size=9e9",), stage_vars)
    assert refusal is not None and refusal.startswith("spec.vars:")
    assert "Stage 'prod'" in refusal and "LONGSHOREMAN_ALLOW_PROMOTION_STEPS" in refusal
    allowed = Limits(allow_own_steps=True)
    assert own_steps_problem(template, template, "prod", allowed, ("size=9e9",), stage_vars) is None
