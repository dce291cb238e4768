"""SystemClock: the one place that reads the wall clock and the monotonic clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime

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
