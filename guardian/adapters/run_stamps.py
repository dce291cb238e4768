"""RunStamps: the restart requests and counter resets this run wrote, with a monotonic reading
of each, so that read back they are placed by the monotonic clock: a step of the wall clock
within a run neither shortens nor lengthens a cooldown, an attempt window or the host budget.
Stamps from before this run move by the steps since it began; a step before it cannot be told
from time passing (decide() counts a stamp ahead of the clock as now: core.stamps).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from guardian.adapters.clock import JITTER, stepped_between, wall_offset
from guardian.ports import Clock

KEEP = timedelta(days=8)  # longer than any window or cooldown a decision looks back over
SLACK = 1.0  # seconds: beyond the bound a stamp could be placed at (RunStamps._since)


@dataclass(frozen=True)
class _Stamp:
    host: str
    container: str
    container_id: str  # "" for a counter reset (kept by name)
    at: datetime  # as written
    mono: float  # the monotonic clock then
    offset: float  # the wall clock minus the monotonic clock then (adapters.clock.wall_offset)


Key = tuple[str | datetime, ...]  # what a read by host, by name or by id counts a time under


@dataclass(frozen=True)
class _Record:
    """Every stamp kept, as one value: a write makes a new one and swaps it in whole, so a read
    takes it once (one reference) and sees one moment of it, whatever is written meanwhile."""

    # In the order written, which is the monotonic clock's: a read walks back from the
    # newest only as far as a stamp could still count (_since), and the oldest leave first.
    restarts: tuple[_Stamp, ...] = ()
    resets: tuple[_Stamp, ...] = ()
    # The reset stamps by what a read looks them up by: host, name and the stored time.
    reset_at: Mapping[tuple[str, str, datetime], tuple[_Stamp, ...]] = field(default_factory=dict)
    # How many of this run's restart stamps carry each time, by host, by name and by id:
    # the store's rows that are this run's own, known without walking the stamps.
    written: Mapping[Key, int] = field(default_factory=dict)
    # How far a stamp's time lies ahead of the clocks read as it was made: a request's time
    # is taken before its stamp, so never, unless the wall clock stepped back in between.
    lead: float = 0.0
    count: int = 0  # restart stamps written


class RunStamps:
    """The Stamps port over a Clock.

    Keeps no lock: its writes come one at a time (LoopStore makes them under its lock, with
    the write they stamp), each making a new _Record from the last and swapping it in whole
    (one reference assignment, atomic in CPython); a read takes the record once and reads only
    that value, so it never walks stamps while they change (a deque popped or appended to
    under a lazy walk raises) nor counts from two moments. A write is a copy of what is kept
    (the restart requests of KEEP, which decide() and the host budget bound): a restart's cost,
    not a read's."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._record = _Record()
        self._began = wall_offset(clock)
        self._began_at = clock.now()

    def began(self) -> datetime:
        """When this run began, placed by the monotonic clock."""
        return self._began_at + self.stepped()

    def stepped(self) -> timedelta:
        """How far the wall clock stepped since this run began (forward: positive)."""
        return stepped_between(self._began, wall_offset(self.clock))

    def _stamp(
        self, was: _Record, host: str, container: str, container_id: str, at: datetime
    ) -> tuple[_Stamp, float]:
        """The stamp, and the lead kept with it."""
        mono, offset = self.clock.monotonic(), wall_offset(self.clock)
        lead = max(was.lead, at.timestamp() - (offset + mono))
        return _Stamp(host, container, container_id, at, mono, offset), lead

    @staticmethod
    def _key(
        host: str, at: datetime, container: str | None = None, container_id: str | None = None
    ) -> Key:
        """What a read by host, by name (`container`) or by id (and name) counts a time under."""
        return (host, *(x for x in (container, container_id) if x is not None), at)

    def _counted_as(self, s: _Stamp) -> tuple[Key, ...]:
        return (
            self._key(s.host, s.at),
            self._key(s.host, s.at, s.container),
            self._key(s.host, s.at, s.container, s.container_id),
        )

    def wrote_restart(self, host: str, container: str, container_id: str, at: datetime) -> None:
        """One at a time (the caller's lock: LoopStore's)."""
        was = self._record
        stamp, lead = self._stamp(was, host, container, container_id, at)
        restarts, gone = self._forget_old((*was.restarts, stamp))
        written = Counter(was.written)
        written.update(self._counted_as(stamp))
        for old in gone:
            for key in self._counted_as(old):
                written[key] -= 1
                if not written[key]:
                    del written[key]
        self._record = replace(
            was, restarts=restarts, written=written, lead=lead, count=was.count + 1
        )

    def wrote_reset(self, host: str, container: str, at: datetime) -> None:
        """One at a time (the caller's lock: LoopStore's)."""
        was = self._record
        stamp, lead = self._stamp(was, host, container, "", at)
        resets, gone = self._forget_old((*was.resets, stamp))
        reset_at = dict(was.reset_at)
        key = (host, container, at)
        reset_at[key] = (*reset_at.get(key, ()), stamp)
        for old in gone:
            key = (old.host, old.container, old.at)
            same = reset_at[key][1:]  # the oldest of them: stamps leave in the order written
            if same:
                reset_at[key] = same
            else:
                del reset_at[key]
        self._record = replace(was, resets=resets, reset_at=reset_at, lead=lead)

    def _forget_old(
        self, stamps: tuple[_Stamp, ...]
    ) -> tuple[tuple[_Stamp, ...], tuple[_Stamp, ...]]:
        """(those kept, those forgotten): the oldest leave once past KEEP."""
        oldest = self.clock.monotonic() - KEEP.total_seconds()
        gone = 0
        while gone < len(stamps) and stamps[gone].mono < oldest:
            gone += 1
        return stamps[gone:], stamps[:gone]

    def _placed(self, stamps: Iterable[_Stamp]) -> list[tuple[_Stamp, datetime]]:
        """Each stamp with where the monotonic clock puts it on today's wall clock: moved by
        the steps since it was written."""
        offset = wall_offset(self.clock)
        return [(s, s.at + stepped_between(s.offset, offset)) for s in stamps]

    def _since(self, record: _Record, since: datetime) -> Iterator[_Stamp]:
        """The restart stamps, newest first, down to the last that could be placed after
        `since`. A stamp is placed at most JITTER (an unnoticed step) plus its lead after the
        wall clock's reading for its monotonic one (wall_offset), and the stamps are in
        monotonic order: one older than that bound, and every one before it, is placed before
        `since`."""
        bound = since.timestamp() - wall_offset(self.clock) - record.lead - JITTER - SLACK
        for s in reversed(record.restarts):
            if s.mono < bound:
                return
            yield s

    def restart_times(
        self,
        host: str,
        since: datetime,
        read: Callable[[datetime], tuple[datetime, ...]],
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        """The restart times after `since`: `read(after)` asks the store; this run's own
        requests among them are placed by the monotonic clock, the others moved by the steps
        since this run began. Costs the stamps written since `since`, not the whole run's."""
        record = self._record
        ours = [
            placed
            for s, placed in self._placed(
                s
                for s in self._since(record, since)
                if s.host == host
                and (container is None or s.container == container)
                and (container_id is None or s.container_id == container_id)
            )
            if placed > since
        ]
        stepped = self.stepped()
        # Only a stored time later than `since` less a step forward can count.
        stored = read(since - max(stepped, timedelta(0)))

        now = self._record
        # This run's own among the stored ones, as many times as it wrote each (after a
        # step back, two requests may carry the same stamp), as of the stamps read above.
        later = Counter(
            k
            for s in itertools.islice(reversed(now.restarts), now.count - record.count)
            for k in self._counted_as(s)
        )
        keys = {t: self._key(host, t, container, container_id) for t in set(stored)}
        written = {t: now.written.get(k, 0) - later[k] for t, k in keys.items()}
        older = []
        for t in stored:
            if written[t] > 0:
                written[t] -= 1
            elif t + stepped > since:
                older.append(t + stepped)
        return tuple(older) + tuple(reversed(ours))  # in the order written, as the store's

    def last_reset(self, host: str, container: str, stored: datetime | None) -> datetime | None:
        """The last counter reset: this run's own, placed by the monotonic clock, when the
        store's latest is one of them."""
        # The first written of those that carry the stored time (after a step back, two
        # resets may carry the same).
        same = self._record.reset_at.get((host, container, stored)) if stored is not None else None
        if same:
            [(_, placed)] = self._placed((same[0],))
            return placed
        return None if stored is None else stored + self.stepped()
