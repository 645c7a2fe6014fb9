"""The bad manifests of issue 35, built once: what admission must refuse, all problems at once,
wherever it runs (the embedded cluster, the HTTP webhook, a real kube-apiserver's webhooks)."""

from __future__ import annotations

from typing import Any

from tests.support import objects

STEPS = "spec.promotionTemplate.spec.steps"


def broken_stage(namespace: str, warehouse: str) -> dict[str, Any]:
    """An unknown step kind, a missing required field, a broken expression, a task that does
    not exist, and one that does (fine)."""
    return objects.stage(
        "broken",
        namespace=namespace,
        warehouse=warehouse,
        steps=[
            {"uses": "git-clonee"},
            {"uses": "git-commit", "config": {"path": "./out"}},
            {"uses": "compose-output", "config": {"x": "${{ vars.a + }}"}},
            {"task": {"name": "no-such-task"}},
            {"task": {"name": "update-image-and-push"}},
        ],
    )


# The field each of broken_stage's problems names, in order.
BROKEN_STAGE_FIELDS = [
    f"{STEPS}[0].uses",
    f"{STEPS}[1].config.message",
    f"{STEPS}[2].config.x",
    f"{STEPS}[3].task.name",
]


def broken_warehouse(namespace: str) -> dict[str, Any]:
    """An image repoURL with a scheme, and one with upper case and a space."""
    return objects.warehouse(
        "broken",
        namespace=namespace,
        subscriptions=[
            {"image": {"repoURL": "https://ghcr.io/acme/app"}},
            {"image": {"repoURL": "ghcr.io/Acme/My App"}},
        ],
    )


def broken_project_config(namespace: str) -> dict[str, Any]:
    """A window with a bad time zone, a bad rrule and a bad BYDAY."""
    return objects.project_config(
        namespace,
        windows=[
            {
                "name": "freeze",
                "kind": "Deny",
                "dtstart": "TZID=Mars/Olympus:20260102T180000",
                "dtend": "20260105T090000Z",
                "rrule": "FREQ=SOMETIMES;BYDAY=XX",
            }
        ],
    )


# What each of broken_project_config's window problems says.
BROKEN_WINDOW_PROBLEMS = ("unknown time zone 'Mars/Olympus'", "'FREQ': SOMETIMES", "'BYDAY': XX")
