"""Parse and format the durations people write in config and labels: 500ms, 30s, 5m, 1h; and
read the times they write to the API (RFC 3339) into the UTC moment they name."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
# Far beyond any sensible setting, and well inside what timedelta and SQLite can hold.
MAX_DURATION = timedelta(days=365)


def parse_duration(value: object) -> timedelta:
    """Return the timedelta for `value` ("30s", "5m", "1h", "500ms", or a number of seconds).

    Raises ValueError with a message fit for people on anything else, negative or over a year.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 5m or 1h")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if not match:
            raise ValueError("expected a duration such as 500ms, 30s, 5m or 1h")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        raise ValueError("expected a duration such as 500ms, 30s, 5m or 1h")
    if seconds != seconds or seconds < 0:  # NaN or negative
        raise ValueError("expected a duration of zero or more")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError("expected a duration of at most 365d")
    return timedelta(seconds=seconds)


def format_duration(delta: timedelta) -> str:
    """The shortest exact form: 300s -> "5m", 1.5s -> "1500ms"."""
    ms = round(delta.total_seconds() * 1000)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def format_elapsed(delta: timedelta) -> str:
    """A measured span for people, to the second: 39s, 3m52s, 2h0m5s (never rounded to a unit)."""
    total = max(0, round(delta.total_seconds()))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{s}s"
    return f"{m}m{s}s" if m else f"{s}s"


# RFC 3339 section 5.6: full-date "T" full-time, with its offset. Its note allows a lower-case
# "t" and "z", and a space between date and time. A space where the offset's sign stands is
# a `+` that a query string left unencoded.
_FORM = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt ]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?:\.(?P<fraction>\d+))?"
    r"(?:[Zz]|(?P<sign>[-+ ])(?P<off_hour>\d{2}):(?P<off_minute>\d{2}))",
    re.ASCII,
)
FORM = "expected an RFC 3339 time with its offset, such as 2026-03-01T00:00:00Z"
CALENDAR = (
    "not a time on the calendar (a month has its days, hours go to 23, minutes to 59, "
    "seconds to 60, an offset stays under 24 hours)"
)
RANGE = "a time outside the years 1 to 9999 in UTC"


def parse_rfc3339(text: str) -> datetime:
    """The moment `text` names, as an aware datetime in UTC.

    Only RFC 3339 date-times: `2026-03-01T04:00:00Z`, `...04:00:00.5+01:00`; no week dates,
    basic format, dates alone or times without an offset. Digits after the microsecond are
    cut; a leap second (:60) is the moment after :59. Raises ValueError with a reason fit for
    people that does not repeat `text`.
    """
    match = _FORM.fullmatch(text)
    if match is None:
        raise ValueError(FORM)
    field = {k: int(v) for k, v in match.groupdict().items() if v and k not in ("sign", "fraction")}
    if field["year"] == 0:
        raise ValueError(RANGE)
    leap = field["second"] == 60
    micro = int((match["fraction"] or "")[:6].ljust(6, "0"))
    off_hour, off_minute = field.get("off_hour", 0), field.get("off_minute", 0)
    if off_hour > 23 or off_minute > 59:
        raise ValueError(CALENDAR)
    offset = timedelta(hours=off_hour, minutes=off_minute)
    try:
        wall = datetime(
            field["year"],
            field["month"],
            field["day"],
            field["hour"],
            field["minute"],
            59 if leap else field["second"],
            micro,
        )
    except ValueError:
        raise ValueError(CALENDAR) from None
    try:
        moment = wall + (offset if match["sign"] == "-" else -offset) + timedelta(seconds=leap)
    except OverflowError:
        raise ValueError(RANGE) from None
    return moment.replace(tzinfo=UTC)
