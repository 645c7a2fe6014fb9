"""Freezes: a person stops the line from chat, recorded on the cluster, enforced as a Deny window.

Kargo's answer to "stop all deploys during this incident" is a ``Deny`` promotion window in the
ProjectConfig, written with kubectl. ``/freeze STAGE|PROJECT [for DURATION | until TIME]
[reason]`` writes the same thing where chat can write it, and ``/unfreeze`` takes it back:

- a Stage's freeze is its ``longshoreman.dev/freeze`` annotation; a whole project's is the same
  annotation on the project's ProjectConfig (every Stage of the project, also those made later).
  Its value is JSON: who froze (``by``), why (``reason``), since when (``since``) and until when
  (``until``, absent: until someone unfreezes). An annotation, not a ``promotionWindows`` entry:
  the spec belongs to whoever applies the ProjectConfig (often a GitOps tool that would undo
  chat's edit), and an annotation says who and why, which a window cannot;
- a freeze in force *is* a window: :func:`freeze_window` turns it into a
  :class:`~promoter.control.windows.Window` of kind ``Deny`` from ``since`` to ``until``, which
  :func:`promoter.control.policies.schedule_for` adds to the Stage's schedule. So everything a
  closed window does, a freeze does, on every path: the Stage's queue is held (auto-promotion
  and rollback included), chat and the pages refuse ``/promote`` with the reason and the end,
  the Stage's ``status.promotionWindowStatus`` says so, and the controller requeues the Stage at
  the end, when the held Promotions start by themselves;
- who may freeze and unfreeze: the Stage's promoters (for a project, the promoters of each of its
  Stages), unless the ProjectConfig's ``longshoreman.dev/freezers`` annotation names a list; then
  only those (GitHub logins or ``org/team``, Slack user or user-group IDs, in one list).

Durations read ``90m``, ``2h``, ``1h30m``, ``3d``, ``1w``; times read ISO 8601
(``2026-12-04T09:00Z``, ``2026-12-04T09:00+01:00``; without a zone, UTC) or ``HH:MM`` (UTC, the
next such time). Nothing here does I/O or reads the clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from promoter.control.windows import DENY, Window
from promoter.resources import annotations as ann

__all__ = [
    "FREEZE_WINDOW",
    "Freeze",
    "FreezeError",
    "freeze_of",
    "freeze_stand_in",
    "freeze_window",
    "parse_duration",
    "parse_until",
]

FREEZE_WINDOW = "freeze"  # the window's name, as status and refusals show it
# A freeze without an end still needs a window length: longer than the windows' look-ahead
# (windows.HORIZON), so no reopening is ever announced for it.
OPEN_ENDED = timedelta(days=3650)
MAX_REASON = 200

_DURATION = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


class FreezeError(ValueError):
    """A duration or time that does not parse, said as users read it."""


@dataclass(frozen=True, slots=True)
class Freeze:
    """One freeze: who, why, since when, until when (None: until someone unfreezes)."""

    by: str
    reason: str
    since: datetime
    until: datetime | None = None

    def to_annotation(self) -> str:
        value: dict[str, str] = {"by": self.by, "since": _stamp(self.since)}
        if self.reason:
            value["reason"] = self.reason
        if self.until is not None:
            value["until"] = _stamp(self.until)
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    def active(self, now: datetime) -> bool:
        return self.until is None or now < self.until

    def note(self) -> str:
        """``frozen by github:alice: incident 4711``: what status and refusals add."""
        return f"frozen by {self.by}" + (f": {self.reason}" if self.reason else "")


def freeze_of(obj: Mapping[str, Any] | None) -> Freeze | None:
    """The freeze recorded on a Stage or ProjectConfig; None when there is none or it does not
    read (a person may have edited it: then it is gone, as an unreadable annotation says
    nothing about when it ends)."""
    value = ann.read_json(obj or {}, ann.FREEZE)
    if not value:
        return None
    try:
        since = _parse_stamp(str(value["since"]))
        until = _parse_stamp(str(value["until"])) if value.get("until") else None
    except (KeyError, ValueError):
        return None
    return Freeze(str(value.get("by") or "someone"), str(value.get("reason") or ""), since, until)


def freeze_window(freeze: Freeze, scope: str) -> Window:
    """The freeze as the Deny window it is; ``scope`` says whose it is (Stage or project)."""
    end = freeze.until if freeze.until is not None else freeze.since + OPEN_ENDED
    length = max(end - freeze.since, timedelta(seconds=1))
    note = freeze.note() + (f" (project {scope})" if scope else "")
    return Window(FREEZE_WINDOW, DENY, freeze.since.astimezone(UTC), length, "UTC", None, note=note)


def freeze_stand_in(
    name: str, namespace: str, freezers: str, keys: tuple[str, ...]
) -> dict[str, Any]:
    """A Stage-shaped object whose promoter lists are the project's freezers: each front end
    asks its usual "may this person act on this Stage" of it, so a freezer list means the same
    (users, teams, user groups) as a promoter list."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": dict.fromkeys(keys, freezers),
        }
    }


def parse_duration(text: str) -> timedelta:
    """``2h``, ``90m``, ``1h30m``, ``3d``, ``1w``."""
    found = _DURATION.match(text.strip().lower())
    if not text.strip() or found is None or not any(found.groups()):
        raise FreezeError(f"{text!r} is not a duration such as 30m, 2h, 1h30m or 3d")
    weeks, days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    length = timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    if length <= timedelta(0):
        raise FreezeError(f"{text!r} is not a duration longer than zero")
    return length


def parse_until(text: str, now: datetime) -> datetime:
    """An ISO 8601 time (UTC without a zone) or ``HH:MM`` UTC, the next one after ``now``."""
    clock = _CLOCK.match(text.strip())
    if clock is not None:
        at = now.astimezone(UTC).replace(
            hour=int(clock[1]), minute=int(clock[2]), second=0, microsecond=0
        )
        return at if at > now else at + timedelta(days=1)
    try:
        at = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise FreezeError(
            f"{text!r} is not a time such as 18:00 (UTC) or 2026-12-04T09:00Z"
        ) from None
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if at <= now:
        raise FreezeError(f"{text!r} has passed")
    return at.astimezone(UTC)


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_stamp(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
