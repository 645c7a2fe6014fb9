"""Kargo's Freight verification Events, built purely: what a Stage records when a verification
of Freight ends (``FreightVerificationSucceeded``, ``...Failed``, ``...Errored``, ``...Aborted``,
``...Inconclusive``, ``...Unknown``).

Kargo (pkg/event/freight.go, pkg/controller/stages/regular_stages.go
``recordFreightVerificationEvent``, control_flow_stages.go) sends them as core Events on the
Freight, type ``Normal``, the event type as the reason, and its data as annotations under
``event.kargo.akuity.io/`` (project, actor, Freight name, alias, Warehouse, creation time,
commits/images/charts as JSON, Stage, verification start and finish times, AnalysisRun, and the
Promotion that started the AnalysisRun), so tools that read Kargo's Events read these. The
message is Kargo's: ``Freight verification succeeded``, else the verification's own message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from promoter.resources.model import meta, name_of, namespace_of, parse_time

PREFIX = "event.kargo.akuity.io/"
# Kargo's EventActorControllerPrefix + the controller's name.
CONTROLLER_ACTOR = "controller:longshoreman"

# Kargo's VerificationInfo phases -> its event types.
_EVENT_TYPES = {
    "Successful": "FreightVerificationSucceeded",
    "Failed": "FreightVerificationFailed",
    "Error": "FreightVerificationErrored",
    "Aborted": "FreightVerificationAborted",
    "Inconclusive": "FreightVerificationInconclusive",
}
UNKNOWN = "FreightVerificationUnknown"


@dataclass(frozen=True, slots=True)
class FreightEvent:
    """A core Event to record: on the Freight (``involved``), with Kargo's reason, message and
    annotations."""

    involved: Mapping[str, Any]
    reason: str
    message: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    type: str = "Normal"


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _discovered(freight: Mapping[str, Any]) -> datetime | None:
    """Kargo's EffectiveDiscoveredAt: ``discoveredAt`` when set, else creationTimestamp."""
    return parse_time(freight.get("discoveredAt")) or parse_time(
        meta(freight).get("creationTimestamp")
    )


def verification_event(
    freight: Mapping[str, Any],
    stage: str,
    phase: str,
    *,
    message: str = "",
    actor: str = "",
    started: datetime | None = None,
    finished: datetime | None = None,
    analysis_run: str = "",
    promotion: str = "",
) -> FreightEvent:
    """The Event of a verification of ``freight`` in ``stage`` that ended in ``phase`` (Kargo's
    VerificationInfo phase: Successful, Failed, Error, Aborted, Inconclusive)."""
    reason = _EVENT_TYPES.get(phase, UNKNOWN)
    if reason == "FreightVerificationSucceeded":
        message = "Freight verification succeeded"
    project = namespace_of(freight) or "default"
    notes = {
        "project": project,
        "actor": actor or CONTROLLER_ACTOR,
        "freight-name": name_of(freight),
        "stage-name": stage,
    }
    created = _discovered(freight)
    notes["freight-create-time"] = _stamp(created) if created else "0001-01-01T00:00:00Z"
    origin = freight.get("origin") or {}
    if origin.get("name"):
        notes["freight-warehouse-name"] = str(origin["name"])
    if freight.get("alias"):
        notes["freight-alias"] = str(freight["alias"])
    for key in ("commits", "images", "charts", "artifacts"):
        if freight.get(key):
            notes[f"freight-{key}"] = json.dumps(freight[key], separators=(",", ":"))
    if started is not None:
        notes["verification-start-time"] = _stamp(started)
    if finished is not None:
        notes["verification-finish-time"] = _stamp(finished)
    if analysis_run:
        notes["analysis-run-name"] = analysis_run
    if promotion:
        notes["promotion-name"] = promotion
    involved = {
        "apiVersion": freight.get("apiVersion") or "longshoreman.dev/v1alpha1",
        "kind": "Freight",
        "metadata": {
            "name": name_of(freight),
            "namespace": project,
            **({"uid": meta(freight)["uid"]} if meta(freight).get("uid") else {}),
        },
    }
    return FreightEvent(
        involved, reason, message, {PREFIX + key: value for key, value in notes.items()}
    )
