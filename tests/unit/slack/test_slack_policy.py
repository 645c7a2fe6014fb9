"""Who may act on a Stage from Slack (pure)."""

from __future__ import annotations

from slack.commands import slack_may_act
from tests.support import objects


def test_slack_authorization_uses_stage_list_then_default() -> None:
    stage = objects.stage("prod", annotations={"longshoreman.dev/slack-promoters": "U1 S9"})
    assert slack_may_act(stage, "U1").allowed
    assert slack_may_act(stage, "U2", user_groups=["S9"]).allowed
    assert not slack_may_act(stage, "U2").allowed
    bare = objects.stage("dev")
    assert slack_may_act(bare, "U2").allowed
    assert not slack_may_act(bare, "U2", default_promoters=["U1"]).allowed
