"""Chat command grammar, Freight resolution and authorization (pure, table-driven)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.markdown import markdown_table
from handlers.promoters import github_may_act
from promoter.chat.freight_refs import resolve_freight
from promoter.chat.grammar import (
    Command,
    CommandError,
    parse_command,
    parse_comment,
    parse_slash,
    usage_lines,
)
from promoter.chat.planner import Refusal, abort_targets, available_to
from promoter.chat.port import PromotionRef, Snapshot
from promoter.chat.views import stage_views
from slack.commands import slack_may_act
from tests.support import objects


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


def freight(
    name: str, alias: str, created: str, commit: str, verified: tuple[str, ...] = ()
) -> dict[str, Any]:
    return objects.freight(
        name,
        alias=alias,
        created=created,
        commits=[{"repoURL": "https://x/r.git", "id": commit}],
        status={"verifiedIn": {s: {} for s in verified}},
    )


F1 = freight("f1aaaaaa", "old-one", "2026-01-01T00:00:00Z", "1111111aaaa", verified=("test",))
F2 = freight("f2bbbbbb", "new-one", "2026-01-02T00:00:00Z", "2222222bbbb")
DIRECT = objects.stage("test")
UPSTREAM = objects.stage("uat", upstream=["test"])


@pytest.mark.parametrize(
    ("ref", "stage", "expected"),
    [
        ("f2bbbbbb", None, "f2bbbbbb"),
        ("old-one", None, "f1aaaaaa"),
        ("2222222", None, "f2bbbbbb"),
        ("latest", DIRECT, "f2bbbbbb"),
        ("latest", UPSTREAM, "f1aaaaaa"),
    ],
)
def test_freight_resolution(ref: str, stage: dict[str, Any] | None, expected: str) -> None:
    assert resolve_freight(ref, [F1, F2], stage)["metadata"]["name"] == expected


def with_image(f: dict[str, Any], repo: str, tag: str, digest: str) -> dict[str, Any]:
    return {**f, "images": [{"repoURL": repo, "tag": tag, "digest": digest}]}


I1 = with_image(F1, "ghcr.io/acme/app", "1.4.1", "sha256:" + "1" * 64)
I2 = with_image(F2, "ghcr.io/acme/app", "1.4.2", "sha256:" + "2" * 64)
I3 = with_image(
    freight("f3cccccc", "same-image", "2026-01-03T00:00:00Z", "3333333cccc"),
    "ghcr.io/acme/app",
    "1.4.2",
    "sha256:" + "2" * 64,
)
HUB = with_image(F1, "docker.io/library/nginx", "1.27.0", "sha256:" + "3" * 64)


@pytest.mark.parametrize(
    ("ref", "freights", "stage", "expected"),
    [
        ("ghcr.io/acme/app:1.4.1", [I1, I2], None, "f1aaaaaa"),
        ("ghcr.io/acme/app:1.4.2", [I1, I2], None, "f2bbbbbb"),
        ("GHCR.io/acme/app:1.4.2", [I1, I2], None, "f2bbbbbb"),
        ("ghcr.io/acme/app@sha256:" + "1" * 64, [I1, I2], None, "f1aaaaaa"),
        ("ghcr.io/acme/app:1.4.2@sha256:" + "2" * 64, [I1, I2], None, "f2bbbbbb"),
        # The same image in two Freight (another commit): the newest, unless the Stage may
        # only take one of them.
        ("ghcr.io/acme/app:1.4.2", [I2, I3], None, "f3cccccc"),
        (
            "ghcr.io/acme/app:1.4.2",
            [with_image(F1, *I2["images"][0].values()), I3],
            UPSTREAM,
            "f1aaaaaa",
        ),
        # Docker Hub's spellings of one repository.
        ("nginx:1.27.0", [HUB, I2], None, "f1aaaaaa"),
        ("docker.io/nginx:1.27.0", [HUB, I2], None, "f1aaaaaa"),
        # A commit SHA still resolves in Freight that also holds an image.
        ("3333333", [I1, I2, I3], None, "f3cccccc"),
    ],
)
def test_an_image_reference_resolves_to_the_freight_holding_it(
    ref: str, freights: list[dict[str, Any]], stage: dict[str, Any] | None, expected: str
) -> None:
    assert resolve_freight(ref, freights, stage)["metadata"]["name"] == expected
    assert parse_command("promote", f"{ref} to test").freight == ref


def test_an_image_no_freight_holds_says_so() -> None:
    with pytest.raises(
        LookupError, match=r"no Freight holds the image `ghcr\.io/acme/app:9\.9\.9`"
    ):
        resolve_freight("ghcr.io/acme/app:9.9.9", [I1, I2])


def test_unknown_freight_and_empty_latest_say_so() -> None:
    with pytest.raises(
        LookupError, match="no Freight named, aliased or with a name or commit starting 'nope'"
    ):
        resolve_freight("nope", [F1, F2])
    with pytest.raises(LookupError, match="no Freight is available to Stage 'uat' yet"):
        resolve_freight("latest", [F2], UPSTREAM)
    assert available_to(UPSTREAM, F1) and not available_to(UPSTREAM, F2)


def stage_with(annotation: str | None) -> dict[str, Any]:
    annotations = {"longshoreman.dev/github-promoters": annotation} if annotation else {}
    return objects.stage("prod", annotations=annotations)


@pytest.mark.parametrize(
    ("annotation", "user", "permission", "teams", "allowed"),
    [
        (None, "alice", "write", (), True),
        (None, "alice", "read", (), False),
        ("bob, acme/release", "alice", "admin", (), False),
        ("bob, acme/release", "alice", "maintain", ("acme/release",), True),
        ("bob", "Bob", "write", (), True),
    ],
)
def test_github_authorization(
    annotation: str | None, user: str, permission: str, teams: tuple[str, ...], allowed: bool
) -> None:
    decision = github_may_act(stage_with(annotation), user, permission, teams)
    assert decision.allowed is allowed
    if not allowed:
        assert user in decision.reason


def test_slack_authorization_uses_stage_list_then_default() -> None:
    stage = objects.stage("prod", annotations={"longshoreman.dev/slack-promoters": "U1 S9"})
    assert slack_may_act(stage, "U1").allowed
    assert slack_may_act(stage, "U2", user_groups=["S9"]).allowed
    assert not slack_may_act(stage, "U2").allowed
    bare = objects.stage("dev")
    assert slack_may_act(bare, "U2").allowed
    assert not slack_may_act(bare, "U2", default_promoters=["U1"]).allowed


def test_status_rows_and_table() -> None:
    stage = objects.stage(
        "test",
        status={
            "freightHistory": [{"items": {"Warehouse/w": {"name": "f1", "alias": "old-one"}}}],
            "conditions": [{"type": "Healthy", "status": "True"}],
        },
    )
    promos = [objects.promotion("a", "test", phase="Running"), objects.promotion("b", "test")]
    rows = stage_views([stage], promos)
    assert rows[0].freight == "old-one" and rows[0].running == "a" and rows[0].queued == 1
    # Health in Kargo's words, never the condition's "True".
    assert "| test | old-one | a | 1 | Healthy | - |" in markdown_table(rows)
    stage["status"]["health"] = {"status": "Progressing"}
    assert stage_views([stage], promos)[0].health == "Progressing"


def test_status_shows_the_freights_alias_though_the_history_names_only_the_freight() -> None:
    # Stage history entries (Kargo's FreightReference) carry no alias; the row looks it up.
    stage = objects.stage(
        "test", status={"freightHistory": [{"items": {"Warehouse/w": {"name": "a" * 40}}}]}
    )
    freight = objects.freight("a" * 40, alias="frozen-tauntaun")
    assert stage_views([stage], [], [freight])[0].freight == "frozen-tauntaun"
    assert stage_views([stage], [])[0].freight == "a" * 40  # never a cut of the name


def _promo(name: str, stage: str, phase: str, freight: str = "f1") -> dict[str, Any]:
    # Created in the order of the names' last two digits, a second apart.
    created = f"2026-01-01T00:00:{name[-2:]}Z"
    return objects.promotion(name, stage, freight=freight, created=created, phase=phase)


ABORT_SNAPSHOT = Snapshot(
    namespace="p",
    stages=[objects.stage(s) for s in ("test", "prod")],
    promotions=[
        _promo("prod.01", "prod", "Succeeded"),
        _promo("prod.02", "prod", "Pending"),
        _promo("prod.03", "prod", "Running"),
        _promo("prod.04", "prod", "Pending", freight="f2"),
        _promo("test.01", "test", "Pending"),
    ],
)


@pytest.mark.parametrize(
    ("target", "queued", "freight", "expected"),
    [
        ("prod", False, None, ["prod.03"]),  # the running one
        ("prod", True, None, ["prod.03", "prod.02", "prod.04"]),  # and the queue when asked
        ("test", False, None, ["test.01"]),  # nothing running: the oldest queued one
        ("prod.02", False, None, ["prod.02"]),  # a Promotion named: that one
        (
            "prod.01",
            False,
            None,
            "Promotion `prod.01` already finished (Succeeded); there is nothing to abort",
        ),
        ("ghost", False, None, "no Promotion or Stage named `ghost` in project `p`"),
        (None, False, "f1", ["prod.03", "test.01", "prod.02"]),  # a PR's Freight (GitHub)
        (None, False, "f9", "no Promotion of this pull request's Freight is running or queued"),
    ],
)
def test_one_abort_rule_for_every_front_end(
    target: str | None, queued: bool, freight: str | None, expected: list[str] | str
) -> None:
    got = abort_targets(ABORT_SNAPSHOT, target, queued=queued, freight=freight)
    if isinstance(expected, str):
        assert got == Refusal(expected)
    else:
        assert not isinstance(got, Refusal) and [p["metadata"]["name"] for p in got] == expected


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
    assert [c.split()[0] for c in comment[2:]] == [f"/{s.split()[1]}" for s in slash[2:]]


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


@pytest.mark.parametrize(
    ("status", "phase", "message"),
    [
        (None, "Pending", ""),  # just created: no status yet
        ({"phase": "Running"}, "Running", ""),
        ({"phase": "Failed", "message": "git-push: refused"}, "Failed", "git-push: refused"),
    ],
)
def test_a_promotion_ref_names_the_objects_stage_freight_and_phase(
    status: dict[str, Any] | None, phase: str, message: str
) -> None:
    obj = objects.promotion("test.01", "test", namespace="p", freight="f1", status=status)
    assert PromotionRef.of(obj) == PromotionRef("p", "test.01", "test", "f1", phase, message)
