"""The pure Stage planner (promoter.control.stage_planner), table-driven: what the controller does
next.

The end-to-end tests (test_reconciler.py, test_verification_flow.py, tests/cluster) show the
controller applying these decisions against an API server; these tables cover every rule.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.chat.views import stage_views
from promoter.control.stage_planner import (
    Health,
    QueuePlan,
    plan_queue,
    plan_status,
    stage_health,
    verification_in_progress,
)
from promoter.resources import annotations as ann
from promoter.resources.model import name_of
from tests.support import objects

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def promotion(
    name: str, phase: str | None = None, *, created: str = "00", **annotations: str
) -> dict[str, Any]:
    return objects.promotion(
        name,
        phase=phase,
        created=f"2024-01-01T00:00:{created}Z",
        annotations=annotations,
        uid=f"uid-{name}",
    )


BY_CHAT = {ann.CREATE_ACTOR_ANNOTATIONS[0]: "github:alice"}
ABORT = ann.abort("slack:T/U1")


def stage(verification: str | None = None, healthy: str | None = "True") -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": []}
    if healthy is not None:
        status["conditions"].append({"type": "Healthy", "status": healthy})
    if verification is not None:
        status["freightHistory"] = [
            {"items": {}, "verificationHistory": [{"id": "v1", "phase": verification}]}
        ]
    return objects.stage("test", status=status)


def names(plan: QueuePlan) -> tuple[list[str], list[tuple[str, str]], str | None, bool]:
    return (
        [p["metadata"]["name"] for p in plan.announce],
        [(p["metadata"]["name"], actor) for p, actor in plan.aborts],
        plan.run["metadata"]["name"] if plan.run is not None else None,
        plan.waiting_for_verification,
    )


@pytest.mark.parametrize(
    ("stage_obj", "promotions", "announced", "expected"),
    [
        pytest.param(stage(), [], set(), ([], [], None, False), id="empty queue"),
        # kubectl-created Promotions are announced once per process; the builder's never.
        pytest.param(
            stage(),
            [promotion("a", created="01"), promotion("b", created="02", **BY_CHAT)],
            set(),
            (["a"], [], "a", False),
            id="announce kubectl-created",
        ),
        pytest.param(
            stage(), [promotion("a")], {"uid-a"}, ([], [], "a", False), id="announced already"
        ),
        pytest.param(
            stage(),
            [promotion("a", "Succeeded", **BY_CHAT)],
            set(),
            ([], [], None, False),
            id="finished ones are not queued",
        ),
        # Oldest first; a running one before any queued one.
        pytest.param(
            stage(),
            [
                promotion("b", "Pending", created="02", **BY_CHAT),
                promotion("a", "Pending", created="01", **BY_CHAT),
            ],
            set(),
            ([], [], "a", False),
            id="oldest first",
        ),
        pytest.param(
            stage(),
            [
                promotion("a", "Pending", created="01", **BY_CHAT),
                promotion("b", "Running", created="02", **BY_CHAT),
            ],
            set(),
            ([], [], "b", False),
            id="running first",
        ),
        # An abort request is carried out and the aborted one never runs.
        pytest.param(
            stage(),
            [
                promotion("a", "Running", created="01", **BY_CHAT, **ABORT),
                promotion("b", "Pending", created="02", **BY_CHAT),
            ],
            set(),
            ([], [("a", "slack:T/U1")], "b", False),
            id="abort then the next",
        ),
        pytest.param(
            stage(),
            [promotion("a", "Aborted", **BY_CHAT, **ABORT)],
            set(),
            ([], [], None, False),
            id="abort of a finished one is moot",
        ),
        # Queued Promotions wait for the verification of the Freight before them...
        pytest.param(
            stage("Running"),
            [promotion("a", "Pending", **BY_CHAT)],
            set(),
            ([], [], None, True),
            id="queued waits for verification",
        ),
        pytest.param(
            stage("Successful"),
            [promotion("a", "Pending", **BY_CHAT)],
            set(),
            ([], [], "a", False),
            id="verification done",
        ),
        # ...but not while the Stage is unhealthy (a fix matters more), and a running one
        # always goes on.
        pytest.param(
            stage("Running", healthy="False"),
            [promotion("a", "Pending", **BY_CHAT)],
            set(),
            ([], [], "a", False),
            id="unhealthy stage does not wait",
        ),
        pytest.param(
            stage("Pending"),
            [promotion("a", "Running", **BY_CHAT)],
            set(),
            ([], [], "a", False),
            id="running goes on",
        ),
        pytest.param(
            None, [promotion("a", "Pending", **BY_CHAT)], set(), ([], [], "a", False), id="no stage"
        ),
    ],
)
def test_plan_queue(
    stage_obj: dict[str, Any] | None,
    promotions: list[dict[str, Any]],
    announced: set[str],
    expected: tuple[Any, ...],
) -> None:
    assert names(plan_queue(stage_obj, promotions, announced=announced)) == expected


def test_verification_in_progress_needs_a_healthy_stage() -> None:
    assert verification_in_progress(stage("Running"))
    assert verification_in_progress(stage("Pending", healthy=None))
    assert not verification_in_progress(stage("Running", healthy="Unknown"))
    assert not verification_in_progress(stage("Failed"))
    assert not verification_in_progress(stage())


def app(name: str, health: str, sync: str = "Synced", namespace: str = "argocd") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "status": {"health": {"status": health}, "sync": {"status": sync}},
    }


def checked(*apps: tuple[str, str]) -> dict[str, Any]:
    """A succeeded Promotion whose argocd-update step registered a health check."""
    obj = promotion("last", "Succeeded")
    obj["status"]["healthChecks"] = [
        {"config": {"apps": [{"name": n, "namespace": ns} for n, ns in apps]}}
    ]
    return obj


LAST = {"lastPromotion": {"name": "last"}, "freightHistory": [{"items": {}}]}


@pytest.mark.parametrize(
    ("status", "promotions", "applications", "state"),
    [
        pytest.param({}, [], [], "Unknown", id="nothing promoted yet"),
        pytest.param(LAST, [], [], "Healthy", id="promoted without health checks"),
        pytest.param(LAST, [checked(("a", "argocd"))], [app("a", "Healthy")], "Healthy", id="ok"),
        pytest.param(
            LAST,
            [checked(("a", "argocd"))],
            [app("a", "Progressing")],
            "Progressing",
            id="progressing stays progressing",
        ),
        pytest.param(
            LAST, [checked(("a", "argocd"))], [app("a", "Degraded")], "Unhealthy", id="degraded"
        ),
        pytest.param(
            LAST,
            [checked(("a", "argocd"))],
            [app("a", "Healthy", "OutOfSync")],
            "Unhealthy",
            id="drifted",
        ),
        pytest.param(LAST, [checked(("a", "argocd"))], [], "Unknown", id="application missing"),
        # Kargo's merge: the most severe wins.
        pytest.param(
            LAST,
            [checked(("a", "argocd"), ("b", "argocd"))],
            [app("a", "Progressing"), app("b", "Degraded")],
            "Unhealthy",
            id="merge most severe",
        ),
        # Applications are keyed by their own namespace, whatever it is (no fixed "argocd").
        pytest.param(
            LAST,
            [checked(("a", "gitops"))],
            [app("a", "Healthy", namespace="gitops"), app("a", "Degraded")],
            "Healthy",
            id="namespaced key",
        ),
    ],
)
def test_stage_health(
    status: dict[str, Any],
    promotions: list[dict[str, Any]],
    applications: list[dict[str, Any]],
    state: str,
) -> None:
    health = stage_health(status, promotions, applications)
    assert health.state == state
    assert health.condition == {"Healthy": "True", "Unknown": "Unknown"}.get(state, "False")


def test_the_status_records_health_in_kargos_words() -> None:
    stage_obj = {
        "metadata": {"name": "test", "namespace": "p", "generation": 3},
        "spec": {},
        "status": {"lastPromotion": {"name": "last"}, "freightHistory": [{"items": {"w": {}}}]},
    }
    status = plan_status(stage_obj, [checked(("a", "argocd"))], [app("a", "Progressing")], NOW)
    healthy = next(c for c in status["conditions"] if c["type"] == "Healthy")
    assert (healthy["status"], healthy["reason"]) == ("False", "Progressing")
    assert status["health"] == {"status": "Progressing"}
    # And every front end shows the word, never the condition's "False".
    (view,) = stage_views([{**stage_obj, "status": status}], [])
    assert view.health == "Progressing"
    assert Health("Progressing", "").condition == "False"


def test_queued_promotions_say_what_they_wait_for() -> None:
    queue = [
        promotion("a", "Running", created="01", **BY_CHAT),
        promotion("b", "Pending", created="02", **BY_CHAT),
        promotion("c", "Pending", created="03", **BY_CHAT),
    ]
    waiting = plan_queue(stage(), queue).waiting
    assert [(name_of(p), why) for p, why in waiting] == [
        ("b", "waiting for Promotion a to finish"),
        ("c", "waiting for Promotion a to finish"),
    ]
    # The head of a queue about to start waits for nothing; the rest wait for it.
    assert [name_of(p) for p, _ in plan_queue(stage(), queue[1:]).waiting] == ["c"]
    verifying = plan_queue(stage("Running"), queue[1:]).waiting
    assert [why for _, why in verifying] == [
        "waiting for the verification of Stage test's Freight to finish"
    ] * 2


def test_health_is_not_assessed_while_a_promotion_runs() -> None:
    # Kargo's assessHealth: the Applications are mid-sync on purpose, so what they show says
    # nothing; the Stage's status stays still until the Promotion ends.
    stage_obj = {
        "metadata": {"name": "test", "namespace": "p", "generation": 3},
        "spec": {},
        "status": {"lastPromotion": {"name": "last"}, "freightHistory": [{"items": {"w": {}}}]},
    }
    running = promotion("next", "Running")
    mid_sync = [app("a", "Degraded", "OutOfSync")]
    status = plan_status(stage_obj, [checked(("a", "argocd")), running], mid_sync, NOW)
    healthy = next(c for c in status["conditions"] if c["type"] == "Healthy")
    assert (healthy["status"], healthy["reason"], healthy["message"]) == (
        "Unknown",
        "ActivePromotion",
        "Stage has a Promotion in progress",
    )
    assert status["health"] == {"status": "Unknown"}
    # Each step of the sync leaves it as it was.
    synced = [app("a", "Progressing")]
    again = plan_status(
        {**stage_obj, "status": status}, [checked(("a", "argocd")), running], synced, NOW
    )
    assert again == status
    # Once it has ended, the health checks count again.
    finished = promotion("next", "Succeeded")
    after = plan_status(
        {**stage_obj, "status": status}, [checked(("a", "argocd")), finished], synced, NOW
    )
    assert next(c for c in after["conditions"] if c["type"] == "Healthy")["reason"] == "Progressing"
