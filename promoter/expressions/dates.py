"""expr-lang's dates and durations: ``now()``, ``date()``, ``duration()``, ``timezone()``.

Kargo users get Go's ``time.Time`` and ``time.Duration`` through expr-lang: ``date(s).Year()``,
``now() - date(s) > duration("24h")``, ``d.Format("2006-01-02")``. These classes carry the same
values (a time is nanoseconds since the Unix epoch plus a zone, a duration is nanoseconds) and a
whitelist of Go's methods, and they print the way Go prints them: ``string(d)`` is ``1h0m0s``,
``toJSON(t)`` is RFC 3339 with nanoseconds, ``toJSON(d)`` the number of nanoseconds.

Layouts are Go's reference-time layouts (``2006-01-02T15:04:05Z07:00``), for both ``Format`` and
``date(s, layout)``; the common elements are supported (see :data:`_CHUNKS`). ``timezone()``
reads the IANA database that ships with Python (:mod:`zoneinfo`).

``now()`` reads the time through the one clock port (:data:`promoter.clock.SYSTEM`); the
engine
shadows it with :func:`now_on` over the Promotion's clock (``Runtime.clock``), so a Promotion's
``${{ now() }}`` is the controller's time and a test can pin it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from promoter.clock import SYSTEM
from promoter.expressions.errors import ExpressionError
from promoter.expressions.regex import compile_regex, escape

_NS = 1_000_000_000
_US = 1_000
_MS = 1_000_000
_UNITS = {
    "ns": 1, "us": _US, "µs": _US, "μs": _US, "ms": _MS, "s": _NS, "m": 60 * _NS,
    "h": 3600 * _NS,
}  # fmt: skip
INT64_MAX = (1 << 63) - 1


def _fail(reason: str) -> ExpressionError:
    return ExpressionError(reason=reason)


class GoLocation:
    """A ``*time.Location`` from ``timezone("Europe/Zurich")``."""

    __slots__ = ("name", "tz")

    def __init__(self, name: str, tz: tzinfo):
        self.name, self.tz = name, tz

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoLocation) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name


class GoDuration:
    """A ``time.Duration``: a signed number of nanoseconds (int64)."""

    __slots__ = ("ns",)

    def __init__(self, ns: int):
        if not -INT64_MAX - 1 <= ns <= INT64_MAX:
            raise _fail("duration out of range")
        self.ns = ns

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoDuration) and other.ns == self.ns

    def __hash__(self) -> int:
        return hash(self.ns)

    def __str__(self) -> str:
        return format_duration(self.ns)

    def __repr__(self) -> str:
        return f"GoDuration({self})"


class GoTime:
    """A ``time.Time``: nanoseconds since the Unix epoch, shown in ``location``."""

    __slots__ = ("location", "unix_ns")

    def __init__(self, unix_ns: int, location: GoLocation):
        self.unix_ns, self.location = unix_ns, location

    def __eq__(self, other: object) -> bool:
        # expr-lang compares times with time.Time.Equal: the same instant, whatever the zone.
        return isinstance(other, GoTime) and other.unix_ns == self.unix_ns

    def __hash__(self) -> int:
        return hash(self.unix_ns)

    def __repr__(self) -> str:
        return f"GoTime({format_time(self, _DEFAULT_LAYOUT)})"

    def moment(self) -> datetime:
        """The time to the second as an aware datetime in its zone (nanoseconds apart)."""
        seconds = self.unix_ns // _NS
        try:
            return datetime.fromtimestamp(seconds, self.location.tz)
        except (OverflowError, OSError, ValueError):
            raise _fail("time out of range") from None

    @property
    def nanosecond(self) -> int:
        return self.unix_ns % _NS


UTC_LOCATION = GoLocation("UTC", UTC)


def _fixed(offset_seconds: int, name: str = "") -> GoLocation:
    if offset_seconds == 0 and name in ("", "UTC"):
        return UTC_LOCATION
    offset = timedelta(seconds=offset_seconds)
    return GoLocation(name, timezone(offset, name) if name else timezone(offset))


# --- durations --------------------------------------------------------------------------------

_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)([a-zµμ]+)")


def parse_duration(text: str) -> int:
    """Go's ``time.ParseDuration``: ``1h30m``, ``-1.5s``, ``300ms``; nanoseconds."""
    invalid = _fail(f'time: invalid duration "{text}"')
    rest, sign = text, 1
    if rest[:1] in ("-", "+"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        match = _DURATION.match(rest)
        if not match or match.group(1) in ("", "."):
            raise invalid
        number, unit = match.groups()
        scale = _UNITS.get(unit)
        if scale is None:
            raise _fail(f'time: unknown unit "{unit}" in duration "{text}"')
        whole, _, fraction = number.partition(".")
        value = int(whole or "0") * scale
        if fraction:
            value += int(fraction) * scale // 10 ** len(fraction)
        total += value
        if total > INT64_MAX + (sign < 0):
            raise invalid
        rest = rest[match.end() :]
    return sign * total


def _fraction(value: int, digits: int) -> str:
    text = f"{value:0{digits}d}".rstrip("0")
    return f".{text}" if text else ""


def format_duration(ns: int) -> str:
    """Go's ``Duration.String``: ``1h0m0s``, ``1.5s``, ``300ms``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < _NS:
        for unit, scale, digits in (("ms", _MS, 6), ("µs", _US, 3), ("ns", 1, 0)):
            if u >= scale:
                return f"{sign}{u // scale}{_fraction(u % scale, digits) if digits else ''}{unit}"
    seconds, fraction = divmod(u, _NS)
    text = f"{seconds % 60}{_fraction(fraction, 9)}s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours:
            text = f"{hours}h{text}"
    return sign + text


# --- layouts ----------------------------------------------------------------------------------

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")

# Go's layout elements (time/format.go nextStdChunk), longest first where they share a prefix.
_CHUNKS = (
    "January", "Jan", "Monday", "Mon", "MST", "2006", "002", "__2", "_2", "01", "02", "03",
    "04", "05", "06", "15", "1", "2", "3", "4", "5", "PM", "pm",
    "Z07:00:00", "Z070000", "Z07:00", "Z0700", "Z07", "-07:00:00", "-070000", "-07:00",
    "-0700", "-07",
)  # fmt: skip
_FRACTION = re.compile(r"[.,](0+|9+)(?!\d)")
_DEFAULT_LAYOUT = "2006-01-02 15:04:05.999999999 -0700 MST"
RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_NANO = "2006-01-02T15:04:05.999999999Z07:00"


def _layout_chunks(layout: str) -> list[tuple[bool, str]]:
    """Split a Go layout into (is_element, text) pieces."""
    out: list[tuple[bool, str]] = []
    i = 0
    literal: list[str] = []
    while i < len(layout):
        fraction = _FRACTION.match(layout, i)
        if fraction:
            chunk = fraction.group()
        else:
            chunk = next((c for c in _CHUNKS if layout.startswith(c, i)), "")
            if chunk == "Jan" and layout.startswith("January", i):
                chunk = "January"
        if not chunk:
            literal.append(layout[i])
            i += 1
            continue
        if literal:
            out.append((False, "".join(literal)))
            literal = []
        out.append((True, chunk))
        i += len(chunk)
    if literal:
        out.append((False, "".join(literal)))
    return out


def _offset_text(seconds: int, chunk: str) -> str:
    if chunk.startswith("Z") and seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    body = chunk.lstrip("Z-")
    colon = ":" in body
    text = f"{sign}{hours:02d}"
    if body in ("07",):
        return text
    text += f"{':' if colon else ''}{minutes:02d}"
    if len(body.replace(":", "")) == 6:
        text += f"{':' if colon else ''}{secs:02d}"
    return text


def format_time(value: GoTime, layout: str) -> str:
    """Go's ``Time.Format(layout)``."""
    moment = value.moment()
    offset = moment.utcoffset() or timedelta(0)
    offset_seconds = int(offset.total_seconds())
    parts: list[str] = []
    for element, chunk in _layout_chunks(layout):
        if not element:
            parts.append(chunk)
            continue
        parts.append(_format_chunk(chunk, moment, value.nanosecond, offset_seconds, value))
    return "".join(parts)


def _format_chunk(chunk: str, moment: datetime, nanos: int, offset: int, value: GoTime) -> str:
    hour12 = moment.hour % 12 or 12
    simple: dict[str, Callable[[], str]] = {
        "2006": lambda: f"{moment.year:04d}",
        "06": lambda: f"{moment.year % 100:02d}",
        "January": lambda: _MONTHS[moment.month - 1],
        "Jan": lambda: _MONTHS[moment.month - 1][:3],
        "01": lambda: f"{moment.month:02d}",
        "1": lambda: str(moment.month),
        "Monday": lambda: _DAYS[(moment.weekday() + 1) % 7],
        "Mon": lambda: _DAYS[(moment.weekday() + 1) % 7][:3],
        "02": lambda: f"{moment.day:02d}",
        "2": lambda: str(moment.day),
        "_2": lambda: f"{moment.day:2d}",
        "002": lambda: f"{moment.timetuple().tm_yday:03d}",
        "__2": lambda: f"{moment.timetuple().tm_yday:3d}",
        "15": lambda: f"{moment.hour:02d}",
        "03": lambda: f"{hour12:02d}",
        "3": lambda: str(hour12),
        "04": lambda: f"{moment.minute:02d}",
        "4": lambda: str(moment.minute),
        "05": lambda: f"{moment.second:02d}",
        "5": lambda: str(moment.second),
        "PM": lambda: "PM" if moment.hour >= 12 else "AM",
        "pm": lambda: "pm" if moment.hour >= 12 else "am",
        "MST": lambda: _zone_name(moment, value, offset),
    }
    if chunk in simple:
        return simple[chunk]()
    if chunk[0] in ".,":
        digits = len(chunk) - 1
        text = f"{nanos:09d}"[:digits]
        if chunk[1] == "9":
            text = text.rstrip("0")
            return f"{chunk[0]}{text}" if text else ""
        return chunk[0] + text
    return _offset_text(offset, chunk)


def _zone_name(moment: datetime, value: GoTime, offset: int) -> str:
    name = moment.tzname() or value.location.name
    if name and not name.startswith(("+", "-", "UTC+", "UTC-")):
        return name
    # Go writes a zone without an abbreviation as its offset: "-0700".
    return _offset_text(offset, "-0700")


def _chunk_pattern(chunk: str) -> str:
    patterns = {
        "2006": r"(?P<year>\d{4})", "06": r"(?P<year2>\d{2})",
        "January": "(?P<month_name>" + "|".join(_MONTHS) + ")",
        "Jan": "(?P<month_abbr>" + "|".join(m[:3] for m in _MONTHS) + ")",
        "01": r"(?P<month>\d{2})", "1": r"(?P<month>\d{1,2})",
        "Monday": "(?:" + "|".join(_DAYS) + ")",
        "Mon": "(?:" + "|".join(d[:3] for d in _DAYS) + ")",
        "02": r"(?P<day>\d{2})", "2": r"(?P<day>\d{1,2})", "_2": r" ?(?P<day>\d{1,2})",
        "002": r"(?P<yday>\d{3})", "__2": r" {0,2}(?P<yday>\d{1,3})",
        "15": r"(?P<hour>\d{1,2})", "03": r"(?P<hour12>\d{2})", "3": r"(?P<hour12>\d{1,2})",
        "04": r"(?P<minute>\d{2})", "4": r"(?P<minute>\d{1,2})",
        # Go accepts a fractional second after the seconds even when the layout has none.
        "05": r"(?P<second>\d{2})(?:[.,](?P<frac>\d+))?",
        "5": r"(?P<second>\d{1,2})(?:[.,](?P<frac>\d+))?",
        "PM": r"(?P<ampm>AM|PM)", "pm": r"(?P<ampm>am|pm)",
        "MST": r"(?P<zone>[A-Z]{3,5}|[+-]\d{4})",
    }  # fmt: skip
    if chunk in patterns:
        return patterns[chunk]
    if chunk[0] in ".,":
        return r"(?:[.,](?P<frac2>\d+))" + ("" if chunk[1] == "0" else "?")
    z = "Z|" if chunk.startswith("Z") else ""
    body = chunk.lstrip("Z-")
    sep = ":" if ":" in body else ""
    pattern = r"[+-]\d{2}"
    if body != "07":
        pattern += sep + r"\d{2}"
    if len(body.replace(":", "")) == 6:
        pattern += sep + r"\d{2}"
    return f"(?P<offset>{z}{pattern})"


def parse_time(layout: str, text: str, location: GoLocation | None) -> GoTime:
    """Go's ``time.Parse`` (``location`` None) or ``time.ParseInLocation``."""
    pattern: list[str] = []
    seen: set[str] = set()
    for element, chunk in _layout_chunks(layout):
        if not element:
            pattern.append(escape(chunk))
            continue
        piece = _chunk_pattern(chunk)
        # A layout may repeat an element (rare); later copies must not redefine the group.
        for name in re.findall(r"\?P<(\w+)>", piece):
            if name in seen:
                piece = piece.replace(f"?P<{name}>", "?:")
            seen.add(name)
        pattern.append(piece)
    # The layout is the user's, so the pattern runs in RE2: a layout of forty "2"s is forty
    # \d{1,2} in a row, which Python's re backtracks through for hours on a long digit string.
    groups = compile_regex("".join(pattern), captures=True).groups(text)
    if groups is None:
        raise _fail(f'parsing time "{text}" as "{layout}": cannot parse')
    try:
        return _build_time(groups, location)
    except ValueError as exc:
        raise _fail(f'parsing time "{text}": {exc}') from None


def _build_time(groups: dict[str, str], location: GoLocation | None) -> GoTime:
    year = int(groups["year"]) if "year" in groups else 0
    if "year2" in groups:
        short = int(groups["year2"])
        year = 1900 + short if short >= 69 else 2000 + short
    month = int(groups.get("month", "1"))
    if "month_name" in groups:
        month = _MONTHS.index(groups["month_name"]) + 1
    if "month_abbr" in groups:
        month = [m[:3] for m in _MONTHS].index(groups["month_abbr"]) + 1
    day = int(groups.get("day", "1"))
    hour = int(groups.get("hour", "0"))
    if "hour12" in groups:
        hour = int(groups["hour12"]) % 12
        if groups.get("ampm", "").lower() == "pm":
            hour += 12
    minute, second = int(groups.get("minute", "0")), int(groups.get("second", "0"))
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError("hour, minute or second out of range")
    frac = groups.get("frac") or groups.get("frac2") or ""
    nanos = int((frac + "000000000")[:9]) if frac else 0
    naive = datetime(max(year, 1), month, day, hour, minute, second)
    if "yday" in groups:
        naive = naive.replace(month=1, day=1) + timedelta(days=int(groups["yday"]) - 1)
    zone = groups.get("zone")
    offset_text = groups.get("offset")
    if offset_text is not None or (zone and zone[0] in "+-"):
        offset = _offset_seconds(offset_text if offset_text is not None else zone or "")
        aware = naive.replace(tzinfo=timezone(timedelta(seconds=offset)))
        result_location = _fixed(offset, zone or "")
        if location is not None and location.tz.utcoffset(naive) == timedelta(seconds=offset):
            result_location = location
    elif zone in ("UTC", "GMT", "Z"):
        aware, result_location = naive.replace(tzinfo=UTC), UTC_LOCATION
    elif location is not None:
        aware, result_location = naive.replace(tzinfo=location.tz), location
    else:
        # Go: an unknown zone abbreviation is a fabricated zone with offset 0.
        result_location = _fixed(0, zone or "UTC")
        aware = naive.replace(tzinfo=UTC)
    return GoTime(int(aware.timestamp()) * _NS + nanos, result_location)


def _offset_seconds(text: str) -> int:
    if text == "Z":
        return 0
    digits = text[1:].replace(":", "")
    hours, minutes, seconds = int(digits[:2]), int(digits[2:4] or 0), int(digits[4:6] or 0)
    total = hours * 3600 + minutes * 60 + seconds
    return -total if text[0] == "-" else total


# --- builtins ---------------------------------------------------------------------------------

_DEFAULT_LAYOUTS = (
    "2006-01-02", "15:04:05", "2006-01-02 15:04:05", RFC3339,
    "02 Jan 06 15:04 MST", "Monday, 02-Jan-06 15:04:05 MST", "Mon, 02 Jan 2006 15:04:05 MST",
)  # fmt: skip


def load_location(name: Any) -> GoLocation:
    """expr-lang ``timezone(name)``: Go's ``time.LoadLocation``."""
    if not isinstance(name, str):
        raise _fail(f"timezone() argument must be a string, got {type(name).__name__}")
    if name in ("", "UTC"):
        return UTC_LOCATION
    if name == "Local":
        # The server's local zone is not the user's; Kargo's controllers run in UTC.
        return UTC_LOCATION
    # Imported here: only timezone() needs the zone database (the local runner starts without).
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return GoLocation(name, ZoneInfo(name))
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _fail(f"unknown time zone {name}") from None


def time_of(moment: datetime, location: GoLocation = UTC_LOCATION) -> GoTime:
    """The ``time.Time`` of an aware datetime, to the microsecond (no float rounding)."""
    whole = int(moment.replace(microsecond=0).timestamp())
    return GoTime(whole * _NS + moment.microsecond * _US, location)


def now_on(clock: Callable[[], datetime]) -> Callable[..., GoTime]:
    """expr-lang ``now()`` (optionally ``now(timezone("..."))``) reading ``clock``."""

    def now(*args: Any) -> GoTime:
        if len(args) > 1:
            raise _fail(f"now() expects 0 to 1 arguments, got {len(args)}")
        location = args[0] if args else None
        if location is not None and not isinstance(location, GoLocation):
            raise _fail("invalid number of arguments (expected 0, got 1)")
        return time_of(clock(), location or UTC_LOCATION)

    return now


now = now_on(SYSTEM.now)


def duration(text: Any) -> GoDuration:
    """expr-lang ``duration("1h30m")``."""
    if not isinstance(text, str):
        raise _fail("duration() argument must be a string")
    return GoDuration(parse_duration(text))


def date(*args: Any) -> GoTime:
    """expr-lang ``date(s)``, ``date(s, layout)``, ``date(s, layout, zone)``."""
    location: GoLocation | None = None
    if args and isinstance(args[0], GoLocation):
        location, args = args[0], args[1:]
    if not 1 <= len(args) <= 3:
        raise _fail(f"date() expects 1 to 3 arguments, got {len(args)}")
    if not all(isinstance(a, str) for a in args):
        raise _fail("date() arguments must be strings")
    text = args[0]
    if len(args) >= 2:
        if len(args) == 3:
            location = load_location(args[2])
        return parse_time(args[1], text, location)
    for layout in _DEFAULT_LAYOUTS:
        try:
            return parse_time(layout, text, location)
        except ExpressionError:
            continue
    raise _fail(f"invalid date {text}")


# --- methods ----------------------------------------------------------------------------------


def _duration_arg(method: str, value: Any) -> int:
    if not isinstance(value, GoDuration):
        raise _fail(f"{method}() needs a duration")
    return value.ns


def _time_arg(method: str, value: Any) -> GoTime:
    if not isinstance(value, GoTime):
        raise _fail(f"{method}() needs a time")
    return value


def _in(value: GoTime, location: Any) -> GoTime:
    if not isinstance(location, GoLocation):
        raise _fail("In() needs a location from timezone()")
    return GoTime(value.unix_ns, location)


def _add_date(value: GoTime, years: Any, months: Any, days: Any) -> GoTime:
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (years, months, days)):
        raise _fail("AddDate() needs three ints")
    moment = value.moment()
    # Go normalises out-of-range months and days (Oct 31 + 1 month is Dec 1).
    month_index = moment.month - 1 + months
    year = moment.year + years + month_index // 12
    first = moment.replace(year=year, month=month_index % 12 + 1, day=1, tzinfo=None)
    shifted = first + timedelta(days=moment.day - 1 + days)
    aware = shifted.replace(tzinfo=value.location.tz)
    return GoTime(int(aware.timestamp()) * _NS + value.nanosecond, value.location)


def _truncate(value: GoTime, step: Any) -> GoTime:
    ns = _duration_arg("Truncate", step)
    if ns <= 0:
        return value
    return GoTime(value.unix_ns - value.unix_ns % ns, value.location)


def _truncate_duration(ns: int, step: int) -> GoDuration:
    if step <= 0:
        return GoDuration(ns)
    remainder = abs(ns) % step  # Go's % truncates toward zero
    return GoDuration(ns - remainder if ns >= 0 else ns + remainder)


def _weekday(value: GoTime) -> int:
    return (value.moment().weekday() + 1) % 7  # Go counts from Sunday = 0


# Go's zero time, January 1, year 1, 00:00:00 UTC.
_ZERO_TIME_NS = int(datetime(1, 1, 1, tzinfo=UTC).timestamp()) * _NS


TIME_METHODS: dict[str, Callable[..., Any]] = {
    "Year": lambda t: t.moment().year,
    "Month": lambda t: t.moment().month,
    "Day": lambda t: t.moment().day,
    "Hour": lambda t: t.moment().hour,
    "Minute": lambda t: t.moment().minute,
    "Second": lambda t: t.moment().second,
    "Nanosecond": lambda t: t.nanosecond,
    "Weekday": _weekday,
    "YearDay": lambda t: t.moment().timetuple().tm_yday,
    "Unix": lambda t: t.unix_ns // _NS,
    "UnixMilli": lambda t: t.unix_ns // _MS,
    "UnixMicro": lambda t: t.unix_ns // _US,
    "UnixNano": lambda t: t.unix_ns,
    "Format": lambda t, layout: format_time(t, _layout_arg(layout)),
    "String": lambda t: format_time(t, _DEFAULT_LAYOUT),
    "UTC": lambda t: GoTime(t.unix_ns, UTC_LOCATION),
    "In": _in,
    "Location": lambda t: t.location,
    "Add": lambda t, d: GoTime(t.unix_ns + _duration_arg("Add", d), t.location),
    "AddDate": _add_date,
    "Sub": lambda t, u: GoDuration(t.unix_ns - _time_arg("Sub", u).unix_ns),
    "Before": lambda t, u: t.unix_ns < _time_arg("Before", u).unix_ns,
    "After": lambda t, u: t.unix_ns > _time_arg("After", u).unix_ns,
    "Equal": lambda t, u: t.unix_ns == _time_arg("Equal", u).unix_ns,
    "Compare": lambda t, u: (t.unix_ns > (o := _time_arg("Compare", u).unix_ns)) - (t.unix_ns < o),
    "IsZero": lambda t: t.unix_ns == _ZERO_TIME_NS,
    "Truncate": _truncate,
}
DURATION_METHODS: dict[str, Callable[..., Any]] = {
    "Hours": lambda d: d.ns / (3600 * _NS),
    "Minutes": lambda d: d.ns / (60 * _NS),
    "Seconds": lambda d: d.ns / _NS,
    "Milliseconds": lambda d: int(d.ns / _MS),
    "Microseconds": lambda d: int(d.ns / _US),
    "Nanoseconds": lambda d: d.ns,
    "String": lambda d: format_duration(d.ns),
    "Abs": lambda d: GoDuration(abs(d.ns)),
    "Truncate": lambda d, m: _truncate_duration(d.ns, _duration_arg("Truncate", m)),
}
LOCATION_METHODS: dict[str, Callable[..., Any]] = {"String": lambda loc: loc.name}


def _layout_arg(layout: Any) -> str:
    if not isinstance(layout, str):
        raise _fail("Format() layout must be a string")
    return layout


def time_json(value: GoTime) -> str:
    """What ``json.Marshal`` writes for a time (without the quotes): RFC 3339 with nanos."""
    return format_time(value, RFC3339_NANO)


def go_string(value: GoTime | GoDuration | GoLocation) -> str:
    """``fmt.Sprint`` of a time, duration or location."""
    if isinstance(value, GoTime):
        return format_time(value, _DEFAULT_LAYOUT)
    return str(value)
