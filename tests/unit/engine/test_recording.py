"""Which Promotion status changes are written: a waiting step's progress is not, anything a
takeover or a reader needs is (promoter/engine/recording.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from promoter.engine.recording import progress_only
from promoter.resources.model import Phase, PromotionStatus, StepExecution

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
STARTED = NOW - timedelta(seconds=5)
AHEAD = NOW + timedelta(seconds=5)


def waiting(message: str = "sync started", next_attempt: datetime | None = AHEAD) -> StepExecution:
    return StepExecution(
        alias="sync",
        status="Running",
        started_at=STARTED,
        message=message,
        next_attempt_at=next_attempt,
    )


DONE = StepExecution(alias="push", status="Succeeded", started_at=STARTED, finished_at=STARTED)


def status(step: StepExecution, **changes: object) -> PromotionStatus:
    base = PromotionStatus(
        phase=Phase.RUNNING,
        message=f"step 'sync' (argocd-update): {step.message}",
        current_step=1,
        steps=(DONE, step),
        state={"push": {"commit": "abc"}},
        started_at=STARTED,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


STORED = status(waiting())
LATER = AHEAD + timedelta(seconds=10)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        pytest.param(status(waiting("sync is Running", LATER)), True, id="a new message only"),
        pytest.param(status(waiting("sync started", LATER)), True, id="a new next attempt only"),
        pytest.param(
            status(replace(waiting("retrying"), error_count=1)), False, id="an error is counted"
        ),
        pytest.param(
            status(replace(waiting(), status="Succeeded", finished_at=NOW)),
            False,
            id="the step ended",
        ),
        pytest.param(
            status(waiting("x", LATER), current_step=2), False, id="the Promotion moved on"
        ),
        pytest.param(
            status(waiting("x", LATER), phase=Phase.SUCCEEDED), False, id="the Promotion ended"
        ),
        pytest.param(
            status(waiting("x", LATER), state={"push": {"commit": "abc"}, "sync": {"a": 1}}),
            False,
            id="the step put out something",
        ),
        pytest.param(
            status(waiting("x", LATER), replay_steps={"push": {"input": "sha256:0"}}),
            False,
            id="a replay record changed",
        ),
        pytest.param(
            status(waiting("x", LATER), health_checks=({"uses": "argocd-update"},)),
            False,
            id="a health check was added",
        ),
        pytest.param(
            status(replace(waiting("x", LATER), started_at=NOW)), False, id="the step restarted"
        ),
    ],
)
def test_only_a_waiting_steps_progress_goes_unwritten(
    after: PromotionStatus, expected: bool
) -> None:
    assert progress_only(STORED, after, NOW) is expected


def test_a_timed_entry_is_written_so_the_stored_pacing_never_falls_behind() -> None:
    # Woken by its retry (the stored next attempt reached), not by an event: written.
    due = status(waiting(next_attempt=NOW))
    assert not progress_only(due, status(waiting("sync is Running", LATER)), NOW)
    # A step entered for the first time, or a Promotion not running yet, is always written.
    assert not progress_only(status(waiting(next_attempt=None)), STORED, NOW)
    first = PromotionStatus(phase=Phase.RUNNING, current_step=1, steps=(DONE,))
    assert not progress_only(first, STORED, NOW)
    assert not progress_only(PromotionStatus(), STORED, NOW)
