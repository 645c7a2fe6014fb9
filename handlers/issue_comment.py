"""``issue_comment`` events: chat commands in pull request and issue comments.

Only ``created`` comments count (an edit must not re-run a command), the bot's own comments and
other bots' are ignored, and only lines that are commands of ours (:func:`parse_comment`; fenced
code and quotes do not count). A comment with commands gets an ``eyes`` reaction, then each
command one reply ``@user: ...``. Every command is authorized first (repository permission plus
the Stage's ``longshoreman.dev/github-promoters``, or for ``/approve`` its
``longshoreman.dev/github-approvers`` when it lists them); a refusal replies with the reason and
changes nothing. The reply to ``/promote`` is remembered on the Promotion and edited in place as it
progresses (``handlers/progress.py``).

Which project (namespace) a repository's commands act on: the project whose namespace names the
repository (``longshoreman.dev/github-repositories``; a Warehouse subscription does not count), else
the repository's entry in ``LONGSHOREMAN_GITHUB_REPO_PROJECTS``, else
``LONGSHOREMAN_GITHUB_PROJECT`` (:func:`promoter.chat.projects.route`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gidgethub import routing, sansio

from handlers import checks
from handlers.client import GitHubAPI
from handlers.context import Deps, event_repo, github_facts
from handlers.markdown import diff_markdown, markdown_table
from promoter.chat import neutral
from promoter.chat.diff import freight_diff, ranges_to_fetch
from promoter.chat.freight_refs import freight_for_commit
from promoter.chat.grammar import USAGE, Command, help_text, parse_comment
from promoter.chat.planner import (
    AlreadyApproved,
    DoAbort,
    DoApprove,
    DoFreeze,
    DoPromote,
    DoReverify,
    DoUnfreeze,
    Facts,
    Plan,
    Refusal,
    ShowDiff,
    ShowHelp,
    ShowStatus,
    needs_pr_freight,
    plan,
)
from promoter.chat.port import Snapshot, promote_decided, set_freeze
from promoter.chat.projects import NotResolved, Route
from promoter.chat.targets import find_stage, named_stage, naming
from promoter.chat.views import promotion_view
from promoter.errors import LongshoremanError
from promoter.resources import annotations as ann
from promoter.resources.model import name_of

log = logging.getLogger(__name__)

router = routing.Router()


def is_bot(comment: Mapping[str, Any], app_id: str | None) -> bool:
    user = comment.get("user") or {}
    if user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]"):
        return True
    app = comment.get("performed_via_github_app") or {}
    return app_id is not None and str(app.get("id")) == app_id


@router.register("issue_comment", action="created")
async def on_comment_created(event: sansio.Event, deps: Deps) -> None:
    data = event.data
    comment = data.get("comment") or {}
    if is_bot(comment, deps.settings.app_id):
        return
    parsed = parse_comment(str(comment.get("body") or ""))
    if not parsed:
        return
    gh = await deps.gh(data)
    repo = event_repo(data)
    session = CommandSession(
        deps,
        gh,
        repo=repo,
        issue=int(data["issue"]["number"]),
        is_pr=bool((data.get("issue") or {}).get("pull_request")),
        user=str(comment["user"]["login"]),
        namespace=deps.namespace_for(data),
        delivery=event.delivery_id,
        projects=deps.projects_for(data),
    )
    await gh.post(
        f"/repos/{repo}/issues/comments/{int(comment['id'])}/reactions", data={"content": "eyes"}
    )
    for line in parsed:
        if line.command is None:
            await session.reply(f"@{session.user}: {neutral.quiet(line.error or '')}")
            continue
        try:
            await session.run(line.command)
        except Exception:
            log.exception("command %r failed", line.line, extra={"delivery_id": event.delivery_id})
            await session.reply(
                f"@{session.user}: `{line.line}` failed with an internal error "
                f"(delivery {event.delivery_id}); nothing more was done."
            )


class CommandSession:
    """Runs the commands of one comment: one reply per command."""

    def __init__(
        self,
        deps: Deps,
        gh: GitHubAPI,
        *,
        repo: str,
        issue: int,
        is_pr: bool,
        user: str,
        namespace: str,
        delivery: str,
        projects: tuple[str, ...] = (),
    ) -> None:
        self.deps = deps
        self.gh = gh
        self.repo = repo
        self.issue = issue
        self.is_pr = is_pr
        self.user = user
        self.namespace = namespace
        # The projects the repository belongs to (promoter.chat.projects): a Stage named
        # ``project/stage``, or one of several, is looked for among them.
        self.where = Route(projects or (namespace,))
        self.delivery = delivery
        self._merge_commit: str | bool | None = False  # False: not looked up yet

    async def reply(self, body: str) -> dict[str, Any]:
        data: dict[str, Any] = await self.gh.post(
            f"/repos/{self.repo}/issues/{self.issue}/comments",
            data={"body": checks.clip(body, checks.MAX_OUTPUT)},
        )
        return data

    async def refuse(self, reason: str) -> None:
        await self.reply(f"@{self.user}: refused: {reason}. Nothing was changed.")

    async def merge_commit(self) -> str | None:
        if self._merge_commit is False:
            data = await self.gh.getitem(f"/repos/{self.repo}/pulls/{self.issue}")
            merged = bool(data.get("merged") or data.get("merged_at"))
            self._merge_commit = str(data["merge_commit_sha"]) if merged else None
        return self._merge_commit if isinstance(self._merge_commit, str) else None

    async def run(self, command: Command) -> None:
        home = self.namespace
        try:
            stage = named_stage(command)
            if stage and ("/" in stage or self.where.project is None):
                target = await find_stage(self.deps.service, stage, self.where, only_here=True)
                if isinstance(target, NotResolved):
                    await self.refuse(neutral.quiet(target.reason))
                    return
                command = naming(command, target.stage)
                self.namespace = target.project
            decision = plan(command, await self._facts(command))
            await self._carry_out(command, decision)
        except LongshoremanError as e:
            # The service refused (a name not found, an invalid object): tell the user.
            said = f"`{neutral.code(command.raw)}`: {neutral.quiet(str(e))}"
            await self.reply(f"@{self.user}: {said}")
        finally:
            self.namespace = home  # the next command of the comment starts from the repository's

    async def _facts(self, command: Command) -> Facts:
        """Everything :func:`promoter.chat.planner.plan` needs, looked up now (the I/O is here)."""
        snapshot = await self.deps.service.snapshot(self.namespace)
        pr_freight = None
        if needs_pr_freight(command):
            pr_freight = await self._pr_freight(snapshot, command)
        return await github_facts(
            self.deps, self.gh, self.repo, self.user, command, snapshot, pr_freight
        )

    async def _pr_freight(self, snapshot: Snapshot, command: Command) -> str | Refusal:
        """The Freight whose commits include this PR's merge commit, or why there is none."""
        what = (
            f"name a Freight. Usage: {USAGE['promote']}"
            if command.name == "promote"
            else f"name a Promotion or Stage. Usage: {USAGE['abort']}"
        )
        if not self.is_pr:
            return Refusal(f"this is not a pull request: {what}")
        sha = await self.merge_commit()
        if sha is None:
            return Refusal(f"this pull request is not merged yet: {what}")
        freight = freight_for_commit(sha, snapshot.freight)
        if freight is None:
            return Refusal(
                f"no Freight in project `{self.namespace}` contains this pull request's merge "
                f"commit `{sha[:12]}` yet (has the Warehouse seen it?): {what}"
            )
        return name_of(freight)

    async def _carry_out(self, command: Command, decision: Plan) -> None:
        actor = self.deps.actor(self.user)
        if isinstance(decision, Refusal):
            await self.refuse(neutral.quiet(decision.reason))
        elif isinstance(decision, DoPromote):  # GitHub never asks to confirm (Facts.confirm)
            await self._promote(command, decision)
        elif isinstance(decision, DoApprove):
            await self.deps.service.approve(
                self.namespace, decision.stage, decision.freight, actor=actor
            )
            await self.reply(f"@{self.user}: {checks.approved_line(decision)}")
        elif isinstance(decision, AlreadyApproved):
            await self.reply(f"@{self.user}: {checks.already_approved_line(decision)}")
        elif isinstance(decision, DoAbort):
            aborted = []
            for name in decision.promotions:
                ref = await self.deps.service.abort(self.namespace, name, actor=actor)
                aborted.append(f"`{ref.name}` (Stage `{ref.stage}`)")
            await self.reply(f"@{self.user}: abort requested for {', '.join(aborted)}")
        elif isinstance(decision, DoReverify):
            await self.deps.service.reverify(self.namespace, decision.stage, actor=actor)
            await self.reply(
                f"@{self.user}: verification of the current Freight in Stage `{decision.stage}` "
                "requested"
            )
        elif isinstance(decision, ShowStatus):
            if not decision.rows:
                await self.reply(f"@{self.user}: project `{self.namespace}` has no Stages")
                return
            table = markdown_table(decision.rows)
            await self.reply(f"@{self.user}: status of project `{self.namespace}`\n\n{table}")
        elif isinstance(decision, ShowDiff):
            facts = await self.deps.diffs.facts(ranges_to_fetch(decision.current, decision.freight))
            diff = freight_diff(decision.stage, decision.current, decision.freight, facts)
            await self.reply(f"@{self.user}: {diff_markdown(diff, decision.label)}")
        elif isinstance(decision, DoFreeze):
            await set_freeze(
                self.deps.service, self.namespace, decision.stage, decision.freeze.to_annotation()
            )
            said = decision.said(self.namespace, self.deps.clock.now())
            await self.reply(f"@{self.user}: {neutral.quiet(said)}")
        elif isinstance(decision, DoUnfreeze):
            await set_freeze(self.deps.service, self.namespace, decision.stage, None)
            await self.reply(f"@{self.user}: {neutral.quiet(decision.said(self.namespace))}")
        elif isinstance(decision, ShowHelp):
            await self._help(decision)

    async def _promote(self, command: Command, decision: DoPromote) -> None:
        ref = await promote_decided(
            self.deps.service,
            self.namespace,
            decision.stage,
            decision.freight,
            decision.create,
            actor=self.deps.actor(self.user),
        )
        promotion = {
            "metadata": {"name": ref.name, "namespace": ref.namespace},
            "spec": {"stage": ref.stage, "freight": ref.freight},
            "status": {"phase": ref.phase},
        }
        view = replace(
            promotion_view(promotion, link=self.deps.settings.link_for(ref.namespace, ref.name)),
            label=decision.label,
        )
        comment = await self.reply(checks.reply_body(self.user, command.raw, view))
        reply = {
            "repo": self.repo,
            "comment": int(comment["id"]),
            "user": self.user,
            "command": command.raw,
        }
        await self.deps.service.annotate(
            ref.namespace, ref.name, ann.GITHUB_REPLY, json.dumps(reply, sort_keys=True)
        )

    async def _help(self, decision: ShowHelp) -> None:
        permission = await self.deps.permissions.permission(self.gh, self.repo, self.user)
        lines = [
            f"@{self.user}: commands (one per line; project `{self.namespace}`):",
            help_text(),
            "",
            f"Your permission on `{self.repo}`: **{permission}**.",
        ]
        if decision.allowed:
            lines.append(f"You may promote to: {', '.join(f'`{s}`' for s in decision.allowed)}.")
        if decision.approvable:
            lines.append(
                f"You may approve Freight for: {', '.join(f'`{s}`' for s in decision.approvable)}"
                " (where a Stage lists approvers, being one of them; else as for promoting)."
            )
        if decision.refused:
            lines.append(
                f"Not to: {', '.join(f'`{s}`' for s in decision.refused)} (write access and, "
                "where a Stage lists promoters, being one of them directly or through a team "
                "are required)."
            )
        await self.reply("\n".join(lines))
