"""Maintenance windows on a calendar: from each start a crontab line names on a zone's wall clock,
the containers a glob matches are held for a duration of real time. Pure: `now` is an argument;
zoneinfo reads the tz database once per zone name, when a window is parsed.

Crontab lines are read by core.detection.crontab, not by APScheduler: the core imports the standard
library only (pyproject's import contract), and APScheduler 3.x departs from crontab where
operators would notice: it numbers weekdays from Monday (0 = Monday), it requires both day fields
to match, and it starts a fixed-time job twice on the night the clocks go back. The unit tests
hold these starts against `CronTrigger.from_crontab` on ordinary days.

Daylight saving, e.g. `0 2 * * *` in Europe/Berlin:
- the spring-forward night (02:00-03:00 does not exist): a start in the missing hour is moved
  forward by the gap, as zoneinfo reads a missing wall time and as APScheduler does: 02:00
  starts at 03:00 CEST, 02:30 at 03:30 CEST. The window happens once that day and lasts its
  full duration; each start in the gap happens (APScheduler keeps only the first).
- the fall-back night (02:00-03:00 happens twice): the window starts once, at the first
  02:00 (CEST), and a 1h window ends when the clock reads 02:00 for the second time. Only
  when the hour field is a wildcard (`*`, `*/2`) do the repeated hour's times start windows in
  both passes, so an hourly window leaves no hole in the night (as Vixie cron runs its
  wildcard jobs).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from fnmatch import fnmatchcase
from zoneinfo import ZoneInfo

from guardian.core.detection.crontab import Cron
from guardian.core.durations import format_duration, parse_duration

LABEL = "guardian.maintenance"
MAX_TEXT = 200  # a label value, a cron line, a container glob
MAX_DURATION = timedelta(days=7)
CONFIG_KEYS = ("containers", "cron", "duration", "tz")
ONE_DAY = timedelta(days=1)
# A 29 February can be 8 years from the next (across a century year that is no leap year);
# beyond this horizon next_start() gives up.
_HORIZON_DAYS = 9 * 366
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")


class WindowError(ValueError):
    """A maintenance window that cannot be read: one line naming the key or label and what is
    allowed."""


@dataclass(frozen=True)
class MaintenanceWindow:
    """Containers whose names match `containers` are in maintenance for `duration` from each
    time `cron` names on the wall clock of `zone`. Build one with from_config or from_label."""

    containers: str  # a glob on container names, e.g. "db-*"
    cron: Cron
    duration: timedelta
    zone: tzinfo = UTC
    origin: str = "config"  # where it was written, for messages: "maintenance[0]", a label

    def applies_to(self, name: str) -> bool:
        return fnmatchcase(name, self.containers)

    def describe(self) -> str:
        return f"{self.cron.text} for {format_duration(self.duration)} ({self.zone})"

    def active_at(self, now: datetime) -> tuple[datetime, datetime] | None:
        """(start, end) of the window in force at `now` (start <= now < end), in UTC, or None.

        Only the last `duration` before `now` is searched, so a clock stepped into a window
        finds it and one stepped back out of it does not."""
        _check_aware(now)
        since = now - self.duration
        latest: datetime | None = None
        day, stop = self._local_day(now), self._local_day(since) - ONE_DAY
        while day >= stop:
            starts = self._starts_on(day)
            i = bisect_right(starts, now)
            if i and starts[i - 1] > since and (latest is None or starts[i - 1] > latest):
                latest = starts[i - 1]
            elif latest is not None:
                # A gap moves a start by an hour or two: a day that adds no later start to the
                # one after it ends the search.
                break
            day -= ONE_DAY
        return None if latest is None else (latest, latest + self.duration)

    def next_start(self, now: datetime) -> datetime | None:
        """The first start after `now`, in UTC; None past a 9-year horizon, which only a 29
        February narrowed further to some weekdays (`0 2 29 2 */7`) can lie beyond."""
        _check_aware(now)
        found: datetime | None = None
        day = self._local_day(now) - ONE_DAY  # a start moved over midnight by a gap
        for _ in range(_HORIZON_DAYS):
            starts = self._starts_on(day)
            i = bisect_right(starts, now)
            if i < len(starts) and (found is None or starts[i] < found):
                found = starts[i]
            elif found is not None:
                break  # as in active_at, the other way
            day += ONE_DAY
        return found

    def _local_day(self, moment: datetime) -> date:
        return moment.astimezone(self.zone).date()

    def _starts_on(self, day: date) -> list[datetime]:
        """The window starts whose wall time falls on `day`, as sorted UTC instants."""
        if not self.cron.on(day):
            return []
        midnight = datetime.combine(day, time(), tzinfo=self.zone)
        offset = midnight.utcoffset()
        if offset is not None and offset == (midnight + ONE_DAY).utcoffset():
            # No change of offset that day (nearly every day): plain arithmetic, in order.
            base = datetime.combine(day, time(), tzinfo=UTC) - offset
            return [
                base + timedelta(hours=h, minutes=m)
                for h in self.cron.hours
                for m in self.cron.minutes
            ]
        starts: set[datetime] = set()
        for h in self.cron.hours:
            for m in self.cron.minutes:
                # fold=0: a missing wall time moves forward by the gap; a repeated one is the
                # first pass. The second pass of a repeated time only for a wildcard hour.
                wall = datetime.combine(day, time(h, m), tzinfo=self.zone)
                first = wall.astimezone(UTC)
                starts.add(first)
                second = wall.replace(fold=1).astimezone(UTC)
                if self.cron.every_hour and second > first:
                    starts.add(second)
        return sorted(starts)


def _check_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")


def _zone(name: str) -> tzinfo:
    if name == "UTC":
        return UTC  # needs no tz database: slim images may lack one
    if len(name) <= 64 and _ZONE_NAME.fullmatch(name):
        try:
            return ZoneInfo(name)
        except (ValueError, OSError, KeyError):  # KeyError: ZoneInfoNotFoundError
            pass
    raise ValueError(f"{name[:40]!r}: expected an IANA time zone such as Europe/Berlin, or UTC")


def _duration(raw: object) -> timedelta:
    allowed = f"expected more than 0s and at most {format_duration(MAX_DURATION)}, such as 1h"
    try:
        duration = parse_duration(raw)
    except ValueError:
        duration = timedelta(0)
    if not timedelta(0) < duration <= MAX_DURATION:
        raise ValueError(f"{str(raw)[:40]!r}: {allowed}")
    return duration


def _text(raw: object, expected: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"expected {expected}")
    if len(raw) > MAX_TEXT:
        raise ValueError(f"expected at most {MAX_TEXT} characters")
    return raw.strip()


def from_config(entry: Mapping[str, object], where: str) -> MaintenanceWindow:
    """A window from a config entry {containers, cron, duration, tz (default UTC)}; `where` names
    it in errors, e.g. "maintenance[0]". Raises WindowError naming the key."""
    unknown = sorted(str(k) for k in entry if k not in CONFIG_KEYS)
    if unknown:
        allowed = ", ".join(CONFIG_KEYS)
        raise WindowError(f"{where}.{unknown[0][:40]}: unknown key; expected {allowed}")
    key = "containers"
    try:
        containers = _text(entry.get(key), "a container name or glob such as db-*")
        key = "cron"
        cron = Cron.parse(_text(entry.get(key), "a crontab line such as 0 2 * * *"))
        key = "duration"
        duration = _duration(entry.get(key))
        key = "tz"
        zone = _zone(_text(entry.get(key, "UTC"), "a time zone such as Europe/Berlin"))
    except ValueError as e:
        raise WindowError(f"{where}.{key}: {e}") from None
    return MaintenanceWindow(containers, cron, duration, zone, origin=where)


def from_label(container: str, value: str) -> MaintenanceWindow:
    """The window of a `guardian.maintenance` label, "0 2 * * * 1h" or "0 2 * * * 1h
    Europe/Berlin", which holds its own container only. Raises WindowError naming the label."""
    where = f"label {LABEL}={value[:40]!r}"
    if len(value) > MAX_TEXT:
        raise WindowError(f"label {LABEL}: expected at most {MAX_TEXT} characters")
    parts = value.split()
    if len(parts) not in (6, 7):
        raise WindowError(
            f"{where}: expected 5 cron fields, a duration and an optional time zone, such as"
            " 0 2 * * * 1h Europe/Berlin"
        )
    part = ""  # a cron error names its field
    try:
        cron = Cron.parse(" ".join(parts[:5]))
        part = "duration "
        duration = _duration(parts[5])
        part = "tz "
        zone = _zone(parts[6]) if len(parts) == 7 else UTC
    except ValueError as e:
        raise WindowError(f"{where}: {part}{e}") from None
    return MaintenanceWindow(container, cron, duration, zone, origin=f"label {LABEL}")


def windows_for(name: str, windows: Iterable[MaintenanceWindow]) -> tuple[MaintenanceWindow, ...]:
    """The windows that hold the container called `name`."""
    return tuple(w for w in windows if w.applies_to(name))


def in_force(
    name: str, windows: Iterable[MaintenanceWindow], now: datetime
) -> tuple[MaintenanceWindow, datetime] | None:
    """The window holding `name` at `now` and its end; of overlapping ones, the one that ends
    latest, since the container stays in maintenance until then."""
    best: tuple[MaintenanceWindow, datetime] | None = None
    for window in windows_for(name, windows):
        span = window.active_at(now)
        if span is not None and (best is None or span[1] > best[1]):
            best = (window, span[1])
    return best


MAX_NAME = 200  # a period's name, its glob and its schedule as the store keeps them


@dataclass(frozen=True)
class MaintenancePeriod:
    """One run of a window, from `started_at` (its start on the calendar) to `until`: what the
    store records of maintenance (the events feed's maintenance.started and .ended). `name`
    is where the window was written (`maintenance[0]`, `label guardian.maintenance`), with
    `containers` (its glob) and `schedule` (cron, duration, zone) naming it; `id` is the
    store's, once written."""

    name: str
    containers: str
    schedule: str
    started_at: datetime
    until: datetime
    id: int | None = None

    @property
    def key(self) -> tuple[str, str, str, datetime]:
        """The same run of the same window, whoever saw it (one start per run)."""
        return (self.name, self.containers, self.schedule, self.started_at)


def periods_in_force(
    windows: Iterable[MaintenanceWindow], now: datetime
) -> dict[tuple[str, str, str, datetime], MaintenancePeriod]:
    """The runs of `windows` in force at `now`, by key; the texts cut to MAX_NAME."""
    out = {}
    for w in windows:
        span = w.active_at(now)
        if span is not None:
            period = MaintenancePeriod(
                w.origin[:MAX_NAME], w.containers[:MAX_NAME], w.describe()[:MAX_NAME], *span
            )
            out[period.key] = period
    return out
