"""Commands from the status pages, for a person signed in with GitHub: the same facts, planner
and rules as a pull request comment by that person (:mod:`handlers.issue_comment`).

A page has no repository of its own, so the one whose permission decides is found from the
project: the repositories ``LONGSHOREMAN_GITHUB_REPO_PROJECTS`` maps to it, then those of its
Freight's commits that map to it (where a comment would act on this project). The person may act
when a comment by them in one of those repositories would be allowed; otherwise the refusal is
the one a comment in the first of them would get, word for word. Protected Stages
(``longshoreman.dev/slack-confirm: "true"``) ask for a confirmation, as Slack does.
"""

from __future__ import annotations

from dataclasses import replace

from handlers import checks
from handlers.context import Deps, github_facts
from handlers.progress import commit_targets
from promoter.chat.acting import Acted
from promoter.chat.grammar import Command
from promoter.chat.planner import (
    AlreadyApproved,
    AskConfirm,
    DoAbort,
    DoApprove,
    DoPromote,
    DoReverify,
    Plan,
    Refusal,
    plan,
)
from promoter.chat.port import Snapshot, promote_decided
from promoter.errors import LongshoremanError
from promoter.resources import annotations as ann


def project_repos(deps: Deps, snapshot: Snapshot) -> list[str]:
    """The repositories whose comments act on the snapshot's project, as far as it is known."""
    namespace = snapshot.namespace
    mapped = sorted(r for r, ns in deps.settings.repo_projects.items() if ns == namespace)
    seen = {r.lower() for r in mapped}
    for freight in snapshot.freight:
        for repo, _sha in commit_targets(freight):
            if repo.lower() not in seen and deps.settings.project_for(repo) == namespace:
                seen.add(repo.lower())
                mapped.append(repo)
    return mapped


def refused(reason: str) -> Acted:
    """The refusal as a PR comment words it, without the ``@user:`` a reply starts with and the
    zero-width spaces that keep GitHub from notifying those it mentions (a page notifies nobody)."""
    return Acted("refused", f"refused: {reason}. Nothing was changed.")


class GitHubActing:
    """:class:`promoter.chat.acting.Acting` for people signed in to the pages with GitHub."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def act(self, namespace: str, login: str, command: Command) -> Acted:
        try:
            snapshot = await self.deps.service.snapshot(namespace)
            repos = project_repos(self.deps, snapshot)
            if not repos:
                return refused(
                    f"no GitHub repository is known to act on project `{namespace}`, so your "
                    "permission cannot be checked (map one: LONGSHOREMAN_GITHUB_REPO_PROJECTS="
                    f"owner/repo={namespace})"
                )
            decision = await self._decide(repos, login, command, snapshot)
            return await self._carry_out(namespace, login, command, decision)
        except LongshoremanError as e:
            return refused(str(e))

    async def _decide(
        self, repos: list[str], login: str, command: Command, snapshot: Snapshot
    ) -> Plan:
        first: Plan | None = None
        for repo in repos:
            gh = await self.deps.client.repo_api(repo)
            facts = await github_facts(self.deps, gh, repo, login, command, snapshot)
            decision = plan(command, replace(facts, confirm=ann.confirm_required))
            if not isinstance(decision, Refusal):
                return decision
            first = first or decision
        assert first is not None
        return first

    async def _carry_out(
        self, namespace: str, login: str, command: Command, decision: Plan
    ) -> Acted:
        service = self.deps.service
        actor = self.deps.actor(login)
        if isinstance(decision, Refusal):
            return refused(decision.reason)
        if isinstance(decision, AskConfirm):
            return Acted(
                "confirm",
                f"Stage `{decision.stage}` asks for a confirmation: promote Freight "
                f"`{decision.label.short}` to it?",
            )
        if isinstance(decision, DoPromote):
            ref = await promote_decided(
                service, namespace, decision.stage, decision.freight, decision.create, actor=actor
            )
            return Acted(
                "done",
                f"Promotion `{ref.name}` of Freight `{decision.label.short}` to Stage "
                f"`{ref.stage}` created",
                ref,
            )
        if isinstance(decision, DoApprove):
            await service.approve(namespace, decision.stage, decision.freight, actor=actor)
            return Acted("done", checks.approved_line(decision))
        if isinstance(decision, AlreadyApproved):
            return Acted("done", checks.already_approved_line(decision))
        if isinstance(decision, DoAbort):
            aborted = []
            for name in decision.promotions:
                ref = await service.abort(namespace, name, actor=actor)
                aborted.append(f"`{ref.name}` (Stage `{ref.stage}`)")
            return Acted("done", f"abort requested for {', '.join(aborted)}")
        if isinstance(decision, DoReverify):
            await service.reverify(namespace, decision.stage, actor=actor)
            return Acted(
                "done",
                f"verification of the current Freight in Stage `{decision.stage}` requested",
            )
        return refused(f"`{command.raw}` is not something the pages do; use a comment")
