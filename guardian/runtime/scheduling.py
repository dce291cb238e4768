"""SteadyScheduler: APScheduler's background scheduler, keeping its jobs' cadence through a step
of the wall clock.

APScheduler 3 keeps run times on the wall clock: after a step back of an hour the interval jobs
(sweep, verify, probes) would wait that hour, and after a step forward a job would run once per
missed interval. Its own waits are monotonic (threading), so each turn looks for a step
(service.watchers.clock_steps.StepWatch) and moves every job's run time, and its interval's grid, by
it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from guardian.service.watchers.clock_steps import StepWatch

# A turn at least this often even with nothing due, so a step is followed within it.
MAX_WAIT = 60.0


class SteadyScheduler(BackgroundScheduler):  # type: ignore[misc]
    def __init__(self, steps: StepWatch, **options: Any) -> None:
        self.steps = steps
        super().__init__(**options)

    def follow_steps(self) -> timedelta:
        """Move the jobs by the wall clock's step since the last look; returns the step."""
        step = self.steps.look()
        if not step:
            return step
        with self._jobstores_lock:
            for job in self.get_jobs():
                if isinstance(job.trigger, IntervalTrigger):
                    # resume() counts from the grid's start: a paused job resumed after a
                    # step back would otherwise wait for the step's length.
                    job.trigger.start_date += step
                if job.next_run_time is not None:
                    self.modify_job(job.id, next_run_time=job.next_run_time + step)
        return step

    def _process_jobs(self) -> float | None:
        self.follow_steps()
        wait: float | None = super()._process_jobs()
        return MAX_WAIT if wait is None else min(wait, MAX_WAIT)
