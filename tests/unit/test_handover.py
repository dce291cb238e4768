"""A restart goes from "running" to "verifying" in one step: under contention (sweeps, events
and verify ticks on many threads over a slow store) no incident is resolved without its
verification (the Verifications type on its own: tests/unit/test_verifications.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import IncidentState, Outcome, RemediationAction
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import wait_until

CONTAINERS = 8


class SlowStore(SqliteStore):
    """A store whose writes take a while, as on a busy disk or behind another writer: what
    sits between a restart call's return and what comes after it takes that long too."""

    delay = 0.02

    def record_outcome(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(self.delay)
        return super().record_outcome(*args, **kwargs)

    def save_incident(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(self.delay)
        return super().save_incident(*args, **kwargs)


def test_no_incident_is_resolved_without_its_verification_under_contention(tmp_path: Path):
    clock = FakeClock()
    engine = FakeEngine(clock)
    for i in range(CONTAINERS):
        engine.add(f"app{i}", health="unhealthy")
    loop = make_app(
        tmp_path,
        engine=engine,
        clock=clock,
        sqlite=SlowStore(str(tmp_path / "guardian.db")),
        restart={
            "cooldown": "1h",
            "max_attempts": 3,
            "max_per_minute": 1000,
            "max_concurrent": 1000,
            "verify_timeout": "1h",
        },
        storm={"threshold": "100%"},
    )
    healer, verifier = loop.healer, loop.app.verifier
    ids = [engine.id_of(f"app{i}") for i in range(CONTAINERS)]
    # The incidents are opened first, on one thread: two threads opening the same incident at
    # once is another race (the store's unique key refuses the second) than this test's.
    for cid in ids:
        opened = healer.assess(engine.containers[cid], "sweep")
        opened.decision = None  # recorded, not acted on
        healer.apply(opened)
    done = threading.Event()
    errors: list[Exception] = []

    def keep(work) -> threading.Thread:  # type: ignore[no-untyped-def]
        def run() -> None:
            try:
                while not done.is_set():
                    work()
            except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in a thread
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    threads = [keep(lambda: healer.sweep()) for _ in range(3)]
    threads += [keep(lambda i=i: healer.react(ids[i % CONTAINERS])) for i in range(4)]
    threads += [keep(verifier.verify)]
    try:
        wait_until(
            lambda: (
                errors
                or (verified(loop.restarts()) and not healer.ctx.state.verifications.pending())
            ),
            60,
            0.05,
            "every container restarted and its restart verified",
        )
    finally:
        done.set()
        for thread in threads:
            thread.join(30)
    assert errors == []
    host = loop.host
    for container in (f"app{i}" for i in range(CONTAINERS)):
        [restart] = [a for a in loop.restarts() if a.container == container]
        assert restart.outcome is Outcome.SUCCEEDED, container
        [incident] = loop.store.list_incidents(host, container=container)
        resolved = [
            t
            for t in loop.store.transitions(incident.id or 0)
            if t.to_state is IncidentState.RESOLVED
        ]
        # The restart's incident is resolved by its verification, and only once. (A sweep that
        # listed the container unhealthy before the restart may reopen it afterwards as a
        # recurrence, which a later healthy look resolves: that is a new problem's story.)
        first = resolved[0]
        assert (first.from_state, first.reason) == (
            IncidentState.IN_PROGRESS,
            "healthy after restart",
        ), (container, resolved)
        assert all(t.from_state is not IncidentState.IN_PROGRESS for t in resolved[1:])


def verified(restarts: list[RemediationAction]) -> bool:
    """Every container restarted, and each restart's verdict written (not only its call's)."""
    done = {a.container for a in restarts if a.outcome not in (None, Outcome.RESTARTED)}
    return len(done) == CONTAINERS
