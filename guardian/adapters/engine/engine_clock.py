"""EngineClock: the engine's clock against Guardian's, so the engine's stamps (State.StartedAt,
health probe times, event times) are judged in Guardian's frame even when the two clocks differ
(a remote engine, a host whose clock Guardian does not share, a skewed VM).

Every engine response carries a `Date` header (a socket proxy that allows only Guardian's
endpoints still sends it, unlike /info's SystemTime). A header has whole seconds, so one answer
bounds the skew within about a second; each answer narrows the bounds, and answers that
contradict them (either clock stepped) start them afresh. While the bounds allow no skew at all,
there is none: a local engine's stamps are taken as they are.

A stamp of a container's state is placed where it was first seen and then moves with the steps
of Guardian's wall clock (adapters.clock.wall_offset), as every stamp Guardian holds does: a
grace period or a verification that began before a step keeps its length through it.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from guardian.adapters.clock import stepped_between, wall_offset
from guardian.core.model import ContainerSnapshot
from guardian.ports import Clock

SEEN = 4096  # state stamps remembered (the oldest are forgotten first)


class EngineClock:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._skew = timedelta(0)  # the engine's clock minus Guardian's
        self._bounds: tuple[float, float] | None = None  # what the answers allow, in seconds
        # An engine stamp -> where it was placed when first seen, and wall_offset() then.
        self._seen: dict[datetime, tuple[datetime, float]] = {}
        self._header: tuple[str, float] | None = None  # the last Date parsed, as a timestamp

    @property
    def skew(self) -> timedelta:
        """The engine's clock minus Guardian's wall clock (positive: the engine is ahead)."""
        with self._lock:
            return self._skew

    @property
    def uncertainty(self) -> timedelta | None:
        """How far an engine stamp in Guardian's frame may be off: the width of what the
        answers allow (None: no answer yet)."""
        with self._lock:
            if self._bounds is None:
                return None
            low, high = self._bounds
            return timedelta(seconds=high - low)

    def saw_date(self, date: str | None, elapsed: float = 0.0) -> None:
        """An engine response's `Date` header (RFC 7231), just received, `elapsed` seconds
        after its request was sent."""
        if not date:
            return
        header = self._header
        if header is not None and header[0] == date:
            engine_at = header[1]  # answers within one second share their Date
        else:
            parsed = http_date(date)
            if parsed is None:
                return  # a broken header tells nothing; the skew stays
            engine_at = parsed.timestamp()
            self._header = (date, engine_at)
        received = self.clock.now().timestamp()
        sent = received - max(0.0, elapsed)
        # The engine wrote the header between `sent` and `received`, within its second.
        low, high = engine_at - received, engine_at + 1 - sent
        with self._lock:
            if self._bounds is not None:
                narrowed = max(low, self._bounds[0]), min(high, self._bounds[1])
                if narrowed[0] <= narrowed[1]:
                    low, high = narrowed
            self._bounds = (low, high)
            self._skew = timedelta(0) if low <= 0 <= high else timedelta(seconds=(low + high) / 2)

    def ours(self, stamp: datetime) -> datetime:
        """An engine stamp in Guardian's frame."""
        return stamp - self.skew

    def theirs(self, stamp: datetime) -> datetime:
        """A Guardian stamp in the engine's frame (e.g. the `since` of an event stream)."""
        return stamp + self.skew

    def snapshot(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        """`snap` with the engine's stamps in Guardian's frame."""
        offset = wall_offset(self.clock)
        stamps = (
            snap.started_at,
            snap.finished_at,
            snap.health_log_at,
            snap.unhealthy_since,
            snap.unhealthy_by,
            snap.created,
        )
        with self._lock:
            placed = tuple(self._placed(stamp, offset) for stamp in stamps)
        if placed == stamps:
            return snap
        started_at, finished_at, health_log_at, unhealthy_since, unhealthy_by, created = placed
        return replace(
            snap,
            started_at=started_at,
            finished_at=finished_at,
            health_log_at=health_log_at,
            unhealthy_since=unhealthy_since,
            unhealthy_by=unhealthy_by,
            created=created,
        )

    def _placed(self, stamp: datetime | None, offset: float) -> datetime | None:
        if stamp is None:
            return None
        seen = self._seen.get(stamp)
        if seen is None:
            if len(self._seen) >= SEEN:
                del self._seen[next(iter(self._seen))]
            seen = self._seen[stamp] = (stamp - self._skew, offset)
        at, then = seen
        return at + stepped_between(then, offset)


def http_date(date: str | None) -> datetime | None:
    """An HTTP `Date` header (RFC 7231) as an aware time; None when it is missing or unreadable."""
    try:
        parsed = parsedate_to_datetime(date or "")
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else None
