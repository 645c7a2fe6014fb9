"""The words of chat commands, parsed the same in a PR comment and a Slack slash command."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promoter.chat.grammar import (
    Command,
    CommandError,
    parse_command,
    parse_comment,
    parse_slash,
    usage_lines,
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/promote to staging", [Command("promote", stage="staging", raw="/promote to staging")]),
        (
            "/promote abc123f to prod",
            [Command("promote", freight="abc123f", stage="prod", raw="/promote abc123f to prod")],
        ),
        ("LGTM\n/abort\n", [Command("abort", raw="/abort")]),
        (
            "/status test\n/help",
            [Command("status", stage="test", raw="/status test"), Command("help", raw="/help")],
        ),
        ("```\n/promote to prod\n```\n> /abort\n/cc @someone", []),
        ("  /verify uat  ", [Command("verify", stage="uat", raw="/verify uat")]),
    ],
)
def test_comments_yield_our_commands_in_order(body: str, expected: list[Command]) -> None:
    assert [p.command for p in parse_comment(body)] == expected


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("promote", "prod", "missing `to STAGE`"),
        ("promote", "a b to prod", "expected one Freight and one Stage"),
        ("promote", "${{ vars.x }} to prod", "arguments are names, not expressions"),
        ("promote", "x to ${%a%}", "arguments are names, not expressions"),
        ("verify", "", "expected one Stage"),
        ("abort", "a b", "too many arguments"),
        ("promote", "to pr;od", "is not a valid name"),
    ],
)
def test_malformed_commands_explain_with_usage(name: str, args: str, message: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(name, args)
    assert message in str(err.value)
    assert "Usage: /" in str(err.value) or name == "abort"


@given(st.text())
def test_the_comment_parser_never_raises(body: str) -> None:
    for parsed in parse_comment(body):
        assert (parsed.command is None) != (parsed.error is None)


def test_abort_all_parses_on_both_front_ends() -> None:
    assert parse_command("abort", "prod all") == Command(
        "abort", target="prod", queued=True, raw="/abort prod all"
    )
    assert parse_slash("abort prod all").queued
    with pytest.raises(CommandError):
        parse_command("abort", "prod everything")


def test_both_front_ends_show_the_same_usage_with_their_prefix() -> None:
    comment, slash = usage_lines("comment"), usage_lines("slash")
    assert comment[0] == slash[0] == "/promote [FREIGHT] to STAGE"
    assert "/abort [PROMOTION | STAGE [all]]" in comment
    assert "/promote abort PROMOTION | STAGE [all]" in slash
    # /approve is a slash command of its own in Slack, read the same as in a comment.
    assert comment[1] == slash[1] == "/approve FREIGHT for STAGE"
    # So are /freeze and /unfreeze.
    own = {"/freeze", "/unfreeze"}
    assert [c for c in comment if c.split()[0] in own] == [s for s in slash if s.split()[0] in own]
    rest = [c for c in comment[2:] if c.split()[0] not in own]
    assert [c.split()[0] for c in rest] == [
        f"/{s.split()[1]}" for s in slash[2:] if s.split()[0] not in own
    ]


@pytest.mark.parametrize(
    ("text", "freight", "stage", "error"),
    [
        ("hotfix-1 for prod", "hotfix-1", "prod", None),
        ("ghcr.io/acme/app:1.4.2 for prod", "ghcr.io/acme/app:1.4.2", "prod", None),
        ("hotfix-1 to prod", None, None, "missing `for STAGE`"),
        ("for prod", None, None, "expected one Freight and one Stage"),
        ("a b for prod", None, None, "expected one Freight and one Stage"),
        ("a for prod uat", None, None, "expected one Freight and one Stage"),
        ("${{ vars.x }} for prod", None, None, "names, not expressions"),
    ],
)
def test_approve_names_one_freight_for_one_stage_in_both_forms(
    text: str, freight: str | None, stage: str | None, error: str | None
) -> None:
    forms = [lambda: parse_command("approve", text), lambda: parse_slash(f"approve {text}")]
    for parse in forms:
        if error is None:
            command = parse()
            assert (command.name, command.freight, command.stage) == ("approve", freight, stage)
        else:
            with pytest.raises(CommandError, match=re.escape(error)):
                parse()
    comment = parse_comment(f"Hotfix.\n/approve {text}")
    assert len(comment) == 1
    assert (comment[0].command is None) is (error is not None)
