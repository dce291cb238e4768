"""Storm sizing and the storm's hold: how many unhealthy containers at once make a host-level
incident, how long restarts wait, and how the hold grows when a canary restart does not heal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class StormSettings:
    threshold: float = 50.0  # percent of watched containers
    window: timedelta = timedelta(seconds=60)
    # Five: fewer are restarted within the budget (2 at once, 10 a minute) in a round or two,
    # so a small host whose three or four containers fail together heals instead of waiting.
    min_containers: int = 5
    hold: timedelta = timedelta(minutes=5)  # restarts wait this long, then one canary
    max_hold: timedelta = timedelta(hours=1)  # the hold doubles after each failed canary, to this


@dataclass(frozen=True)
class StormHold:
    """An open, unacknowledged storm as decide() sees it: every restart waits until `until`;
    then one container is restarted as the canary, and the others wait for its verdict."""

    until: datetime
    canary: str | None = None  # the container restarted as the canary, awaiting its verdict
    failed: str | None = None  # the last canary, not healed: another container tries next


def storm_size(watched: int, settings: StormSettings) -> int:
    """How many unhealthy containers make a storm: more than threshold %, and at least min."""
    over = int(watched * settings.threshold / 100) + 1
    return max(over, settings.min_containers)


def next_hold(hold: timedelta, settings: StormSettings) -> timedelta:
    """The hold after a canary that did not heal: doubled, never beyond max_hold."""
    return min(hold * 2, settings.max_hold)
