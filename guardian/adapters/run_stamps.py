"""RunStamps: the restart requests and counter resets this run wrote, with a monotonic reading
of each, so that read back they are placed by the monotonic clock: a step of the wall clock
within a run neither shortens nor lengthens a cooldown, an attempt window or the host budget.
Stamps from before this run move by the steps since it began; a step before it cannot be told
from time passing (decide() counts a stamp ahead of the clock as now: core.stamps).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.adapters.clock import stepped_between, wall_offset
from guardian.ports import Clock

KEEP = timedelta(days=8)  # longer than any window or cooldown a decision looks back over


@dataclass(frozen=True)
class _Stamp:
    host: str
    container: str
    container_id: str  # "" for a counter reset (kept by name)
    at: datetime  # as written
    mono: float  # the monotonic clock then
    offset: float  # the wall clock minus the monotonic clock then (adapters.clock.wall_offset)


class RunStamps:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._restarts: list[_Stamp] = []
        self._resets: list[_Stamp] = []
        self._began = wall_offset(clock)

    def stepped(self) -> timedelta:
        """How far the wall clock stepped since this run began (forward: positive)."""
        return stepped_between(self._began, wall_offset(self.clock))

    def _stamp(self, host: str, container: str, container_id: str, at: datetime) -> _Stamp:
        return _Stamp(
            host, container, container_id, at, self.clock.monotonic(), wall_offset(self.clock)
        )

    def wrote_restart(self, host: str, container: str, container_id: str, at: datetime) -> None:
        with self._lock:
            self._restarts.append(self._stamp(host, container, container_id, at))
            self._restarts = self._recent(self._restarts)

    def wrote_reset(self, host: str, container: str, at: datetime) -> None:
        with self._lock:
            self._resets.append(self._stamp(host, container, "", at))
            self._resets = self._recent(self._resets)

    def _recent(self, stamps: list[_Stamp]) -> list[_Stamp]:
        oldest = self.clock.monotonic() - KEEP.total_seconds()
        return [s for s in stamps if s.mono >= oldest]

    def _placed(self, stamps: Iterable[_Stamp]) -> list[tuple[_Stamp, datetime]]:
        """Each stamp with where the monotonic clock puts it on today's wall clock: moved by
        the steps since it was written."""
        offset = wall_offset(self.clock)
        return [(s, s.at + stepped_between(s.offset, offset)) for s in stamps]

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
        since this run began."""
        with self._lock:
            ours = self._placed(
                s
                for s in self._restarts
                if s.host == host
                and (container is None or s.container == container)
                and (container_id is None or s.container_id == container_id)
            )
        stepped = self.stepped()
        # A stamp written before a step forward lies earlier than it counts: ask further back.
        widen = max((placed - s.at for s, placed in ours), default=timedelta(0))
        # This run's own among the stored ones, as many times as it wrote each (after a step
        # back, two requests may carry the same stamp).
        written = Counter(s.at for s, _ in ours)
        older = []
        for t in read(since - max(widen, stepped, timedelta(0))):
            if written[t]:
                written[t] -= 1
            elif t + stepped > since:
                older.append(t + stepped)
        return tuple(older) + tuple(placed for _, placed in ours if placed > since)

    def last_reset(self, host: str, container: str, stored: datetime | None) -> datetime | None:
        """The last counter reset: this run's own, placed by the monotonic clock, when the
        store's latest is one of them."""
        with self._lock:
            ours = self._placed(
                s for s in self._resets if (s.host, s.container) == (host, container)
            )
        for s, placed in ours:
            if s.at == stored:
                return placed
        return None if stored is None else stored + self.stepped()
