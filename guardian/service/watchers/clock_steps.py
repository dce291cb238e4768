"""StepWatch: notices the wall clock stepping against the monotonic clock, logs each step once
and counts it (guardian_clock_steps_total), and hands it to `on_step`. What the loop holds in
memory for durations (deadlines, holds, streaks, pacing, probe schedules) is held on the
monotonic clock and needs no telling; a step is followed only where wall stamps are kept at an
edge: the store's problem starts and the outbox's retry times (Loop.follow_step), the
scheduler's run times (APScheduler keeps them on the wall clock: runtime/scheduling.py), and
the container cache, whose entries are doubted. So no duration depends on a step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from guardian.logs import kv
from guardian.ports import Clock, Metrics

log = logging.getLogger("guardian.clock")

# Slewing (NTP's gradual correction) moves the wall clock by well under a millisecond per
# second; a jump of more than this between two looks (at most an interval apart) is a step.
STEP = timedelta(seconds=3)


class StepWatch:
    """Call `look()` often (every scheduler turn): the step since the last look, or zero.

    One thread looks: the scheduler's own (SteadyScheduler._process_jobs runs only on
    APScheduler's main loop thread), so the baseline needs no lock."""

    def __init__(
        self,
        clock: Clock,
        metrics: Metrics,
        on_step: Callable[[timedelta], None] | None = None,
        threshold: timedelta = STEP,
    ) -> None:
        self.clock = clock
        self.metrics = metrics
        self.on_step = on_step
        self.threshold = threshold.total_seconds()
        self._offset = self._read()

    def _read(self) -> float:
        """Wall minus monotonic, in seconds: constant while the wall clock does not step."""
        return self.clock.now().timestamp() - self.clock.monotonic()

    def look(self) -> timedelta:
        offset = self._read()
        step, self._offset = offset - self._offset, offset
        # Below the threshold the baseline follows: slewing never adds up to a step.
        if abs(step) <= self.threshold:
            return timedelta(0)
        self.metrics.clock_stepped(step)
        log.warning(
            "wall clock stepped; durations run on the monotonic clock, stamps ahead of the "
            "clock count as now",
            extra=kv(step=f"{step:+.0f}s", now=self.clock.now().isoformat(timespec="seconds")),
        )
        moved = timedelta(seconds=step)
        if self.on_step is not None:
            try:
                self.on_step(moved)
            except Exception:
                log.exception("following the clock step failed")
        return moved
