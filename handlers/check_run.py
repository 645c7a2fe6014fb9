"""``check_run`` events on our own ``promote: STAGE`` and ``verify: STAGE`` runs: buttons, re-runs.

``requested_action`` is a button press (Abort, Re-verify, Promote to NEXT, Approve for NEXT; see
:func:`handlers.checks.actions` and :func:`handlers.checks.verification_actions`); both kinds of
run name their Promotion in ``external_id``, which gives the Stage and the Freight.
``rerequested`` on a failed or cancelled run ("Re-run" in the Checks tab) starts a new Promotion
of the same Freight to the same Stage, or, on a ``verify:`` run, verifies again. Each runs the same
authorization as a comment command: the project the repository is mapped to (never the
project the run's ``external_id`` names: :meth:`handlers.context.Deps.refuses_project`), the
presser's repository permission and the Stage's promoters (approvers, for Approve). A refusal
is told on the pull request the check belongs to (a check run has no thread of its own) and
changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gidgethub import routing, sansio

from handlers import checks
from handlers.client import GitHubAPI
from handlers.context import Deps, event_repo, github_facts
from promoter.chat import neutral
from promoter.chat.grammar import Command
from promoter.chat.planner import (
    AlreadyApproved,
    DoAbort,
    DoApprove,
    DoPromote,
    DoReverify,
    Refusal,
    plan,
)
from promoter.chat.port import Snapshot, promote_decided
from promoter.resources.model import name_of

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


@dataclass(frozen=True, slots=True)
class _Pressed:
    """Who acted on which of our check runs, and the Promotion that run is about."""

    deps: Deps
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

    async def carry_out(self, command: Command) -> None:
        """Decide ``command`` with the same planner as comments, then act or say why not."""
        facts = await github_facts(self.deps, self.gh, self.repo, self.user, command, self.snapshot)
        decision = plan(command, facts)
        actor = self.deps.actor(self.user)
        if isinstance(decision, Refusal):
            await self.tell(f"refused: {neutral.quiet(decision.reason)}. Nothing was changed.")
        elif isinstance(decision, DoApprove):
            await self.deps.service.approve(
                self.namespace, decision.stage, decision.freight, actor=actor
            )
            await self.tell(checks.approved_line(decision))
        elif isinstance(decision, AlreadyApproved):
            await self.tell(checks.already_approved_line(decision))
        elif isinstance(decision, DoPromote):
            ref = await promote_decided(
                self.deps.service,
                self.namespace,
                decision.stage,
                decision.freight,
                decision.create,
                actor=actor,
            )
            log.info("%s promoted %s to %s from a check run", self.user, ref.freight, ref.stage)
        elif isinstance(decision, DoAbort):
            for name in decision.promotions:
                await self.deps.service.abort(self.namespace, name, actor=actor)
        elif isinstance(decision, DoReverify):
            await self.deps.service.reverify(self.namespace, decision.stage, actor=actor)


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
    refused = deps.refuses_project(data, namespace)
    if refused is not None:
        await _tell(gh, repo, run, f"@{user}: refused: {refused}. Nothing was changed.")
        return None
    snapshot = await deps.service.snapshot(namespace)
    promotion = next((p for p in snapshot.promotions if name_of(p) == name), None)
    if promotion is None:
        await _tell(gh, repo, run, f"@{user}: Promotion `{name}` no longer exists")
        return None
    return _Pressed(deps, gh, repo, run, user, namespace, snapshot, promotion)


def _button_command(identifier: str, pressed: _Pressed) -> Command | None:
    """A button as the command it stands for; None for one we do not know."""
    if identifier == checks.ABORT:
        return Command("abort", target=name_of(pressed.promotion), raw="Abort")
    if identifier == checks.REVERIFY:
        return Command("verify", stage=pressed.stage, raw="Re-verify")
    if identifier.startswith(checks.APPROVE_PREFIX):
        # Like Promote to NEXT, by a digest of the Stage's name; a Stage gone is named by
        # nothing, and the planner says there is no such Stage.
        chosen = next(
            (
                name_of(s)
                for s in pressed.snapshot.stages
                if checks.approve_identifier(name_of(s)) == identifier
            ),
            "",
        )
        return Command(
            "approve", freight=checks.freight_of(pressed.promotion), stage=chosen, raw="Approve"
        )
    if identifier.startswith(checks.NEXT_PREFIX):
        # The identifier carries a digest of the Stage's name (identifiers are 20 characters);
        # a Stage that no longer exists is named by nothing, and the planner says so.
        chosen = next(
            (
                name_of(s)
                for s in pressed.snapshot.stages
                if checks.next_identifier(name_of(s)) == identifier
            ),
            "",
        )
        return Command(
            "promote",
            freight=checks.freight_of(pressed.promotion),
            stage=chosen,
            after=pressed.stage,
            raw="Promote",
        )
    return None


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
    command = _button_command(identifier, pressed)
    if command is None:
        log.info("unknown check run action %r", identifier)
        return
    if command.name in ("promote", "approve") and not command.stage:
        await pressed.tell(f"that Stage no longer follows `{pressed.stage}`")
        return
    await pressed.carry_out(command)


@router.register("check_run", action="rerequested")
async def on_rerequested(event: sansio.Event, deps: Deps) -> None:
    data = event.data
    found = _our_run(data, deps)
    if found is None:
        return
    run, target = found
    retry_on: tuple[str, ...] = ("failure", "cancelled", "timed_out")
    verify = str(run.get("name", "")).startswith(checks.VERIFY_PREFIX)
    if verify:
        retry_on += ("neutral",)  # an inconclusive analysis is worth running again too
    if run.get("conclusion") not in retry_on:
        return  # only a failed promotion (or verification) is worth repeating
    pressed = await _pressed(data, run, target, deps)
    if pressed is None:
        return
    if verify:
        await pressed.carry_out(Command("verify", stage=pressed.stage, raw="Re-run"))
        return
    freight = checks.freight_of(pressed.promotion)
    await pressed.carry_out(Command("promote", freight=freight, stage=pressed.stage, raw="Re-run"))
