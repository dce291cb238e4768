"""Parse and format the durations people write in config and labels: 500ms, 30s, 5m, 1h."""

from __future__ import annotations

import re
from datetime import timedelta

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
