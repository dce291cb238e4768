"""Storm sizing and the storm's hold: which containers count, how many unhealthy at once make a
host-level incident, whom it holds and how long, and how the hold grows when a canary restart
does not heal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.core.labels import in_scope


@dataclass(frozen=True)
class StormSettings:
    threshold: float = 50.0  # percent of watched containers
    window: timedelta = timedelta(seconds=60)
    # Five: fewer are restarted within the budget (2 at once, 10 a minute) in a round or two,
    # so a small host whose three or four containers fail together heals instead of waiting.
    min_containers: int = 5
    hold: timedelta = timedelta(minutes=5)  # restarts wait this long, then one canary
    max_hold: timedelta = timedelta(hours=1)  # the hold doubles after each failed canary, to this
    # storm.count: the label selector ("key" or "key=value") of the containers that count toward
    # a storm and that it may hold; empty: every watched container.
    count: str = ""


@dataclass(frozen=True)
class StormHold:
    """An open, unacknowledged storm as decide() sees it: every restart waits until `until`;
    then one container is restarted as the canary, and the others wait for its verdict."""

    until: datetime
    canary: str | None = None  # the container restarted as the canary, awaiting its verdict
    failed: str | None = None  # the last canary, not healed: another container tries next
    # None: one of the storm's own containers, held in full. Else a bystander's detection (or the
    # opening, if later): anyone who can start containers can make a storm, so a bystander is
    # held at most one cooldown from it.
    bystander_since: datetime | None = None


def counts(labels: Mapping[str, str], settings: StormSettings) -> bool:
    """Whether a watched container counts toward a storm (storm.count), and so may be held."""
    return in_scope(labels, settings.count)


def storm_size(watched: int, settings: StormSettings) -> int:
    """How many unhealthy containers make a storm: more than threshold %, and at least min."""
    over = int(watched * settings.threshold / 100) + 1
    return max(over, settings.min_containers)


def next_hold(hold: timedelta, settings: StormSettings) -> timedelta:
    """The hold after a canary that did not heal: doubled, never beyond max_hold."""
    return min(hold * 2, settings.max_hold)
