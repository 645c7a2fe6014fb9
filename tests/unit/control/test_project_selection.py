"""Which namespaces are projects, which of them are served, and what routing they declare."""

from __future__ import annotations

from typing import Any

import pytest

from promoter.control.policies import PolicyError, cluster_config, schedule_for
from promoter.control.projects import ProjectSelection, project_of, repository_of_url
from tests.support import objects


def namespace(name: str, labels: dict[str, str], **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations}}


KARGO = {"kargo.akuity.io/project": "true"}
OURS = {"longshoreman.dev/project": "true"}


@pytest.mark.parametrize(
    ("names", "selector", "ns", "served", "reachable"),
    [
        ("", "", namespace("x", {}), True, False),
        ("", "", namespace("x", KARGO), True, True),
        ("", "", namespace("x", OURS), True, True),
        ("", "", namespace("x", {"kargo.akuity.io/project": "false"}), True, False),
        ("x,y", "", namespace("x", {}), True, True),
        ("y", "", namespace("x", KARGO), False, False),
        ("", "team=a", namespace("x", {**KARGO, "team": "a"}), True, True),
        ("", "team=a", namespace("x", {"team": "a"}), False, False),
        ("", "team==a", namespace("x", {**KARGO, "team": "b"}), False, False),
        ("", "team in (a, b),!legacy", namespace("x", {**KARGO, "team": "b"}), True, True),
        (
            "",
            "team in (a,b),!legacy",
            namespace("x", {**KARGO, "team": "b", "legacy": ""}),
            False,
            False,
        ),
        ("", "team notin (a),tier", namespace("x", {**OURS, "team": "c", "tier": "1"}), True, True),
        ("", "team!=a", namespace("x", {**OURS}), True, True),
    ],
)
def test_a_selection_serves_and_reaches_namespaces(
    names: str, selector: str, ns: dict[str, Any], served: bool, reachable: bool
) -> None:
    selection = ProjectSelection.parse(names, selector)
    assert selection.serves_namespace("x", ns) is served
    assert selection.reachable(ns) is reachable


@pytest.mark.parametrize(
    ("names", "selector", "message"),
    [
        ("a", "team=a", "both set"),
        ("Team_A", "", "'Team_A' is not a namespace name"),
        ("", "team in ()", "names no values"),
        ("", "team=a,=b", "'=b' is not a label selector requirement"),
        ("", "team=a,", "'' is not a label selector requirement"),
    ],
)
def test_a_selection_that_does_not_parse_names_the_setting(
    names: str, selector: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        ProjectSelection.parse(names, selector)


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/Acme/App.git", "acme/app"),
        ("https://github.example.com/acme/app", "acme/app"),
        ("ssh://git@github.com/acme/app.git", "acme/app"),
        ("git@github.com:acme/app.git", "acme/app"),
        ("https://gitlab.com/group/sub/app.git", None),
        ("not a url", None),
    ],
)
def test_a_git_url_names_a_repository(url: str, repo: str | None) -> None:
    assert repository_of_url(url) == repo


def test_a_project_routes_its_annotated_channels_and_repositories_only() -> None:
    ns = namespace(
        "team-a",
        KARGO,
        **{
            "longshoreman.dev/slack-channels": " C0123, C0456,,C0123",
            "longshoreman.dev/github-repositories": "Acme/GitOps",
        },
    )
    project = project_of(ns)
    assert project.name == "team-a"
    assert project.slack_channels == ("C0123", "C0456")
    assert project.github_repositories == ("acme/gitops",)


def test_a_cluster_window_project_selector_matches_the_namespace_labels() -> None:
    config = cluster_config(
        objects.cluster_config(
            windows=[
                {
                    "name": "freeze",
                    "kind": "Deny",
                    "projectSelector": {"matchLabels": {"tier": "production"}},
                    "rrule": "FREQ=DAILY",
                    "dtstart": "20260101T000000Z",
                    "dtend": "20260101T235959Z",
                }
            ]
        )
    )
    stage = objects.stage("prod", namespace="team-a")
    assert len(schedule_for(stage, None, config, {"tier": "production"}).windows) == 1
    assert schedule_for(stage, None, config, {"tier": "dev"}).windows == ()
    assert schedule_for(stage, None, config).windows == ()
