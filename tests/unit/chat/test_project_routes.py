"""Which project a command acts on, from where it was typed: the one rule of both front ends."""

from __future__ import annotations

import pytest

from promoter.chat.projects import (
    Defaults,
    GitHubRepository,
    Place,
    Route,
    SlackChannel,
    projects_of_repository,
    route,
)
from promoter.control.projects import Project

PROJECTS = [
    Project("team-a", {}, slack_channels=("C0A", "C0SHARED"), github_repositories=("acme/app",)),
    Project("team-b", {}, slack_channels=("C0B", "C0SHARED"), github_repositories=("acme/b",)),
    Project("team-c", {}, github_repositories=("acme/app",)),
]
OPERATOR = Defaults(by_place={"acme/legacy": "old"}, project="default")


@pytest.mark.parametrize(
    ("place", "defaults", "expected"),
    [
        (SlackChannel("C0A"), OPERATOR, Route(("team-a",), mapped=True)),
        (SlackChannel("C0SHARED"), OPERATOR, Route(("team-a", "team-b"), mapped=True)),
        (SlackChannel("C0LOBBY"), OPERATOR, Route(("default",))),
        (SlackChannel("C0LOBBY"), Defaults(), Route(())),
        (GitHubRepository("Acme/B"), OPERATOR, Route(("team-b",), mapped=True)),
        (GitHubRepository("acme/app"), OPERATOR, Route(("team-a", "team-c"), mapped=True)),
        (GitHubRepository("acme/legacy"), OPERATOR, Route(("old",))),
        (GitHubRepository("acme/other"), OPERATOR, Route(("default",))),
        # A Slack channel ID is never looked up among the operator's repositories.
        (SlackChannel("acme/legacy"), OPERATOR, Route(("default",))),
    ],
)
def test_a_project_names_its_places_and_the_operator_settings_are_defaults(
    place: Place, defaults: Defaults, expected: Route
) -> None:
    assert route(place, PROJECTS, defaults) == expected


def test_one_project_or_none() -> None:
    assert Route(("a",)).project == "a"
    assert Route(("a", "b")).project is None
    assert Route(()).project is None
    assert projects_of_repository("acme/b", PROJECTS, OPERATOR) == ("team-b",)
