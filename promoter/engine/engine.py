"""The step engine: runs a Promotion's steps with Kargo's loop semantics, resumably.

Decisions are pure functions of the Promotion's persisted status, the clock and step results
(:func:`should_run`, :func:`record`, :func:`final_phase`, :func:`abort`); :func:`advance` is the
thin async driver that renders configs, calls steps and applies what they return. Everything the
loop needs to continue lives in ``Promotion.status`` (current step, per-step metadata, outputs), so
a Promotion left ``Running`` in one process is continued by another.

Kargo's rules, as implemented here:
- start at ``currentStep``; ``if`` is evaluated only before a step starts; without ``if`` a step
  is skipped once an earlier step without ``continueOnError`` has failed or errored;
- config is rendered just in time, and the Promotion's vars with it, for every step that
  needs them (a var that fails errors that step, not the Promotion); a step's output is stored
  at ``state[alias]``;
- a technical error counts against ``retry.errorThreshold`` (default 1); ``retry.timeout`` is
  measured from the step's first start; a refused config (:class:`ConfigRefused`) ends the step
  ``Failed`` at once, another terminal error ``Errored``;
- a step returning Running leaves the Promotion Running with its position saved;
- the final phase is the worst status of the steps without ``continueOnError``
  (Succeeded < Skipped < Running < Aborted < Failed < Errored).

Not Kargo's, because its work directory is a volume every controller restart keeps: before a
step runs, the work directory must be the one the status describes. A replica that continues a
Promotion it did not start (or whose work directory is gone) first rebuilds it from the status
(:func:`_prepare_work_dir`; the rules are in :mod:`promoter.engine.replay`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from promoter.clock import SYSTEM
from promoter.engine import replay
from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, Scope, freight_functions, render
from promoter.expressions.dates import now_on
from promoter.ports.clusterdata import DataCache, evaluate_with_data
from promoter.resources.model import (
    TASK_SEPARATOR,
    Phase,
    Promotion,
    PromotionStatus,
    StepExecution,
    StepSpec,
    Var,
    freight_reference,
)
from promoter.steps.base import (
    Effect,
    Replaying,
    Step,
    StepContext,
    StepResult,
    StepServices,
    StepStatus,
    effect_of,
    uses_work_dir_of,
    verifier_of,
)

log = logging.getLogger(__name__)

# Back-off between attempts after a retryable step error (seconds), doubling up to the cap.
ERROR_BACKOFF_BASE = 1.0
ERROR_BACKOFF_CAP = 60.0
DEFAULT_RUNNING_RETRY = 300.0
MIN_RUNNING_RETRY = 0.0

_FAILED = {StepStatus.FAILED.value, StepStatus.ERRORED.value}
_DONE = {
    s.value
    for s in (
        StepStatus.SUCCEEDED,
        StepStatus.SKIPPED,
        StepStatus.FAILED,
        StepStatus.ERRORED,
        StepStatus.ABORTED,
    )
}


# ---- pure decisions -----------------------------------------------------------------------------


def task_alias(alias: str) -> str | None:
    """``deploy::open-pr`` -> ``deploy``; a step outside a task has none."""
    head, sep, _ = alias.partition(TASK_SEPARATOR)
    return head if sep else None


def status_functions(
    steps: Sequence[StepSpec], executions: Sequence[StepExecution], index: int
) -> dict[str, Callable[..., Any]]:
    """``always()``, ``success()``, ``failure()`` and ``status(alias)`` for the step at ``index``.

    ``status('x')`` follows Kargo's ``getStatus``: inside a task it sees only the task's own
    steps (``x`` is ``<task>::x``), outside one only the steps outside tasks; an empty alias is
    an error, an unknown one is ``''``.
    """
    earlier = executions[:index]

    def failure() -> bool:
        for spec, ex in zip(steps, earlier, strict=False):
            if ex.status in _FAILED and not spec.continue_on_error:
                return True
        return False

    own_task = task_alias(steps[index].alias or "")

    def status(alias: Any) -> str:
        if not isinstance(alias, str):
            raise ExpressionError(reason=f"status(): argument must be string, got {alias!r}")
        if not alias:
            raise ExpressionError(reason="status(): argument must not be empty")
        for ex in executions:
            head, sep, short = ex.alias.partition(TASK_SEPARATOR)
            namespace, name = (head, short) if sep else (None, ex.alias)
            if namespace == own_task and name == alias:
                return ex.status or ""
        return ""

    return {
        "always": lambda: True,
        "failure": failure,
        "success": lambda: not failure(),
        "status": status,
    }


def final_phase(
    steps: Sequence[StepSpec], executions: Sequence[StepExecution]
) -> tuple[Phase, str]:
    """The worst status among steps without continueOnError, and a message naming the culprit."""
    worst = StepStatus.SUCCEEDED
    culprit: tuple[StepSpec, StepExecution] | None = None
    for spec, ex in zip(steps, executions, strict=False):
        if spec.continue_on_error or not ex.status:
            continue
        status = StepStatus(ex.status)
        if status.severity > worst.severity:
            worst, culprit = status, (spec, ex)
    phase = {
        StepStatus.SUCCEEDED: Phase.SUCCEEDED,
        StepStatus.SKIPPED: Phase.SUCCEEDED,
        StepStatus.RUNNING: Phase.RUNNING,
        StepStatus.ABORTED: Phase.ABORTED,
        StepStatus.FAILED: Phase.FAILED,
        StepStatus.ERRORED: Phase.ERRORED,
        StepStatus.PENDING: Phase.RUNNING,
    }[worst]
    if culprit is None or phase in (Phase.SUCCEEDED, Phase.RUNNING):
        return phase, "All steps completed" if phase is Phase.SUCCEEDED else ""
    spec, ex = culprit
    verb = {Phase.FAILED: "failed", Phase.ERRORED: "errored", Phase.ABORTED: "was aborted"}[phase]
    return phase, f"step {ex.alias!r} ({spec.uses}) {verb}: {ex.message}".rstrip(": ")


def abort(promotion: Promotion, actor: str, now: datetime) -> Promotion:
    """Abort a Promotion: its running step and itself become Aborted, naming who asked."""
    status = promotion.status
    if status.phase.terminal:
        return promotion
    who = actor or "unknown"
    message = f"Aborted by {who}"
    executions = list(status.steps)
    i = status.current_step
    if i < len(promotion.steps):
        alias = promotion.steps[i].alias or promotion.steps[i].alias_at(i)
        if i < len(executions):
            executions[i] = replace(
                executions[i],
                status=StepStatus.ABORTED.value,
                finished_at=now,
                message=message,
                next_attempt_at=None,
            )
        elif status.phase is Phase.RUNNING:
            executions.append(
                StepExecution(
                    alias=alias,
                    status=StepStatus.ABORTED.value,
                    started_at=now,
                    finished_at=now,
                    message=message,
                )
            )
    return promotion.with_status(
        replace(
            status,
            phase=Phase.ABORTED,
            message=message,
            steps=tuple(executions),
            finished_at=now,
            started_at=status.started_at or now,
        )
    )


async def abort_step(promotion: Promotion, runtime: Runtime) -> bool:
    """Let the running step undo what it started before the Promotion is marked Aborted.

    Steps that start work outside the Promotion (an Argo CD sync) implement
    ``async abort(ctx, config)``; others have nothing to undo. Returns whether a hook ran.
    """
    status = promotion.status
    i = status.current_step
    if i >= len(promotion.steps) or i >= len(status.steps):
        return False
    if status.steps[i].status != StepStatus.RUNNING.value:
        return False
    spec = promotion.steps[i]
    step = runtime.registry.get(spec.uses or "")
    hook = getattr(step, "abort", None)
    if hook is None:
        return False
    alias = spec.alias or spec.alias_at(i)
    data = _data_cache(promotion, runtime)
    functions = {**_clock_functions(runtime), **_functions(runtime, promotion.namespace)}
    functions.update(data.functions())
    functions.update(status_functions(promotion.steps, status.steps, i))
    ctx = step_ctx_map(base_context(promotion, runtime), alias)
    state = dict(status.state)
    config = await evaluate_with_data(
        lambda: _render_config(spec, functions, ctx, promotion.vars, state, alias),
        data,
        runtime.services.cluster_data,
    )
    step_ctx = _step_context(
        promotion, runtime, alias, state, runtime.clock(), status.steps[i].started_at, data
    )
    await hook(step_ctx, config)
    return True


def _functions(runtime: Runtime, namespace: str) -> dict[str, Callable[..., Any]]:
    """The Freight functions over the runtime's Freight, plus the caller's extra ones."""
    functions: dict[str, Callable[..., Any]] = dict(
        freight_functions(
            list(runtime.freights) or [runtime.freight],
            warehouses=runtime.warehouses,
            namespace=namespace,
        )
    )
    functions.update(runtime.extra_functions)
    return functions


def _clock_functions(runtime: Runtime) -> dict[str, Callable[..., Any]]:
    """``now()`` on the runtime's clock; not recorded for replays, which run at their own time."""
    return {"now": now_on(runtime.clock)}


def _data_cache(promotion: Promotion, runtime: Runtime) -> DataCache:
    """What one step's secret()/configMap() calls read: fetched on demand, kept for the step."""
    return DataCache(promotion.namespace, runtime.services.shared_namespace)


def _step_context(
    promotion: Promotion,
    runtime: Runtime,
    alias: str,
    state: Mapping[str, Any],
    now: datetime,
    started_at: datetime | None,
    data: DataCache | None = None,
) -> StepContext:
    return StepContext(
        project=promotion.namespace,
        stage=promotion.stage,
        promotion=promotion.name,
        alias=alias,
        actor=promotion.actor,
        work_dir=runtime.work_dir,
        freight=runtime.freight,
        freights=tuple(runtime.freights) or (runtime.freight,),
        warehouses=runtime.warehouses,
        state=state,
        previous_output=state.get(alias) or {},
        services=runtime.services,
        now=now,
        started_at=started_at,
        secret_values=data.secret_values() if data is not None else (),
    )


def error_backoff(error_count: int) -> float:
    return float(min(ERROR_BACKOFF_CAP, ERROR_BACKOFF_BASE * 2 ** max(0, error_count - 1)))


def timed_out(spec: StepSpec, execution: StepExecution, now: datetime) -> bool:
    if spec.retry is None or spec.retry.timeout is None or execution.started_at is None:
        return False
    return now - execution.started_at > timedelta(seconds=spec.retry.timeout)


def record(
    spec: StepSpec,
    execution: StepExecution,
    result: StepResult | StepError,
    now: datetime,
    running_retry: float = DEFAULT_RUNNING_RETRY,
) -> tuple[StepExecution, bool]:
    """Apply a step's result to its metadata; returns it and whether the step is done."""
    if isinstance(result, StepError):
        threshold = spec.retry.error_threshold if spec.retry else 1
        count = execution.error_count + 1
        if result.terminal or count >= threshold or timed_out(spec, execution, now):
            # A refused config ends Failed, as Kargo's Failed + TerminalError does (its
            # determineStepCompletion keeps the step's Failed); any other error, Errored.
            refused = isinstance(result, ConfigRefused)
            return (
                replace(
                    execution,
                    status=(StepStatus.FAILED if refused else StepStatus.ERRORED).value,
                    error_count=count,
                    message=result.message,
                    finished_at=now,
                    next_attempt_at=None,
                ),
                True,
            )
        delay = result.retry_after if result.retry_after is not None else error_backoff(count)
        return (
            replace(
                execution,
                status=StepStatus.RUNNING.value,
                error_count=count,
                message=f"attempt {count} of {threshold} failed, retrying: {result.message}",
                next_attempt_at=now + timedelta(seconds=delay),
            ),
            False,
        )
    if result.status is StepStatus.RUNNING:
        if timed_out(spec, execution, now):
            assert spec.retry is not None and spec.retry.timeout is not None
            return (
                replace(
                    execution,
                    status=StepStatus.ERRORED.value,
                    message=f"timed out after {spec.retry.timeout:g}s: {result.message}".rstrip(
                        ": "
                    ),
                    finished_at=now,
                    next_attempt_at=None,
                ),
                True,
            )
        delay = (
            running_retry
            if result.retry_after is None
            else max(MIN_RUNNING_RETRY, result.retry_after)
        )
        return (
            replace(
                execution,
                status=StepStatus.RUNNING.value,
                message=result.message,
                next_attempt_at=now + timedelta(seconds=delay),
            ),
            False,
        )
    return (
        replace(
            execution,
            status=result.status.value,
            message=result.message,
            finished_at=now,
            next_attempt_at=None,
        ),
        True,
    )


# ---- the driver ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Runtime:
    """What :func:`advance` needs besides the Promotion: steps, ports and the Freight."""

    registry: Mapping[str, Step]
    services: StepServices
    work_dir: Path
    freight: Mapping[str, Any]
    # Freight the expression functions may search (the target first, then the Stage's others).
    freights: Sequence[Mapping[str, Any]] = ()
    # The Warehouses the Stage requests Freight from, by name (None: not found), which decide
    # where imageFrom() and the like look without an origin, as in Kargo. None: not known (a
    # local run without their manifests), so the Freight that carry an artifact decide.
    warehouses: Mapping[str, Mapping[str, Any] | None] | None = None
    extra_functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    # The time steps are stamped with and ``now()`` answers (the controller passes its Clock's).
    clock: Callable[[], datetime] = SYSTEM.now
    # Called with (promotion, step index) whenever a step starts or finishes, for progress output.
    observer: Callable[[Promotion, int], None] | None = None
    # When to enter a Running step again if it names no time and no event wakes it (seconds).
    running_retry: float = DEFAULT_RUNNING_RETRY


@dataclass(frozen=True, slots=True)
class Outcome:
    promotion: Promotion
    # When to call advance() again if no event comes first (None when terminal).
    requeue_after: float | None


def base_context(promotion: Promotion, runtime: Runtime) -> dict[str, Any]:
    """``ctx`` as Kargo's expressions see it (pkg/promotion BuildCtxMap), before a step's alias."""
    freight = runtime.freight
    origin = freight.get("origin") or {}
    return {
        "uiBaseUrl": runtime.services.ui_base_url,
        "project": promotion.namespace,
        "stage": promotion.stage,
        "promotion": promotion.name,
        "targetFreight": {
            # The Freight's name even when the Promotion names it by alias (kubectl), as in
            # Kargo: freightMetadata(ctx.targetFreight.name) looks the Freight up by name.
            "name": str((freight.get("metadata") or {}).get("name") or promotion.freight),
            "alias": freight.get("alias") or "",
            "origin": {"kind": origin.get("kind", "Warehouse"), "name": origin.get("name", "")},
        },
        "meta": {"promotion": {"actor": promotion.actor, "rollback": promotion.rollback}},
    }


def step_ctx_map(ctx: Mapping[str, Any], alias: str) -> dict[str, Any]:
    """``ctx`` for one step: the base with ``ctx.meta.step.alias``."""
    meta = ctx.get("meta") or {}
    return {**ctx, "meta": {**meta, "step": {"alias": alias}}}


def evaluate_vars(
    variables: Sequence[Any],
    base: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    into: dict[str, Any],
    where: str,
) -> None:
    """Evaluate vars in order; each may use the ones before it (and whatever ``base`` offers)."""
    for v in variables:
        scope = Scope({**base, "vars": into}, functions)
        into[v.name] = render(v.value, scope, where=f"{where}.{v.name}")


class _Work:
    """Mutable working copy of a Promotion's status during one advance() call."""

    def __init__(self, promotion: Promotion) -> None:
        st = promotion.status
        self.promotion = promotion
        self.phase = st.phase
        self.message = st.message
        self.current = st.current_step
        self.executions = list(st.steps)
        self.state: dict[str, Any] = dict(st.state)
        self.health_checks = list(st.health_checks)
        self.freight = st.freight
        self.started_at = st.started_at
        self.finished_at = st.finished_at
        self.replay_token = st.replay_token
        self.replay_steps: dict[str, Any] = dict(st.replay_steps)

    def snapshot(self) -> Promotion:
        return self.promotion.with_status(
            PromotionStatus(
                phase=self.phase,
                message=self.message,
                current_step=self.current,
                steps=tuple(self.executions),
                state=dict(self.state),
                freight=self.freight,
                health_checks=tuple(self.health_checks),
                started_at=self.started_at,
                finished_at=self.finished_at,
                replay_token=self.replay_token,
                replay_steps=dict(self.replay_steps),
            )
        )


async def advance(
    promotion: Promotion, runtime: Runtime, *, force: bool = False, max_steps: int | None = None
) -> Outcome:
    """Run steps from ``currentStep`` until one is Running or all are done.

    ``force`` re-enters a waiting step before its ``nextAttemptAt`` (an event woke it).
    ``max_steps`` stops after that many steps have run, with ``requeue_after`` 0: a controller
    persists the Promotion after every step this way, one status write per pass.
    """
    now = runtime.clock()
    work = _Work(promotion)
    if work.phase.terminal:
        return Outcome(promotion, None)
    if work.phase is Phase.PENDING:
        work.phase = Phase.RUNNING
        work.started_at = now
        work.message = ""
        work.freight = freight_reference(runtime.freight)

    steps = promotion.steps
    promotion_ctx = base_context(promotion, runtime)
    live_functions = _functions(runtime, promotion.namespace)
    # The functions that read the cluster, noting what they answered: a replay of a step must
    # see the same answers (promoter/engine/replay.py).
    recorder = replay.CallRecorder(live_functions)
    functions = {**_clock_functions(runtime), **recorder.functions}
    ran = 0
    prepared = False

    while work.current < len(steps):
        if max_steps is not None and ran >= max_steps:
            return Outcome(work.snapshot(), 0.0)
        i = work.current
        spec = steps[i]
        alias = spec.alias or spec.alias_at(i)
        ctx = step_ctx_map(promotion_ctx, alias)
        now = runtime.clock()
        # secret() and the like: not recorded for replays (their values must not reach the
        # status), fetched for this step only.
        data = _data_cache(promotion, runtime)
        fns = {**functions, **data.functions(), **status_functions(steps, work.executions, i)}
        if i >= len(work.executions):
            work.executions.append(StepExecution(alias=alias))
        execution = work.executions[i]

        if execution.status is None:
            # Not started: `if` is evaluated only now, never again once the step runs.
            try:
                run = await evaluate_with_data(
                    partial(_should_run, spec, fns, ctx, promotion.vars, work.state, alias),
                    data,
                    runtime.services.cluster_data,
                )
            except ExpressionError as e:
                work.executions[i] = replace(
                    execution,
                    status=StepStatus.ERRORED.value,
                    started_at=now,
                    finished_at=now,
                    message=data.redact(f"if: {e}"),
                )
                work.current += 1
                await _checkpoint(work, runtime, i)
                continue
            if not run:
                work.executions[i] = replace(
                    execution,
                    status=StepStatus.SKIPPED.value,
                    started_at=now,
                    finished_at=now,
                    message="skipped: "
                    + (f"if {spec.if_!r} was false" if spec.if_ else "an earlier step failed"),
                )
                work.current += 1
                await _checkpoint(work, runtime, i)
                continue
            execution = replace(execution, status=StepStatus.RUNNING.value, started_at=now)
            work.executions[i] = execution
            if runtime.observer:
                runtime.observer(work.snapshot(), i)
        elif execution.status == StepStatus.RUNNING.value:
            if (
                execution.next_attempt_at is not None
                and now < execution.next_attempt_at
                and not force
            ):
                await _checkpoint(work, runtime, None)
                return Outcome(work.snapshot(), (execution.next_attempt_at - now).total_seconds())
        elif execution.status in _DONE:
            # Finished before a crash that happened before currentStep was saved.
            work.current += 1
            continue
        force = False

        step = runtime.registry.get(spec.uses or "")
        result: StepResult | StepError
        config: Mapping[str, Any] = {}
        if step is None:
            result = StepError(
                f"unknown step kind {spec.uses!r}; known kinds: "
                + ", ".join(sorted(runtime.registry)),
                terminal=True,
            )
        else:
            problem = None
            if not prepared:
                problem = await _prepare_work_dir(work, runtime, promotion, i, ctx, live_functions)
                prepared = problem is None
            # What the cluster-reading functions answer this step's vars and config.
            recorder.calls = {}
            if problem is not None:
                result = problem
            else:
                try:
                    config = await evaluate_with_data(
                        partial(_render_config, spec, fns, ctx, promotion.vars, work.state, alias),
                        data,
                        runtime.services.cluster_data,
                    )
                except ExpressionError as e:
                    result = StepError(data.redact(str(e)), terminal=True)
                else:
                    step_ctx = _step_context(
                        promotion, runtime, alias, work.state, now, execution.started_at, data
                    )
                    result = await _run_step(step, step_ctx, config, spec)
        now = runtime.clock()
        execution, done = record(spec, execution, result, now, runtime.running_retry)
        work.executions[i] = execution
        if isinstance(result, StepResult):
            if done and result.status is StepStatus.SUCCEEDED and _replayable(step):
                work.replay_steps[alias] = replay.record_of(
                    config, recorder.calls, result.replay_data, work.replay_steps
                )
            if result.output or alias not in work.state:
                work.state[alias] = dict(result.output)
            owner = task_alias(alias)
            if owner is not None and spec.uses == "compose-output" and done:
                # Kargo: compose-output inside a task publishes its keys as outputs.<taskAlias>.
                work.state[owner] = {**(work.state.get(owner) or {}), **result.output}
            if result.health_check and done and result.status is StepStatus.SUCCEEDED:
                work.health_checks.append(dict(result.health_check))
        if not done:
            work.message = f"step {alias!r} ({spec.uses}): {execution.message}".rstrip(": ")
            await _checkpoint(work, runtime, i)
            wait = (
                (execution.next_attempt_at - now).total_seconds()
                if execution.next_attempt_at
                else runtime.running_retry
            )
            return Outcome(work.snapshot(), max(0.0, wait))
        work.current += 1
        ran += 1
        await _checkpoint(work, runtime, i)

    phase, message = final_phase(steps, work.executions)
    work.phase = phase
    work.message = message
    work.finished_at = runtime.clock()
    if not steps:
        work.phase, work.message = Phase.ERRORED, "the Promotion has no steps"
    return await _done(work, runtime)


# ---- rebuilding the work directory (promoter/engine/replay.py has the rules)
# ---------------------------


def _rebuilds(step: Step | None) -> bool:
    """Whether running this step again rebuilds part of the work directory."""
    return step is not None and effect_of(step) is Effect.LOCAL and uses_work_dir_of(step)


def _replayable(step: Step | None) -> bool:
    """Whether a replay does anything with this step: runs it again, or checks its effect."""
    return _rebuilds(step) or verifier_of(step) is not None


async def _prepare_work_dir(
    work: _Work,
    runtime: Runtime,
    promotion: Promotion,
    index: int,
    ctx: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]],
) -> StepResult | StepError | None:
    """Make the work directory the one the status describes before step ``index`` runs.

    None when it is (or nothing before or at ``index`` needs one); otherwise the rebuild's
    failure, as the result of step ``index``: a refusal is terminal; trouble that may pass
    (a remote unreachable) is an error of the step, or Running when the port said when to try
    again (a rate limit), which uses up no ``errorThreshold``.
    """
    registry, steps = runtime.registry, promotion.steps
    past = [
        j
        for j in range(min(index, len(work.executions)))
        if work.executions[j].status == StepStatus.SUCCEEDED.value
        and _replayable(registry.get(steps[j].uses or ""))
    ]
    # Only a work directory that something uses needs to be the right one (a Promotion of
    # compose-output and argocd-update steps never has one).
    if not uses_work_dir_of(registry.get(steps[index].uses or "")) and not any(
        uses_work_dir_of(registry.get(steps[j].uses or "")) for j in past
    ):
        return None
    identity = f"{promotion.namespace}/{promotion.name}"
    # Inline, not in a thread: reading a few bytes costs less than the hand-off (bench_scale).
    if work.replay_token and replay.read_token(runtime.work_dir, identity) == work.replay_token:
        return None
    try:
        replayed: list[str] = []
        if past:
            await runtime.services.io.call(replay.clear, runtime.work_dir)
            replayed = await _rebuild(work, runtime, promotion, index, ctx, functions, past)
        elif replay.has_content(runtime.work_dir):
            # Left by an attempt whose step never got recorded, here or elsewhere: start clean.
            await runtime.services.io.call(replay.clear, runtime.work_dir)
    except StepError as e:
        message = (
            "the work directory is not the one the earlier steps ran in (another replica's, or "
            f"gone), and it cannot be rebuilt as they left it: {e.message}"
        )
        if not e.terminal and e.retry_after is not None:
            return StepResult(
                StepStatus.RUNNING,
                message=f"rebuilding the work directory: {e.message}; trying again",
                retry_after=e.retry_after,
            )
        return StepError(message, terminal=e.terminal, retry_after=e.retry_after)
    token = replay.new_token()
    replay.write_token(runtime.work_dir, identity, token)
    work.replay_token = token
    if past:
        log.info(
            "rebuilt the work directory of Promotion %s before step %d: %s",
            identity,
            index,
            ", ".join(replayed),
            extra={"promotion": promotion.name},
        )
    return None


async def _rebuild(
    work: _Work,
    runtime: Runtime,
    promotion: Promotion,
    index: int,
    ctx: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    past: Sequence[int],
) -> list[str]:
    """Replay (or check) the steps in ``past``, in order, in an empty work directory.

    Returns what was done, for the log; raises StepError when the state cannot be reproduced.
    """
    replayed = set(past)
    # The outputs as each step saw them when it ran: those recorded before it, never after.
    state: dict[str, Any] = {}
    done: list[str] = []
    for j in range(index):
        spec = promotion.steps[j]
        alias = spec.alias or spec.alias_at(j)
        if j in replayed:
            done.append(await _replay_step(work, runtime, promotion, j, ctx, functions, state))
        if alias in work.state:
            state[alias] = work.state[alias]
            owner = task_alias(alias)
            if owner is not None and spec.uses == "compose-output":
                state[owner] = {**(state.get(owner) or {}), **work.state[alias]}
    return done


async def _replay_step(
    work: _Work,
    runtime: Runtime,
    promotion: Promotion,
    j: int,
    ctx: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    state: Mapping[str, Any],
) -> str:
    """Run step ``j`` again (LOCAL) or check its effect (``verify``), as it ran the first time:
    the same statuses before it, the recorded answers of the cluster-reading functions, the
    same rendered config (by its recorded digest), and then the same output."""
    spec = promotion.steps[j]
    alias = spec.alias or spec.alias_at(j)
    step = runtime.registry.get(spec.uses or "")
    assert step is not None
    what = f"step {alias!r} ({spec.uses})"
    record_ = replay.StepRecord.from_dict(work.replay_steps.get(alias))
    execution = work.executions[j]
    as_it_ran = [*work.executions[:j], replace(execution, status=StepStatus.RUNNING.value)]
    data = _data_cache(promotion, runtime)
    fns = {
        **replay.replaying_functions(functions, record_.calls),
        **data.functions(),
        **status_functions(promotion.steps, as_it_ran, j),
    }
    step_ctx_vars = step_ctx_map(ctx, alias)
    try:
        config = await evaluate_with_data(
            lambda: _render_config(spec, fns, step_ctx_vars, promotion.vars, state, alias),
            data,
            runtime.services.cluster_data,
        )
    except ExpressionError as e:
        raise StepError(
            data.redact(f"{what}: its config no longer renders: {e}"), terminal=True
        ) from None
    if record_.input and replay.input_digest(config) != record_.input:
        raise StepError(
            f"{what}: its config renders differently than when it ran (an input it read has "
            "changed since), so replaying it would not rebuild what it built",
            terminal=True,
        )
    recorded = work.state.get(alias) or {}
    step_ctx = replace(
        _step_context(
            promotion, runtime, alias, state, runtime.clock(), execution.started_at, data
        ),
        previous_output={},
        replay=Replaying(dict(recorded), record_.data),
    )
    verify = verifier_of(step)
    if verify is not None:
        try:
            await verify(step_ctx, config)
        except StepError as e:
            raise StepError(
                f"checking what {what} did: {step_ctx.redact(e.message)}",
                terminal=e.terminal,
                retry_after=e.retry_after,
            ) from None
        except Exception as e:  # a bug in a hook must not wedge the Promotion
            log.exception("verifying step %s (%s) raised", alias, spec.uses)
            raise StepError(
                step_ctx.redact(f"checking what {what} did: internal error: {e}")
            ) from None
        return f"checked {alias}"
    result = await _run_step(step, step_ctx, config, spec)
    if isinstance(result, StepError):
        raise StepError(
            f"replaying {what}: {result.message}",
            terminal=result.terminal,
            retry_after=result.retry_after,
        )
    if result.status is not StepStatus.SUCCEEDED:
        raise StepError(
            f"replaying {what} ended {result.status.value}"
            + (f": {result.message}" if result.message else ""),
            terminal=True,
        )
    if result.replaces_output:
        work.state[alias] = dict(result.output)
        return f"replayed {alias} ({result.message or 'with a new output'})"
    if not replay.same_output(result.output, recorded):
        raise StepError(
            f"replaying {what} gave the output {replay.shown(result.output)}, not the "
            f"{replay.shown(recorded)} it recorded",
            terminal=True,
        )
    return f"replayed {alias}"


async def _run_step(
    step: Step, ctx: StepContext, config: Mapping[str, Any], spec: StepSpec
) -> StepResult | StepError:
    try:
        return await step.run(ctx, config)
    except StepError as e:
        return e.with_message(ctx.redact(e.message))
    except Exception as e:  # a bug in a step must not wedge the Promotion: count it as an error
        log.exception("step %s (%s) raised", ctx.alias, spec.uses)
        return StepError(ctx.redact(f"internal error in step: {type(e).__name__}: {e}"))


def _variables(
    spec: StepSpec,
    fns: Mapping[str, Callable[..., Any]],
    ctx: Mapping[str, Any],
    promotion_vars: Sequence[Var],
    state: Mapping[str, Any],
    alias: str,
) -> dict[str, Any]:
    """What a step's ``if`` and config see. As in Kargo (StepEvaluator.Vars) the Promotion's vars
    are evaluated again for every step that needs them, without the outputs, so one that fails
    errors that step only, and a step that never runs never evaluates them."""
    owner = task_alias(alias)
    task_outputs: dict[str, Any] = {}
    if owner is not None:
        prefix = owner + TASK_SEPARATOR
        task_outputs = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    base: dict[str, Any] = {"ctx": ctx, "outputs": state, "task": {"outputs": task_outputs}}
    step_vars: dict[str, Any] = {}
    evaluate_vars(promotion_vars, {"ctx": ctx}, fns, step_vars, "promotion vars")
    if spec.vars:
        evaluate_vars(spec.vars, base, fns, step_vars, f"{alias}: vars")
    base["vars"] = step_vars
    return base


def _should_run(
    spec: StepSpec,
    fns: Mapping[str, Callable[..., Any]],
    ctx: Mapping[str, Any],
    promotion_vars: Sequence[Var],
    state: Mapping[str, Any],
    alias: str,
) -> bool:
    if spec.if_ is None:
        return bool(fns["success"]())
    variables = _variables(spec, fns, ctx, promotion_vars, state, alias)
    value = render(spec.if_, Scope(variables, fns), where=f"step {alias!r}: if")
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ExpressionError(
        spec.if_,
        f"step {alias!r}: if",
        f"must evaluate to a boolean (true or false), got {value!r}",
    )


def _render_config(
    spec: StepSpec,
    fns: Mapping[str, Callable[..., Any]],
    ctx: Mapping[str, Any],
    promotion_vars: Sequence[Var],
    state: Mapping[str, Any],
    alias: str,
) -> Mapping[str, Any]:
    if not spec.config:
        return {}  # Kargo: no config, nothing evaluated (not even the vars)
    variables = _variables(spec, fns, ctx, promotion_vars, state, alias)
    rendered = render(spec.config or {}, Scope(variables, fns), where=f"step {alias!r}: config")
    return rendered if isinstance(rendered, Mapping) else {}


async def _checkpoint(work: _Work, runtime: Runtime, index: int | None) -> None:
    if runtime.observer and index is not None:
        runtime.observer(work.snapshot(), index)


async def _done(work: _Work, runtime: Runtime) -> Outcome:
    return Outcome(work.snapshot(), None)
