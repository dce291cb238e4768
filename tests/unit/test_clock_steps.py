"""Steps of the wall clock: noticed once, counted, and followed by the scheduler's jobs."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.entrypoints.scheduling import SteadyScheduler
from guardian.service.clock_steps import StepWatch
from tests.fakes import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metrics() -> PrometheusMetrics:
    return PrometheusMetrics(CollectorRegistry())


def steps(metrics: PrometheusMetrics, direction: str) -> float | None:
    return metrics.registry.get_sample_value("guardian_clock_steps_total", {"direction": direction})


def test_a_step_is_logged_once_and_counted_by_direction(clock, metrics, caplog) -> None:
    watch = StepWatch(clock, metrics)
    assert steps(metrics, "back") == 0 and steps(metrics, "forward") == 0
    clock.step(hours=-1)
    with caplog.at_level(logging.WARNING, "guardian.clock"):
        assert watch.look() == timedelta(hours=-1)
        clock.advance(10)
        assert watch.look() == timedelta(0)  # time passing is no step
    assert [r.getMessage() for r in caplog.records] == [
        "wall clock stepped; durations run on the monotonic clock, stamps ahead of the clock "
        "count as now"
    ]
    assert steps(metrics, "back") == 1
    clock.step(days=1)
    assert watch.look() == timedelta(days=1)
    assert steps(metrics, "forward") == 1


def test_slewing_never_adds_up_to_a_step(clock, metrics) -> None:
    """NTP slews a clock by under a millisecond per second; the baseline follows it."""
    watch = StepWatch(clock, metrics)
    for _ in range(10_000):
        clock.advance(2)
        clock.step(0.001)
        assert watch.look() == timedelta(0)
    assert steps(metrics, "forward") == 0


def test_the_scheduler_moves_its_jobs_by_the_step(clock, metrics) -> None:
    """APScheduler keeps run times on the wall clock: after a step back of an hour, the sweep
    runs at its next interval anyway, and a paused job resumes at once, not an hour later."""
    scheduler = SteadyScheduler(StepWatch(clock, metrics), timezone="UTC")
    scheduler.start(paused=True)
    try:
        due = clock.now() + timedelta(seconds=2)
        scheduler.add_job(print, "interval", id="sweep", seconds=2, next_run_time=due)
        scheduler.add_job(print, "interval", id="verify", seconds=1, next_run_time=None)
        verify_grid = scheduler.get_job("verify").trigger.start_date

        clock.step(hours=-1)
        assert scheduler.follow_steps() == timedelta(hours=-1)
        assert scheduler.get_job("sweep").next_run_time == due - timedelta(hours=1)
        assert scheduler.get_job("verify").trigger.start_date == verify_grid - timedelta(hours=1)

        clock.step(days=1)
        scheduler.follow_steps()
        assert scheduler.get_job("sweep").next_run_time == due + timedelta(days=1, hours=-1)
        assert scheduler.follow_steps() == timedelta(0)  # followed once
    finally:
        scheduler.shutdown(wait=False)
