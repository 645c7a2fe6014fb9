"""Deep links: Kargo's ``pkg/deeplinks`` table (``TestEvaluateLinks``), ported, plus ``${{ }}``.

Kargo's URLs are Go templates (``{{ .freight.metadata.name }}``); Longshoreman reads them with
its one expression engine, as it reads ``${{ }}`` everywhere else.
"""

from __future__ import annotations

import pytest

from handlers.checks import summary
from promoter.chat.views import promotion_view
from promoter.control.links import ResolvedLink, evaluate_links, freight_links, stage_links
from promoter.control.policies import DeepLink, cluster_config, project_config
from slack.messages import render_promotion
from tests.support import objects

CONTEXT = {
    "freight": {
        "metadata": {"name": "abc123", "namespace": "my-project"},
        "images": [{"tag": "v1.2.3", "repoURL": "ghcr.io/my-org/my-app"}],
    }
}

ROWS: list[tuple[str, list[DeepLink], list[ResolvedLink], list[str]]] = [
    (
        "simple URL with no condition",
        [DeepLink("Freight", "https://example.com/{{ .freight.metadata.name }}")],
        [ResolvedLink("Freight", "https://example.com/abc123")],
        [],
    ),
    (
        "description is passed through",
        [
            DeepLink(
                "Freight",
                "https://example.com/{{ .freight.metadata.name }}",
                "View freight details",
            )
        ],
        [ResolvedLink("Freight", "https://example.com/abc123", "View freight details")],
        [],
    ),
    (
        "condition true includes link",
        [
            DeepLink(
                "Release Notes",
                "https://github.com/releases/{{ .freight.metadata.name }}",
                if_='freight.metadata.namespace == "my-project"',
            )
        ],
        [ResolvedLink("Release Notes", "https://github.com/releases/abc123")],
        [],
    ),
    (
        "condition false omits link",
        [
            DeepLink(
                "Release Notes",
                "https://github.com/releases/{{ .freight.metadata.name }}",
                if_='freight.metadata.namespace == "other-project"',
            )
        ],
        [],
        [],
    ),
    (
        "invalid condition expression collects error and skips link",
        [DeepLink("Bad Condition", "https://example.com", if_="!!!invalid!!!")],
        [],
        ["error evaluating condition for link 'Bad Condition'"],
    ),
    (
        "non-boolean condition collects error and skips link",
        [DeepLink("Non-bool", "https://example.com", if_="1 + 1")],
        [],
        ["condition for link 'Non-bool' evaluated to non-boolean value"],
    ),
    (
        "invalid URL template collects error and skips link",
        [DeepLink("Bad Template", "https://example.com/{{ .freight.metadata.name")],
        [],
        ["error evaluating URL template for link 'Bad Template'"],
    ),
    (
        "sprig functions available in URL template",
        [DeepLink("Sprig", "https://example.com/{{ .freight.metadata.name | upper }}")],
        [ResolvedLink("Sprig", "https://example.com/ABC123")],
        [],
    ),
    (
        "blocked function env is unavailable",
        [DeepLink("Env", 'https://example.com/{{ env "HOME" }}')],
        [],
        ["error evaluating URL template for link 'Env'"],
    ),
    (
        "multiple links: good and bad are handled independently",
        [
            DeepLink("Good", "https://example.com/{{ .freight.metadata.name }}"),
            DeepLink("Bad", "https://example.com/{{ .freight.metadata.name"),
        ],
        [ResolvedLink("Good", "https://example.com/abc123")],
        ["error evaluating URL template for link 'Bad'"],
    ),
    ("empty links returns empty results", [], [], []),
    (
        "Longshoreman's own ${{ }} templates, with the expression language's functions",
        [
            DeepLink(
                "Image",
                "https://${{ freight.images[0].repoURL }}/tags/${{ freight.images[0].tag }}",
            )
        ],
        [ResolvedLink("Image", "https://ghcr.io/my-org/my-app/tags/v1.2.3")],
        [],
    ),
    (
        "urlquery, Go templates' escaping",
        [DeepLink("Search", "https://example.com/?q={{ .freight.metadata.namespace | urlquery }}")],
        [ResolvedLink("Search", "https://example.com/?q=my-project")],
        [],
    ),
]


@pytest.mark.parametrize(
    ("links", "resolved", "errors"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_evaluate_links(
    links: list[DeepLink], resolved: list[ResolvedLink], errors: list[str]
) -> None:
    got, problems = evaluate_links(links, CONTEXT)
    assert got == resolved
    assert len(problems) == len(errors)
    for problem, expected in zip(problems, errors, strict=True):
        assert problem.startswith(expected), problem


def test_cluster_links_come_first_then_the_project_s_each_in_its_own_context() -> None:
    link = {"title": "All", "url": "https://c/{{ .freight.metadata.name }}"}
    cluster = cluster_config(objects.cluster_config(freightLinks=[link]))
    project = project_config(
        objects.project_config(
            "p",
            freightLinks=[{"title": "Mine", "url": "https://p/${{ freight.metadata.name }}"}],
            stageLinks=[
                {
                    "title": "Grafana",
                    "url": "https://g/?env={{ .stage.metadata.name }}",
                    "if": 'stage.metadata.name == "prod"',
                }
            ],
        )
    )
    resolved, _ = freight_links(objects.freight("f1"), project, cluster)
    assert [(r.title, r.url) for r in resolved] == [
        ("All", "https://c/f1"),
        ("Mine", "https://p/f1"),
    ]
    assert stage_links(objects.stage("test"), project, cluster) == ([], [])
    prod, _ = stage_links(objects.stage("prod"), project, cluster)
    assert prod == [ResolvedLink("Grafana", "https://g/?env=prod")]


def test_check_runs_and_slack_messages_carry_the_links() -> None:
    project = project_config(
        objects.project_config(
            "p",
            stageLinks=[{"title": "Grafana", "url": "https://g/?env={{ .stage.metadata.name }}"}],
            freightLinks=[{"title": "Commit", "url": "https://git/${{ freight.metadata.name }}"}],
        )
    )
    promotion = objects.promotion("test.p1", "test", freight="f1", phase="Succeeded")
    view = promotion_view(
        promotion, stage=objects.stage("test"), freights=[objects.freight("f1")], project=project
    )
    assert "[Grafana](https://g/?env=test) · [Commit](https://git/f1)" in summary(view)
    facts = str(render_promotion(view).blocks)
    assert "<https://g/?env=test|Grafana> · <https://git/f1|Commit>" in facts
