"""A burst proceeds at the engine's pace: restarts of many containers failing together reach the
engine at the same time, up to restart.max_concurrent, however long each takes to stop."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path

from guardian.core.model import ActionOutcome
from guardian.entrypoints.daemon import Daemon, job_threads
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import wait_until

BURST = 20


class SlowStopEngine(FakeEngine):
    """Each restart waits until `expected` restarts are in the engine together, as containers
    that take their stop timeout would: the burst passes only if they all run at once."""

    def __init__(self, clock: FakeClock, expected: int) -> None:
        super().__init__(clock)
        self.together = threading.Barrier(expected, timeout=20)
        self.lock = threading.Lock()

    def restart(
        self, container_id: str, stop_timeout: timedelta, previous_started_at: datetime | None
    ) -> ActionOutcome:
        self.together.wait()  # BrokenBarrierError when fewer arrive: the burst was serialised
        with self.lock:
            return super().restart(container_id, stop_timeout, previous_started_at)


def test_a_burst_of_restarts_reaches_the_engine_together(tmp_path: Path) -> None:
    clock = FakeClock()
    engine = SlowStopEngine(clock, BURST)
    t = make_app(
        tmp_path,
        daemon=True,
        engine=engine,
        clock=clock,
        restart={"max_concurrent": BURST, "max_per_minute": 1000},
        storm={"threshold": "100%"},
    )
    ids = [engine.add(f"web{i}", health="unhealthy").id for i in range(BURST)]
    d = Daemon(t.app)
    d.scheduler.start()
    try:
        for cid in ids:  # what the event listener does for each unhealthy event
            d.react_soon(cid, None)
        wait_until(lambda: len(t.restarts()) == BURST, 30, message="not every restart ran")
        assert not engine.together.broken
        assert sorted(t.restarted()) == sorted(f"web{i}" for i in range(BURST))
    finally:
        engine.together.abort()
        d.scheduler.shutdown(wait=True)
        d.reactions.close(10)
        t.store.close()


def test_an_event_is_judged_while_every_scheduled_job_thread_is_busy(tmp_path: Path) -> None:
    """A reaction waits for no scheduler turn or job thread: with every job thread held by a
    job that hangs (a sweep waiting on a slow engine), an unhealthy container is still
    restarted at its event."""
    clock = FakeClock()
    engine = FakeEngine(clock)
    t = make_app(tmp_path, daemon=True, engine=engine, clock=clock)
    cid = engine.add("web", health="unhealthy").id
    d = Daemon(t.app)
    hung = threading.Event()
    d.scheduler.start()
    try:
        for _ in range(job_threads(t.app.settings)):
            d.scheduler.add_job(hung.wait, args=[30], misfire_grace_time=None)
        d.react_soon(cid, None)
        wait_until(lambda: t.restarted() == ["web"], 10, message="the event waited for a job")
    finally:
        hung.set()
        d.scheduler.shutdown(wait=True)
        d.reactions.close(10)
        t.store.close()


def test_an_event_read_as_guardian_stops_is_left_to_the_next_start(tmp_path: Path) -> None:
    t = make_app(tmp_path, daemon=True)
    cid = t.engine.add("web", health="unhealthy").id
    d = Daemon(t.app)
    assert d.reactions.close(1) == 0
    d.react_soon(cid, None)  # the listener's last event: neither raised nor judged
    assert t.restarted() == []
    t.store.close()
