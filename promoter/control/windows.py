"""Promotion windows: when a Stage's schedule lets Promotions start, decided purely.

Kargo's ``PromotionWindow`` (``api/v1alpha1/promotion_window_types.go``) is an ``Allow`` or a
``Deny`` window: an RFC 5545 ``rrule`` (optional) with an iCal ``dtstart``/``dtend``, each
optionally prefixed with its time zone (``TZID=Europe/Berlin:20260105T090000``). Without
``rrule`` the window is the one interval ``[dtstart, dtend)``; with it, every occurrence of the
rule starts a window as long as ``dtend - dtstart``. Kargo's rule for the union of the windows
matching a Stage: the schedule is open when no matching Deny window is active and, if any Allow
windows match, at least one of them is active. Kargo OSS carries the API without enforcing it;
Longshoreman enforces it.

How the times are read, and why:

- Recurrence is python-dateutil's ``rrulestr`` (a well-kept RFC 5545 implementation), anchored
  at ``dtstart`` as an aware ``datetime`` in a :mod:`zoneinfo` zone. dateutil steps occurrences
  in wall-clock time of that zone, so "every Friday 18:00 Europe/Berlin" stays 18:00 across
  daylight-saving changes, which is what people mean by it.
- Durations are wall-clock too: a window from Friday 18:00 to Monday 09:00 ends Monday 09:00
  local time, also on the weekend the clocks change (one hour shorter or longer in real time).
- A local time that does not exist (the hour skipped in spring) is read with ``fold=0``, as
  Python does: 02:30 on that day is 03:30 summer time. A local time that happens twice (the
  hour repeated in autumn) is its first occurrence.
- ``dtstart`` without a zone and without a trailing ``Z`` is read as UTC (a "floating" time has
  no meaning on a server). ``UNTIL`` inside a rule with a zone must be UTC (``...Z``), as
  RFC 5545 and dateutil require.
- A window that does not parse fails *closed*: it keeps the Stages it matches frozen and its
  error is the reason, because a misspelt freeze must not let a Friday deploy through.

This module imports only the standard library and dateutil; the selectors that decide which
windows match a Stage are in :mod:`promoter.control.policies`.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

__all__ = [
    "ALLOW",
    "DENY",
    "Schedule",
    "Window",
    "WindowState",
    "format_when",
    "parse_ical_time",
    "parse_window",
]

ALLOW = "Allow"
DENY = "Deny"

# How far ahead the next opening or closing is looked for, and how many occurrences of one
# window at most: a rule that repeats every minute must not make a reconcile walk a year of it.
HORIZON = timedelta(days=400)
MAX_OCCURRENCES = 5000

_ICAL_TIME = re.compile(r"^(?:TZID=(?P<tz>[^:]+):)?(?P<date>\d{8})(?:T(?P<time>\d{6}))?(?P<z>Z)?$")


class WindowError(ValueError):
    """A window whose times or rule do not parse."""


def parse_ical_time(value: str) -> tuple[datetime, str]:
    """An iCal date-time (``[TZID=<zone>:]YYYYMMDD[THHMMSS][Z]``) as an aware datetime and the
    name of its zone (``UTC`` when it has none)."""
    text = value.strip()
    if text.upper().startswith("DTSTART:") or text.upper().startswith("DTEND:"):
        text = text.split(":", 1)[1]
    for prefix in ("DTSTART;", "DTEND;"):
        if text.upper().startswith(prefix):
            text = text[len(prefix) :]
    found = _ICAL_TIME.match(text)
    if found is None:
        raise WindowError(
            f"{value!r} is not an iCal date-time such as 20260105T090000Z or "
            "TZID=Europe/Berlin:20260105T090000"
        )
    zone_name = found["tz"] or "UTC"
    if found["tz"] and found["z"]:
        raise WindowError(f"{value!r} names a zone and ends in Z: use one of them")
    try:
        zone: tzinfo = UTC if zone_name == "UTC" else ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowError(f"unknown time zone {zone_name!r} in {value!r}") from None
    stamp = found["date"] + (found["time"] or "000000")
    try:
        naive = datetime.strptime(stamp, "%Y%m%d%H%M%S")
    except ValueError:
        raise WindowError(f"{value!r} is not a valid date-time") from None
    return naive.replace(tzinfo=zone), zone_name


@dataclass(frozen=True, slots=True)
class Window:
    """One parsed window. ``error`` set: it did not parse and keeps its Stages closed."""

    name: str
    kind: str  # ALLOW | DENY
    start: datetime | None = None  # aware, in its zone
    duration: timedelta = timedelta(0)  # wall-clock length of each occurrence
    zone: str = "UTC"
    rule: rrule | None = None
    error: str = ""
    # Said instead of "Deny window `x` is in effect": a freeze's who and why (freezes.py).
    note: str = ""

    def occurrences(self, after: datetime) -> Iterator[tuple[datetime, datetime]]:
        """(start, end) of the occurrences that end after ``after``, in order, in UTC."""
        if self.start is None:
            return
        if self.rule is None:
            end = self.start + self.duration
            if end > after:
                yield self.start.astimezone(UTC), end.astimezone(UTC)
            return
        # An occurrence ending after `after` starts after `after - duration`; a day of slack
        # covers the hour a daylight-saving change adds to or takes from wall-clock lengths.
        since = after - self.duration - timedelta(days=1)
        for start in itertools.islice(self.rule.xafter(since, inc=True), MAX_OCCURRENCES):
            end = start + self.duration
            if end > after:
                yield start.astimezone(UTC), end.astimezone(UTC)

    def active(self, at: datetime) -> bool:
        """Whether an occurrence covers ``at`` (start included, end excluded)."""
        if self.start is None:
            return False
        if self.rule is None:
            return self.start <= at < self.start + self.duration
        # All occurrences are equally long, so the latest start before `at` ends the latest.
        latest = self.rule.before(at, inc=True)
        return latest is not None and at < latest + self.duration


def _rrule_problems(text: str, anchor: datetime) -> list[str]:
    """Each part of a rule that does not parse on its own (a bad FREQ and a bad BYDAY are two
    problems, named together); empty when only the parts' combination fails."""
    problems = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        alone = part if part.upper().startswith("FREQ=") else f"FREQ=DAILY;{part}"
        try:
            rrulestr(alone, dtstart=anchor)
        except (ValueError, TypeError) as e:
            problems.append(f"rrule {part!r}: {e}")
    return problems


def parse_window(spec: Mapping[str, Any]) -> Window:
    """A window from its Kargo shape. Never raises: what does not parse is the ``error``,
    every problem of the window in it (a bad time zone and a bad rule are fixed in one go)."""
    name = str(spec.get("name") or "")
    kind = str(spec.get("kind") or "")
    errors: list[str] = []
    if kind not in (ALLOW, DENY):
        errors.append(f"kind must be Allow or Deny, not {kind!r}")

    def read_time(key: str, missing: str) -> tuple[datetime | None, str]:
        if not spec.get(key):
            errors.append(missing)
            return None, "UTC"
        try:
            return parse_ical_time(str(spec[key]))
        except WindowError as e:
            errors.append(str(e))
            return None, "UTC"

    start, zone = read_time("dtstart", "dtstart is required")
    end, _ = read_time("dtend", "dtend is required (dtend - dtstart is each occurrence's length)")
    duration = timedelta(0)
    if start is not None and end is not None:
        if end.tzinfo is start.tzinfo or end.utcoffset() == start.utcoffset():
            duration = end.replace(tzinfo=None) - start.replace(tzinfo=None)
        else:
            duration = end - start
        if duration <= timedelta(0):
            errors.append("dtend must be after dtstart")
    rule: rrule | None = None
    text = str(spec.get("rrule") or "").strip()
    if text:
        anchor = start or datetime(2000, 1, 1, tzinfo=UTC)
        try:
            parsed = rrulestr(text, dtstart=anchor, cache=True)
        except (ValueError, TypeError) as e:
            errors.extend(_rrule_problems(text, anchor) or [f"rrule {text!r}: {e}"])
        else:
            if isinstance(parsed, rrule):
                rule = parsed
            else:
                errors.append(f"rrule {text!r} must be a single RRULE")
    if errors:
        return Window(name, kind if kind in (ALLOW, DENY) else DENY, error="; ".join(errors))
    return Window(name, kind, start, duration, zone, rule)


# ---- the schedule ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WindowState:
    """Kargo's ``PromotionWindowStatus`` for one Stage at one moment, plus who is responsible.

    ``window`` names the window that keeps the Stage closed (the first active Deny, else the
    Allow window that opens next), ``zone`` is that window's time zone, in which people are
    told when it opens; ``next_close_window`` and ``next_close_zone`` the same for the next
    closing.
    """

    closed: bool
    reason: str = ""
    window: str = ""
    zone: str = "UTC"
    next_open: datetime | None = None
    next_close: datetime | None = None
    next_close_reason: str = ""
    next_close_window: str = ""
    next_close_zone: str = "UTC"
    note: str = ""  # the closing window's own words (a freeze's who and why)

    def to_status(self) -> dict[str, Any]:
        """The Stage's ``status.promotionWindowStatus`` in Kargo's field names."""
        out: dict[str, Any] = {"closed": self.closed}
        if self.closed and self.reason:
            out["reason"] = self.reason
        if self.next_open is not None:
            out["nextOpen"] = _stamp(self.next_open)
        if not self.closed and self.next_close is not None:
            out["nextClose"] = _stamp(self.next_close)
            out["nextCloseReason"] = self.next_close_reason
        return out

    def frozen_text(self, now: datetime) -> str:
        """``frozen until Mon 09:00 Europe/Berlin (window `weekend-freeze`)``; "" while open."""
        if not self.closed:
            return ""
        where = f" (window `{self.window}`)" if self.window else ""
        if self.note:
            where = f" ({self.note})"
            if self.next_open is None:
                return f"frozen until unfrozen{where}"
        if self.next_open is None:
            return f"frozen with no known end{where}: {self.reason}"
        return f"frozen until {format_when(self.next_open, self.zone, now)}{where}"

    def frozen_message(self, stage: str, now: datetime) -> str:
        """What chat says when a Promotion to ``stage`` cannot start now."""
        return f"{stage} is {self.frozen_text(now)}"

    def held_message(self, now: datetime) -> str:
        """What a held Promotion's status says while it waits."""
        where = f"promotion window `{self.window}`" if self.window else "the promotion windows"
        if self.note:
            where = f"the freeze ({self.note})"
            if self.next_open is None:
                return f"waiting for {where} to be lifted with /unfreeze"
        if self.next_open is None:
            return f"waiting for {where}: {self.reason}; no reopening is known"
        return f"waiting for {where}: opens {format_when(self.next_open, self.zone, now)}"


OPEN = WindowState(closed=False)


@dataclass(frozen=True, slots=True)
class Schedule:
    """The union of the windows that match one Stage (ProjectConfig's and ClusterConfig's)."""

    windows: tuple[Window, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.windows)

    def _closed_at(self, at: datetime) -> tuple[bool, str, Window | None]:
        broken = next((w for w in self.windows if w.error), None)
        if broken is not None:
            return True, f"window `{broken.name}` is invalid: {broken.error}", broken
        denied = next((w for w in self.windows if w.kind == DENY and w.active(at)), None)
        if denied is not None:
            return True, denied.note or f"Deny window `{denied.name}` is in effect", denied
        allows = [w for w in self.windows if w.kind == ALLOW]
        if allows and not any(w.active(at) for w in allows):
            names = ", ".join(f"`{w.name}`" for w in allows)
            return True, f"outside the Allow windows ({names})", None
        return False, "", None

    def state(self, now: datetime) -> WindowState:
        """Whether the schedule is closed at ``now``, why, and when that next changes."""
        if not self.windows:
            return OPEN
        now = now.astimezone(UTC)
        closed, reason, responsible = self._closed_at(now)
        if closed and responsible is not None and responsible.error:
            return WindowState(True, reason, responsible.name, responsible.zone)
        change, by = self._next_change(now, closed)
        if closed:
            shown = responsible or by
            return WindowState(
                True,
                reason,
                shown.name if shown else "",
                shown.zone if shown else "UTC",
                next_open=change,
                note=responsible.note if responsible else "",
            )
        if change is None:
            return WindowState(False)
        _, close_reason, closer = self._closed_at(change)
        shown = closer or by
        return WindowState(
            False,
            next_close=change,
            next_close_reason=close_reason,
            next_close_window=shown.name if shown else "",
            next_close_zone=shown.zone if shown else "UTC",
        )

    def _next_change(self, now: datetime, closed: bool) -> tuple[datetime | None, Window | None]:
        """The first boundary after ``now`` where closed-ness flips, and the window whose
        boundary it is (the one that opens, for an Allow-closed schedule)."""
        horizon = now + HORIZON
        for when, window in _boundaries(self.windows, now):
            if when > horizon:
                break
            if self._closed_at(when)[0] != closed:
                return when, window
        return None, None


def _boundaries(windows: Iterable[Window], after: datetime) -> Iterator[tuple[datetime, Window]]:
    """Every start and end of the windows' occurrences after ``after``, in time order."""

    def edges(index: int, window: Window) -> Iterator[tuple[datetime, int, Window]]:
        pending: list[datetime] = []  # ends not yet passed, kept in order
        for start, end in window.occurrences(after):
            while pending and pending[0] <= start:
                yield heapq.heappop(pending), index, window
            if start > after:
                yield start, index, window
            heapq.heappush(pending, end)
        while pending:
            yield heapq.heappop(pending), index, window

    streams = [edges(i, w) for i, w in enumerate(windows) if not w.error]
    for when, _, window in heapq.merge(*streams, key=lambda e: (e[0], e[1])):
        yield when, window


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_when(when: datetime, zone: str, now: datetime) -> str:
    """A time as people read it in the window's zone: ``Mon 09:00 Europe/Berlin`` within the
    coming week, with the date beyond it."""
    local = when.astimezone(UTC if zone == "UTC" else ZoneInfo(zone))
    if when - now < timedelta(days=6):
        return f"{local:%a %H:%M} {zone}"
    return f"{local:%a %d %b %Y %H:%M} {zone}"


def schedule(windows: Sequence[Window]) -> Schedule:
    return Schedule(tuple(windows))
