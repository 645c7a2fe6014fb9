"""Which project a command acts on, from where it was typed: the one rule of both front ends."""

from __future__ import annotations

import pytest

from promoter.chat.projects import (
    Defaults,
    GitHubRepository,
    InProject,
    NotResolved,
    Place,
    Route,
    SlackChannel,
    projects_of_repository,
    route,
    stage_target,
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


REACHABLE = ["team-a", "team-b", "team-c"]
STAGES = {"team-a": {"test", "prod"}, "team-b": {"test"}, "team-c": {"test", "qa"}}


@pytest.mark.parametrize(
    ("stage", "where", "expected"),
    [
        ("prod", Route(("team-a",), mapped=True), InProject("team-a", "prod")),
        # The place's one project decides, even when the Stage is not there (it says so later).
        ("qa", Route(("team-a",), mapped=True), InProject("team-a", "qa")),
        ("team-c/qa", Route(("team-a",), mapped=True), InProject("team-c", "qa")),
        ("team-c/qa", Route(()), InProject("team-c", "qa")),
        ("qa", Route(()), InProject("team-c", "qa")),
        ("prod", Route(("team-a", "team-b")), InProject("team-a", "prod")),
        (
            "test",
            Route(()),
            NotResolved(
                "`test` is a Stage in several projects: `team-a/test`, `team-b/test`, "
                "`team-c/test`; name one of them"
            ),
        ),
        (
            "test",
            Route(("team-a", "team-b")),
            NotResolved(
                "`test` is a Stage in several projects: `team-a/test`, `team-b/test`; "
                "name one of them"
            ),
        ),
        (
            "uat",
            Route(()),
            NotResolved("no Stage `uat` in the projects searched (`team-a`, `team-b`, `team-c`)"),
        ),
        (
            "team-z/test",
            Route(()),
            NotResolved(
                "there is no project `team-z` here (projects: `team-a`, `team-b`, `team-c`)"
            ),
        ),
    ],
)
def test_a_stage_name_means_one_project_or_the_reply_says_why_not(
    stage: str, where: Route, expected: InProject | NotResolved
) -> None:
    assert stage_target(stage, where, REACHABLE, STAGES) == expected
