"""Who may act on a Stage from GitHub, decided purely.

Repository permission plus the Stage's ``longshoreman.dev/github-promoters`` (or, to approve,
``longshoreman.dev/github-approvers``) annotation; :mod:`handlers.context` looks up the
permission and the teams (I/O) and hands the answer to the planner as its ``may_act``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from promoter.chat.planner import Decision, deciding_list, listed, stage_annotation
from promoter.resources import annotations as ann
from promoter.resources.model import name_of


def github_may_act(
    stage: Mapping[str, Any],
    user: str,
    permission: str,
    user_teams: Iterable[str] = (),
    *,
    approve: bool = False,
) -> Decision:
    """A GitHub user may act on a Stage with write/maintain/admin on the repo, and — when the
    Stage lists promoters in its annotation — only if named there (user or ``org/team``).

    With ``approve`` (``/approve``), the Stage's approvers decide the same way when it lists
    them, else its promoters: whoever may promote to the Stage may approve for it, as in Kargo.
    """
    if permission not in ("write", "maintain", "admin"):
        return Decision(
            False, f"@{user} needs write access to this repository (has {permission or 'none'})"
        )
    key = deciding_list(
        stage, promoters=ann.GITHUB_PROMOTERS, approvers=ann.GITHUB_APPROVERS, approve=approve
    )
    allowed = listed(stage_annotation(stage, key))
    if not allowed:
        return Decision(True, "repository writer")
    teams = {t.lower() for t in user_teams}
    for entry in allowed:
        if entry.lower() == user.lower() or entry.lower() in teams:
            return Decision(True, f"listed in {key}")
    return Decision(False, f"@{user} is not listed in Stage {name_of(stage)}'s {key} annotation")
