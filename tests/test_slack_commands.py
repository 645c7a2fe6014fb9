"""``/promote``'s grammar and decisions (pure, table-driven; property-tested parsing)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promoter.chatops import (
    SLACK_CONFIRM,
    SLACK_PROMOTERS,
    Command,
    CommandError,
    Snapshot,
    parse_slash,
    reason_of,
)
from slack.commands import (
    AskConfirm,
    DoAbort,
    DoPromote,
    DoReverify,
    PendingPromotion,
    Refuse,
    ShowHelp,
    ShowStatus,
    groups_to_resolve,
    plan,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("frozen-tauntaun to prod", Command("promote", freight="frozen-tauntaun", stage="prod")),
        ("latest to uat", Command("promote", freight="latest", stage="uat")),
        ("to uat", Command("promote", stage="uat")),
        ("abort prod", Command("abort", target="prod")),
        ("ABORT prod.01abc", Command("abort", target="prod.01abc")),
        ("status", Command("status")),
        ("status prod", Command("status", stage="prod")),
        ("verify uat", Command("verify", stage="uat")),
        ("help", Command("help")),
        # A Freight aliased like a subcommand can still be promoted.
        ("status to prod", Command("promote", freight="status", stage="prod")),
    ],
)
def test_slash_text(text: str, expected: Command) -> None:
    got = parse_slash(text)
    assert (got.name, got.freight, got.stage, got.target) == (
        expected.name,
        expected.freight,
        expected.stage,
        expected.target,
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "tell me what to do"),
        ("deploy everything", "missing `to STAGE`"),
        ("a b to prod", "expected one Freight and one Stage"),
        ("abort", "which Promotion or Stage"),
        ("abort a b", "too many arguments"),
        ("verify", "expected one Stage"),
        ("${{ vars.x }} to prod", "not expressions"),
        ("abort ${% x %}", "not expressions"),
        ("x to pr;od", "is not a valid name"),
    ],
)
def test_malformed_text_says_why(text: str, reason: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_slash(text)
    assert reason in reason_of(err.value)
    assert "Usage: /" not in reason_of(err.value)


@given(st.text())
def test_parsing_never_raises_anything_but_command_error(text: str) -> None:
    try:
        parse_slash(text)
    except CommandError:
        pass


@given(
    st.lists(
        st.sampled_from(["to", "abort", "status", "verify", "help", "${{", "prod", "x", "", "\n"]),
        max_size=6,
    )
)
def test_parsing_grammar_words_never_raises(words: list[str]) -> None:
    try:
        parse_slash(" ".join(words))
    except CommandError:
        pass


def stage(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "p", "annotations": annotations},
        "spec": {
            "requestedFreight": [
                {"origin": {"kind": "Warehouse", "name": "w"}, "sources": {"direct": True}}
            ]
        },
    }


def verified(stage: dict[str, Any]) -> dict[str, Any]:
    stage["spec"]["verification"] = {"analysisTemplates": [{"name": "smoke"}]}
    return stage


def downstream(stage: dict[str, Any], upstream: str) -> dict[str, Any]:
    stage["spec"]["requestedFreight"][0]["sources"] = {"stages": [upstream]}
    return stage


def promotion(name: str, stage_name: str, phase: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "p", "creationTimestamp": name[-2:]},
        "spec": {"stage": stage_name, "freight": "f1"},
        "status": {"phase": phase},
    }


SNAPSHOT = Snapshot(
    namespace="p",
    stages=[
        stage("test"),
        verified(stage("prod", **{SLACK_PROMOTERS: "U1, S0OPS", SLACK_CONFIRM: "true"})),
        downstream(stage("uat", **{SLACK_CONFIRM: "true"}), "test"),
    ],
    freight=[
        {
            "metadata": {"name": "abc1234def", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "alias": "frozen-tauntaun",
            "origin": {"kind": "Warehouse", "name": "w"},
            "commits": [{"id": "abc1234def0"}],
        },
        *(
            {
                "metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
                "alias": alias,
                "origin": {"kind": "Warehouse", "name": "w"},
                "commits": [{"id": "1234567abc"}],
            }
            for name, alias in [("0ddba11aaa", "lazy-lemur"), ("0ddba11bbb", "wily-yak")]
        ),
    ],
    promotions=[
        promotion("prod.01", "prod", "Succeeded"),
        promotion("prod.02", "prod", "Pending"),
        promotion("prod.03", "prod", "Running"),
    ],
)


@pytest.mark.parametrize(
    ("text", "user", "groups", "defaults", "expected"),
    [
        (
            "frozen-tauntaun to test",
            "U9",
            [],
            [],
            DoPromote("test", "abc1234def", "frozen-tauntaun"),
        ),
        (
            "abc1234 to test",
            "U9",
            [],
            [],
            DoPromote("test", "abc1234def", "frozen-tauntaun"),
        ),
        (
            "latest to prod",
            "U1",
            [],
            [],
            AskConfirm("prod", "abc1234def", "frozen-tauntaun"),
        ),
        (
            "latest to prod",
            "U2",
            ["S0OPS"],
            [],
            AskConfirm("prod", "abc1234def", "frozen-tauntaun"),
        ),
        ("latest to prod", "U2", [], [], Refuse("<@U2> may not act on Stage prod")),
        ("latest to test", "U2", [], ["U1"], Refuse("<@U2> may not act on Stage test")),
        (
            "nope to test",
            "U1",
            [],
            [],
            Refuse("no Freight named, aliased or with a name or commit starting 'nope'"),
        ),
        # A unique prefix of the name finds it, like a git short hash; an ambiguous one lists
        # the candidates, alias first.
        ("abc1 to test", "U9", [], [], DoPromote("test", "abc1234def", "frozen-tauntaun")),
        (
            "abd to test",
            "U9",
            [],
            [],
            Refuse("no Freight named, aliased or with a name or commit starting 'abd'"),
        ),
        (
            "0ddba11 to test",
            "U9",
            [],
            [],
            Refuse(
                "`0ddba11` is ambiguous: it could be `lazy-lemur (0ddba11aaa)`, "
                "`wily-yak (0ddba11bbb)`; use an alias or a longer prefix"
            ),
        ),
        # Not available to a Stage that asks for confirmation: refused before asking.
        (
            "frozen-tauntaun to uat",
            "U1",
            [],
            [],
            Refuse(
                "Freight `frozen-tauntaun` is not available to Stage `uat` yet (it must come "
                "from a Warehouse the Stage requests directly, or be verified in its upstream "
                "Stages and soaked there, if required)"
            ),
        ),
        ("latest to nowhere", "U1", [], [], Refuse("no Stage named `nowhere` in project `p`")),
        ("abort prod", "U1", [], [], DoAbort(("prod.03",), "prod")),
        ("abort prod all", "U1", [], [], DoAbort(("prod.03", "prod.02"), "prod")),
        ("abort prod.02", "U1", [], [], DoAbort(("prod.02",), "prod")),
        (
            "abort prod.01",
            "U1",
            [],
            [],
            Refuse("Promotion `prod.01` already finished (Succeeded); there is nothing to abort"),
        ),
        ("abort prod.02", "U3", [], [], Refuse("<@U3> may not act on Stage prod")),
        (
            "abort test",
            "U1",
            [],
            [],
            Refuse("nothing to abort: no Promotion is running or queued in Stage `test`"),
        ),
        ("abort ghost", "U1", [], [], Refuse("no Promotion or Stage named `ghost` in project `p`")),
        ("verify prod", "U1", [], [], DoReverify("prod")),
        (
            "verify test",
            "U1",
            [],
            [],
            Refuse(
                "Stage `test` has no verification configured (spec.verification): its Freight "
                "counts as verified once a Promotion succeeds and the Stage is healthy"
            ),
        ),
        ("verify prod", "U4", [], [], Refuse("<@U4> may not act on Stage prod")),
        ("help", "U4", [], [], ShowHelp()),
    ],
)
def test_plans(
    text: str, user: str, groups: list[str], defaults: list[str], expected: object
) -> None:
    assert plan(parse_slash(text), SNAPSHOT, user, groups, defaults) == expected


def test_status_rows() -> None:
    result = plan(parse_slash("status"), SNAPSHOT, "U9")
    assert isinstance(result, ShowStatus)
    assert [r.stage for r in result.rows] == ["prod", "test", "uat"]
    assert result.rows[0].running == "prod.03" and result.rows[0].queued == 1
    assert plan(parse_slash("status qa"), SNAPSHOT, "U9") == Refuse(
        "no Stage named `qa` in project `p`"
    )


def test_only_listed_groups_are_looked_up() -> None:
    assert groups_to_resolve(SNAPSHOT.stage("prod"), ["S0DEFAULT"]) == ["S0OPS"]
    assert groups_to_resolve(SNAPSHOT.stage("test"), ["U1", "S0DEFAULT"]) == ["S0DEFAULT"]


def test_pending_promotions_round_trip_and_expire() -> None:
    pending = PendingPromotion.new("p", "prod", "abc", "U1", now=1000.0, ttl=60)
    assert PendingPromotion.from_value(pending.to_value()) == pending
    assert not pending.expired(1059.9) and pending.expired(1060.0)
    for junk in ("[]", "{}", '{"namespace": "p"}'):
        with pytest.raises(ValueError):
            PendingPromotion.from_value(junk)
