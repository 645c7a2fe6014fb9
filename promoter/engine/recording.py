"""Which of a Promotion's status changes are worth a write to the API server, decided purely.

The controller persists the Promotion after every step it runs, so any replica can resume from
the object (``app/controller/reconciler.py``). A step that waits (argocd-update on a sync,
git-wait-for-pr, http) is entered again on every event of what it waits on, and each entry
reports Running with a fresh progress message ("sync started", "sync is Running", ...) and a
fresh ``nextAttemptAt``. On a busy Stage those entries come by the dozen, and a write for each
carries nothing new to anyone (akuity/kargo#6831: pointless status writes load the API server).

A change is *progress only*, and left unwritten, when all of this holds:

- the Promotion is Running before and after, on the same step (``currentStep``);
- that step is Running before and after, with the same start, the same error count and no
  finish; every other step's record, the outputs (``state``), the replay records, the health
  checks and the Promotion's own times are unchanged: what a takeover resumes from is exactly
  what is stored;
- the entry was an early one, woken by an event: the stored ``nextAttemptAt`` is still ahead.
  A timed entry (its ``nextAttemptAt`` reached) is always written, so a step that polls shows
  its newest message at least once per retry period, and the step's pacing stored for a
  takeover never falls behind by more than one period.

What stays unwritten is the running step's message and next attempt; the next write that counts
(the step's end, an error, a timed entry) carries the newest of both.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from promoter.resources.model import Phase, PromotionStatus
from promoter.steps.base import StepStatus


def progress_only(before: PromotionStatus, after: PromotionStatus, now: datetime) -> bool:
    """Whether ``after`` differs from the stored ``before`` by a waiting step's progress only
    (see the module's docstring): then it need not be written."""
    if not (before.phase is Phase.RUNNING and after.phase is Phase.RUNNING):
        return False
    index = before.current_step
    if after.current_step != index or not index < min(len(before.steps), len(after.steps)):
        return False
    stored, running = before.steps[index], after.steps[index]
    if stored.status != StepStatus.RUNNING.value or running.status != StepStatus.RUNNING.value:
        return False
    if stored.next_attempt_at is None or stored.next_attempt_at <= now:
        return False
    # With the progress put back as stored (the step's message and next attempt, and the
    # Promotion's message, which quotes the step's), nothing may differ.
    as_stored = replace(running, message=stored.message, next_attempt_at=stored.next_attempt_at)
    steps = (*after.steps[:index], as_stored, *after.steps[index + 1 :])
    return replace(after, message=before.message, steps=steps) == before
