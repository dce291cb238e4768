"""Maintenance windows on a calendar (core.detection.windows): parsing and its one-line errors,
crontab semantics held against APScheduler's CronTrigger, both DST nights, clock steps, overlaps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger

from guardian.core.detection.windows import (
    LABEL,
    MaintenanceWindow,
    WindowError,
    from_config,
    from_label,
    in_force,
    windows_for,
)
from tests.fakes import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")
SPRING = datetime(2027, 3, 28, tzinfo=UTC)  # Berlin: 02:00 CET jumps to 03:00 CEST (01:00Z)
FALL = datetime(2027, 10, 31, tzinfo=UTC)  # Berlin: 03:00 CEST goes back to 02:00 CET (01:00Z)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def berlin(cron: str, duration: str = "1h") -> MaintenanceWindow:
    return from_label("db-1", f"{cron} {duration} Europe/Berlin")


def starts(window: MaintenanceWindow, after: datetime, count: int) -> list[datetime]:
    """The next `count` starts after `after`, by stepping next_start."""
    found: list[datetime] = []
    while len(found) < count and (nxt := window.next_start(after)) is not None:
        found.append(nxt)
        after = nxt
    return found


def aps_starts(cron: str, zone: object, after: datetime, count: int) -> list[datetime]:
    """What APScheduler 3.x fires for the same crontab line, in UTC."""
    trigger = CronTrigger.from_crontab(cron, timezone=zone)
    found: list[datetime] = []
    previous = None
    while len(found) < count:
        fire = trigger.get_next_fire_time(previous, after)
        found.append(fire.astimezone(UTC))
        previous = after = fire
    return found


# -- parsing ------------------------------------------------------------------------------------

BAD_LABELS = [
    ("0 2 * * 1h", "expected 5 cron fields, a duration and an optional time zone"),
    ("0 2 * * * * 1h UTC", "expected 5 cron fields"),
    ("61 2 * * * 1h", "minute '61': expected 0-59"),
    ("0 24 * * * 1h", "hour '24': expected 0-23"),
    ("0 2 0 * * 1h", "day-of-month '0': expected 1-31"),
    ("0 2 * 13 * 1h", "month '13': expected 1-12 or jan-dec"),
    ("0 2 * * 8 1h", "day-of-week '8': expected 0-7 or sun-sat"),
    ("0 2 * * moon 1h", "day-of-week 'moon': expected 0-7 or sun-sat"),
    ("x 2 * * * 1h", "minute 'x': expected 0-59"),
    ("*/0 2 * * * 1h", "minute '*/0': expected a step from 1 to 99"),
    ("0 5-1 * * * 1h", "hour '5-1': the range runs backwards"),
    ("0 2 1,,2 * * 1h", "day-of-month '': expected 1-31"),
    ("0 2 30 2 * 1h", "'0 2 30 2 *' never happens"),
    ("0 2 * * * 0s", "duration '0s': expected more than 0s and at most 7d"),
    ("0 2 * * * -1h", "duration '-1h': expected more than 0s and at most 7d"),
    ("0 2 * * * 8d", "duration '8d': expected more than 0s and at most 7d"),
    ("0 2 * * * soon", "duration 'soon': expected more than 0s and at most 7d"),
    ("0 2 * * * 1h Mars/Olympus", "tz 'Mars/Olympus': expected an IANA time zone"),
    ("0 2 * * * 1h ../../etc/passwd", "tz '../../etc/passwd': expected an IANA time zone"),
    ("0 2 * * * 1h Europe", "tz 'Europe': expected an IANA time zone"),
    ("0 2 * * * 1h " + "A" * 190, "expected at most 200 characters"),
]


@pytest.mark.parametrize(("value", "message"), BAD_LABELS, ids=[v[:24] for v, _ in BAD_LABELS])
def test_a_bad_label_is_one_line_naming_the_label_and_what_is_allowed(
    value: str, message: str
) -> None:
    with pytest.raises(WindowError) as caught:
        from_label("db-1", value)
    text = str(caught.value)
    assert text.startswith(f"label {LABEL}")
    assert message in text
    assert "\n" not in text and len(text) < 200
    # No chained traceback behind it: the inner error is not shown.
    error = caught.value
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


BAD_ENTRIES = [
    ({"cron": "0 2 * * *", "duration": "1h"}, "maintenance[0].containers: expected a container"),
    ({"containers": "db-*", "duration": "1h"}, "maintenance[0].cron: expected a crontab line"),
    ({"containers": "db-*", "cron": "0 2 * *", "duration": "1h"}, "cron: expected 5 fields"),
    ({"containers": "db-*", "cron": "0 2 * * *"}, "maintenance[0].duration: 'None': expected"),
    ({"containers": "db-*", "cron": "0 2 * * *", "duration": 0}, "duration: '0': expected more"),
    ({"containers": "db-*", "cron": "0 2 * * *", "duration": True}, "duration: 'True'"),
    ({"containers": "db-*", "cron": "0 2 * * *", "duration": "1h", "tz": "Nowhere"}, "tz: 'Now"),
    ({"containers": "db-*", "cron": "0 2 * * *", "duration": "1h", "tz": 1}, "tz: expected a"),
    ({"containers": "db-*", "cron": "0 " * 100 + "*", "duration": "1h"}, "cron: expected at most"),
    ({"containers": "db-*", "cron": "0 2 * * *", "duration": "1h", "zone": "UTC"}, ".zone: unk"),
]


@pytest.mark.parametrize(("entry", "message"), BAD_ENTRIES, ids=[m for _, m in BAD_ENTRIES])
def test_a_bad_config_entry_is_one_line_naming_the_key(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(WindowError) as caught:
        from_config(entry, "maintenance[0]")
    assert message in str(caught.value)
    assert str(caught.value).startswith("maintenance[0].")
    assert "\n" not in str(caught.value)


def test_a_config_entry_reads_its_keys_and_defaults_to_utc() -> None:
    window = from_config(
        {"containers": "db-*", "cron": "0  2 * * *", "duration": "1h", "tz": "Europe/Berlin"},
        "maintenance[1]",
    )
    assert window.containers == "db-*"
    assert window.cron.text == "0 2 * * *"
    assert window.duration == timedelta(hours=1)
    assert window.zone == BERLIN
    assert window.origin == "maintenance[1]"
    plain = from_config({"containers": "web", "cron": "30 4 * * sun", "duration": 900}, "m[0]")
    assert plain.zone is UTC and plain.duration == timedelta(minutes=15)
    assert plain.describe() == "30 4 * * sun for 15m (UTC)"


def test_a_label_holds_its_own_container_with_an_optional_time_zone() -> None:
    window = from_label("db-1", "0 2 * * * 1h")
    assert window.zone is UTC and window.duration == timedelta(hours=1)
    assert window.applies_to("db-1") and not window.applies_to("db-10")
    assert window.origin == f"label {LABEL}"
    assert from_label("db-1", "0 2 * * * 90m Europe/Berlin").zone == BERLIN


# -- crontab semantics --------------------------------------------------------------------------

ORDINARY = ["0 2 * * *", "*/15 9-17 * * mon-fri", "30 4 1,15 * *", "0 0 1 jan,jul *", "5 */6 * * *"]


@pytest.mark.parametrize("zone", [UTC, BERLIN, ZoneInfo("America/New_York")], ids=str)
@pytest.mark.parametrize("cron", ORDINARY)
def test_ordinary_days_start_when_apscheduler_fires(cron: str, zone: ZoneInfo) -> None:
    window = MaintenanceWindow("*", from_label("x", f"{cron} 1m").cron, timedelta(minutes=1), zone)
    june = utc(2027, 6, 1, 0, 0, 30)  # no start: APScheduler's first may fall at `after`
    assert starts(window, june, 60) == aps_starts(cron, zone, june, 60)


def test_weekday_numbers_are_crontabs_where_sunday_is_0_and_7() -> None:
    # APScheduler 3.x reads 0 as Monday (its issue 286); an operator writing crontab means Sunday.
    monday = utc(2027, 6, 7)
    for cron in ("0 2 * * 0", "0 2 * * 7", "0 2 * * sun"):
        assert from_label("x", f"{cron} 1h").next_start(monday) == utc(2027, 6, 13, 2)
    assert aps_starts("0 2 * * 0", UTC, monday, 1) == [utc(2027, 6, 7, 2)]  # a Monday
    weekend = from_label("x", "0 2 * * 6-7 1h")
    assert [s.strftime("%a") for s in starts(weekend, monday, 3)] == ["Sat", "Sun", "Sat"]


def test_restricted_day_of_month_and_weekday_start_on_either_as_crontab_does() -> None:
    # "the 1st, and every Monday"; APScheduler would need a Monday that is the 1st.
    window = from_label("x", "0 2 1 * mon 1h")
    days = [s.date().isoformat() for s in starts(window, utc(2027, 6, 1, 3), 5)]
    assert days == ["2027-06-07", "2027-06-14", "2027-06-21", "2027-06-28", "2027-07-01"]


# -- daylight saving ----------------------------------------------------------------------------


def test_spring_forward_a_start_in_the_missing_hour_happens_once_moved_by_the_gap() -> None:
    window = berlin("0 2 * * *")
    # 02:00 CET does not exist on this night: the window runs 03:00-04:00 CEST (01:00-02:00Z).
    assert window.next_start(SPRING) == utc(2027, 3, 28, 1)
    assert window.active_at(utc(2027, 3, 28, 0, 59)) is None
    assert window.active_at(utc(2027, 3, 28, 1, 30)) == (utc(2027, 3, 28, 1), utc(2027, 3, 28, 2))
    assert window.active_at(utc(2027, 3, 28, 2)) is None
    assert starts(window, utc(2027, 3, 27), 3) == [
        utc(2027, 3, 27, 1),  # 02:00 CET
        utc(2027, 3, 28, 1),  # 03:00 CEST, the one start of the night
        utc(2027, 3, 29, 0),  # 02:00 CEST
    ]
    # APScheduler does the same, as zoneinfo reads a missing wall time.
    before = utc(2027, 3, 27)
    assert aps_starts("0 2 * * *", BERLIN, before, 3) == starts(window, before, 3)


def test_spring_forward_each_missing_start_happens_so_a_window_keeps_its_length() -> None:
    halves = berlin("0,30 2 * * *", "30m")
    assert starts(halves, SPRING, 2) == [utc(2027, 3, 28, 1), utc(2027, 3, 28, 1, 30)]
    # APScheduler drops the 02:30 of that night: only half of the hour would be held.
    assert aps_starts("0,30 2 * * *", BERLIN, SPRING, 2)[1] == utc(2027, 3, 29, 0)
    late = berlin("30 2 * * *")  # 02:30 CET does not exist: 03:30 CEST, sixty real minutes
    assert late.active_at(utc(2027, 3, 28, 2)) == (utc(2027, 3, 28, 1, 30), utc(2027, 3, 28, 2, 30))


def test_fall_back_a_start_in_the_repeated_hour_happens_once_at_the_first_pass() -> None:
    window = berlin("0 2 * * *")
    first, second = utc(2027, 10, 31, 0), utc(2027, 10, 31, 1)  # 02:00 CEST, then 02:00 CET
    assert window.active_at(first) == (first, second)
    assert window.active_at(utc(2027, 10, 31, 0, 59)) == (first, second)
    assert window.active_at(second) is None  # the clock reads 02:00 again: the window is over
    assert window.active_at(utc(2027, 10, 31, 1, 30)) is None
    assert window.next_start(first) == utc(2027, 11, 1, 1)  # not the second 02:00
    # APScheduler starts it twice that night: two hours held instead of one.
    assert aps_starts("0 2 * * *", BERLIN, utc(2027, 10, 30, 12), 2) == [first, second]


def test_fall_back_a_window_lasts_real_time_not_wall_time() -> None:
    window = berlin("30 2 * * *")
    start = utc(2027, 10, 31, 0, 30)  # 02:30 CEST
    assert window.active_at(start) == (start, start + timedelta(minutes=60))  # 02:30 CET


def test_fall_back_an_hourly_window_leaves_no_hole_in_the_repeated_hour() -> None:
    window = berlin("0 * * * *")
    moment = utc(2027, 10, 30, 22)
    while moment < utc(2027, 10, 31, 4):
        assert window.active_at(moment) is not None, moment
        moment += timedelta(minutes=10)
    assert utc(2027, 10, 31, 1) in starts(window, FALL, 4)  # 02:00 CET starts one too


# Zones whose clocks change at midnight (Havana, Santiago) or by half an hour (Lord Howe).
ZONES = ["Europe/Berlin", "America/New_York", "America/Havana", "America/Santiago"]
ZONES += ["Australia/Lord_Howe"]


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("cron", ["0 0 * * *", "30 2 * * *"])
def test_a_daily_window_starts_once_on_every_day_of_the_year(zone: str, cron: str) -> None:
    window = from_label("db-1", f"{cron} 1h {zone}")
    year = starts(window, utc(2026, 12, 31, 12), 366)
    days = {s.astimezone(ZoneInfo(zone)).date() for s in year}
    assert len(days) == 366  # every day once, none twice
    for before, after in pairwise(year):
        assert timedelta(hours=22) <= after - before <= timedelta(hours=26)
        assert window.active_at(after) == (after, after + timedelta(hours=1))


# -- queries over time --------------------------------------------------------------------------


def test_a_clock_stepped_forward_into_a_window_finds_it_and_one_stepped_back_out_does_not() -> None:
    window = from_label("db-1", "0 2 * * * 1h")
    clock = FakeClock(utc(2027, 6, 1, 1, 50))
    assert window.active_at(clock.now()) is None
    clock.step(minutes=20)  # 02:10, no time passed
    assert window.active_at(clock.now()) == (utc(2027, 6, 1, 2), utc(2027, 6, 1, 3))
    clock.step(minutes=-30)  # back to 01:40
    assert window.active_at(clock.now()) is None
    clock.step(hours=24, minutes=30)  # over the end and into the next night's window
    assert window.active_at(clock.now()) == (utc(2027, 6, 2, 2), utc(2027, 6, 2, 3))
    clock.step(days=-1, hours=2)  # back, past the end of the first night's window
    assert window.active_at(clock.now()) is None


def test_a_window_holds_from_its_start_up_to_but_not_at_its_end() -> None:
    window = from_label("db-1", "0 2 * * * 1h")
    assert window.active_at(utc(2027, 6, 1, 2)) is not None
    assert window.active_at(utc(2027, 6, 1, 2, 59, 59)) is not None
    assert window.active_at(utc(2027, 6, 1, 3)) is None


def test_a_window_spans_midnight() -> None:
    window = from_label("db-1", "30 23 * * * 2h Europe/Berlin")
    start, end = utc(2027, 6, 1, 21, 30), utc(2027, 6, 1, 23, 30)  # 23:30-01:30 CEST
    assert window.active_at(utc(2027, 6, 1, 23, 0)) == (start, end)
    long = from_label("db-1", "0 22 * * sat 2d")  # Saturday 22:00 to Monday 22:00 UTC
    assert long.active_at(utc(2027, 6, 7, 21)) == (utc(2027, 6, 5, 22), utc(2027, 6, 7, 22))
    assert long.active_at(utc(2027, 6, 7, 22)) is None


def test_next_start_is_strictly_after_now() -> None:
    window = from_label("db-1", "0 2 * * * 1h")
    assert window.next_start(utc(2027, 6, 1, 1)) == utc(2027, 6, 1, 2)
    assert window.next_start(utc(2027, 6, 1, 2)) == utc(2027, 6, 2, 2)  # in force now
    assert window.next_start(utc(2027, 12, 31, 23)) == utc(2028, 1, 1, 2)
    leap = from_label("db-1", "0 2 29 2 * 1h")
    assert leap.next_start(utc(2097, 3, 1)) == utc(2104, 2, 29, 2)  # 2100 is no leap year


def test_time_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        from_label("db-1", "0 2 * * * 1h").active_at(datetime(2027, 6, 1, 2))


# -- many windows for one container -------------------------------------------------------------


def test_windows_for_a_name_are_those_whose_glob_matches_it() -> None:
    db = from_config({"containers": "db-*", "cron": "0 2 * * *", "duration": "1h"}, "m[0]")
    web = from_config({"containers": "web", "cron": "0 3 * * *", "duration": "1h"}, "m[1]")
    own = from_label("db-1", "0 4 * * * 1h")
    assert windows_for("db-1", [db, web, own]) == (db, own)
    assert windows_for("db-2", [db, web, own]) == (db,)
    assert windows_for("DB-1", [db, web, own]) == ()  # names are case-sensitive


def test_of_overlapping_windows_the_one_that_ends_latest_is_in_force() -> None:
    short = from_config({"containers": "db-*", "cron": "0 2 * * *", "duration": "1h"}, "m[0]")
    long = from_label("db-1", "30 1 * * * 2h")
    other = from_config({"containers": "web", "cron": "0 2 * * *", "duration": "6h"}, "m[1]")
    windows = [short, long, other]
    assert in_force("db-1", windows, utc(2027, 6, 1, 2, 15)) == (long, utc(2027, 6, 1, 3, 30))
    assert in_force("db-2", windows, utc(2027, 6, 1, 2, 15)) == (short, utc(2027, 6, 1, 3))
    assert in_force("db-1", windows, utc(2027, 6, 1, 1, 45)) == (long, utc(2027, 6, 1, 3, 30))
    assert in_force("db-1", windows, utc(2027, 6, 1, 3, 30)) is None
    assert in_force("cache", windows, utc(2027, 6, 1, 2, 15)) is None
