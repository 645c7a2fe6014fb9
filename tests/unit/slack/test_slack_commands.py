"""``/promote``'s grammar, Slack's facts and its Confirm value (pure; property-tested parsing).

The decisions themselves are the shared planner's: tests/test_commands.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promoter.chat.grammar import Command, CommandError, parse_slash, reason_of
from promoter.resources import annotations as ann
from slack.commands import PendingPromotion, groups_to_resolve
from tests.support.objects import stage


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


def test_only_listed_groups_are_looked_up() -> None:
    prod = stage("prod", annotations={ann.SLACK_PROMOTERS: "U1, S0OPS"})
    test = stage("test", annotations={})
    assert groups_to_resolve([prod], ["S0DEFAULT"]) == ["S0OPS"]
    assert groups_to_resolve([test], ["U1", "S0DEFAULT"]) == ["S0DEFAULT"]
    assert groups_to_resolve([prod, test], ["S0DEFAULT"]) == ["S0OPS", "S0DEFAULT"]
    # Nothing to consult (an abort of a Stage that is gone): the defaults decide.
    assert groups_to_resolve([], ["S0DEFAULT"]) == ["S0DEFAULT"]


def test_pending_promotions_round_trip_and_expire() -> None:
    pending = PendingPromotion.new("p", "prod", "abc", "U1", now=1000.0, ttl=60)
    assert PendingPromotion.from_value(pending.to_value()) == pending
    assert not pending.expired(1059.9) and pending.expired(1060.0)
    for junk in ("[]", "{}", '{"namespace": "p"}'):
        with pytest.raises(ValueError):
            PendingPromotion.from_value(junk)
