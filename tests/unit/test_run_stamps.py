"""RunStamps reads what a decision looks back over, not the whole run: over any sequence of
clock steps, slews, late stamps and store rows, it answers exactly what walking every stamp of
the run answers (the oracle below), and a read walks only the stamps that could count."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import guardian.adapters.run_stamps as run_stamps
from guardian.adapters.clock import stepped_between, wall_offset
from guardian.adapters.run_stamps import KEEP, RunStamps
from tests.fakes import FakeClock

Read = Callable[[datetime], tuple[datetime, ...]]


class WalkAll:
    """The oracle: every stamp of the run placed at every read (what RunStamps did before it
    walked back from the newest only)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.restarts: list[tuple[str, str, datetime, float, float]] = []
        self.resets: list[tuple[str, datetime, float, float]] = []
        self.began = wall_offset(clock)

    def _mono_offset(self) -> tuple[float, float]:
        return self.clock.monotonic(), wall_offset(self.clock)

    def _recent(self, stamps: list) -> list:  # type: ignore[type-arg]
        oldest = self.clock.monotonic() - KEEP.total_seconds()
        return [s for s in stamps if s[-2] >= oldest]

    def wrote_restart(self, container: str, at: datetime) -> None:
        self.restarts = self._recent(
            [*self.restarts, (container, container, at, *self._mono_offset())]
        )

    def wrote_reset(self, container: str, at: datetime) -> None:
        self.resets = self._recent([*self.resets, (container, at, *self._mono_offset())])

    def _place(self, at: datetime, offset: float) -> datetime:
        return at + stepped_between(offset, wall_offset(self.clock))

    def restart_times(
        self, since: datetime, read: Read, container: str | None
    ) -> tuple[datetime, ...]:
        ours = [
            (at, self._place(at, offset))
            for name, _, at, _, offset in self.restarts
            if container is None or name == container
        ]
        stepped = stepped_between(self.began, wall_offset(self.clock))
        widen = max((placed - at for at, placed in ours), default=timedelta(0))
        written = Counter(at for at, _ in ours)
        older = []
        for t in read(since - max(widen, stepped, timedelta(0))):
            if written[t]:
                written[t] -= 1
            elif t + stepped > since:
                older.append(t + stepped)
        return tuple(older) + tuple(placed for _, placed in ours if placed > since)

    def last_reset(self, container: str, stored: datetime | None) -> datetime | None:
        for name, at, _, offset in self.resets:
            if name == container and at == stored:
                return self._place(at, offset)
        stepped = stepped_between(self.began, wall_offset(self.clock))
        return None if stored is None else stored + stepped


def nothing_stored(after: datetime) -> tuple[datetime, ...]:
    return ()


NAMES = ("a", "b", "c")
move = st.one_of(
    st.tuples(st.just("advance"), st.floats(0, 5)),
    st.tuples(st.just("advance"), st.floats(0, 4000)),
    st.tuples(st.just("advance"), st.floats(0, 4 * 86400)),
    st.tuples(st.just("step"), st.floats(-7200, 7200)),
    st.tuples(st.just("step"), st.floats(-1.5, 1.5)),  # within and around the jitter
    st.tuples(st.just("tick"), st.floats(0, 600)),  # the wall clock slewed back
)
# A request's time is taken before its stamp (up to seconds before, when the store was slow),
# or after it, when the wall clock stepped back in between.
write = st.tuples(st.sampled_from(("restart", "reset")), st.sampled_from(NAMES), st.floats(-5, 5))
look = st.tuples(
    st.just("look"),
    st.sampled_from((None, *NAMES)),
    st.one_of(
        st.floats(0, 8),  # about where a late stamp or an unnoticed step places one
        st.sampled_from((60.0, 3600.0, 7200.0, 86400.0, 8 * 86400.0)),
    ),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(move, write, look), min_size=1, max_size=80))
def test_a_read_answers_what_walking_every_stamp_answers(script) -> None:
    clock = FakeClock()
    fast, oracle = RunStamps(clock), WalkAll(clock)
    # The store: rows of this run and of an earlier one (written before it began).
    stored: list[tuple[str, datetime]] = [
        (name, clock.now() - timedelta(seconds=s)) for name, s in (("a", 30), ("b", 90))
    ]
    resets: dict[str, datetime] = {}
    for op in script:
        if op[0] in ("advance", "step", "tick"):
            getattr(clock, op[0])(op[1])
        elif op[0] == "restart":
            at = clock.now() + timedelta(seconds=op[2])
            stored.append((op[1], at))
            fast.wrote_restart("h", op[1], op[1], at)
            oracle.wrote_restart(op[1], at)
        elif op[0] == "reset":
            at = clock.now() + timedelta(seconds=op[2])
            resets[op[1]] = at
            fast.wrote_reset("h", op[1], at)
            oracle.wrote_reset(op[1], at)
        else:
            _, who, back = op

            def read(after: datetime, who: str | None = who) -> tuple[datetime, ...]:
                return tuple(t for name, t in stored if t > after and who in (None, name))

            since = clock.now() - timedelta(seconds=back)
            got = fast.restart_times("h", since, read, who, who)
            assert sorted(got) == sorted(oracle.restart_times(since, read, who))
            for name in NAMES:
                expected = oracle.last_reset(name, resets.get(name))
                assert fast.last_reset("h", name, resets.get(name)) == expected


def test_a_read_walks_the_stamps_it_looks_back_over_not_the_runs(monkeypatch) -> None:
    """A week of restarts, one a minute: the host's last minute (the budget) and a container's
    last hour (its window) place only the stamps written in them, and the reads say so."""
    clock = FakeClock()
    stamps = RunStamps(clock)
    for i in range(7 * 24 * 60):
        clock.advance(60)
        stamps.wrote_restart("h", f"c{i % 10}", f"c{i % 10}", clock.now())
    placed = Counter[str]()
    place = run_stamps.stepped_between

    def counting(then: float, now: float) -> timedelta:
        placed["stamps"] += 1
        return place(then, now)

    monkeypatch.setattr(run_stamps, "stepped_between", counting)
    minute = stamps.restart_times("h", clock.now() - timedelta(minutes=1), nothing_stored)
    assert len(minute) == 1 and placed["stamps"] <= 3
    placed.clear()
    hour = stamps.restart_times("h", clock.now() - timedelta(hours=1), nothing_stored, "c3", "c3")
    assert len(hour) == 6 and placed["stamps"] <= 8


@pytest.mark.parametrize("step", [-3600.0, 3600.0])
def test_a_stamp_written_before_a_step_is_placed_by_the_monotonic_clock(step: float) -> None:
    clock = FakeClock()
    stamps = RunStamps(clock)
    written = clock.now()
    stamps.wrote_restart("h", "a", "a", written)
    clock.advance(30)
    clock.step(step)
    got = stamps.restart_times("h", clock.now() - timedelta(minutes=1), nothing_stored, "a", "a")
    assert got == (written + timedelta(seconds=step),)


def test_a_stamp_ahead_of_its_clocks_is_still_read() -> None:
    # The wall clock stepped back between the request's time and its stamp: the time lies
    # ahead of the clocks read for the stamp, and still counts once the clock passes it.
    clock = FakeClock()
    stamps = RunStamps(clock)
    ahead = clock.now() + timedelta(seconds=3)
    stamps.wrote_restart("h", "a", "a", ahead)
    clock.advance(2)
    assert stamps.restart_times("h", clock.now(), nothing_stored, "a", "a") == (ahead,)


def test_a_stamp_before_an_unnoticed_step_back_is_still_read() -> None:
    # A step back within the jitter is not told from reading two clocks: the stamp keeps its
    # time, which now lies ahead of where the monotonic clock alone would place it.
    clock = FakeClock()
    stamps = RunStamps(clock)
    written = clock.now()
    stamps.wrote_restart("h", "a", "a", written)
    clock.step(-0.9)
    clock.advance(0.5)
    assert stamps.restart_times("h", clock.now(), nothing_stored, None) == (written,)
