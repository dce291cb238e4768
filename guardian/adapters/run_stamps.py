"""RunStamps: the restart requests and counter resets this run wrote, with a monotonic reading
of each, so that read back they are placed by the monotonic clock: a step of the wall clock
within a run neither shortens nor lengthens a cooldown, an attempt window or the host budget.
Stamps from before this run move by the steps since it began; a step before it cannot be told
from time passing (decide() counts a stamp ahead of the clock as now: core.stamps).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
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


class RunStamps:
    """The Stamps port over a Clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        # In the order written, which is the monotonic clock's: a read walks back from the
        # newest only as far as a stamp could still count (_since), and the oldest leave first.
        self._restarts: deque[_Stamp] = deque()
        self._resets: deque[_Stamp] = deque()
        # The reset stamps by what a read looks them up by: host, name and the stored time.
        self._reset_at: dict[tuple[str, str, datetime], deque[_Stamp]] = {}
        # How many of this run's restart stamps carry each time, by host, by name and by id:
        # the store's rows that are this run's own, known without walking the stamps.
        self._written: Counter[tuple[str | datetime, ...]] = Counter()
        # How far a stamp's time lies ahead of the clocks read as it was made: a request's time
        # is taken before its stamp, so never, unless the wall clock stepped back in between.
        self._lead = 0.0
        self._count = 0  # restart stamps written
        self._began = wall_offset(clock)

    def stepped(self) -> timedelta:
        """How far the wall clock stepped since this run began (forward: positive)."""
        return stepped_between(self._began, wall_offset(self.clock))

    def _stamp(self, host: str, container: str, container_id: str, at: datetime) -> _Stamp:
        mono, offset = self.clock.monotonic(), wall_offset(self.clock)
        self._lead = max(self._lead, at.timestamp() - (offset + mono))
        return _Stamp(host, container, container_id, at, mono, offset)

    @staticmethod
    def _key(
        host: str, at: datetime, container: str | None = None, container_id: str | None = None
    ) -> tuple[str | datetime, ...]:
        """What a read by host, by name (`container`) or by id (and name) counts a time under."""
        return (host, *(x for x in (container, container_id) if x is not None), at)

    def _counted_as(self, s: _Stamp) -> tuple[tuple[str | datetime, ...], ...]:
        return (
            self._key(s.host, s.at),
            self._key(s.host, s.at, s.container),
            self._key(s.host, s.at, s.container, s.container_id),
        )

    def wrote_restart(self, host: str, container: str, container_id: str, at: datetime) -> None:
        with self._lock:
            stamp = self._stamp(host, container, container_id, at)
            self._restarts.append(stamp)
            self._count += 1
            self._written.update(self._counted_as(stamp))
            for gone in self._forget_old(self._restarts):
                for key in self._counted_as(gone):
                    self._written[key] -= 1
                    if not self._written[key]:
                        del self._written[key]

    def wrote_reset(self, host: str, container: str, at: datetime) -> None:
        with self._lock:
            stamp = self._stamp(host, container, "", at)
            self._resets.append(stamp)
            self._reset_at.setdefault((host, container, at), deque()).append(stamp)
            for gone in self._forget_old(self._resets):
                same = self._reset_at[(gone.host, gone.container, gone.at)]
                same.popleft()  # the oldest of them: stamps leave in the order written
                if not same:
                    del self._reset_at[(gone.host, gone.container, gone.at)]

    def _forget_old(self, stamps: deque[_Stamp]) -> list[_Stamp]:
        oldest = self.clock.monotonic() - KEEP.total_seconds()
        gone = []
        while stamps and stamps[0].mono < oldest:
            gone.append(stamps.popleft())
        return gone

    def _placed(self, stamps: Iterable[_Stamp]) -> list[tuple[_Stamp, datetime]]:
        """Each stamp with where the monotonic clock puts it on today's wall clock: moved by
        the steps since it was written."""
        offset = wall_offset(self.clock)
        return [(s, s.at + stepped_between(s.offset, offset)) for s in stamps]

    def _since(self, stamps: deque[_Stamp], since: datetime) -> Iterator[_Stamp]:
        """The stamps, newest first, down to the last that could be placed after `since`.
        A stamp is placed at most JITTER (an unnoticed step) plus its lead after the wall
        clock's reading for its monotonic one (wall_offset), and the stamps are in monotonic
        order: one older than that bound, and every one before it, is placed before `since`."""
        bound = since.timestamp() - wall_offset(self.clock) - self._lead - JITTER - SLACK
        for s in reversed(stamps):
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
        with self._lock:
            ours = [
                placed
                for s, placed in self._placed(
                    s
                    for s in self._since(self._restarts, since)
                    if s.host == host
                    and (container is None or s.container == container)
                    and (container_id is None or s.container_id == container_id)
                )
                if placed > since
            ]
            count = self._count
        stepped = self.stepped()
        # Only a stored time later than `since` less a step forward can count.
        stored = read(since - max(stepped, timedelta(0)))

        with self._lock:
            # This run's own among the stored ones, as many times as it wrote each (after a
            # step back, two requests may carry the same stamp), as of the stamps read above.
            later = Counter(
                k
                for s in itertools.islice(reversed(self._restarts), self._count - count)
                for k in self._counted_as(s)
            )
            keys = {t: self._key(host, t, container, container_id) for t in set(stored)}
            written = {t: self._written[k] - later[k] for t, k in keys.items()}
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
        with self._lock:
            # The first written of those that carry the stored time (after a step back, two
            # resets may carry the same).
            same = self._reset_at.get((host, container, stored)) if stored is not None else None
            first = same[0] if same else None
        if first is not None:
            [(_, placed)] = self._placed((first,))
            return placed
        return None if stored is None else stored + self.stepped()
