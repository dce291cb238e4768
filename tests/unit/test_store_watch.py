"""The daemon hears another process's write to the store as it lands (an inotify watch on the
store's write-ahead log), not after its next sweep; a flood of writes costs at most one look
per PACE; where the store cannot be watched, the sweep looks as before."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.adapters.clock import SystemClock
from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_operator
from guardian.core.facts import Fact, RecordWrittenElsewhere
from guardian.entrypoints.daemon import Daemon
from guardian.runtime.store_watch import PACE, StoreWatch
from guardian.service.operator import Operator
from tests.app import HOST, make_app
from tests.fakes import FakeNotifier
from tests.helpers import wait_until

MIN = timedelta(minutes=1)


@contextmanager
def watching(path: Path, look: Callable[[], object]) -> Iterator[StoreWatch]:
    """A watch on the store at `path`, running `look` on a thread of its own, stopped at the
    end (the thread joined)."""
    watch, reason = StoreWatch.of(path)
    assert watch is not None, reason
    thread = threading.Thread(target=watch.run, args=(look,), daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stop()
        thread.join(5)
        assert not thread.is_alive(), "the watch did not stop"
        watch.close()


def silence(path: Path, name: str) -> None:
    """`guardian silence NAME`: another process, on a connection of its own."""
    cli = SqliteStore(path)
    try:
        Operator(cli, SystemClock(), HOST).silence(name, MIN, "upgrade", "bob")
    finally:
        cli.close()


def test_another_processs_write_wakes_the_watch_at_once(tmp_path: Path) -> None:
    path = tmp_path / "guardian.db"
    daemon_side = SqliteStore(path)  # the daemon's connection: its log file is there
    looked: list[float] = []
    with watching(path, lambda: looked.append(time.monotonic())):
        silence(path, "web")
        written = time.monotonic()
        wait_until(lambda: looked, 5, 0.01, "a look after the write")
        assert looked[0] - written < 1.0
    daemon_side.close()


def test_a_flood_of_writes_costs_at_most_one_look_per_pace(tmp_path: Path) -> None:
    path = tmp_path / "guardian.db"
    daemon_side = SqliteStore(path)
    looked: list[float] = []
    other = SqliteStore(path)
    with watching(path, lambda: looked.append(time.monotonic())):
        began = time.monotonic()
        for n in range(300):  # one commit each, as fast as SQLite takes them
            with other.db.transaction() as conn:
                conn.execute(
                    "INSERT INTO marks (host, name, at) VALUES (?, ?, '2026-01-01')",
                    (HOST, f"flood-{n}"),
                )
        last = time.monotonic()
        # Nothing written is missed: a look begins after the last write.
        wait_until(lambda: looked and looked[-1] >= last, 5, 0.01, "a look after the flood")
        during = [at for at in looked if at <= last]
        assert len(during) <= (last - began) / PACE + 2, (len(during), last - began)
    other.close()
    daemon_side.close()


def test_a_poke_looks_and_a_stop_ends_the_watch(tmp_path: Path) -> None:
    path = tmp_path / "guardian.db"
    daemon_side = SqliteStore(path)
    looked: list[int] = []
    with watching(path, lambda: looked.append(1)) as watch:
        watch.poke()  # the sweep's look, where a write may have been missed
        wait_until(lambda: looked, 5, 0.01, "a look after the poke")
    daemon_side.close()


def test_a_store_without_its_log_is_not_watched(tmp_path: Path) -> None:
    watch, reason = StoreWatch.of(tmp_path / "never-opened.db")
    assert watch is None
    assert "never-opened.db-wal" in reason and "No such file" in reason


def test_a_cli_write_reaches_the_readers_and_the_channels_without_a_sweep(
    tmp_path: Path,
) -> None:
    """`guardian run` with a sweep an hour apart: a person's `guardian incidents resolve` is
    told to the readers (its container named) and its notification sent within moments."""
    t = make_app(
        tmp_path,
        daemon=True,
        notify={"group_wait": "0s"},
        watch={"interval": "1h"},
        restart={"dry_run": True},
    )
    d = Daemon(t.app)
    worker = t.app.delivery
    assert worker is not None
    slack = FakeNotifier("slack")
    worker.channels.append(slack)
    worker.routing = None  # no receivers configured: the one channel hears everything
    seen: list[Fact] = []
    t.app.facts.subscribe(seen.append)
    t.engine.add("web", health="unhealthy")
    t.healer.sweep()  # opens web's incident
    worker.start()
    d.watch_store()
    try:
        assert d.store_watch is not None
        wait_until(lambda: slack.sent and not worker.outbox.queue_depth(), 10)
        [incident] = t.store.open_incidents(HOST)
        cli = build_operator(t.settings, clock=t.clock, host=HOST)  # another connection
        cli.change(incident.id or 0, "resolve", "alice", "fixed by hand")
        told = RecordWrittenElsewhere("web", incident.id, "incident.changed")
        wait_until(lambda: told in seen, 5, 0.01, "the readers told")
        kinds = lambda: [n.kind for batch in slack.sent[1:] for n in batch]  # noqa: E731
        wait_until(kinds, 5, 0.01, "the resolution sent")
        assert kinds() == ["resolved"]
    finally:
        d.unwatch_store()
        worker.stop()
        t.store.close()


@pytest.mark.parametrize("missing", ["ctypes", "inotify"])
def test_where_the_store_cannot_be_watched_the_sweep_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    import guardian.runtime.store_watch as store_watch

    reasons = {"ctypes": "no inotify here (ImportError: no ctypes)", "inotify": "inotify: ENOSYS"}
    monkeypatch.setattr(store_watch, "_watch", lambda path: (-1, reasons[missing]))
    t = make_app(tmp_path, daemon=True, watch={"interval": "1h"})
    d = Daemon(t.app)
    seen: list[Fact] = []
    t.app.facts.subscribe(seen.append)
    d.watch_store()
    assert d.store_watch is None
    t.engine.add("web")
    build_operator(t.settings, host=HOST).silence("web", MIN, "upgrade", "bob")
    d.sweep_job()
    assert RecordWrittenElsewhere("web", None, "silence.set") in seen
    t.store.close()
