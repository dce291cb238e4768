"""Time as the oracle measures it: true time (the monotonic clock) and the time Guardian may
credit between two moments when the wall clock stepped and Guardian restarted in between.

Within one run of Guardian every duration runs on the monotonic clock (docs/design.md rule 12).
Across a restart of Guardian only the wall stamps in its store survive, so a step of the wall
clock forward before the restart cannot be told from time passing: it may be credited. A step
back only ever makes Guardian wait longer (a stamp ahead of the clock counts as now).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

from tests.fakes import FakeClock

# The clock's resolution: Guardian's stamps keep microseconds, while true time here is a sum of
# floats; a look Guardian asked for at a deadline runs on it, so Guardian may count up to this
# much more than the floats say.
RESOLUTION = 1e-6


@dataclass(frozen=True, order=True)
class Moment:
    """A point in the simulation: its place in the order of what happened, and true time."""

    seq: int
    mono: float


@dataclass
class Frame:
    """The runs of Guardian and the steps of the wall clock, in order (found by bisection: a
    week of steps asks these questions hundreds of thousands of times)."""

    clock: FakeClock
    runs: list[Moment] = field(default_factory=list)  # each start of Guardian
    steps: list[tuple[Moment, float]] = field(default_factory=list)  # (when, seconds)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _step_at: list[Moment] = field(default_factory=list)  # the steps' moments
    _forward: list[float] = field(default_factory=lambda: [0.0])  # steps forward, summed so far

    def now(self) -> Moment:
        return Moment(next(self._order), self.clock.monotonic())

    def started(self) -> None:
        self.runs.append(self.now())

    def stepped(self, seconds: float) -> None:
        at = self.now()
        self.steps.append((at, seconds))
        self._step_at.append(at)
        self._forward.append(self._forward[-1] + max(seconds, 0.0))

    def within(self, moments: list[Moment], after: Moment, seconds: float) -> list[Moment]:
        """Those of `moments` (in order) that Guardian may count less than `seconds` before
        `after`: walked back from the newest only as far as any credit could reach."""
        reach = seconds + self._forward[-1]
        found = []
        for m in reversed(moments):
            if after.mono - m.mono >= reach:
                break
            if self.credited(m, after) < seconds:
                found.append(m)
        return found[::-1]

    def run_index(self, at: Moment) -> int:
        """Which run of Guardian (0: the first) `at` lies in."""
        return bisect.bisect_right(self.runs, at) - 1

    def run_start(self, at: Moment) -> Moment:
        """When the run of Guardian `at` lies in began."""
        index = self.run_index(at)
        return self.runs[index] if index >= 0 else Moment(-1, 0.0)

    def credited(self, before: Moment, after: Moment) -> float:
        """The most seconds Guardian may count from `before` to `after`: true time, plus the
        wall clock's steps forward between `before` and the start of the run `after` lies in
        (when `before` lies in an earlier run). A step back may make Guardian count less (a
        stamp ahead of the clock counts as now): safe, so never demanded."""
        gap = after.mono - before.mono + RESOLUTION
        start = self.run_start(after)
        if before < start:
            first = bisect.bisect_right(self._step_at, before)
            last = bisect.bisect_right(self._step_at, start)
            gap += self._forward[last] - self._forward[first]
        return gap


@dataclass
class Unwell:
    """When one container was last seen unwell (a restart, or the engine showing Guardian the
    container unwell), and every sighting that followed a clean stretch of `reset_after`
    seconds: the moments a counter reset may have counted from. Sightings come in order."""

    reset_after: float
    last: Moment | None = None
    after_clean: list[Moment] = field(default_factory=list)

    def saw(self, at: Moment) -> None:
        if self.last is None or at.mono - self.last.mono + RESOLUTION >= self.reset_after:
            self.after_clean.append(at)
        self.last = at

    def reset_point(self, at: Moment) -> Moment:
        """The latest moment up to `at` a reset may have counted from: restarts from it on
        count against max_attempts, earlier ones may have been reset. `at` itself when the
        stretch before it is clean. Lenient on purpose: Guardian resets only once it observed
        reset_after of health, never on a sighting it was not shown."""
        if self.last is None or at.mono - self.last.mono + RESOLUTION >= self.reset_after:
            return at
        return self.after_clean[-1]
