"""parse_rfc3339(): the UTC moment of every RFC 3339 time, and one reason for everything else
(a table, and a property over any text)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardian.core.durations import CALENDAR, FORM, RANGE, parse_rfc3339

D = datetime


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-12-07T04:00:00Z", D(2026, 12, 7, 4, tzinfo=UTC)),
        ("2026-12-07t04:00:00z", D(2026, 12, 7, 4, tzinfo=UTC)),
        ("2026-12-07 04:00:00Z", D(2026, 12, 7, 4, tzinfo=UTC)),
        ("2026-12-07T04:00:00+01:00", D(2026, 12, 7, 3, tzinfo=UTC)),
        ("2026-12-07T04:00:00 01:00", D(2026, 12, 7, 3, tzinfo=UTC)),  # `+` sent as a space
        ("2026-12-07 04:00:00 01:00", D(2026, 12, 7, 3, tzinfo=UTC)),
        ("2026-12-07T04:00:00-05:30", D(2026, 12, 7, 9, 30, tzinfo=UTC)),
        ("2026-12-07T04:00:00-00:00", D(2026, 12, 7, 4, tzinfo=UTC)),
        ("2026-12-07T04:00:00.5Z", D(2026, 12, 7, 4, 0, 0, 500000, tzinfo=UTC)),
        ("2026-12-07T04:00:00.123456789Z", D(2026, 12, 7, 4, 0, 0, 123456, tzinfo=UTC)),
        ("2016-12-31T23:59:60Z", D(2017, 1, 1, tzinfo=UTC)),  # a leap second
        ("2016-12-31T18:59:60.5-05:00", D(2017, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
        ("2024-02-29T00:00:00Z", D(2024, 2, 29, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", D(1, 1, 1, tzinfo=UTC)),
        ("0001-01-01T00:00:00-01:00", D(1, 1, 1, 1, tzinfo=UTC)),
        ("9999-12-31T23:59:59.999999Z", D(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
        ("9999-12-31T23:59:59+01:00", D(9999, 12, 31, 22, 59, 59, tzinfo=UTC)),
    ],
)
def test_an_rfc3339_time_is_its_moment_in_utc(text: str, moment: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == moment and parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0001-01-01T00:00:00+01:00", RANGE),  # an hour before the first moment, in UTC
        ("9999-12-31T23:59:59-01:00", RANGE),
        ("9999-12-31T23:59:60Z", RANGE),
        ("0000-06-01T00:00:00Z", RANGE),
        ("2026-02-29T00:00:00Z", CALENDAR),
        ("2026-13-01T00:00:00Z", CALENDAR),
        ("2026-12-07T24:00:00Z", CALENDAR),
        ("2026-12-07T04:60:00Z", CALENDAR),
        ("2026-12-07T04:00:61Z", CALENDAR),
        ("2026-12-07T04:00:00+24:00", CALENDAR),
        ("2026-12-07T04:00:00+01:60", CALENDAR),
        ("2026-W49-1T00:00Z", FORM),
        ("20261207T040000Z", FORM),
        ("2026-12-07", FORM),
        ("2026-12-07T04:00", FORM),
        ("2026-12-07T04:00Z", FORM),
        ("2026-12-07T04:00:00", FORM),  # no offset: which time?
        ("2026-12-07T04:00:00,5Z", FORM),
        ("2026-12-07T04:00:00.Z", FORM),
        ("2026-12-07T04:00:00+0100", FORM),
        ("2026-12-07T04:00:00+01", FORM),
        ("2026-12-07_04:00:00Z", FORM),
        ("2026-12-07T04:00:00Z ", FORM),
        (" 2026-12-07T04:00:00Z", FORM),
        ("2026-12-07T04:00:00Z\n", FORM),
        ("+2026-12-07T04:00:00Z", FORM),
        ("12026-12-07T04:00:00Z", FORM),
        ("２026-12-07T04:00:00Z", FORM),  # a full-width digit
        ("", FORM),
    ],
)
def test_anything_else_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_rfc3339(text)
    assert str(refused.value) == reason


def test_no_reason_repeats_the_text_or_takes_two_lines() -> None:
    for reason in (FORM, CALENDAR, RANGE):
        assert "\n" not in reason and len(reason) < 200


@given(moment=st.datetimes(timezones=st.just(UTC)), minutes=st.integers(-1439, 1439))
def test_every_moment_written_with_any_offset_reads_back_as_itself(
    moment: datetime, minutes: int
) -> None:
    zone = timezone(timedelta(minutes=minutes))
    try:
        local = moment.astimezone(zone)
    except OverflowError:
        return  # a wall time no datetime holds: written only by hand, refused above
    assert parse_rfc3339(local.isoformat()) == moment


@given(text=st.text(max_size=60))
def test_any_text_is_a_moment_in_utc_or_one_of_three_reasons(text: str) -> None:
    try:
        parsed = parse_rfc3339(text)
    except ValueError as exc:
        assert str(exc) in (FORM, CALENDAR, RANGE)
    else:
        assert parsed.tzinfo is UTC
