"""``issue_comment`` events: chat commands in pull request and issue comments.

Only ``created`` comments count (an edit must not re-run a command), the bot's own comments and
other bots' are ignored, and only lines that are commands of ours (:func:`parse_comment`; fenced
code and quotes do not count). A comment with commands gets an ``eyes`` reaction, then each
command one reply ``@user: ...``. Every command is authorized first (repository permission plus
the Stage's ``longshoreman.dev/github-promoters``); a refusal replies with the reason and changes
nothing. The reply to ``/promote`` is remembered on the Promotion and edited in place as it
progresses (``handlers/progress.py``).

Which project (namespace) a repository's commands act on: ``GITHUB_PROJECT``, or the repository's
entry in ``GITHUB_REPO_PROJECTS`` (see :mod:`handlers.settings`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gidgethub import routing, sansio

from handlers import checks
from handlers.client import GitHubAPI
from handlers.context import REPLY_ANNOTATION, Deps, event_repo
from promoter.chatops import (
    GITHUB_PROMOTERS,
    USAGE,
    Command,
    Refusal,
    Snapshot,
    abort_targets,
    freight_for_commit,
    freight_label,
    github_may_act,
    help_text,
    listed,
    markdown_table,
    no_verification,
    not_available,
    parse_comment,
    resolve_freight,
    stage_rows,
)
from promoter.errors import LongshoremanError
from promoter.model import meta, name_of

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
    )
    await gh.post(
        f"/repos/{repo}/issues/comments/{int(comment['id'])}/reactions", data={"content": "eyes"}
    )
    for line in parsed:
        if line.command is None:
            await session.reply(f"@{session.user}: {checks.quiet(line.error or '')}")
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
    ) -> None:
        self.deps = deps
        self.gh = gh
        self.repo = repo
        self.issue = issue
        self.is_pr = is_pr
        self.user = user
        self.namespace = namespace
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
        handler = {
            "promote": self.promote,
            "abort": self.abort,
            "status": self.status,
            "verify": self.verify,
            "help": self.help,
        }[command.name]
        try:
            await handler(command)
        except LongshoremanError as e:
            # The service refused (a name not found, an invalid object): tell the user.
            await self.reply(f"@{self.user}: `{checks.quiet(command.raw)}`: {checks.quiet(str(e))}")

    async def _snapshot(self) -> Snapshot:
        return await self.deps.service.snapshot(self.namespace)

    async def _authorize(self, stage: Mapping[str, Any] | None) -> bool:
        decision = await self.deps.permissions.decide(self.gh, self.repo, self.user, stage)
        if not decision.allowed:
            await self.refuse(decision.reason)
        return decision.allowed

    async def _pr_freight(self, snapshot: Snapshot, what: str) -> Mapping[str, Any] | None:
        """The Freight whose commits include this PR's merge commit, or a reply saying why not."""
        if not self.is_pr:
            await self.reply(f"@{self.user}: this is not a pull request: {what}")
            return None
        sha = await self.merge_commit()
        if sha is None:
            await self.reply(f"@{self.user}: this pull request is not merged yet: {what}")
            return None
        freight = freight_for_commit(sha, snapshot.freight)
        if freight is None:
            await self.reply(
                f"@{self.user}: no Freight in project `{self.namespace}` contains this pull "
                f"request's merge commit `{sha[:12]}` yet (has the Warehouse seen it?): {what}"
            )
        return freight

    # ---- commands -------------------------------------------------------------------------

    async def _authorized_stage(
        self, command: Command
    ) -> tuple[Snapshot, Mapping[str, Any]] | None:
        """The command's Stage if it exists and the commenter may act on it; else says why."""
        assert command.stage is not None
        snapshot = await self._snapshot()
        stage = snapshot.stage(command.stage)
        if stage is None:
            await self.reply(
                f"@{self.user}: there is no Stage `{command.stage}` in project `{self.namespace}`"
            )
            return None
        if not await self._authorize(stage):
            return None
        return snapshot, stage

    async def promote(self, command: Command) -> None:
        assert command.stage is not None
        authorized = await self._authorized_stage(command)
        if authorized is None:
            return
        snapshot, stage = authorized
        if command.freight is not None:
            try:
                freight = resolve_freight(
                    command.freight, snapshot.freight, stage, datetime.now(UTC)
                )
            except LookupError as e:
                await self.reply(f"@{self.user}: {checks.quiet(str(e.args[0] if e.args else e))}")
                return
        else:
            found = await self._pr_freight(snapshot, f"name a Freight. Usage: {USAGE['promote']}")
            if found is None:
                return
            freight = found
        label = freight_label(freight)
        refusal = not_available(stage, freight, datetime.now(UTC))
        if refusal is not None:
            await self.refuse(refusal)
            return
        ref = await self.deps.service.promote(
            self.namespace, command.stage, name_of(freight), actor=self.deps.actor(self.user)
        )
        promotion = {
            "metadata": {"name": ref.name, "namespace": ref.namespace},
            "spec": {"stage": ref.stage, "freight": ref.freight},
            "status": {"phase": ref.phase},
        }
        comment = await self.reply(
            checks.reply_body(
                self.user,
                command.raw,
                promotion,
                freight_label=label,
                link=self.deps.settings.link_for(ref.namespace, ref.name),
            )
        )
        reply = {
            "repo": self.repo,
            "comment": int(comment["id"]),
            "user": self.user,
            "command": command.raw,
        }
        await self.deps.service.annotate(
            ref.namespace, ref.name, REPLY_ANNOTATION, json.dumps(reply, sort_keys=True)
        )

    async def abort(self, command: Command) -> None:
        snapshot = await self._snapshot()
        freight: str | None = None
        if command.target is None:
            found = await self._pr_freight(
                snapshot, f"name a Promotion or Stage. Usage: {USAGE['abort']}"
            )
            if found is None:
                return
            freight = name_of(found)
        targets = abort_targets(snapshot, command.target, queued=command.queued, freight=freight)
        if isinstance(targets, Refusal):
            await self.refuse(targets.reason)
            return
        for promotion in targets:
            stage = snapshot.stage(checks.stage_of(promotion))
            if not await self._authorize(stage):
                return
        aborted = []
        for promotion in targets:
            ref = await self.deps.service.abort(
                self.namespace, name_of(promotion), actor=self.deps.actor(self.user)
            )
            aborted.append(f"`{ref.name}` (Stage `{ref.stage}`)")
        await self.reply(f"@{self.user}: abort requested for {', '.join(aborted)}")

    async def status(self, command: Command) -> None:
        if not await self._authorize(None):
            return
        snapshot = await self._snapshot()
        stages = snapshot.stages
        if command.stage is not None:
            stage = snapshot.stage(command.stage)
            if stage is None:
                await self.reply(
                    f"@{self.user}: there is no Stage `{command.stage}` in project "
                    f"`{self.namespace}`"
                )
                return
            stages = [stage]
        if not stages:
            await self.reply(f"@{self.user}: project `{self.namespace}` has no Stages")
            return
        table = markdown_table(stage_rows(stages, snapshot.promotions, snapshot.freight))
        await self.reply(f"@{self.user}: status of project `{self.namespace}`\n\n{table}")

    async def verify(self, command: Command) -> None:
        assert command.stage is not None
        authorized = await self._authorized_stage(command)
        if authorized is None:
            return
        refusal = no_verification(authorized[1])
        if refusal is not None:
            await self.refuse(refusal)
            return
        await self.deps.service.reverify(
            self.namespace, command.stage, actor=self.deps.actor(self.user)
        )
        await self.reply(
            f"@{self.user}: verification of the current Freight in Stage `{command.stage}` "
            "requested"
        )

    async def help(self, command: Command) -> None:
        permission = await self.deps.permissions.permission(self.gh, self.repo, self.user)
        snapshot = await self._snapshot()
        allowed: list[str] = []
        refused: list[str] = []
        # Resolve the team memberships the Stages name, so the lists say what is true now.
        slugs = {
            entry
            for stage in snapshot.stages
            for entry in listed((meta(stage).get("annotations") or {}).get(GITHUB_PROMOTERS))
            if "/" in entry
        }
        teams = await self.deps.permissions.teams(self.gh, self.user, sorted(slugs))
        for stage in snapshot.stages:
            decision = github_may_act(stage, self.user, permission, teams)
            (allowed if decision.allowed else refused).append(f"`{name_of(stage)}`")
        lines = [
            f"@{self.user}: commands (one per line; project `{self.namespace}`):",
            help_text(),
            "",
            f"Your permission on `{self.repo}`: **{permission}**.",
        ]
        if allowed:
            lines.append(f"You may promote to: {', '.join(sorted(allowed))}.")
        if refused:
            lines.append(
                f"Not to: {', '.join(sorted(refused))} (write access and, where a Stage lists "
                "promoters, being one of them directly or through a team are required)."
            )
        await self.reply("\n".join(lines))
