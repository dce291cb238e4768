"""Steps of the wall clock: noticed once, counted, and followed by the scheduler's jobs."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import ActionKind, Outcome, ProblemType, RemediationAction
from guardian.core.stamps import Reading, placed_since
from guardian.runtime.scheduling import SteadyScheduler
from guardian.service.watchers.clock_steps import StepWatch
from tests.app import TestApp, make_app
from tests.fakes import T0, FakeClock


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


# -- the loop through a step: every duration keeps its length -------------------------------


def follow(w: TestApp) -> StepWatch:
    """The daemon's step watch over the test's app (the scheduler looks at every turn)."""
    return StepWatch(w.clock, w.app.metrics, w.app.loop.follow_step)


def give_up(w: TestApp) -> None:
    w.engine.add("bad", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    for _ in range(20):
        w.healer.sweep()
        w.clock.advance(1)
        w.verify()
        w.clock.advance(2)
    assert len(w.engine.restarts) == 3


@pytest.mark.parametrize("hours", [2, -2, 24, -24])
def test_a_step_within_a_run_hands_no_attempt_back(w: TestApp, hours: int) -> None:
    """3 attempts within the hour, then the wall clock steps past the window (forward) or
    before the attempts (back): the attempts still count, placed by the monotonic clock."""
    steps = follow(w)
    give_up(w)
    w.clock.step(hours=hours)
    steps.look()
    for _ in range(10):
        w.healer.sweep()
        w.clock.advance(60)
    assert len(w.engine.restarts) == 3
    w.clock.advance(3600)  # an hour of real time: the window frees the budget
    w.healer.sweep()
    assert len(w.engine.restarts) == 4


def test_a_step_forward_does_not_end_a_verification_early(w: TestApp) -> None:
    """verify_timeout is 30 s of real time: a step forward of an hour judged the starting
    container unhealthy_after_restart and said so."""
    steps = follow(w)
    w.engine.add("app", health="unhealthy")
    w.engine.after_restart_health = "starting"
    w.healer.sweep()
    assert len(w.engine.restarts) == 1
    w.clock.advance(1)
    w.clock.step(hours=1)
    w.engine.clock_stepped(timedelta(hours=1))
    steps.look()
    w.verify()
    assert w.app.verifier.awaiting() and [a.outcome for a in w.restarts()] == [Outcome.RESTARTED]
    w.clock.advance(5)
    w.engine.set("app", health="healthy")
    w.verify()
    assert [a.outcome for a in w.restarts()] == [Outcome.SUCCEEDED]


@pytest.mark.parametrize("hours", [1, -1])
def test_a_healthy_streak_keeps_its_length_through_a_step(w: TestApp, hours: int) -> None:
    """reset_after is 600 s of continuous health, whatever the wall clock does meanwhile."""
    steps = follow(w)
    w.engine.add("app", health="unhealthy")
    w.healer.sweep()
    w.verify()
    w.clock.advance(300)
    w.healer.sweep()
    w.clock.step(hours=hours)
    steps.look()
    w.healer.sweep()
    assert w.store.last_reset("h", "app") is None
    w.clock.advance(301)
    w.healer.sweep()
    assert w.store.last_reset("h", "app") == w.clock.now()


@pytest.mark.parametrize("hours", [1, -1])
def test_a_storm_holds_for_its_hold_through_a_step(tmp_path, hours: int) -> None:
    """storm.hold is 5 minutes of real time: a step forward no longer ends it at once, a
    step back no longer stretches it by the step."""
    loop = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "5m"})
    steps = follow(loop)
    for i in range(10):
        loop.engine.add(f"c{i}", health="unhealthy" if i < 8 else "healthy")
    loop.healer.sweep()
    loop.clock.advance(60)
    loop.clock.step(hours=hours)
    loop.engine.clock_stepped(timedelta(hours=hours))
    steps.look()
    for _ in range(7):  # 3.5 more minutes: still held
        loop.clock.advance(30)
        loop.healer.sweep()
    assert loop.restarted() == []
    loop.clock.advance(30)  # 5 minutes of real time since the storm opened
    loop.healer.sweep()
    assert len(loop.restarted()) == 1  # the canary


@pytest.mark.parametrize("hours", [1, -1])
def test_a_storm_holds_a_bystander_one_cooldown_of_real_time_through_a_step(
    tmp_path, hours: int
) -> None:
    """A container that did not make the storm waits one cooldown (60 s) of real time: a step
    forward does not let it through at once, a step back does not hold it for the step."""
    loop = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "1h"})
    steps = follow(loop)
    for i in range(10):
        loop.engine.add(f"c{i}", health="unhealthy" if i < 8 else "healthy")
    loop.healer.sweep()
    loop.clock.advance(120)  # past storm.window: c8 is a bystander
    loop.engine.set("c8", health="unhealthy")
    loop.healer.sweep()
    loop.clock.advance(20)
    loop.clock.step(hours=hours)
    loop.engine.clock_stepped(timedelta(hours=hours))
    steps.look()
    for _ in range(3):  # 50 s of real time since its detection: still held
        loop.healer.sweep()
        loop.clock.advance(10)
    loop.healer.sweep()
    assert loop.restarted() == []
    loop.clock.advance(10)
    loop.healer.sweep()
    assert loop.restarted() == ["c8"]


def test_a_crash_loop_keeps_its_window_through_a_step_forward(tmp_path) -> None:
    loop = make_app(tmp_path, crash_loop={"restarts": 3, "window": "5m"})
    steps = follow(loop)
    loop.engine.add("worker", health=None, restart_policy="always", state="restarting")
    for count in range(4):
        loop.engine.set("worker", restart_count=count, exit_code=2)
        loop.healer.sweep()
        loop.clock.advance(10)
        if count == 1:
            loop.clock.step(hours=1)  # the first two restarts are still within 5 minutes
            loop.engine.clock_stepped(timedelta(hours=1))
            steps.look()
    kinds = [i.type for i in loop.store.open_incidents(loop.host)]
    assert kinds == [ProblemType.CRASH_LOOP]


def test_restarts_after_a_step_back_count_after_the_counter_reset_before_it_in_the_next_run(
    w: TestApp,
) -> None:
    """A counter reset, then the wall clock steps back half an hour and three restarts fail:
    their stamps lie before the reset's. Once the next run's clock has passed the reset's stamp
    again, they used to look older than the reset and the budget was handed back (F8)."""
    steps = follow(w)
    w.engine.add("bad", health="unhealthy")
    w.healer.sweep()  # a restart that heals
    w.clock.advance(1)
    w.verify()
    for _ in range(12):  # healthy for reset_after (600 s): the counter resets
        w.clock.advance(60)
        w.healer.sweep()
    assert w.store.last_reset("h", "bad") is not None
    w.clock.step(minutes=-30)
    steps.look()
    w.engine.set("bad", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    for _ in range(20):  # restarts after the step, none healed, until given up
        w.healer.sweep()
        w.clock.advance(1)
        w.verify()
        w.clock.advance(2)
    made = len(w.engine.restarts)
    assert made == 4  # three after the reset, as max_attempts allows: placed by the monotonic clock
    w.clock.advance(minutes=31)  # the reset's stamp is behind the clock again
    again = w.restart_guardian()
    for _ in range(3):
        again.healer.sweep()
        w.clock.advance(10)
    assert len(w.engine.restarts) == made, "the budget was handed back"


def test_the_store_tells_the_restarts_written_after_a_counter_reset_whatever_their_stamps(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "g.db")

    def restart(at: datetime) -> None:
        row = RemediationAction(None, None, "h", "web", "web-id", ActionKind.RESTART, at, "")
        store.record_intent(row)

    restart(T0 - timedelta(minutes=20))  # before the reset
    store.record_reset("h", "web", T0)
    assert store.first_restart_after_reset("h", "web") is None
    restart(T0 - timedelta(minutes=10))  # after it, the wall clock stepped back in between
    restart(T0 + timedelta(minutes=1))
    assert store.first_restart_after_reset("h", "web") == T0 - timedelta(minutes=10)
    assert store.last_reset("h", "web") == T0  # the stamp as written
    store.close()


# (wall stamp, its monotonic reading, the clocks now) -> where the stamp is placed now
H, S = timedelta(hours=1), timedelta(seconds=1)
PLACED = [
    ("kept, no step", T0, 1000.0, (T0 + 5 * S, 1005.0), T0),
    ("kept, a step forward since", T0, 1000.0, (T0 + H + 5 * S, 1005.0), T0 + H),
    ("kept, a step back since: now at most", T0, 1000.0, (T0 - H + 5 * S, 1005.0), T0 - H + 5 * S),
    ("none kept: the stamp", T0, None, (T0 + H + 5 * S, 1005.0), T0),
    ("another boot's: the stamp", T0, 90_000.0, (T0 + H + 5 * S, 40.0), T0),
]


@pytest.mark.parametrize(
    ("stamp", "mono", "now", "placed"), [p[1:] for p in PLACED], ids=[p[0] for p in PLACED]
)
def test_a_stamp_kept_with_its_monotonic_reading_is_placed_by_it(stamp, mono, now, placed):
    assert placed_since(stamp, mono, Reading(*now)) == placed
