"""Admission's decision, table by table: what is refused, naming the field, all at once."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.admission import Facts, Problem, validate
from tests.support import objects
from tests.support.runaway import comes_back

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = frozenset({"git-clone", "git-commit", "git-push", "compose-output"})


def facts(*stored: Mapping[str, Any]) -> Facts:
    by_key = {
        (str(o["kind"]), str(o["metadata"].get("namespace") or ""), str(o["metadata"]["name"])): o
        for o in stored
    }
    return Facts(
        lookup=lambda kind, namespace, name: by_key.get((kind, namespace, name)),
        step_kinds=KINDS,
        now=NOW,
    )


def fields(problems: list[Problem]) -> list[str]:
    return [p.field for p in problems]


STEPS = "spec.promotionTemplate.spec.steps"


@pytest.mark.parametrize(
    ("step", "field", "words"),
    [
        (
            {"uses": "git-clonee"},
            f"{STEPS}[0].uses",
            'not a known step kind (did you mean "git-clone"?)',
        ),
        (
            {"uses": "git-commit", "config": {"path": "."}},
            f"{STEPS}[0].config.message",
            "Required value",
        ),
        (
            {"uses": "compose-output", "config": {"a": "${{ vars.x + }}"}},
            f"{STEPS}[0].config.a",
            "unexpected end",
        ),
        ({"uses": "compose-output", "if": "${{ ) }}"}, f"{STEPS}[0].if", "Invalid value"),
        ({"task": {"name": "missing"}}, f"{STEPS}[0].task.name", 'Not found: "missing"'),
        ({"task": {"name": "x", "kind": "Task"}}, f"{STEPS}[0].task.kind", "Unsupported value"),
        ({"uses": "git-push", "task": {"name": "t"}}, f"{STEPS}[0]", "mutually exclusive"),
        ({}, f"{STEPS}[0].uses", "Required value"),
    ],
)
def test_a_stage_step_is_refused_naming_its_field(
    step: dict[str, Any], field: str, words: str
) -> None:
    problems = validate(objects.stage("s", steps=[step]), None, facts())
    assert fields(problems) == [field]
    assert words in problems[0].message


def test_every_problem_of_a_stage_comes_in_one_answer() -> None:
    stage = objects.stage(
        "s",
        steps=[{"uses": "git-clonee"}, {"uses": "git-commit"}, {"task": {"name": "gone"}}],
        vars=[{"name": "v", "value": "${{ ( }}"}],
    )
    assert fields(validate(stage, None, facts())) == [
        "spec.vars[0].value",
        f"{STEPS}[0].uses",
        f"{STEPS}[1].config.path",
        f"{STEPS}[1].config.message",
        f"{STEPS}[2].task.name",
    ]


def test_a_deprecated_field_the_step_still_reads_stands_in_for_the_required_one() -> None:
    step = {"uses": "git-commit", "config": {"path": ".", "messageFromSteps": ["update"]}}
    assert validate(objects.stage("s", steps=[step]), None, facts()) == []


def test_task_references_resolve_in_the_namespace_or_the_cluster() -> None:
    task = objects.promotion_task("t", [{"uses": "git-push", "config": {"path": "."}}])
    cluster_task = objects.promotion_task("ct", [], kind="ClusterPromotionTask")
    stage = objects.stage(
        "s",
        steps=[{"task": {"name": "t"}}, {"task": {"name": "ct", "kind": "ClusterPromotionTask"}}],
    )
    assert validate(stage, None, facts(task, cluster_task)) == []
    elsewhere = objects.promotion_task("t", [], namespace="other")
    assert fields(validate(stage, None, facts(elsewhere, cluster_task))) == [
        f"{STEPS}[0].task.name"
    ]


def test_a_promotion_task_is_held_to_the_same_step_rules() -> None:
    task = objects.promotion_task("t", [{"uses": "nope"}])
    assert fields(validate(task, None, facts())) == ["spec.steps[0].uses"]


def test_an_update_that_keeps_the_spec_is_not_judged_again() -> None:
    stage = objects.stage("s", steps=[{"task": {"name": "deleted-since"}}])
    relabelled = {**stage, "metadata": {**stage["metadata"], "labels": {"a": "b"}}}
    assert validate(relabelled, stage, facts()) == []
    assert validate(stage, None, facts()) != []


@pytest.mark.parametrize(
    ("subscription", "field", "words"),
    [
        ({"image": {"repoURL": "https://ghcr.io/acme/app"}}, "image.repoURL", "no scheme"),
        ({"image": {"repoURL": "ghcr.io/Acme/app"}}, "image.repoURL", "must be lower case"),
        (
            {"image": {"repoURL": "ghcr.io/acme/my app"}},
            "image.repoURL",
            "valid image repository URL",
        ),
        ({"git": {"repoURL": "github.com/acme/app"}}, "git.repoURL", "valid Git repository URL"),
        (
            {"chart": {"repoURL": "ghcr.io/acme/charts"}},
            "chart.repoURL",
            "valid Helm repository URL",
        ),
        (
            {"image": {"repoURL": "ghcr.io/acme/app", "imageSelectionStrategy": "Newest"}},
            "image.imageSelectionStrategy",
            "'Newest'",
        ),
        ({"chart": {"repoURL": "https://charts.example.com"}}, "chart.name", "required"),
    ],
)
def test_a_warehouse_subscription_is_refused_as_kargo_refuses_it(
    subscription: dict[str, Any], field: str, words: str
) -> None:
    problems = validate(objects.warehouse(subscriptions=[subscription]), None, facts())
    assert fields(problems) == [f"spec.subscriptions[0].{field}"]
    assert words in problems[0].message


@pytest.mark.parametrize(
    "subscription",
    [
        {"image": {"repoURL": "public.ecr.aws/nginx/nginx"}},
        {"image": {"repoURL": "127.0.0.1:5000/acme/app"}},
        {"image": {"repoURL": "nginx"}},
        {"git": {"repoURL": "https://github.com/acme/app.git"}},
        {"git": {"repoURL": "git@github.com:acme/app.git"}},
        {"chart": {"repoURL": "oci://ghcr.io/acme/charts/app"}},
        {"chart": {"repoURL": "https://charts.example.com", "name": "app"}},
    ],
)
def test_a_good_subscription_passes(subscription: dict[str, Any]) -> None:
    assert validate(objects.warehouse(subscriptions=[subscription]), None, facts()) == []


def test_a_promotion_needs_its_stage_and_freight_and_the_freight_available() -> None:
    upstream = objects.stage("test")
    prod = objects.stage("prod", upstream=["test"])
    unverified = objects.freight()
    verified = objects.freight(status={"verifiedIn": {"test": {}}})
    approved = objects.freight(status={"approvedFor": {"prod": {}}})
    assert validate(objects.promotion("p", "prod"), None, facts(prod, verified)) == []
    assert validate(objects.promotion("p", "prod"), None, facts(prod, approved)) == []
    assert validate(objects.promotion("p", "test"), None, facts(upstream, unverified)) == []
    refused = validate(objects.promotion("p", "prod"), None, facts(prod, unverified))
    assert fields(refused) == ["spec.freight"]
    assert "not available to Stage" in refused[0].message
    nothing = validate(objects.promotion("p", "nope", freight="gone"), None, facts())
    assert fields(nothing) == ["spec.stage", "spec.freight"]
    # Once created, a Promotion stays writable (status, aborts) whatever became of them.
    promotion = objects.promotion("p", "nope", freight="gone")
    assert validate(promotion, promotion, facts()) == []


def test_freight_content_is_immutable() -> None:
    old = objects.freight(images=[{"repoURL": "ghcr.io/acme/app", "tag": "1.0.0"}])
    moved = objects.freight(
        warehouse="other", images=[{"repoURL": "ghcr.io/acme/app", "tag": "2.0.0"}]
    )
    assert fields(validate(moved, old, facts())) == ["origin", "images"]
    aliased = {**old, "alias": "new-name"}
    assert validate(aliased, old, facts()) == []
    assert validate(moved, None, facts()) == []


def test_project_config_problems_come_all_at_once() -> None:
    window = {"kind": "Allow", "dtstart": "20260101T090000Z", "dtend": "20260101T170000Z"}
    config = objects.project_config(
        policies=[{"stage": "a", "stageSelector": {"name": "a"}}, {}],
        windows=[
            {**window, "name": "zone", "dtstart": "TZID=Mars/Olympus:20260101T090000"},
            {**window, "name": "rule", "rrule": "FREQ=SOMETIMES"},
            {**window, "name": "days", "rrule": "FREQ=WEEKLY;BYDAY=XX"},
        ],
    )
    problems = validate(config, None, facts())
    assert fields(problems) == [
        "spec.promotionPolicies[0]",
        "spec.promotionPolicies[1]",
        "spec.promotionWindows[0]",
        "spec.promotionWindows[1]",
        "spec.promotionWindows[2]",
    ]


def test_an_alias_another_freight_answers_to_is_refused() -> None:
    taken = objects.freight("other", alias="frozen-tauntaun")
    by_label = objects.freight("third", labels={"kargo.akuity.io/alias": "wise-wombat"})
    stored = {"frozen-tauntaun": [taken], "wise-wombat": [by_label]}
    with_aliases = Facts(
        lookup=lambda kind, namespace, name: None,
        step_kinds=KINDS,
        now=NOW,
        aliased=lambda namespace, alias: stored.get(alias, []),
    )
    image = [{"repoURL": "ghcr.io/acme/app", "tag": "1.0.0"}]
    mine = objects.freight("mine", alias="frozen-tauntaun", images=image)
    refused = validate(mine, None, with_aliases)
    assert fields(refused) == ["alias"]
    assert 'already used by Freight "other"' in refused[0].message
    wombat = objects.freight("mine", alias="wise-wombat", images=image)
    assert fields(validate(wombat, None, with_aliases)) == ["alias"]
    # Its own alias, or one kept from before, is no conflict.
    assert validate({**taken, **{"images": image}}, None, with_aliases) == []
    assert validate(mine, mine, with_aliases) == []


def test_the_limits_are_admissions_too() -> None:
    from promoter.rules.limits import Limits

    small = Facts(
        lookup=lambda kind, namespace, name: None,
        step_kinds=KINDS,
        now=NOW,
        limits=Limits(max_steps=2, max_object_bytes=4096),
    )
    steps = [{"uses": "git-push", "config": {"path": "."}}] * 3
    many = objects.promotion("p", steps=steps)
    problems = validate(many, None, small)
    assert [p.field for p in problems][:1] == ["spec.steps"]
    assert "LONGSHOREMAN_MAX_PROMOTION_STEPS" in problems[0].message
    big = objects.stage("s", vars=[{"name": "v", "value": "x" * 5000}])
    assert "LONGSHOREMAN_MAX_OBJECT_BYTES" in str(validate(big, None, small))


def test_a_match_upstream_request_needs_exactly_one_upstream_stage() -> None:
    # Kargo's Stage webhook (selection policies): refused when applied, not only ignored.
    follows = {"stages": ["a", "b"], "autoPromotionOptions": {"selectionPolicy": "MatchUpstream"}}
    stage = objects.stage("s")
    stage["spec"]["requestedFreight"][0]["sources"] = follows
    problems = validate(stage, None, facts())
    assert fields(problems) == [
        "spec.requestedFreight[0].sources.autoPromotionOptions.selectionPolicy"
    ]
    assert "requires exactly one upstream Stage" in problems[0].message


def test_freight_that_carries_nothing_is_refused() -> None:
    # Kargo's Freight webhook: nothing to promote is no Freight.
    empty = objects.freight("empty")
    refused = validate(empty, None, facts())
    assert [(p.field, p.message) for p in refused] == [
        (
            "commits",
            "Required value: freight must contain at least one commit, image, or chart",
        )
    ]
    chart = [{"repoURL": "oci://ghcr.io/acme/charts/app", "version": "1.0.0"}]
    assert validate(objects.freight("chart", charts=chart), None, facts()) == []
    artifact = {**empty, "artifacts": [{"subscriptionName": "feed", "version": "1"}]}
    assert validate(artifact, None, facts()) == []
    # Stored Freight is not judged again for it (an update of its labels passes).
    assert validate(empty, empty, facts()) == []


@pytest.mark.parametrize(
    ("kind", "url", "problem"),
    [
        # Kargo's chart rule ends in (/.*)*$: with Python's re, every slash doubled the time
        # a URL that fails at its end took (22 slashes: 0.2 s; these 60 run for days).
        ("chart", "https://charts.example.com" + "/" * 60 + "\nx", "valid Helm repository URL"),
        ("image", "registry.example.com/" + "a.b/" * 2000 + "!", "valid image repository URL"),
        ("git", "https://" + "a:" * 3000 + "@", "valid Git repository URL"),
    ],
)
def test_a_repo_url_built_to_backtrack_is_refused_at_once(
    kind: str, url: str, problem: str
) -> None:
    """Kargo's repoURL rules run on RE2, as in Go: admission answers at once (kubectl apply on
    the embedded server and the webhook both run it on the server's event loop)."""
    body = {"repoURL": url, **({"name": "app"} if kind == "chart" else {})}
    warehouse = objects.warehouse(subscriptions=[{kind: body}])
    with comes_back(f"a {kind} subscription's repoURL"):
        problems = validate(warehouse, None, facts())
    assert [p.field for p in problems] == [f"spec.subscriptions[0].{kind}.repoURL"]
    assert problem in problems[0].message
