"""EngineClock: the engine's stamps in Guardian's frame, from the Date header of its answers."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import pytest

from guardian.adapters.clock import SystemClock
from guardian.adapters.engine.engine_clock import EngineClock
from guardian.core.model import ContainerSnapshot
from tests.fakes import FakeClock


def date_of(clock: FakeClock, skew: float) -> str:
    """The Date header an engine `skew` seconds ahead of `clock` sends now (whole seconds)."""
    return format_datetime(clock.now() + timedelta(seconds=skew), usegmt=True)


def answers(engine: EngineClock, clock: FakeClock, skew: float, n: int = 12) -> None:
    """`n` answers 2.37 s apart (sweeps): their Dates fall at every phase of a second."""
    for _ in range(n):
        clock.advance(2.37)
        engine.saw_date(date_of(clock, skew), elapsed=0.002)


@pytest.mark.parametrize("skew", [600.3, -600.8, 3 * 3600 + 0.5])
def test_an_engine_minutes_off_gets_its_stamps_translated(skew) -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    engine.saw_date(date_of(clock, skew))
    assert abs(engine.skew.total_seconds() - skew) <= 1  # one answer: within its second
    answers(engine, clock, skew)
    assert abs(engine.skew.total_seconds() - skew) <= 0.1  # answers narrow it down
    started = clock.now() - timedelta(seconds=30)  # as Guardian's clock would have said
    snap = ContainerSnapshot(
        "id", "web", {}, "running", "healthy", started_at=started + timedelta(seconds=skew)
    )
    translated = engine.snapshot(snap).started_at
    assert translated is not None and abs((translated - started).total_seconds()) <= 0.1
    assert engine.theirs(engine.ours(started)) == started


def test_a_local_engine_stays_exactly_in_step() -> None:
    """While the answers allow no skew at all, there is none."""
    clock = FakeClock()
    engine = EngineClock(clock)
    answers(engine, clock, 0, 40)
    assert engine.skew == timedelta(0)
    snap = ContainerSnapshot("id", "web", {}, "running", None, started_at=clock.now())
    assert engine.snapshot(snap) is snap


def test_a_step_of_either_clock_starts_the_bounds_afresh() -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    answers(engine, clock, 0)
    clock.step(minutes=10)  # only Guardian's clock: the engine's is 10 minutes behind it now
    engine.saw_date(date_of(clock, -600))
    assert abs(engine.skew.total_seconds() + 600) <= 1
    answers(engine, clock, -600 + 3600)  # the engine's clock steps an hour forward
    assert abs(engine.skew.total_seconds() - 3000) <= 0.1


@pytest.mark.parametrize("header", [None, "", "yesterday", "Mon, 32 Foo 2026 99:99:99"])
def test_a_broken_date_header_keeps_the_skew(header) -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    answers(engine, clock, 600)
    before = engine.skew
    engine.saw_date(header)
    assert engine.skew == before


@pytest.mark.parametrize("hours", [1, -1])
def test_a_state_stamp_seen_before_a_step_keeps_its_age_through_it(hours) -> None:
    """The host's clock steps (the engine's with it): a container that started 30 s ago is
    still 30 s into its grace period, not an hour past it or an hour before it began."""
    clock = FakeClock()
    engine = EngineClock(clock)
    answers(engine, clock, 0)
    started = clock.now() - timedelta(seconds=30)
    snap = ContainerSnapshot("id", "web", {}, "running", "starting", started_at=started)
    assert engine.snapshot(snap) is snap
    clock.step(hours=hours)
    answers(engine, clock, 0, 1)  # 2.37 s pass
    seen = engine.snapshot(snap).started_at
    assert seen is not None and (clock.now() - seen).total_seconds() == pytest.approx(32.37)
    later = ContainerSnapshot("id", "web", {}, "running", None, started_at=clock.now())
    assert engine.snapshot(later) is later  # written after the step: as it is


def test_reading_two_clocks_never_moves_a_stamp() -> None:
    engine = EngineClock(SystemClock())
    snap = ContainerSnapshot("id", "web", {}, "running", None, started_at=SystemClock().now())
    assert all(engine.snapshot(snap) is snap for _ in range(1000))


@pytest.mark.parametrize("skew", [0.0, 600.3, -0.4])
def test_how_far_a_stamp_may_be_off_narrows_with_the_answers(skew: float) -> None:
    # The container cache orders events against inspects within this (core.cache_entry).
    clock = FakeClock()
    engine = EngineClock(clock)
    assert engine.uncertainty is None  # nothing bounds it yet
    engine.saw_date(date_of(clock, skew), elapsed=0.002)
    first = engine.uncertainty
    assert first is not None and first <= timedelta(seconds=1.01)  # one answer: its second
    answers(engine, clock, skew, n=40)
    narrowed = engine.uncertainty
    assert narrowed is not None and narrowed <= timedelta(seconds=0.05)
    # The skew Guardian applies is within it of the truth.
    assert abs(engine.skew.total_seconds() - skew) <= narrowed.total_seconds()
