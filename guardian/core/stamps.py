"""Stamps against a wall clock that steps.

A stamp read back from the store that lies ahead of the clock was written before the clock
stepped back (or by a clock that ran ahead): it counts as now, so a step makes Guardian wait
longer, never act sooner (docs/design.md rule 12).

Within a run, a moment Guardian holds in memory (a deadline, a hold, a streak's start) is a
reading of the monotonic clock, and is placed on the wall clock only where a person reads it or
the store keeps it (Reading): a step of the wall clock moves the placed stamp with it, and no
duration measured from it changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# Two readings of wall-minus-monotonic differ by microseconds unless the wall clock stepped.
JITTER = 1.0


def no_later_than(stamp: datetime, now: datetime) -> datetime:
    """`stamp`, or `now` when the stamp lies ahead of it."""
    return min(stamp, now)


def ahead(stamp: datetime | None, now: datetime) -> bool:
    """Whether `stamp` lies ahead of the clock: the clock stepped back since it was written."""
    return stamp is not None and stamp > now


def placed_since(stamp: datetime, mono: float | None, now: Reading) -> datetime:
    """A stamp written (perhaps by an earlier run) with the monotonic clock's reading `mono`
    then, on the wall clock as it reads `now`: where the monotonic clock puts it, which counts
    across runs on one boot and never steps, so a step of the wall clock since, followed or
    not, neither ages nor freshens it. The safe side wins: never earlier than the stamp itself
    counted as no later than now (a step back since), and the stamp alone when no reading was
    kept or it lies ahead of the clock's (another boot: the engine has started afresh since)."""
    wall = no_later_than(stamp, now.wall)
    if mono is None or mono > now.mono:
        return wall
    return max(wall, now.wall_of(mono))


@dataclass(frozen=True)
class Reading:
    """The wall clock (`wall`) and the monotonic clock (`mono`, seconds) read at one moment:
    the bridge between a moment held on the monotonic clock and the wall clock as it reads
    now."""

    wall: datetime
    mono: float

    def wall_of(self, mono: float) -> datetime:
        """The monotonic moment `mono` on the wall clock as it reads now."""
        return self.wall + timedelta(seconds=mono - self.mono)

    def mono_of(self, wall: datetime) -> float:
        """A stamp on the wall clock as it reads now (this run's `now`, an engine stamp in
        Guardian's frame) as a moment of the monotonic clock."""
        return self.mono + (wall - self.wall).total_seconds()

    def stepped_since(self, before: Reading) -> bool:
        """Whether the wall clock stepped between `before` and this reading (more than the
        jitter of reading two clocks)."""
        moved = (self.wall - before.wall).total_seconds() - (self.mono - before.mono)
        return abs(moved) >= JITTER
