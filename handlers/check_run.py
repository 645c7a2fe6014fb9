"""``check_run`` events on our own ``promote: STAGE`` and ``verify: STAGE`` runs: buttons, re-runs.

``requested_action`` is a button press (Abort, Re-verify, Promote to NEXT; see
:func:`handlers.checks.actions` and :func:`handlers.checks.verification_actions`); both kinds of
run name their Promotion in ``external_id``, which gives the Stage and the Freight.
``rerequested`` on a failed or cancelled run ("Re-run" in the Checks tab) starts a new Promotion
of the same Freight to the same Stage, or, on a ``verify:`` run, verifies again. Each runs the same
authorization as a comment command: the presser's repository permission and the Stage's
promoters. A refusal is told on the pull request the check belongs to (a check run has no thread
of its own) and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gidgethub import routing, sansio

from handlers import checks
from handlers.client import GitHubAPI
from handlers.context import Deps, event_repo
from promoter.chatops import (
    Refusal,
    Snapshot,
    abort_targets,
    freight_of_name,
    no_verification,
    not_available,
)
from promoter.model import name_of

log = logging.getLogger(__name__)

router = routing.Router()


def ours(run: Mapping[str, Any], app_id: str | None) -> bool:
    app = run.get("app") or {}
    return (
        app_id is not None
        and str(app.get("id")) == app_id
        and str(run.get("name", "")).startswith((checks.CHECK_PREFIX, checks.VERIFY_PREFIX))
    )


async def _tell(gh: GitHubAPI, repo: str, run: Mapping[str, Any], body: str) -> None:
    pulls = run.get("pull_requests") or []
    if not pulls:
        log.info("check run %s: %s", run.get("id"), body)
        return
    await gh.post(f"/repos/{repo}/issues/{int(pulls[0]['number'])}/comments", data={"body": body})


@dataclass(frozen=True)
class _Pressed:
    """Who acted on which of our check runs, and the Promotion that run is about."""

    gh: GitHubAPI
    repo: str
    run: Mapping[str, Any]
    user: str
    namespace: str
    snapshot: Snapshot
    promotion: Mapping[str, Any]

    @property
    def stage(self) -> str:
        return checks.stage_of(self.promotion)

    async def tell(self, body: str) -> None:
        await _tell(self.gh, self.repo, self.run, f"@{self.user}: {body}")


def _our_run(
    data: Mapping[str, Any], deps: Deps
) -> tuple[Mapping[str, Any], tuple[str, str]] | None:
    """The event's check run and the Promotion it names, if the run is one of ours."""
    run = data.get("check_run") or {}
    target = checks.parse_external_id(str(run.get("external_id") or ""))
    if not ours(run, deps.settings.app_id) or target is None:
        return None
    return run, target


async def _pressed(
    data: Mapping[str, Any], run: Mapping[str, Any], target: tuple[str, str], deps: Deps
) -> _Pressed | None:
    """Resolve an action on a run to its Promotion; tell the user when it is gone."""
    namespace, name = target
    user = str((data.get("sender") or {}).get("login") or "")
    repo = event_repo(data)
    gh = await deps.gh(data)
    snapshot = await deps.service.snapshot(namespace)
    promotion = next((p for p in snapshot.promotions if name_of(p) == name), None)
    if promotion is None:
        await _tell(gh, repo, run, f"@{user}: Promotion `{name}` no longer exists")
        return None
    return _Pressed(gh, repo, run, user, namespace, snapshot, promotion)


@router.register("check_run", action="requested_action")
async def on_requested_action(event: sansio.Event, deps: Deps) -> None:
    data = event.data
    found = _our_run(data, deps)
    if found is None:
        return
    run, target = found
    identifier = str((data.get("requested_action") or {}).get("identifier") or "")
    pressed = await _pressed(data, run, target, deps)
    if pressed is None:
        return
    gh, repo, user = pressed.gh, pressed.repo, pressed.user
    snapshot, promotion = pressed.snapshot, pressed.promotion
    namespace, name = target
    stage_name = pressed.stage
    actor = deps.actor(user)
    if identifier.startswith(checks.NEXT_PREFIX):
        downstream = checks.downstream_stages(stage_name, snapshot.stages)
        chosen = next((s for s in downstream if checks.next_identifier(s) == identifier), None)
        if chosen is None:
            await _tell(gh, repo, run, f"@{user}: that Stage no longer follows `{stage_name}`")
            return
        next_stage = snapshot.stage(chosen)
        decision = await deps.permissions.decide(gh, repo, user, next_stage)
        if not decision.allowed:
            await _tell(gh, repo, run, f"@{user}: refused: {decision.reason}. Nothing was changed.")
            return
        freight = freight_of_name(checks.freight_of(promotion), snapshot.freight)
        if next_stage is None or freight is None:
            await pressed.tell(f"Stage `{chosen}` or this Freight no longer exists")
            return
        refusal = not_available(next_stage, freight, datetime.now(UTC))
        if refusal is not None:
            await pressed.tell(f"refused: {refusal}. Nothing was changed.")
            return
        ref = await deps.service.promote(
            namespace, chosen, checks.freight_of(promotion), actor=actor
        )
        log.info("%s promoted %s to %s from a check run", user, ref.freight, chosen)
        return
    decision = await deps.permissions.decide(gh, repo, user, snapshot.stage(stage_name))
    if not decision.allowed:
        await _tell(gh, repo, run, f"@{user}: refused: {decision.reason}. Nothing was changed.")
        return
    if identifier == checks.ABORT:
        targets = abort_targets(snapshot, name)
        if isinstance(targets, Refusal):
            await pressed.tell(f"refused: {targets.reason}. Nothing was changed.")
            return
        await deps.service.abort(namespace, name, actor=actor)
    elif identifier == checks.REVERIFY:
        stage = snapshot.stage(stage_name)
        refusal = no_verification(stage) if stage is not None else None
        if refusal is not None:
            await pressed.tell(f"refused: {refusal}. Nothing was changed.")
            return
        await deps.service.reverify(namespace, stage_name, actor=actor)
    else:
        log.info("unknown check run action %r", identifier)


@router.register("check_run", action="rerequested")
async def on_rerequested(event: sansio.Event, deps: Deps) -> None:
    data = event.data
    found = _our_run(data, deps)
    if found is None:
        return
    run, target = found
    retry_on: tuple[str, ...] = ("failure", "cancelled", "timed_out")
    if str(run.get("name", "")).startswith(checks.VERIFY_PREFIX):
        retry_on += ("neutral",)  # an inconclusive analysis is worth running again too
    if run.get("conclusion") not in retry_on:
        return  # only a failed promotion (or verification) is worth repeating
    pressed = await _pressed(data, run, target, deps)
    if pressed is None:
        return
    stage = pressed.snapshot.stage(pressed.stage)
    decision = await deps.permissions.decide(pressed.gh, pressed.repo, pressed.user, stage)
    if not decision.allowed:
        await pressed.tell(f"refused: {decision.reason}. Nothing was changed.")
        return
    actor = deps.actor(pressed.user)
    if str(run.get("name", "")).startswith(checks.VERIFY_PREFIX):
        await deps.service.reverify(pressed.namespace, pressed.stage, actor=actor)
        return
    await deps.service.promote(
        pressed.namespace, pressed.stage, checks.freight_of(pressed.promotion), actor=actor
    )
