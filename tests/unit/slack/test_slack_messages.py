"""What Slack shows, decided purely: Block Kit limits hold for any Promotion, verification is
read from the Stage, thread replies have stable keys, the record round-trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promoter.chat.views import Verification, promotion_view, verification_of
from promoter.resources import annotations as ann
from promoter.resources.stages import downstream_stages
from slack.messages import (
    ABORT,
    PROMOTE_NEXT,
    REVERIFY,
    LiveTag,
    MessageRecord,
    channel_of,
    freight_available,
    message_final,
    notable_events,
    render_promotion,
    tagged,
)
from tests.support import objects
from tests.support.slack import block_kit_errors

STATUSES = st.sampled_from(["", "Running", "Succeeded", "Skipped", "Failed", "Errored", "Aborted"])
PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Errored", "Aborted"])


@st.composite
def promotions(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 300))
    text = st.text(max_size=400)
    steps = [{"uses": draw(text), "as": draw(st.text(min_size=1, max_size=100))} for _ in range(n)]
    executions = [{"status": draw(STATUSES), "message": draw(text)} for _ in range(n)]
    return objects.promotion(
        draw(st.text(min_size=1, max_size=253)),
        draw(st.text(max_size=253)),
        freight=draw(st.text(max_size=300)),
        steps=steps,
        phase=draw(PHASES),
        status={"message": draw(st.text(max_size=5000)), "stepExecutionMetadata": executions},
    )


@settings(max_examples=60, deadline=None)
@given(promotions())
def test_any_promotion_renders_within_block_kit_limits(promotion: dict[str, Any]) -> None:
    message = render_promotion(promotion_view(promotion))
    assert block_kit_errors(list(message.blocks)) == []
    assert 0 < len(message.text) <= 4000
    for _key, reply in notable_events(promotion, None):
        assert block_kit_errors(list(reply.blocks)) == []


def promotion(phase: str, **status: Any) -> dict[str, Any]:
    return objects.promotion(
        "prod.01",
        "prod",
        phase=phase,
        steps=[{"uses": "argocd-update", "as": "sync"}, {"uses": "http"}],
        status={
            "startedAt": "2024-01-01T00:00:00Z",
            "finishedAt": "2024-01-01T00:01:00Z",
            **status,
        },
    )


def stage(**status: Any) -> dict[str, Any]:
    return objects.stage("prod", annotations={ann.SLACK_CHANNEL: " C1 "}, status=status)


LAST = {"lastPromotion": {"name": "prod.01", "finishedAt": "2024-01-01T00:01:00Z"}}


def history(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"freightHistory": [{"verificationHistory": list(entries)}], **LAST}


@pytest.mark.parametrize(
    ("obj", "stage_obj", "expected"),
    [
        (promotion("Running"), stage(), None),
        (promotion("Succeeded"), None, Verification("none")),
        (promotion("Succeeded"), stage(**LAST), Verification("none")),
        (
            promotion("Succeeded"),
            stage(lastPromotion={"name": "prod.00", "finishedAt": "2023-01-01T00:00:00Z"}),
            Verification("pending", "waiting for the Stage to record this Promotion"),
        ),
        (
            promotion("Succeeded"),
            stage(lastPromotion={"name": "prod.02", "finishedAt": "2024-02-01T00:00:00Z"}),
            Verification("superseded"),
        ),
        (
            promotion("Succeeded"),
            stage(
                **history(
                    {
                        "id": "e1",
                        "promotion": "prod.01",
                        "phase": "Successful",
                        "message": "no verification configured",
                    }
                )
            ),
            Verification("none", "no verification configured"),
        ),
        (
            promotion("Succeeded"),
            stage(
                **history(
                    {
                        "id": "e2",
                        "promotion": "prod.01",
                        "phase": "Running",
                        "analysisRun": {"name": "r"},
                    }
                )
            ),
            Verification("running", "", "e2/Running"),
        ),
        (
            promotion("Succeeded"),
            stage(
                **history(
                    {
                        "id": "e3",
                        "promotion": "prod.01",
                        "phase": "Error",
                        "message": "boom",
                        "analysisRun": {"name": "r"},
                    }
                )
            ),
            Verification("failed", "Error: boom", "e3/Error"),
        ),
        (
            promotion("Succeeded"),
            stage(
                **LAST,
                conditions=[
                    {
                        "type": "Verified",
                        "status": "True",
                        "message": "ok",
                        "lastTransitionTime": "2024-01-01T00:02:00Z",
                    }
                ],
            ),
            Verification("passed", "ok", "2024-01-01T00:02:00Z"),
        ),
        # A Verified condition older than this Promotion is the previous Freight's.
        (
            promotion("Succeeded"),
            stage(
                **LAST,
                conditions=[
                    {
                        "type": "Verified",
                        "status": "True",
                        "lastTransitionTime": "2023-01-01T00:00:00Z",
                    }
                ],
            ),
            Verification("pending", "verification has not started yet", "2023-01-01T00:00:00Z"),
        ),
    ],
)
def test_verification_of(
    obj: dict[str, Any], stage_obj: dict[str, Any] | None, expected: Verification | None
) -> None:
    assert verification_of(obj, stage_obj) == expected


def test_buttons_follow_the_lifecycle() -> None:
    downstream = objects.stage("final", upstream=["prod"])
    freight = objects.freight("f1", alias="a")

    def buttons(obj: dict[str, Any], stage_obj: dict[str, Any]) -> set[str]:
        view = promotion_view(obj, stage=stage_obj, stages=[downstream], freights=[freight])
        msg = render_promotion(view)
        return {
            e["action_id"]
            for b in msg.blocks
            for e in b.get("elements") or ()
            if e.get("type") == "button"
        }

    assert buttons(promotion("Running"), stage()) == {ABORT}
    running = history(
        {"id": "e", "promotion": "prod.01", "phase": "Running", "analysisRun": {"name": "r"}}
    )
    assert buttons(promotion("Succeeded"), stage(**running)) == set()
    passed = history(
        {"id": "e", "promotion": "prod.01", "phase": "Successful", "analysisRun": {"name": "r"}}
    )
    assert buttons(promotion("Succeeded"), stage(**passed)) == {REVERIFY, f"{PROMOTE_NEXT}.0"}
    failed = history(
        {"id": "e", "promotion": "prod.01", "phase": "Failed", "analysisRun": {"name": "r"}}
    )
    assert buttons(promotion("Succeeded"), stage(**failed)) == {REVERIFY}
    assert buttons(promotion("Failed"), stage(**LAST)) == set()
    assert downstream_stages("prod", [downstream], {"kind": "Warehouse", "name": "other"}) == []


def test_thread_replies_have_stable_keys() -> None:
    obj = promotion(
        "Errored",
        stepExecutionMetadata=[
            {"status": "Succeeded", "message": "synced argocd/app"},
            {"status": "Errored", "message": "HTTP 500"},
        ],
    )
    events = notable_events(obj, Verification("passed", "3/3", "e1/Successful"))
    assert [k for k, _ in events] == [
        "argocd/sync/Succeeded",
        "step/step-2/Errored",  # Kargo counts unnamed steps from 1
        "verify/passed/e1/Successful",
    ]
    assert "HTTP 500" in events[1][1].text
    assert message_final(obj, None) and not message_final(
        promotion("Succeeded"), Verification("running")
    )


def test_record_round_trip_and_junk() -> None:
    record = MessageRecord("C1", "1.2", ("a",), True)
    obj = {"metadata": {"annotations": {"longshoreman.dev/slack-message": record.to_annotation()}}}
    assert MessageRecord.of(obj) == record
    for junk in ("", "nope", "[]", '{"channel": "C1"}'):
        assert (
            MessageRecord.of(
                {"metadata": {"annotations": {"longshoreman.dev/slack-message": junk}}}
            )
            is None
        )
    assert channel_of(stage()) == "C1" and channel_of(None) is None


def test_live_tag_round_trip_and_only_our_post_is_found() -> None:
    tag = LiveTag("shop", "prod.01j.7c9e6b1", "a1b2c3")
    assert LiveTag.of(tag.metadata()) == tag
    foreign = {**tag.metadata(), "event_type": "task_created"}
    other_post = LiveTag("shop", "prod.01j.7c9e6b1", "ffffff").metadata()
    for junk in ({}, foreign, {"event_type": "longshoreman_promotion", "event_payload": []}):
        assert LiveTag.of(junk) is None
    history = [("1700000003.000100", {}), ("1700000002.000001", other_post)]
    assert tagged(history, tag) is None
    history += [("1700000001.900000", tag.metadata()), ("1700000001.000010", tag.metadata())]
    assert tagged(history, tag) == "1700000001.000010"  # the first, if both attempts landed


def _diff_of_1000_commits() -> Any:
    """A range of 1000 commits, GitHub's 250 of them listed, every text too long and rude."""
    from promoter.chat.diff import (
        MAX_COMMITS,
        Commit,
        PullRequest,
        RangeFacts,
        RangeKey,
        freight_diff,
    )

    url = "https://github.com/acme/app"
    commits = tuple(
        Commit(
            f"{i:040x}",
            "<!channel> " + "x" * 300,
            f"dev{i}",
            f"{url}/commit/{i:040x}",
            (PullRequest(i, "t" * 300, f"{url}/pull/{i}", "dev", True),),
        )
        for i in range(MAX_COMMITS)
    )
    key = RangeKey(url, "a" * 40, "b" * 40)
    facts = {key: RangeFacts(commits, 1000, f"{url}/compare/{'a' * 40}...{'b' * 40}")}
    current = {"metadata": {"name": "old"}, "commits": [{"repoURL": url, "id": "a" * 40}]}
    new = {"metadata": {"name": "new"}, "commits": [{"repoURL": url, "id": "b" * 40}]}
    return freight_diff("prod", current, new, facts)


def test_a_freight_diff_of_a_250_commit_range_stays_within_block_kit_limits() -> None:
    from promoter.chat.views import FreightLabel
    from slack.messages import DIFF_COMMITS, freight_diff_message

    message = freight_diff_message(_diff_of_1000_commits(), FreightLabel("new", "brave-bird"))
    assert block_kit_errors(list(message.blocks)) == []
    text = "\n".join(block["text"]["text"] for block in message.blocks)
    assert f"… and {1000 - DIFF_COMMITS} more" in text
    assert "1000 new commits" in text
    assert "<!channel>" not in text  # other people's text never pings anyone


def test_the_live_message_of_300_steps_shows_a_250_commit_diff_within_block_kit_limits() -> None:
    steps = [{"uses": "compose-output", "as": f"s{i}"} for i in range(300)]
    many = objects.promotion("prod.1", "prod", freight="new", steps=steps, phase="Running")
    message = render_promotion(promotion_view(many), _diff_of_1000_commits())
    assert block_kit_errors(list(message.blocks)) == []
    text = json.dumps(list(message.blocks))
    assert "1000 new commits" in text and "`s299`" in text
    assert "<!channel>" not in text
    assert message.blocks[-1]["type"] == "actions"  # Abort stays


def test_urls_with_credentials_are_shown_without_them() -> None:
    """Freight written with kubectl may carry a password in a URL; a Promotion's message may
    quote one: neither reaches Slack (issue 34, finding 8)."""
    freight = objects.freight(
        "f1",
        commits=[{"repoURL": "https://robot:pa55word@git.example.com/a.git", "id": "a" * 40}],
        charts=[{"repoURL": "https://robot:pa55word@charts.example.com", "version": "1.0.0"}],
    )
    announced = freight_available("demo", "test", freight)
    failed = render_promotion(
        promotion_view(promotion("Errored", message="cannot reach http://u:pa55word@h/x.git"))
    )
    shown = json.dumps([announced.text, list(announced.blocks), failed.text, list(failed.blocks)])
    assert "pa55word" not in shown
    assert "https://git.example.com/a.git" in shown and "http://h/x.git" in shown


def test_a_generic_subscriptions_artifact_is_announced_by_name_and_version() -> None:
    freight = {
        **objects.freight("f1"),
        "artifacts": [{"artifactType": "s3", "subscriptionName": "bucket", "version": "v7"}],
    }
    announced = freight_available("demo", "test", freight)
    assert "`bucket` `v7`" in json.dumps([announced.text, list(announced.blocks)])
