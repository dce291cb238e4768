"""EngineClock: the engine's stamps in Guardian's frame, from the Date header of its answers."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import pytest

from guardian.adapters.engine_clock import REFRESH, EngineClock
from guardian.core.model import ContainerSnapshot
from tests.fakes import FakeClock


def date_of(clock: FakeClock, skew: float) -> str:
    """The Date header an engine `skew` seconds ahead of `clock` sends now (whole seconds)."""
    return format_datetime(clock.now() + timedelta(seconds=skew), usegmt=True)


@pytest.mark.parametrize("skew", [600, -600, 3 * 3600])
def test_an_engine_minutes_off_gets_its_stamps_translated(skew) -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    assert engine.due()
    engine.saw_date(date_of(clock, skew))
    assert abs((engine.skew - timedelta(seconds=skew)).total_seconds()) <= 1
    started = clock.now() - timedelta(seconds=30)  # as Guardian's clock would have said
    snap = ContainerSnapshot(
        "id", "web", {}, "running", "healthy", started_at=started + timedelta(seconds=skew)
    )
    assert engine.snapshot(snap).started_at == started + timedelta(seconds=skew) - engine.skew
    assert abs((engine.snapshot(snap).started_at - started).total_seconds()) <= 1
    assert engine.theirs(engine.ours(started)) == started


def test_a_local_engine_stays_exactly_in_step() -> None:
    """A header has whole seconds: noise within the tolerance never moves the skew."""
    clock = FakeClock()
    engine = EngineClock(clock)
    for fraction in (0.0, 0.4, 0.9, 0.2):
        clock.advance(REFRESH + fraction)
        assert engine.due()
        engine.saw_date(date_of(clock, 0))
        assert not engine.due()
        assert engine.skew == timedelta(0)
    snap = ContainerSnapshot("id", "web", {}, "running", None, started_at=clock.now())
    assert engine.snapshot(snap) is snap


def test_the_skew_is_read_again_at_once_after_guardians_clock_steps() -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    engine.saw_date(date_of(clock, 0))
    clock.advance(1)
    assert not engine.due()
    clock.step(minutes=10)  # only Guardian's clock: the engine's is 10 minutes behind it now
    assert engine.due()
    engine.saw_date(date_of(clock, -600))
    assert abs((engine.skew + timedelta(minutes=10)).total_seconds()) <= 1


@pytest.mark.parametrize("header", [None, "", "yesterday", "Mon, 32 Foo 2026 99:99:99"])
def test_a_broken_date_header_keeps_the_last_skew(header) -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    engine.saw_date(date_of(clock, 600))
    before = engine.skew
    clock.advance(REFRESH)
    engine.saw_date(header)
    assert engine.skew == before
