"""Storm sizing: how many unhealthy containers at once make a host-level incident."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class StormSettings:
    threshold: float = 50.0  # percent of watched containers
    window: timedelta = timedelta(seconds=60)
    min_containers: int = 3


def storm_size(watched: int, settings: StormSettings) -> int:
    """How many unhealthy containers make a storm: more than threshold %, and at least min."""
    over = int(watched * settings.threshold / 100) + 1
    return max(over, settings.min_containers)


STORM_NEXT = "per-container restarts held until the host recovers or someone acknowledges"
