"""Kargo's Freight verification Events (promoter/control/freight_events.py): reason, message and
annotations as pkg/event/freight.go marshals them (freight_test.go's fields)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from promoter.control.freight_events import PREFIX, verification_event

FREIGHT = {
    "apiVersion": "longshoreman.dev/v1alpha1",
    "kind": "Freight",
    "metadata": {
        "name": "f00d",
        "namespace": "kargo-demo",
        "uid": "u-1",
        "creationTimestamp": "2026-01-01T10:00:00Z",
    },
    "alias": "frozen-tauntaun",
    "origin": {"kind": "Warehouse", "name": "kargo-demo"},
    "images": [{"repoURL": "nginx", "tag": "1.27.0"}],
}
START = datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
END = datetime(2026, 1, 1, 11, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("phase", "reason"),
    [
        ("Successful", "FreightVerificationSucceeded"),
        ("Failed", "FreightVerificationFailed"),
        ("Error", "FreightVerificationErrored"),
        ("Aborted", "FreightVerificationAborted"),
        ("Inconclusive", "FreightVerificationInconclusive"),
        ("Pending", "FreightVerificationUnknown"),
    ],
)
def test_each_phase_has_kargos_event_type(phase: str, reason: str) -> None:
    assert verification_event(FREIGHT, "test", phase).reason == reason


def test_a_success_has_kargos_message_and_annotations() -> None:
    event = verification_event(
        FREIGHT, "test", "Successful", message="all good", started=START, finished=END,
        analysis_run="test.01abc", promotion="test.01xyz",
    )  # fmt: skip
    assert event.message == "Freight verification succeeded"
    assert event.type == "Normal"
    assert event.involved == {
        "apiVersion": "longshoreman.dev/v1alpha1",
        "kind": "Freight",
        "metadata": {"name": "f00d", "namespace": "kargo-demo", "uid": "u-1"},
    }
    assert event.annotations == {
        PREFIX + "project": "kargo-demo",
        PREFIX + "actor": "controller:longshoreman",
        PREFIX + "freight-name": "f00d",
        PREFIX + "stage-name": "test",
        PREFIX + "freight-create-time": "2026-01-01T10:00:00Z",
        PREFIX + "freight-warehouse-name": "kargo-demo",
        PREFIX + "freight-alias": "frozen-tauntaun",
        PREFIX + "freight-images": '[{"repoURL":"nginx","tag":"1.27.0"}]',
        PREFIX + "verification-start-time": "2026-01-01T11:00:00Z",
        PREFIX + "verification-finish-time": "2026-01-01T11:05:00Z",
        PREFIX + "analysis-run-name": "test.01abc",
        PREFIX + "promotion-name": "test.01xyz",
    }


def test_a_failure_carries_the_verification_message_and_who_asked() -> None:
    event = verification_event(
        FREIGHT, "test", "Failed", message="Metric \"error-rate\" assessed Failed",
        actor="github:alice",
    )  # fmt: skip
    assert event.message == 'Metric "error-rate" assessed Failed'
    assert event.annotations[PREFIX + "actor"] == "github:alice"
    assert PREFIX + "verification-start-time" not in event.annotations


def test_discovered_at_wins_over_creation() -> None:
    freight = {**FREIGHT, "discoveredAt": "2025-12-31T09:00:00Z"}
    event = verification_event(freight, "test", "Successful")
    assert event.annotations[PREFIX + "freight-create-time"] == "2025-12-31T09:00:00Z"
