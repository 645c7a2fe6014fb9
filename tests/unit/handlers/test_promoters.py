"""Who may act on a Stage from GitHub (pure, table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from handlers.promoters import github_may_act
from tests.support import objects


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
