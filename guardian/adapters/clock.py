"""SystemClock: the one place that reads the wall clock and the monotonic clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from guardian.core.stamps import JITTER as JITTER  # one home; run_stamps reads it here
from guardian.ports import Clock

# CLOCK_BOOTTIME counts suspend (a host that slept for an hour has waited an hour); where the
# platform lacks it, CLOCK_MONOTONIC, which never steps either.
MONOTONIC_ID = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def monotonic() -> float:
    """Seconds on the clock durations are measured on: never steps, counts suspend."""
    return time.clock_gettime(MONOTONIC_ID)


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return monotonic()


def wall_offset(clock: Clock) -> float:
    """The wall clock minus the monotonic clock, in seconds: it moves only when the wall clock
    steps (slewing moves both alike)."""
    return clock.now().timestamp() - clock.monotonic()


def stepped_between(then: float, now: float) -> timedelta:
    """How far the wall clock stepped between two wall_offset() readings (forward: positive);
    zero for the jitter of reading two clocks."""
    moved = now - then
    return timedelta(seconds=moved) if abs(moved) >= JITTER else timedelta(0)
