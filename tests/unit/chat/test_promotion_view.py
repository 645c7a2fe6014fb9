"""The one read model of a Promotion that check runs, Slack messages and pages format."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from handlers import checks
from promoter.chat.views import FreightLabel, freight_label, promotion_view
from tests.support import objects

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _promotion(steps: list[Any], executions: list[Any] | None = None) -> dict[str, Any]:
    return objects.promotion(
        "prod.01",
        "prod",
        namespace="demo",
        freight="abc123",
        steps=steps,
        phase="Running",
        status={"stepExecutionMetadata": executions or []},
    )


@pytest.mark.parametrize(
    ("step", "execution", "alias", "kind", "status"),
    [
        ({"uses": "git-clone"}, {}, "step-2", "git-clone", ""),
        ({"task": {"name": "deploy"}}, {}, "task-2", "deploy", ""),
        (
            {"uses": "git-clone", "as": "clone"},
            {"status": "Running"},
            "clone",
            "git-clone",
            "Running",
        ),
        ({"task": {"name": "deploy"}, "as": "ship"}, {}, "ship", "deploy", ""),
        # The engine's recorded alias wins: a Promotion keeps the names it ran with.
        ({"uses": "http"}, {"alias": "old-name"}, "old-name", "http", ""),
        ("junk", {}, "step-2", "", ""),
    ],
)
def test_step_lines_name_steps_as_kargo_does(
    step: Any, execution: dict[str, Any], alias: str, kind: str, status: str
) -> None:
    view = promotion_view(_promotion([{"uses": "first"}, step], [{}, execution]))
    line = view.steps[1]
    assert (line.index, line.alias, line.kind, line.status) == (2, alias, kind, status)


def test_the_view_carries_timing_and_phase_as_plain_data() -> None:
    execution = {
        "status": "Succeeded",
        "message": "ok",
        "startedAt": "2024-01-01T00:00:00Z",
        "finishedAt": "2024-01-01T00:00:05Z",
        "errorCount": 1,
    }
    view = promotion_view(_promotion([{"uses": "http"}], [execution]))
    [line] = view.steps
    assert (view.namespace, view.name, view.stage, view.freight, view.phase) == (
        "demo",
        "prod.01",
        "prod",
        "abc123",
        "Running",
    )
    assert (line.started_at, line.finished_at, line.errors, line.message) == (
        T0,
        T0.replace(second=5),
        1,
        "ok",
    )
    assert view.done == 1


@pytest.mark.parametrize(
    ("ref", "freights", "fallback", "short", "full"),
    [
        (
            "a" * 40,
            [{"metadata": {"name": "a" * 40}, "alias": "tauntaun"}],
            None,
            "tauntaun",
            f"tauntaun ({'a' * 40})",
        ),
        (
            "tauntaun",
            [{"metadata": {"name": "n1"}, "alias": "tauntaun"}],
            None,
            "tauntaun",
            "tauntaun (n1)",
        ),
        ("a" * 40, [], None, "a" * 12, "a" * 40),
        ("n1", [], {"metadata": {"name": "n1"}, "alias": "gone"}, "gone", "gone (n1)"),
        ("", [], None, "?", ""),
    ],
)
def test_freight_label_puts_the_alias_first(
    ref: str, freights: list[Any], fallback: Any, short: str, full: str
) -> None:
    label = freight_label(ref, freights, fallback)
    assert (label.short, label.full) == (short, full)
    assert isinstance(label, FreightLabel)


def test_a_task_step_shows_as_task_n_in_the_check_run() -> None:
    promotion = _promotion(
        [{"uses": "git-clone"}, {"task": {"name": "deploy"}}],
        [{"status": "Succeeded"}, {"status": "Running"}],
    )
    summary = checks.summary(promotion_view(promotion))
    assert "| 2 | `task-2` | task | Running |" in summary
    assert "step-2" not in summary


def test_next_stages_are_offered_once_the_freight_is_verified_here() -> None:
    """One rule for GitHub's and Slack's "Promote to NEXT": only Freight verified in this Stage
    can go on (before that the click could only be refused), and only to Stages that request
    Freight of its origin."""
    promotion = _promotion([{"uses": "http"}], [{"status": "Succeeded"}])
    promotion["status"].update(phase="Succeeded", finishedAt="2024-01-01T00:01:00Z")
    stage = objects.stage(
        "prod",
        namespace="demo",
        verification=["smoke"],
        status={"lastPromotion": {"name": "prod.01"}},
    )
    after = objects.stage("final", namespace="demo", upstream=["prod"])
    other = objects.stage("elsewhere", namespace="demo", warehouse="x", upstream=["prod"])
    freight = objects.freight("abc123", namespace="demo", alias="a")

    def view_with(condition: dict[str, Any]) -> Any:
        stage["status"]["conditions"] = [{"type": "Verified", **condition}]
        return promotion_view(promotion, stage=stage, stages=[after, other], freights=[freight])

    running = view_with({"status": "Unknown", "reason": "Verifying"})
    assert running.downstream == ("final",) and running.next_stages == ()
    # Meanwhile a person may let it into the next Stage (/approve), until it is approved there.
    assert [a["label"] for a in checks.actions(running)] == ["Re-verify", "Approve for final"]
    freight["status"] = {"approvedFor": {"final": {"approvedAt": "2024-01-01T00:01:30Z"}}}
    approved = view_with({"status": "Unknown", "reason": "Verifying"})
    assert approved.approved_for == ("final",) and approved.approve_stages == ()
    assert [a["label"] for a in checks.actions(approved)] == ["Re-verify"]
    passed = view_with({"status": "True", "lastTransitionTime": "2024-01-01T00:02:00Z"})
    assert passed.next_stages == ("final",)
    assert [a["label"] for a in checks.actions(passed)] == ["Re-verify", "Promote to final"]
    assert passed.label == FreightLabel("abc123", "a") and passed.verifiable


@pytest.mark.parametrize(
    ("approved_by", "shown"),
    [
        ("github:alice", "by @\u200balice "),
        ("slack:T1/U1", "by slack:T1/U1 "),
        # Written by hand: whatever it says is read, and does nothing (no mention, no link, no
        # HTML, no table cell ended).
        (
            "@org/team [x](https://evil) <b>|</b>",
            "by @\u200borg/team \\[x\\](https://evil) &lt;b&gt;\\|&lt;/b&gt; ",
        ),
    ],
)
def test_the_freights_approvals_show_on_its_check_runs_with_who_gave_them(
    approved_by: str, shown: str
) -> None:
    """An approval given anywhere (a page, a comment, Slack, the command line) is on the Freight,
    so every check run that reports the Freight says it, whatever Stage the run is for."""
    promotion = _promotion([{"uses": "http"}], [{"status": "Succeeded"}])
    freight = objects.freight("abc123", namespace="demo", alias="a")
    freight["status"] = {
        "approvedFor": {
            "prod-eu": {"approvedAt": "2024-01-01T00:01:30Z", "approvedBy": approved_by},
            "hand": {},  # kubectl: nobody recorded, no time
        }
    }
    view = promotion_view(promotion, freights=[freight])
    assert [a.stage for a in view.approvals] == ["hand", "prod-eu"]
    summary = checks.summary(view)
    assert "\nApproved for `hand`\n" in summary
    assert f"Approved for `prod-eu` {shown}at 2024-01-01 00:01 UTC" in summary
    entry = {"id": "v1", "phase": "Failed"}
    fields = checks.verification_check_fields(
        "prod", entry, None, external="demo/prod.01#v1", freight_label="a",
        approvals=view.approvals,
    )  # fmt: skip
    assert f"Approved for `prod-eu` {shown}at " in fields["output"]["summary"]
