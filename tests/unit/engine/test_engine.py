"""The step engine's loop semantics, through its public API, with scripted steps.

Scripted steps are real implementations of the Step interface (not patches of our code): they
return the results a test lists, and record the config they were given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from promoter.engine import engine
from promoter.engine.builder import build_promotion
from promoter.errors import StepError
from promoter.resources.model import (
    Phase,
    Promotion,
    TaskRef,
    TaskSpec,
    Var,
    parse_stage,
    parse_task,
)
from promoter.steps.base import StepContext, StepResult, StepServices, StepStatus
from promoter.steps.basic import STEPS as BASIC
from promoter.steps.registry import StepRegistry
from tests.support import objects

FREIGHT = objects.freight(
    "f00dfeed0123",
    namespace="demo",
    alias="frozen-tauntaun",
    images=[{"repoURL": "my/image", "tag": "1.10", "digest": "sha256:abc"}],
    commits=[{"repoURL": "https://github.com/example/repo.git", "id": "abc123"}],
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Scripted:
    """Returns the listed results in turn (the last one repeats); exceptions are raised."""

    def __init__(self, *results: StepResult | Exception) -> None:
        self.results = list(results)
        self.configs: list[dict[str, Any]] = []
        self.contexts: list[StepContext] = []

    async def run(self, ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        self.configs.append(dict(config))
        self.contexts.append(ctx)
        result = self.results.pop(0) if len(self.results) > 1 else self.results[0]
        if isinstance(result, Exception):
            raise result
        return result


OK = StepResult(StepStatus.SUCCEEDED)


def ok(**output: Any) -> StepResult:
    return StepResult(StepStatus.SUCCEEDED, output=output)


class Tasks:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.tasks = {o["metadata"]["name"]: parse_task(o) for o in objs}

    def get_task(self, ref: TaskRef, namespace: str) -> TaskSpec | None:
        return self.tasks.get(ref.name)


def make(
    steps: list[dict[str, Any]],
    *,
    vars_: list[dict[str, Any]] | None = None,
    tasks: Tasks | None = None,
    extra: tuple[Var, ...] = (),
) -> Promotion:
    stage = parse_stage(objects.stage("test", namespace="demo", steps=steps, vars=vars_ or []))
    return build_promotion(stage, FREIGHT, tasks or Tasks(), actor="alice", extra_vars=extra)


def runtime(tmp_path: Path, clock: Clock, **kinds: Any) -> engine.Runtime:
    registry = StepRegistry(BASIC)
    for kind, step in kinds.items():
        registry.register(kind.replace("_", "-"), step)
    return engine.Runtime(
        registry=registry, services=StepServices(), work_dir=tmp_path, freight=FREIGHT, clock=clock
    )


def statuses(promo: Promotion) -> list[tuple[str, str | None]]:
    return [(s.alias, s.status) for s in promo.status.steps]


async def test_steps_run_in_order_and_outputs_flow_through_expressions(tmp_path: Path) -> None:
    clock = Clock()
    sink = Scripted(OK)
    promo = make(
        [
            {
                "uses": "compose-output",
                "as": "a",
                "config": {
                    "tag": "${{ imageFrom('my/image').Tag }}",
                    "q": "${{ quote(imageFrom('my/image').Tag) }}",
                    "n": "${{ vars.replicas }}",
                },
            },
            {
                "uses": "sink",
                "config": {
                    "tag": "${{ outputs.a.tag }}",
                    "q": "${{ quote(outputs.a.q) }}",
                    "n": "${{ outputs.a.n + 1 }}",
                    "who": "${{ ctx.meta.promotion.actor }}@${{ ctx.stage }}",
                },
            },
        ],
        vars_=[{"name": "replicas", "value": "3"}],
    )
    out = await engine.advance(promo, runtime(tmp_path, clock, sink=sink))
    assert out.promotion.status.phase is Phase.SUCCEEDED
    assert out.requeue_after is None
    # "1.10" becomes the number 1.1 unless quoted, exactly as in Kargo.
    assert sink.configs == [{"tag": 1.1, "q": "1.10", "n": 4, "who": "alice@test"}]
    assert out.promotion.status.state["a"] == {"tag": 1.1, "q": "1.10", "n": 3}
    assert out.promotion.status.freight == {
        "name": "f00dfeed0123",
        "origin": FREIGHT["origin"],
        "commits": FREIGHT["commits"],
        "images": FREIGHT["images"],
    }
    assert (
        out.promotion.status.started_at == clock.now
        and out.promotion.status.finished_at == clock.now
    )


async def test_running_step_keeps_position_and_resumes_from_persisted_status(
    tmp_path: Path,
) -> None:
    clock = Clock()
    first = Scripted(OK)
    waiting = Scripted(
        StepResult(StepStatus.RUNNING, message="PR open", output={"pr": 7}, retry_after=30),
        ok(merged=True),
    )
    last = Scripted(OK)
    promo = make([{"uses": "first"}, {"uses": "waiting", "as": "wait"}, {"uses": "last"}])
    rt = runtime(tmp_path, clock, first=first, waiting=waiting, last=last)
    out = await engine.advance(promo, rt)
    assert out.promotion.status.phase is Phase.RUNNING
    assert out.promotion.status.current_step == 1
    assert out.requeue_after == 30
    assert "PR open" in out.promotion.status.message
    # Another process picks it up from the object alone.
    stored = Promotion.from_object(out.promotion.to_object())
    clock.tick(10)
    early = await engine.advance(stored, rt)
    assert len(waiting.configs) == 1, "not re-entered before its retry-after without an event"
    assert early.requeue_after == pytest.approx(20, abs=1)
    woken = await engine.advance(stored, rt, force=True)
    assert woken.promotion.status.phase is Phase.SUCCEEDED
    assert len(first.configs) == 1, "finished steps never run again"
    assert len(waiting.configs) == 2 and len(last.configs) == 1
    assert waiting.contexts[1].previous_output == {"pr": 7}
    assert woken.promotion.status.state["wait"] == {"merged": True}


@pytest.mark.parametrize(("configured", "expected"), [(None, 300.0), (45.0, 45.0)])
async def test_a_running_step_without_its_own_interval_is_retried_after_the_default(
    tmp_path: Path, configured: float | None, expected: float
) -> None:
    clock = Clock()
    waiting = Scripted(StepResult(StepStatus.RUNNING, message="waiting"))
    rt = runtime(tmp_path, clock, waiting=waiting)
    if configured is not None:
        rt = replace(rt, running_retry=configured)
    out = await engine.advance(make([{"uses": "waiting"}]), rt)
    assert out.requeue_after == expected
    stored = Promotion.from_object(out.promotion.to_object())
    clock.tick(expected - 1)
    assert (await engine.advance(stored, rt)).requeue_after == pytest.approx(1)
    assert len(waiting.configs) == 1


async def test_if_is_evaluated_only_before_a_step_starts(tmp_path: Path) -> None:
    clock = Clock()
    gate = Scripted(ok(flag=False))
    waiting = Scripted(StepResult(StepStatus.RUNNING, retry_after=1), OK)
    promo = make(
        [{"uses": "gate", "as": "g"}, {"uses": "waiting", "if": "${{ outputs.g.flag == false }}"}]
    )
    rt = runtime(tmp_path, clock, gate=gate, waiting=waiting)
    out = await engine.advance(promo, rt)
    # The `if` would be false now that the output changed, but the step already started.
    changed = out.promotion.with_status(replace(out.promotion.status, state={"g": {"flag": True}}))
    done = await engine.advance(changed, rt, force=True)
    assert statuses(done.promotion)[-1][1] == "Succeeded"


async def test_failure_skips_later_steps_unless_their_if_says_otherwise(tmp_path: Path) -> None:
    clock = Clock()
    cleanup = Scripted(OK)
    never = Scripted(OK)
    promo = make(
        [
            {"uses": "fail", "as": "boom", "config": {"message": "bad tag"}},
            {"uses": "never"},
            {"uses": "cleanup", "as": "cleanup", "if": "${{ failure() }}"},
            {
                "uses": "cleanup",
                "as": "report",
                "if": "${{ always() && status('boom') == 'Failed' }}",
            },
            {"uses": "never", "as": "on-success", "if": "${{ success() }}"},
        ]
    )
    out = await engine.advance(promo, runtime(tmp_path, clock, cleanup=cleanup, never=never))
    assert statuses(out.promotion) == [
        ("boom", "Failed"),
        ("step-2", "Skipped"),
        ("cleanup", "Succeeded"),
        ("report", "Succeeded"),
        ("on-success", "Skipped"),
    ]
    assert never.configs == []
    assert out.promotion.status.phase is Phase.FAILED
    assert out.promotion.status.message == "step 'boom' (fail) failed: bad tag"


async def test_continue_on_error_does_not_fail_the_promotion(tmp_path: Path) -> None:
    clock = Clock()
    after = Scripted(OK)
    promo = make([{"uses": "fail", "continueOnError": True}, {"uses": "after"}])
    out = await engine.advance(promo, runtime(tmp_path, clock, after=after))
    assert statuses(out.promotion) == [("step-1", "Failed"), ("step-2", "Succeeded")]
    assert out.promotion.status.phase is Phase.SUCCEEDED


async def test_errors_are_retried_up_to_the_threshold_then_errored(tmp_path: Path) -> None:
    clock = Clock()
    flaky = Scripted(StepError("connection reset"), StepError("connection reset"), OK)
    promo = make([{"uses": "flaky", "as": "push", "retry": {"errorThreshold": 3}}])
    rt = runtime(tmp_path, clock, flaky=flaky)
    out = await engine.advance(promo, rt)
    assert out.promotion.status.phase is Phase.RUNNING
    assert out.promotion.status.steps[0].error_count == 1
    assert "attempt 1 of 3" in out.promotion.status.steps[0].message
    clock.tick(out.requeue_after or 0)
    out = await engine.advance(out.promotion, rt)
    assert out.promotion.status.steps[0].error_count == 2
    clock.tick(out.requeue_after or 0)
    out = await engine.advance(out.promotion, rt)
    assert out.promotion.status.phase is Phase.SUCCEEDED

    always_bad = Scripted(StepError("connection reset"))
    promo = make([{"uses": "bad", "as": "push"}])
    out = await engine.advance(promo, runtime(tmp_path, clock, bad=always_bad))
    assert out.promotion.status.phase is Phase.ERRORED, "default errorThreshold is 1"
    assert out.promotion.status.message == "step 'push' (bad) errored: connection reset"


async def test_terminal_errors_skip_retries(tmp_path: Path) -> None:
    clock = Clock()
    bad = Scripted(StepError("config.path is required", terminal=True))
    out = await engine.advance(
        make([{"uses": "bad", "retry": {"errorThreshold": 5}}]), runtime(tmp_path, clock, bad=bad)
    )
    assert out.promotion.status.phase is Phase.ERRORED
    assert len(bad.configs) == 1


async def test_retry_timeout_is_measured_from_the_first_start(tmp_path: Path) -> None:
    clock = Clock()
    slow = Scripted(StepResult(StepStatus.RUNNING, message="still waiting", retry_after=60))
    rt = runtime(tmp_path, clock, slow=slow)
    out = await engine.advance(make([{"uses": "slow", "retry": {"timeout": "2m"}}]), rt)
    for _ in range(2):
        clock.tick(61)
        out = await engine.advance(out.promotion, rt)
    assert out.promotion.status.phase is Phase.ERRORED
    assert "timed out after 120s" in out.promotion.status.message


async def test_unknown_step_kind_errors_the_promotion_with_known_kinds(tmp_path: Path) -> None:
    out = await engine.advance(make([{"uses": "no-such-step"}]), runtime(tmp_path, Clock()))
    assert out.promotion.status.phase is Phase.ERRORED
    assert "unknown step kind 'no-such-step'" in out.promotion.status.message
    assert "compose-output" in out.promotion.status.message


async def test_expression_errors_at_run_time_name_the_step_and_field(tmp_path: Path) -> None:
    promo = make(
        [
            {
                "uses": "compose-output",
                "as": "c",
                "config": {"deep": {"x": "${{ outputs.nope.field }}"}},
            }
        ]
    )
    out = await engine.advance(promo, runtime(tmp_path, Clock()))
    assert out.promotion.status.phase is Phase.ERRORED
    message = out.promotion.status.message
    assert "step 'c'" in message and "config.deep.x" in message and "outputs.nope.field" in message


async def test_final_phase_is_the_worst_status(tmp_path: Path) -> None:
    clock = Clock()
    err = Scripted(StepError("x", terminal=True))
    promo = make([{"uses": "fail"}, {"uses": "err", "if": "${{ always() }}"}])
    out = await engine.advance(promo, runtime(tmp_path, clock, err=err))
    assert out.promotion.status.phase is Phase.ERRORED
    skipped_only = make([{"uses": "compose-output", "if": "${{ false }}"}])
    out = await engine.advance(skipped_only, runtime(tmp_path, clock))
    assert out.promotion.status.phase is Phase.SUCCEEDED


async def test_task_outputs_and_compose_output_publishing(tmp_path: Path) -> None:
    clock = Clock()
    sink = Scripted(OK)
    t = objects.promotion_task(
        "t",
        [
            {"uses": "compose-output", "as": "inner", "config": {"v": "x${{ vars.suffix }}"}},
            {
                "uses": "compose-output",
                "as": "output",
                "config": {
                    "commit": "${{ task.outputs.inner.v }}",
                    "seen": "${{ status('inner') }}",
                },
            },
        ],
        vars=[{"name": "suffix", "value": "-dflt"}],
        namespace="demo",
    )
    promo = make(
        [
            {"task": {"name": "t"}, "as": "deploy", "vars": [{"name": "suffix", "value": "-ref"}]},
            {
                "uses": "sink",
                "config": {
                    "a": "${{ outputs.deploy.commit }}",
                    "b": "${{ outputs['deploy::inner'].v }}",
                    "c": "${{ outputs.deploy.seen }}",
                },
            },
        ],
        tasks=Tasks(t),
    )
    out = await engine.advance(promo, runtime(tmp_path, clock, sink=sink))
    assert out.promotion.status.phase is Phase.SUCCEEDED, out.promotion.status.message
    assert sink.configs == [{"a": "x-ref", "b": "x-ref", "c": "Succeeded"}]


async def test_step_vars_can_use_outputs_and_promotion_vars_use_earlier_vars(
    tmp_path: Path,
) -> None:
    clock = Clock()
    sink = Scripted(OK)
    promo = make(
        [
            {"uses": "compose-output", "as": "a", "config": {"v": 5}},
            {
                "uses": "sink",
                "vars": [{"name": "fromOut", "value": "${{ outputs.a.v * 2 }}"}],
                "config": {
                    "x": "${{ vars.fromOut }}",
                    "b": "${{ vars.branch }}",
                    "c": "${{ vars.cli }}",
                },
            },
        ],
        vars_=[
            {"name": "base", "value": "stage"},
            {"name": "branch", "value": "${{ vars.base }}/${{ ctx.stage }}"},
        ],
        extra=(Var("cli", "from-cli"),),
    )
    out = await engine.advance(promo, runtime(tmp_path, clock, sink=sink))
    assert out.promotion.status.phase is Phase.SUCCEEDED, out.promotion.status.message
    assert sink.configs == [{"x": 10, "b": "stage/test", "c": "from-cli"}]


async def test_abort_marks_the_running_step_and_names_the_actor(tmp_path: Path) -> None:
    clock = Clock()
    waiting = Scripted(StepResult(StepStatus.RUNNING, retry_after=5))
    rt = runtime(tmp_path, clock, waiting=waiting)
    out = await engine.advance(
        make(
            [{"uses": "waiting", "as": "w"}, {"uses": "compose-output", "config": {"done": True}}]
        ),
        rt,
    )
    aborted = engine.abort(out.promotion, "slack:T1/U2", clock.now)
    assert aborted.status.phase is Phase.ABORTED
    assert aborted.status.message == "Aborted by slack:T1/U2"
    assert statuses(aborted) == [("w", "Aborted")]
    # Terminal Promotions are never run again, and aborting twice changes nothing.
    again = await engine.advance(aborted, rt, force=True)
    assert again.promotion == aborted and len(waiting.configs) == 1
    assert engine.abort(aborted, "bob", clock.now) == aborted


async def test_the_observer_sees_each_step_start_and_finish(tmp_path: Path) -> None:
    """What the CLI prints its progress from (``run_promotion(observer=...)``)."""
    clock = Clock()
    seen: list[tuple[int, str]] = []

    def observer(p: Promotion, index: int) -> None:
        seen.append((index, str(p.status.steps[index].status)))

    rt = replace(runtime(tmp_path, clock), observer=observer)
    out = await engine.advance(
        make(
            [
                {"uses": "compose-output", "config": {"done": True}},
                {"uses": "compose-output", "config": {"done": True}},
            ]
        ),
        rt,
    )
    assert out.promotion.status.phase is Phase.SUCCEEDED
    assert seen == [(0, "Running"), (0, "Succeeded"), (1, "Running"), (1, "Succeeded")]


async def test_health_checks_of_successful_steps_are_recorded(tmp_path: Path) -> None:
    check = {"uses": "argocd-update", "config": {"apps": [{"name": "a"}]}}
    healthy = Scripted(StepResult(StepStatus.SUCCEEDED, health_check=check))
    out = await engine.advance(
        make([{"uses": "healthy"}]), runtime(tmp_path, Clock(), healthy=healthy)
    )
    assert out.promotion.status.health_checks == (check,)


async def test_a_crashing_step_is_an_error_not_a_crash(tmp_path: Path) -> None:
    buggy = Scripted(ZeroDivisionError("division by zero"))
    out = await engine.advance(make([{"uses": "buggy"}]), runtime(tmp_path, Clock(), buggy=buggy))
    assert out.promotion.status.phase is Phase.ERRORED
    assert "internal error in step: ZeroDivisionError" in out.promotion.status.message
