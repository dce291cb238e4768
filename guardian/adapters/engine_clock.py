"""EngineClock: the engine's clock against Guardian's, so the engine's stamps (State.StartedAt,
health probe times, event times) are judged in Guardian's frame even when the two clocks differ
(a remote engine, a host whose clock Guardian does not share, a skewed VM).

The skew is read from the `Date` header that every engine response carries (a socket proxy
that allows only Guardian's endpoints still sends it), at connect and again every REFRESH, or
at once after Guardian's own wall clock stepped. A header has whole seconds, so a skew within
TOLERANCE of the one in use is noise: a local engine's skew stays exactly zero.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from guardian.core.model import ContainerSnapshot
from guardian.ports import Clock

REFRESH = 60.0  # seconds on the monotonic clock between two readings of the engine's clock
TOLERANCE = timedelta(seconds=2)
_STEP = 2.0  # seconds Guardian's wall clock may move against its monotonic clock unnoticed


class EngineClock:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._skew = timedelta(0)  # the engine's clock minus Guardian's
        self._read_at: float | None = None  # monotonic, when the skew was last read
        self._offset = 0.0  # Guardian's wall minus monotonic then

    @property
    def skew(self) -> timedelta:
        """The engine's clock minus Guardian's wall clock (positive: the engine is ahead)."""
        with self._lock:
            return self._skew

    def due(self) -> bool:
        """Whether the next response's Date should be read: never read, REFRESH passed, or
        Guardian's own wall clock stepped since the last reading."""
        mono = self.clock.monotonic()
        offset = self.clock.now().timestamp() - mono
        with self._lock:
            return (
                self._read_at is None
                or mono - self._read_at >= REFRESH
                or abs(offset - self._offset) > _STEP
            )

    def saw_date(self, date: str | None) -> None:
        """An engine response's `Date` header (RFC 7231, whole seconds), just received."""
        if not date:
            return
        try:
            engine_now = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            return  # a broken header tells nothing; the last skew stays
        if engine_now.tzinfo is None:
            return
        mono, now = self.clock.monotonic(), self.clock.now()
        # The header's second began up to a second ago: its middle is the best estimate.
        skew = engine_now + timedelta(milliseconds=500) - now
        with self._lock:
            self._read_at, self._offset = mono, now.timestamp() - mono
            if abs(skew - self._skew) > TOLERANCE:
                self._skew = skew

    def ours(self, stamp: datetime) -> datetime:
        """An engine stamp in Guardian's frame."""
        return stamp - self.skew

    def theirs(self, stamp: datetime) -> datetime:
        """A Guardian stamp in the engine's frame (e.g. the `since` of an event stream)."""
        return stamp + self.skew

    def snapshot(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        """`snap` with the engine's stamps in Guardian's frame."""
        skew = self.skew
        if not skew:
            return snap
        return replace(
            snap,
            started_at=_minus(snap.started_at, skew),
            finished_at=_minus(snap.finished_at, skew),
            health_log_at=_minus(snap.health_log_at, skew),
            unhealthy_since=_minus(snap.unhealthy_since, skew),
        )


def _minus(stamp: datetime | None, skew: timedelta) -> datetime | None:
    return None if stamp is None else stamp - skew
