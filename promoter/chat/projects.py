"""Which project a chat command acts on, from where it was typed: one rule for both front ends.

A project names its own places (``promoter.control.projects.Project``: the Slack channels and
GitHub repositories its namespace's annotations list; a Warehouse subscription names none).
A command typed in one of them acts on that project (on every project that names it, when
several do). Elsewhere the operator's settings still decide, as defaults: a per-place entry
(``LONGSHOREMAN_GITHUB_REPO_PROJECTS``), then the one project (``LONGSHOREMAN_GITHUB_PROJECT``,
``LONGSHOREMAN_SLACK_PROJECT``). With neither, the place is unmapped and the route is empty:
the front end says which projects there are and how to map the place.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from promoter.control.projects import Project


@dataclass(frozen=True, slots=True)
class SlackChannel:
    """A Slack channel, by ID (``C0123456789``)."""

    id: str


@dataclass(frozen=True, slots=True)
class GitHubRepository:
    """A GitHub repository, ``owner/repo`` (compared without case, as GitHub does)."""

    full_name: str


Place = SlackChannel | GitHubRepository


@dataclass(frozen=True, slots=True)
class Defaults:
    """The operator's routing: per place (``owner/repo`` in lower case -> project), then one
    project for every other place (None: none)."""

    by_place: Mapping[str, str] = field(default_factory=dict)
    project: str | None = None


@dataclass(frozen=True, slots=True)
class Route:
    """Where a command typed at a place acts: ``projects`` (none: unmapped), and whether a
    project's own annotation said so (``mapped``) or an operator default did."""

    projects: tuple[str, ...]
    mapped: bool = False

    @property
    def project(self) -> str | None:
        """The one project, when there is exactly one."""
        return self.projects[0] if len(self.projects) == 1 else None


def _names(project: Project, place: Place) -> bool:
    if isinstance(place, SlackChannel):
        return place.id in project.slack_channels
    return place.full_name.lower() in project.github_repositories


def route(place: Place, projects: Iterable[Project], defaults: Defaults) -> Route:
    """The projects a command typed at ``place`` acts on."""
    named = tuple(sorted(p.name for p in projects if _names(p, place)))
    if named:
        return Route(named, mapped=True)
    if isinstance(place, GitHubRepository):
        by_place = defaults.by_place.get(place.full_name.lower())
        if by_place is not None:
            return Route((by_place,))
    return Route((defaults.project,) if defaults.project else ())


def projects_of_repository(
    full_name: str, projects: Iterable[Project], defaults: Defaults
) -> tuple[str, ...]:
    """The projects a GitHub repository belongs to (a comment, a check-run press, a push)."""
    return route(GitHubRepository(full_name), projects, defaults).projects


@dataclass(frozen=True, slots=True)
class InProject:
    """The Stage a command names, and the project it is in."""

    project: str
    stage: str


@dataclass(frozen=True, slots=True)
class NotResolved:
    """Why the Stage a command names is in no one project: the reply, nothing is created."""

    reason: str


def _listed(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"


def search_space(where: Route, reachable: Sequence[str]) -> tuple[str, ...]:
    """The projects an unqualified Stage name is looked for in: the place's, or every one."""
    return where.projects or tuple(reachable)


def stage_target(
    stage: str,
    where: Route,
    reachable: Sequence[str],
    stages: Mapping[str, Collection[str]],
) -> InProject | NotResolved:
    """Which project's Stage ``stage`` means, typed at a place routed to ``where``.

    ``project/stage`` names it in any reachable project (or the place's own). An unqualified
    name means the place's project when it has exactly one; otherwise it is looked for in
    :func:`search_space` (``stages``: each searched project's Stage names): found in one, that
    one; in several, the reply lists them; in none, it says where it looked.
    """
    project, slash, name = stage.partition("/")
    if slash:
        if project in reachable or project in where.projects:
            return InProject(project, name)
        return NotResolved(f"there is no project `{project}` here (projects: {_listed(reachable)})")
    if where.project is not None:
        return InProject(where.project, stage)
    searched = search_space(where, reachable)
    found = [p for p in searched if stage in stages.get(p, ())]
    if len(found) == 1:
        return InProject(found[0], stage)
    if found:
        return NotResolved(
            f"`{stage}` is a Stage in several projects: "
            f"{_listed(f'{p}/{stage}' for p in found)}; name one of them"
        )
    return NotResolved(f"no Stage `{stage}` in the projects searched ({_listed(searched)})")
