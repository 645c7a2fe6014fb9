"""``/promote``'s grammar and decisions (pure, table-driven; property-tested parsing)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promoter.chatops import SLACK_CONFIRM, SLACK_PROMOTERS, Command, CommandError, Snapshot
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
    parse_slash,
    plan,
    reason_of,
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
        stage("prod", **{SLACK_PROMOTERS: "U1, S0OPS", SLACK_CONFIRM: "true"}),
    ],
    freight=[
        {
            "metadata": {"name": "abc1234def", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "alias": "frozen-tauntaun",
            "origin": {"kind": "Warehouse", "name": "w"},
            "commits": [{"id": "abc1234def0"}],
        }
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
            DoPromote("test", "abc1234def", "abc1234def (frozen-tauntaun)"),
        ),
        (
            "abc1234 to test",
            "U9",
            [],
            [],
            DoPromote("test", "abc1234def", "abc1234def (frozen-tauntaun)"),
        ),
        (
            "latest to prod",
            "U1",
            [],
            [],
            AskConfirm("prod", "abc1234def", "abc1234def (frozen-tauntaun)"),
        ),
        (
            "latest to prod",
            "U2",
            ["S0OPS"],
            [],
            AskConfirm("prod", "abc1234def", "abc1234def (frozen-tauntaun)"),
        ),
        ("latest to prod", "U2", [], [], Refuse("<@U2> may not act on Stage prod")),
        ("latest to test", "U2", [], ["U1"], Refuse("<@U2> may not act on Stage test")),
        (
            "nope to test",
            "U1",
            [],
            [],
            Refuse("no Freight named, aliased or with a commit starting 'nope'"),
        ),
        ("latest to nowhere", "U1", [], [], Refuse("no Stage named `nowhere` in project `p`")),
        ("abort prod", "U1", [], [], DoAbort("prod.03", "prod")),
        ("abort prod.02", "U1", [], [], DoAbort("prod.02", "prod")),
        ("abort prod.01", "U1", [], [], Refuse("Promotion `prod.01` already finished (Succeeded)")),
        ("abort prod.02", "U3", [], [], Refuse("<@U3> may not act on Stage prod")),
        (
            "abort test",
            "U1",
            [],
            [],
            Refuse("nothing to abort: no Promotion is running or queued for `test`"),
        ),
        ("abort ghost", "U1", [], [], Refuse("no Promotion or Stage named `ghost` in project `p`")),
        ("verify prod", "U1", [], [], DoReverify("prod")),
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
    assert [r.stage for r in result.rows] == ["prod", "test"]
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
