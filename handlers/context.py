"""What every webhook handler receives besides the event (bedevere's ``gh`` parameter, widened).

Handlers take ``(event, deps)``: the GitHub client for the event's installation is one call
away (:meth:`Deps.gh`), and everything that changes the cluster goes through the
:class:`promoter.chat.port.PromotionService` port. Nothing here knows about the app layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gidgethub
from cachetools import TTLCache

from handlers.authors import freight_authors
from handlers.client import GitHubAPI, GitHubClient, GitHubUnreachable
from handlers.diff_facts import DiffFacts
from handlers.promoters import github_may_act
from handlers.settings import GitHubSettings
from promoter.chat.grammar import Command
from promoter.chat.planner import (
    Decision,
    Facts,
    Refusal,
    freight_to_approve,
    listed,
    stages_to_authorize,
)
from promoter.chat.port import PromotionService, Snapshot, projects_of
from promoter.chat.projects import Defaults, projects_of_repository
from promoter.clock import SYSTEM, Clock
from promoter.resources import annotations as ann
from promoter.resources.model import meta, name_of

log = logging.getLogger(__name__)

# Annotations the GitHub front end keeps on a Promotion, so any replica continues after a restart.
# Repository permissions change rarely; a minute of caching spares a request per command.
PERMISSION_TTL = 60.0


def event_repo(data: Mapping[str, Any]) -> str:
    """``owner/name`` of the event's repository; "" when the payload has none (or a malformed
    one: a signed but odd delivery must not turn into a 500)."""
    repository = data.get("repository")
    return str(repository.get("full_name") or "") if isinstance(repository, Mapping) else ""


class Permissions:
    """Who may act: repository permission and team membership, cached briefly."""

    def __init__(self, ttl: float = PERMISSION_TTL, clock: Clock = SYSTEM) -> None:
        self._permissions: TTLCache[tuple[str, str], str] = TTLCache(
            maxsize=4096, ttl=ttl, timer=clock.monotonic
        )
        self._teams: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=4096, ttl=ttl, timer=clock.monotonic
        )

    async def permission(self, gh: GitHubAPI, repo: str, user: str) -> str:
        key = (repo.lower(), user.lower())
        cached = self._permissions.get(key)
        if cached is not None:
            return cached
        owner, name = repo.split("/", 1)
        try:
            data = await gh.getitem(
                "/repos/{owner}/{repo}/collaborators/{user}/permission",
                {"owner": owner, "repo": name, "user": user},
            )
            permission = str(data.get("permission") or "none")
            if data.get("role_name") == "maintain":
                permission = "maintain"
        except gidgethub.BadRequest as e:
            if int(e.status_code) != 404:
                raise
            permission = "none"
        self._permissions[key] = permission
        return permission

    async def teams(self, gh: GitHubAPI, user: str, wanted: list[str]) -> list[str]:
        """Those of the ``org/team`` slugs in ``wanted`` that ``user`` is an active member of."""
        out = []
        for slug in wanted:
            org, sep, team = slug.partition("/")
            if not sep or not org or not team:
                continue
            key = (slug.lower(), user.lower())
            member = self._teams.get(key)
            if member is None:
                try:
                    data = await gh.getitem(
                        "/orgs/{org}/teams/{team}/memberships/{user}",
                        {"org": org, "team": team, "user": user},
                    )
                    member = data.get("state") == "active"
                except gidgethub.BadRequest as e:
                    # 404: not a member; 403: the App may not read this org's teams.
                    if int(e.status_code) not in (403, 404):
                        raise
                    member = False
                self._teams[key] = member
            if member:
                out.append(slug)
        return out

    async def decide(
        self, gh: GitHubAPI, repo: str, user: str, stage: Mapping[str, Any] | None
    ) -> Decision:
        """github_may_act with the lookups it needs; with no Stage, repository writers may act."""
        permission = await self.permission(gh, repo, user)
        if stage is None:
            return github_may_act({}, user, permission)
        entries = listed((meta(stage).get("annotations") or {}).get(ann.GITHUB_PROMOTERS))
        teams = await self.teams(gh, user, [e for e in entries if "/" in e])
        return github_may_act(stage, user, permission, teams)


@dataclass
class Deps:
    """The handlers' collaborators."""

    settings: GitHubSettings
    client: GitHubClient
    service: PromotionService
    permissions: Permissions
    # Forget what is remembered of one of our GitHub Deployments (handlers.environments).
    forget_deployment: Callable[[int], None] = field(default=lambda _id: None)
    clock: Clock = SYSTEM
    # Freight diffs' GitHub facts, one cache per process (handlers.diff_facts).
    diffs: DiffFacts = field(init=False)

    def __post_init__(self) -> None:
        self.diffs = DiffFacts(self.client)

    async def gh(self, data: Mapping[str, Any]) -> GitHubAPI:
        """A client for the installation the event came from (looked up when not named)."""
        repo = event_repo(data)
        installation = (data.get("installation") or {}).get("id")
        if installation:
            if repo:
                self.client.remember_installation(repo, int(installation))
            return await self.client.installation_api(int(installation))
        return await self.client.repo_api(repo)

    def projects_for(self, data: Mapping[str, Any]) -> tuple[str, ...]:
        """The projects the event's repository belongs to: those whose namespace names it (or
        whose Warehouses subscribe to it), else the operator's defaults
        (``LONGSHOREMAN_GITHUB_REPO_PROJECTS``, ``LONGSHOREMAN_GITHUB_PROJECT``)."""
        defaults = Defaults(self.settings.repo_projects, self.settings.project)
        return projects_of_repository(event_repo(data), projects_of(self.service), defaults)

    def namespace_for(self, data: Mapping[str, Any]) -> str:
        """The project (namespace) an event's repository acts on: the first of :meth:`projects_for`.

        Every command from GitHub (a comment, a check-run button, a re-run) acts on the project
        the repository is mapped to, never on one the event itself names: a check run's
        ``external_id`` is our own claim, and a repository that merely appears in another
        project's Freight carries that project's check runs without being allowed to act on it.
        """
        found = self.projects_for(data)
        return found[0] if found else self.settings.project

    def refuses_project(self, data: Mapping[str, Any], claimed: str) -> str | None:
        """Why an action on ``claimed`` from this event's repository is refused, or None."""
        projects = self.projects_for(data) or (self.settings.project,)
        if claimed in projects:
            return None
        return (
            f"`{event_repo(data)}` acts on project {', '.join(f'`{p}`' for p in projects)}, "
            f"and this check run belongs to project `{claimed}`"
        )

    def actor(self, login: str) -> str:
        return f"github:{login}"

    async def may_read(self, login: str, namespace: str) -> bool:
        """Whether ``login`` may act on project ``namespace`` from GitHub, which is who may read
        its status pages (``LONGSHOREMAN_UI_GITHUB_ACCESS=project``): write access to a
        repository whose commands act on it (:meth:`projects_for`'s rule). The fallback
        project, which every other repository of the installations acts on, is every
        signed-in member's."""
        if namespace == self.settings.project:
            return True
        projects = projects_of(self.service)
        defaults = Defaults(self.settings.repo_projects, self.settings.project)
        candidates = {r for p in projects if p.name == namespace for r in p.github_repositories}
        candidates |= {r for r, p in self.settings.repo_projects.items() if p == namespace}
        for repo in sorted(candidates):
            if namespace not in projects_of_repository(repo, projects, defaults):
                continue
            try:
                gh = await self.client.repo_api(repo)
                permission = await self.permissions.permission(gh, repo, login)
            except (gidgethub.GitHubException, GitHubUnreachable) as e:
                log.info("pages: permission of %s on %s unknown (%s)", login, repo, e)
                continue
            if github_may_act({}, login, permission).allowed:
                return True
        return False


async def github_facts(
    deps: Deps,
    gh: GitHubAPI,
    repo: str,
    user: str,
    command: Command,
    snapshot: Snapshot,
    pr_freight: str | Refusal | None = None,
) -> Facts:
    """What :func:`promoter.chat.planner.plan` needs to decide ``command`` for ``user``, looked
    up now (the I/O is here): the repository permission, the teams the Stage's promoter or
    approver lists name, and for an ``/approve`` on a Stage that forbids self-approval, who
    authored the Freight's changes. One rule for comments and check-run buttons."""
    permission = await deps.permissions.permission(gh, repo, user)
    slugs = {
        entry
        for stage in stages_to_authorize(command, snapshot, pr_freight)
        for key in (ann.GITHUB_PROMOTERS, ann.GITHUB_APPROVERS)
        for entry in listed((meta(stage).get("annotations") or {}).get(key))
        if "/" in entry
    }
    teams = await deps.permissions.teams(gh, user, sorted(slugs))
    now = deps.clock.now()
    authors: dict[str, set[str] | None] = {}
    freight = freight_to_approve(command, snapshot, now)
    if freight is not None:
        authors[name_of(freight)] = await freight_authors(deps.client, freight)

    def may_act(stage: Mapping[str, Any] | None) -> Decision:
        return github_may_act(stage or {}, user, permission, teams)

    def may_approve(stage: Mapping[str, Any] | None) -> Decision:
        return github_may_act(stage or {}, user, permission, teams, approve=True)

    def authored(freight: Mapping[str, Any]) -> bool | None:
        people = authors.get(name_of(freight), set())
        return None if people is None else user.lower() in people

    return Facts(
        snapshot,
        may_act,
        now=now,
        pr_freight=pr_freight,
        may_approve=may_approve,
        authored=authored,
        actor=deps.actor(user),
    )
