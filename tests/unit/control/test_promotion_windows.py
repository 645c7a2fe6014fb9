"""Promotion windows, decided purely: Allow/Deny unions, rrule recurrence, time zones, DST.

Each row is a schedule (Kargo's PromotionWindow shapes), a moment, and what the Stage's
``status.promotionWindowStatus`` must say then. Times in the rows are UTC; the windows are
written in the zones people use.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.control.windows import Schedule, parse_window


def utc(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M").replace(tzinfo=UTC)


# Friday 18:00 to Monday 09:00, Berlin time, every week (2026-01-02 is a Friday).
WEEKEND_FREEZE = {
    "name": "weekend-freeze",
    "kind": "Deny",
    "rrule": "FREQ=WEEKLY;BYDAY=FR",
    "dtstart": "TZID=Europe/Berlin:20260102T180000",
    "dtend": "TZID=Europe/Berlin:20260105T090000",
}
# Weekdays 09:00-17:00, New York time (2026-01-05 is a Monday).
BUSINESS_HOURS = {
    "name": "business-hours",
    "kind": "Allow",
    "rrule": "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
    "dtstart": "TZID=America/New_York:20260105T090000",
    "dtend": "TZID=America/New_York:20260105T170000",
}
RELEASE_FREEZE = {  # one-shot, in UTC
    "name": "year-end",
    "kind": "Deny",
    "dtstart": "20261220T000000Z",
    "dtend": "20270104T000000Z",
}
# 01:00-04:00 Berlin time every day: three hours on the wall, two on the night of the spring
# change (02:00 -> 03:00) and four on the autumn one (03:00 -> 02:00).
NIGHTLY = {
    "name": "nightly-maintenance",
    "kind": "Deny",
    "rrule": "FREQ=DAILY",
    "dtstart": "TZID=Europe/Berlin:20260101T010000",
    "dtend": "TZID=Europe/Berlin:20260101T040000",
}


ROWS: list[tuple[str, list[dict[str, Any]], str, dict[str, Any]]] = [
    (
        "no windows: always open, with no boundary to announce",
        [],
        "2026-01-10T12:00",
        {"closed": False},
    ),
    (
        "a weekend freeze on Saturday: closed until Monday 09:00 Berlin (08:00 UTC in winter)",
        [WEEKEND_FREEZE],
        "2026-01-10T12:00",
        {
            "closed": True,
            "reason": "Deny window `weekend-freeze` is in effect",
            "nextOpen": "2026-01-12T08:00:00Z",
        },
    ),
    (
        "a weekend freeze on Thursday: open, closing Friday 18:00 Berlin",
        [WEEKEND_FREEZE],
        "2026-01-08T12:00",
        {
            "closed": False,
            "nextClose": "2026-01-09T17:00:00Z",
            "nextCloseReason": "Deny window `weekend-freeze` is in effect",
        },
    ),
    (
        "the freeze starts at dtstart's minute exactly (start included)",
        [WEEKEND_FREEZE],
        "2026-01-09T17:00",
        {
            "closed": True,
            "reason": "Deny window `weekend-freeze` is in effect",
            "nextOpen": "2026-01-12T08:00:00Z",
        },
    ),
    (
        "and ends at dtend's minute exactly (end excluded)",
        [WEEKEND_FREEZE],
        "2026-01-12T08:00",
        {
            "closed": False,
            "nextClose": "2026-01-16T17:00:00Z",
            "nextCloseReason": "Deny window `weekend-freeze` is in effect",
        },
    ),
    (
        "before the first occurrence the rule does not apply yet",
        [WEEKEND_FREEZE],
        "2025-12-27T12:00",
        {
            "closed": False,
            "nextClose": "2026-01-02T17:00:00Z",
            "nextCloseReason": "Deny window `weekend-freeze` is in effect",
        },
    ),
    (
        "DST starts on Sunday 29 March: Friday 18:00 is 17:00 UTC, Monday 09:00 is 07:00 UTC",
        [WEEKEND_FREEZE],
        "2026-03-28T12:00",
        {
            "closed": True,
            "reason": "Deny window `weekend-freeze` is in effect",
            "nextOpen": "2026-03-30T07:00:00Z",
        },
    ),
    (
        "DST ends on Sunday 25 October: Friday 18:00 is 16:00 UTC, Monday 09:00 is 08:00 UTC",
        [WEEKEND_FREEZE],
        "2026-10-23T15:59",
        {
            "closed": False,
            "nextClose": "2026-10-23T16:00:00Z",
            "nextCloseReason": "Deny window `weekend-freeze` is in effect",
        },
    ),
    (
        "after the autumn change the freeze still ends Monday 09:00 local",
        [WEEKEND_FREEZE],
        "2026-10-25T12:00",
        {
            "closed": True,
            "reason": "Deny window `weekend-freeze` is in effect",
            "nextOpen": "2026-10-26T08:00:00Z",
        },
    ),
    (
        "business hours on a Monday morning in New York: open until 17:00 EST (22:00 UTC)",
        [BUSINESS_HOURS],
        "2026-01-05T15:00",
        {
            "closed": False,
            "nextClose": "2026-01-05T22:00:00Z",
            "nextCloseReason": "outside the Allow windows (`business-hours`)",
        },
    ),
    (
        "an Allow window opens only its hours: Monday evening is closed until Tuesday 09:00",
        [BUSINESS_HOURS],
        "2026-01-05T23:00",
        {
            "closed": True,
            "reason": "outside the Allow windows (`business-hours`)",
            "nextOpen": "2026-01-06T14:00:00Z",
        },
    ),
    (
        "an Allow window over the US spring change: Monday 9 March 09:00 EDT is 13:00 UTC",
        [BUSINESS_HOURS],
        "2026-03-07T12:00",
        {
            "closed": True,
            "reason": "outside the Allow windows (`business-hours`)",
            "nextOpen": "2026-03-09T13:00:00Z",
        },
    ),
    (
        "a Deny window beats an active Allow window",
        [BUSINESS_HOURS, {**RELEASE_FREEZE, "dtstart": "20260105T000000Z"}],
        "2026-01-05T15:00",
        {
            "closed": True,
            "reason": "Deny window `year-end` is in effect",
            "nextOpen": "2027-01-04T14:00:00Z",
        },
    ),
    (
        "a one-shot Deny window, while it lasts",
        [RELEASE_FREEZE],
        "2026-12-24T12:00",
        {
            "closed": True,
            "reason": "Deny window `year-end` is in effect",
            "nextOpen": "2027-01-04T00:00:00Z",
        },
    ),
    (
        "a one-shot Deny window after it has passed: open for good",
        [RELEASE_FREEZE],
        "2027-02-01T00:00",
        {"closed": False},
    ),
    (
        "a one-shot Allow window that has passed: frozen with no known reopening",
        [{**RELEASE_FREEZE, "name": "launch", "kind": "Allow"}],
        "2027-02-01T00:00",
        {"closed": True, "reason": "outside the Allow windows (`launch`)"},
    ),
    (
        "two Allow windows: open while either is (union)",
        [
            BUSINESS_HOURS,
            {
                "name": "saturday-morning",
                "kind": "Allow",
                "rrule": "FREQ=WEEKLY;BYDAY=SA",
                "dtstart": "TZID=UTC:20260103T080000",
                "dtend": "TZID=UTC:20260103T100000",
            },
        ],
        "2026-01-10T09:00",
        {
            "closed": False,
            "nextClose": "2026-01-10T10:00:00Z",
            "nextCloseReason": "outside the Allow windows (`business-hours`, `saturday-morning`)",
        },
    ),
    (
        "nightly 01:00-04:00 Berlin on the spring-change night: 00:00 to 02:00 UTC",
        [NIGHTLY],
        "2026-03-29T01:59",
        {
            "closed": True,
            "reason": "Deny window `nightly-maintenance` is in effect",
            "nextOpen": "2026-03-29T02:00:00Z",
        },
    ),
    (
        "nightly 01:00-04:00 Berlin on the autumn-change night: 23:00 to 03:00 UTC",
        [NIGHTLY],
        "2026-10-25T02:30",
        {
            "closed": True,
            "reason": "Deny window `nightly-maintenance` is in effect",
            "nextOpen": "2026-10-25T03:00:00Z",
        },
    ),
    (
        "a rule with COUNT ends: after the last occurrence the Stage stays open",
        [{**WEEKEND_FREEZE, "rrule": "FREQ=WEEKLY;BYDAY=FR;COUNT=2"}],
        "2026-01-14T12:00",
        {"closed": False},
    ),
    (
        "overlapping Deny windows: open only when the last of them ends",
        [
            {**RELEASE_FREEZE, "name": "a", "dtend": "20261225T000000Z"},
            {**RELEASE_FREEZE, "name": "b", "dtstart": "20261222T000000Z"},
        ],
        "2026-12-21T00:00",
        {
            "closed": True,
            "reason": "Deny window `a` is in effect",
            "nextOpen": "2027-01-04T00:00:00Z",
        },
    ),
]


@pytest.mark.parametrize(
    ("windows", "at", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_the_schedule_says_what_kargo_s_promotion_window_status_says(
    windows: list[dict[str, Any]], at: str, expected: dict[str, Any]
) -> None:
    schedule = Schedule(tuple(parse_window(w) for w in windows))
    assert schedule.state(utc(at)).to_status() == expected


BROKEN: list[tuple[dict[str, Any], str]] = [
    ({**WEEKEND_FREEZE, "rrule": "FREQ=FORTNIGHTLY"}, "rrule 'FREQ=FORTNIGHTLY'"),
    ({**WEEKEND_FREEZE, "dtstart": "TZID=Mars/Olympus:20260102T180000"}, "unknown time zone"),
    ({**WEEKEND_FREEZE, "dtend": "TZID=Europe/Berlin:20260101T090000"}, "after dtstart"),
    ({**WEEKEND_FREEZE, "dtstart": "2026-01-02 18:00"}, "not an iCal date-time"),
    ({**WEEKEND_FREEZE, "rrule": "FREQ=WEEKLY;UNTIL=20260301T000000"}, "UNTIL"),
    ({**WEEKEND_FREEZE, "dtend": ""}, "dtend is required"),
    ({**WEEKEND_FREEZE, "kind": "Maybe"}, "kind must be Allow or Deny"),
]


@pytest.mark.parametrize(("window", "says"), BROKEN, ids=[b[1] for b in BROKEN])
def test_a_window_that_does_not_parse_keeps_its_stages_frozen_and_says_why(
    window: dict[str, Any], says: str
) -> None:
    state = Schedule((parse_window(window),)).state(utc("2026-01-07T12:00"))
    status = state.to_status()
    assert status["closed"] is True
    assert "nextOpen" not in status
    assert status["reason"].startswith(f"window `{window['name']}` is invalid: ")
    assert says in status["reason"]


def test_chat_is_told_when_the_freeze_ends_in_the_window_s_own_zone() -> None:
    now = utc("2026-01-10T12:00")
    state = Schedule((parse_window(WEEKEND_FREEZE),)).state(now)
    assert state.frozen_message("prod", now) == (
        "prod is frozen until Mon 09:00 Europe/Berlin (window `weekend-freeze`)"
    )
    assert state.held_message(now) == (
        "waiting for promotion window `weekend-freeze`: opens Mon 09:00 Europe/Berlin"
    )


def test_an_allow_window_names_the_window_that_opens_next() -> None:
    now = utc("2026-01-10T12:00")  # Saturday
    state = Schedule((parse_window(BUSINESS_HOURS),)).state(now)
    assert state.frozen_message("prod", now) == (
        "prod is frozen until Mon 09:00 America/New_York (window `business-hours`)"
    )


def test_a_reopening_more_than_a_week_away_is_given_with_its_date() -> None:
    now = utc("2026-12-21T12:00")
    state = Schedule((parse_window(RELEASE_FREEZE),)).state(now)
    assert state.frozen_message("prod", now) == (
        "prod is frozen until Mon 04 Jan 2027 00:00 UTC (window `year-end`)"
    )


def test_a_rule_that_repeats_every_minute_is_evaluated_without_walking_its_history() -> None:
    minutely = {
        "name": "flicker",
        "kind": "Deny",
        "rrule": "FREQ=MINUTELY;INTERVAL=2",
        "dtstart": "20260101T000000Z",
        "dtend": "20260101T000100Z",
    }
    state = Schedule((parse_window(minutely),)).state(utc("2026-01-01T01:00"))
    assert state.to_status() == {
        "closed": True,
        "reason": "Deny window `flicker` is in effect",
        "nextOpen": "2026-01-01T01:01:00Z",
    }
