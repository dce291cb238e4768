"""A burst proceeds at the engine's pace: restarts of many containers failing together reach the
engine at the same time, up to restart.max_concurrent, however long each takes to stop."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path

from guardian.core.model import ActionOutcome
from guardian.entrypoints.daemon import Daemon
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
            d.scheduler.add_job(d.react, args=[cid, None], misfire_grace_time=None)
        wait_until(lambda: len(t.restarts()) == BURST, 30, message="not every restart ran")
        assert not engine.together.broken
        assert sorted(t.restarted()) == sorted(f"web{i}" for i in range(BURST))
    finally:
        engine.together.abort()
        d.scheduler.shutdown(wait=True)
        t.store.close()
