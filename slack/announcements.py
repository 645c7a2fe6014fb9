"""Which Slack channels hear "New Freight X is available to STAGE", decided purely.

:mod:`slack.app` asks on every Freight change (on the leader), posts, and records the Stages it
told on the Freight, so a restart or a new leader tells nobody twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from promoter.resources import annotations as ann
from promoter.resources.model import name_of
from promoter.resources.stages import available_to, freight_created


def _current_freight_names(stage: Mapping[str, Any]) -> set[str]:
    history = (stage.get("status") or {}).get("freightHistory") or []
    items = (history[0].get("items") or {}) if history and isinstance(history[0], Mapping) else {}
    return {str(ref.get("name")) for ref in items.values() if isinstance(ref, Mapping)}


def stages_to_announce(
    freight: Mapping[str, Any],
    stages: Iterable[Mapping[str, Any]],
    freights: Sequence[Mapping[str, Any]],
    now: datetime | None,
    *,
    project_channel: bool = False,
) -> list[Mapping[str, Any]]:
    """The Stages whose Slack channel should hear "New Freight X is available to STAGE".

    Those with a channel (``longshoreman.dev/slack-channel``) that do not auto-promote (an
    auto-promoting Stage just takes it, and its Promotion has its own message), to which the
    Freight is available now, that do not hold it already, and that were not told before
    (the Freight's ``longshoreman.dev/slack-announced`` names them, so a restart or a new
    leader tells nobody twice). Only the newest Freight available to a Stage is news: older
    Freight seen again (a restart lists every Freight) is not, and neither is Freight older
    than what the Stage holds. With ``project_channel`` (the project's namespace names
    Slack channels), a Stage without a channel of its own is told in the project's.
    """
    told = ann.announced_to(freight)
    newness = (freight_created(freight), name_of(freight))
    out = []
    for stage in stages:
        name = name_of(stage)
        has_channel = project_channel or ann.annotations_of(stage).get(ann.SLACK_CHANNEL)
        if not has_channel or ann.auto_promotes(stage):
            continue
        if name in told or name_of(freight) in _current_freight_names(stage):
            continue
        if not available_to(stage, freight, now):
            continue
        current = _current_freight_names(stage)
        if any(
            (freight_created(f), name_of(f)) > newness
            and (name_of(f) in current or available_to(stage, f, now))
            for f in freights
        ):
            continue
        out.append(stage)
    return out
