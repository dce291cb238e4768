"""A store held by another writer (the CLI, a backup) stalls only the threads that write to it:
no SQLite query runs under the loop lock, which the event thread, /healthz and the watchdog
take too."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from guardian.adapters.sqlite.store import SqliteStore
from guardian.ports import EngineEvent
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import wait_until

BUSY = 3.0  # the store's busy timeout in this test (seconds)


def test_a_store_held_by_another_writer_stalls_neither_events_nor_healthz_nor_the_watchdog(
    tmp_path: Path,
):
    clock = FakeClock()
    engine = FakeEngine(clock)
    engine.add("first", health="unhealthy")
    engine.add("second", health="unhealthy")
    engine.add("calm")
    path = tmp_path / "guardian.db"
    loop = make_app(
        tmp_path,
        engine=engine,
        clock=clock,
        sqlite=SqliteStore(path, busy_timeout_ms=int(BUSY * 1000)),
        restart={"cooldown": "1s", "max_concurrent": 10},
    )
    healer, state = loop.healer, loop.healer.ctx.state
    writing = threading.Event()
    loop.store.db.trace(lambda sql: writing.set() if sql.startswith("BEGIN IMMEDIATE") else None)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock, as `guardian incidents ack` would
    reactions = [
        threading.Thread(target=healer.react, args=(engine.id_of(name),), daemon=True)
        for name in ("first", "second")
    ]
    try:
        reactions[0].start()  # its incident's write waits for the other writer, holding the db
        wait_until(writing.is_set, 10, 0.01, "a write waiting for the other writer")
        reactions[1].start()  # its decision's reads wait for that write
        # Meanwhile the event thread's book-keeping, /healthz's and the watchdog's questions
        # to the loop answer at once, for as long as the store is held.
        slowest, until = 0.0, time.monotonic() + BUSY
        event = EngineEvent("start", engine.id_of("calm"), "calm", clock.now(), {})
        while time.monotonic() < until:
            started = time.monotonic()
            state.claims.longest_stop()
            assert state.engine.up is not False
            healer.on_event(event)
            slowest = max(slowest, time.monotonic() - started)
        assert slowest < BUSY / 3, f"the loop lock was held {slowest:.1f}s behind the store"
    finally:
        other.execute("ROLLBACK")
        other.close()
        loop.store.db.trace(None)
    for reaction in reactions:
        reaction.join(4 * BUSY)
        assert not reaction.is_alive()
    # Once the store answers again, the reactions that waited go on: both containers healed.
    healer.react(engine.id_of("first"))
    healer.react(engine.id_of("second"))
    assert sorted(loop.restarted()) == ["first", "second"]
