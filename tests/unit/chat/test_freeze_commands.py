"""``/freeze`` and ``/unfreeze``: the words, who may, and what a freeze does to a Stage's schedule.

Table-driven over the grammar, the planner (with Slack's and GitHub's authorizers, as the front
ends build them) and :func:`promoter.control.policies.schedule_for`, which turns the recorded
freeze into the Deny window every path already obeys.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from handlers.promoters import github_may_act
from promoter.chat.grammar import CommandError, parse_comment, parse_slash
from promoter.chat.planner import (
    DoFreeze,
    DoUnfreeze,
    Facts,
    Refusal,
    plan,
    stages_to_authorize,
)
from promoter.chat.port import Snapshot
from promoter.control.freezes import Freeze, FreezeError, freeze_of, parse_duration, parse_until
from promoter.control.policies import project_config, schedule_for
from promoter.resources import annotations as ann
from slack.commands import authorizer
from tests.support import objects
from tests.support.objects import stage

NOW = datetime(2026, 12, 3, 21, 0, tzinfo=UTC)
FROZEN = Freeze("slack:T1/U1", "incident 4711", NOW, NOW + timedelta(hours=2))


def _snapshot(
    *, prod_freeze: Freeze | None = None, config: dict[str, Any] | None = None
) -> Snapshot:
    prod_annotations = {ann.SLACK_PROMOTERS: "U1", ann.GITHUB_PROMOTERS: "alice"}
    if prod_freeze is not None:
        prod_annotations[ann.FREEZE] = prod_freeze.to_annotation()
    stages = [stage("test", annotations={}), stage("prod", annotations=prod_annotations)]
    return Snapshot(
        namespace="p",
        stages=stages,
        project_config=project_config(config) if config is not None else None,
    )


def _slack(snapshot: Snapshot, user: str = "U1", groups: tuple[str, ...] = ()) -> Facts:
    return Facts(snapshot, authorizer(user, list(groups), ()), now=NOW, actor=f"slack:T1/{user}")


def _config(annotations: dict[str, str]) -> dict[str, Any]:
    config = objects.project_config("p")
    config["metadata"]["annotations"] = annotations
    return config


@pytest.mark.parametrize(
    ("text", "target", "duration", "until", "reason"),
    [
        ('/freeze prod for 2h "incident 4711"', "prod", timedelta(hours=2), None, "incident 4711"),
        (
            "/freeze prod for 1h30m deploy of the db",
            "prod",
            timedelta(minutes=90),
            None,
            "deploy of the db",
        ),
        ("/freeze shop until 18:00", "shop", None, "18:00", ""),
        ("/freeze prod \u201cbad night\u201d", "prod", None, None, "bad night"),
        ("/freeze prod", "prod", None, None, ""),
    ],
)
def test_freeze_reads_target_length_or_end_and_reason(
    text: str, target: str, duration: timedelta | None, until: str | None, reason: str
) -> None:
    (line,) = parse_comment(text)
    assert line.command is not None, line.error
    command = line.command
    assert (command.name, command.target, command.duration, command.until, command.reason) == (
        "freeze",
        target,
        duration,
        until,
        reason,
    )
    # Slack's `/promote freeze ...` and `/freeze ...` read the same words.
    assert replace(parse_slash(text.removeprefix("/")), raw=command.raw) == command


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("/freeze", "which Stage or project"),
        ("/freeze prod for", "needs a value"),
        ("/freeze prod for soon", "not a duration"),
        ("/freeze prod for 2h ping <!channel>", "may not contain"),
        ("/freeze prod for 2h @oncall look", "may not contain"),
        ("/unfreeze", "expected one Stage or project"),
        ("/unfreeze prod now", "expected one Stage or project"),
    ],
)
def test_malformed_freezes_say_what_is_wrong(text: str, error: str) -> None:
    (line,) = parse_comment(text)
    assert line.command is None and error in (line.error or "")


def test_durations_and_times() -> None:
    assert parse_duration("3d") == timedelta(days=3)
    assert parse_duration("1w") == timedelta(weeks=1)
    with pytest.raises(FreezeError):
        parse_duration("0m")
    assert parse_until("23:30", NOW) == datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
    assert parse_until("20:00", NOW) == datetime(2026, 12, 4, 20, 0, tzinfo=UTC)
    assert parse_until("2026-12-04T09:00+01:00", NOW) == datetime(2026, 12, 4, 8, tzinfo=UTC)
    with pytest.raises(FreezeError, match="has passed"):
        parse_until("2026-12-01T09:00Z", NOW)


def test_a_freeze_is_a_deny_window_that_ends_at_its_time() -> None:
    prod = _snapshot(prod_freeze=FROZEN).stage("prod")
    assert prod is not None and freeze_of(prod) == FROZEN
    state = schedule_for(prod, None, None).state(NOW + timedelta(minutes=5))
    assert state.closed and state.next_open == NOW + timedelta(hours=2)
    assert state.reason == "frozen by slack:T1/U1: incident 4711"
    assert state.frozen_message("prod", NOW) == (
        "prod is frozen until Thu 23:00 UTC (frozen by slack:T1/U1: incident 4711)"
    )
    assert not schedule_for(prod, None, None).state(NOW + timedelta(hours=2)).closed


def test_a_project_freeze_holds_every_stage_until_unfrozen() -> None:
    open_ended = Freeze("github:bob", "", NOW)
    config = project_config(_config({ann.FREEZE: open_ended.to_annotation()}))
    for name in ("test", "prod"):
        found = _snapshot().stage(name)
        assert found is not None
        state = schedule_for(found, config, None).state(NOW + timedelta(days=30))
        assert state.closed and state.next_open is None
        assert state.frozen_text(NOW) == "frozen until unfrozen (frozen by github:bob (project p))"


def test_a_promoter_freezes_a_stage_and_the_reply_says_until_when_and_why() -> None:
    facts = _slack(_snapshot())
    decided = plan(parse_slash('freeze prod for 2h "incident 4711"'), facts)
    assert decided == DoFreeze("prod", FROZEN)
    assert isinstance(decided, DoFreeze)
    assert decided.said("p", NOW) == (
        "Stage `prod` is frozen until Thu 23:00 UTC: incident 4711. Promotions to it wait, "
        "auto-promotion included; `/unfreeze prod` lifts it."
    )


def test_someone_who_may_not_promote_may_not_freeze() -> None:
    decided = plan(parse_slash("freeze prod for 2h"), _slack(_snapshot(), user="U2"))
    assert decided == Refusal("<@U2> may not act on Stage prod in project p")
    # GitHub: the same rule through its promoter list.
    command = parse_slash("freeze prod")
    facts = Facts(
        _snapshot(), lambda s: github_may_act(s or {}, "carol", "write"), now=NOW, actor="g"
    )
    assert isinstance(plan(command, facts), Refusal)


def test_a_project_freeze_needs_every_stage_s_promoters_unless_the_project_names_freezers() -> None:
    # U2 may act on test (no list) but not on prod: no project freeze.
    assert isinstance(plan(parse_slash("freeze p"), _slack(_snapshot(), user="U2")), Refusal)
    named = _snapshot(config=_config({ann.FREEZERS: "S0ONCALL, alice"}))
    command = parse_slash("freeze p for 1h")
    (stand_in,) = stages_to_authorize(command, named)
    assert stand_in["metadata"]["annotations"][ann.SLACK_PROMOTERS] == "S0ONCALL, alice"
    decided = plan(command, _slack(named, user="U9", groups=("S0ONCALL",)))
    assert isinstance(decided, DoFreeze) and decided.stage is None
    # With a list, the Stage's own promoter is not enough.
    refused = plan(parse_slash("freeze prod"), _slack(named, user="U1"))
    assert isinstance(refused, Refusal) and "names who may freeze" in refused.reason


def test_unfreeze_lifts_only_a_freeze_from_chat() -> None:
    decided = plan(parse_slash("unfreeze prod"), _slack(_snapshot(prod_freeze=FROZEN)))
    assert decided == DoUnfreeze("prod", FROZEN)
    refused = plan(parse_slash("unfreeze prod"), _slack(_snapshot()))
    assert isinstance(refused, Refusal) and "is not frozen from chat" in refused.reason
    project = _snapshot(config=_config({ann.FREEZE: FROZEN.to_annotation()}))
    refused = plan(parse_slash("unfreeze prod"), _slack(project))
    assert isinstance(refused, Refusal) and "`/unfreeze p`" in refused.reason
    assert plan(parse_slash("unfreeze p"), _slack(project)) == DoUnfreeze(None, FROZEN)


def test_freezing_a_name_that_is_neither_stage_nor_project_is_refused() -> None:
    refused = plan(parse_slash("freeze nowhere"), _slack(_snapshot()))
    assert isinstance(refused, Refusal) and "no Stage `nowhere`" in refused.reason


def test_commanderror_is_raised_for_slash_text_too() -> None:
    with pytest.raises(CommandError):
        parse_slash("freeze prod for ever")
