"""Another process's write (a `guardian` command on a connection of its own) reaches the readers
as what the store's change feed says it wrote: a change naming its container and incident, so
the page brings up to date that row alone. What the feed cannot attribute, and more than a
look reads, is a write of anything (read everything again), as every such write was before."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from guardian.adapters.sqlite.feed import SqliteFeed
from guardian.adapters.sqlite.retention import prune
from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_operator
from guardian.core.facts import (
    FEED_WRITES,
    Fact,
    RecordWrittenElsewhere,
    StoreWrittenElsewhere,
)
from guardian.core.model import Incident
from guardian.ports import Record, StoreError
from guardian.readside.changes import Changes
from guardian.readside.page import PageReader
from guardian.service.elsewhere import Elsewhere
from guardian.service.facts import FactStream
from guardian.service.operator import Operator
from tests.app import HOST, TestApp, make_app

WATCHED = {"guardian.enable": "true"}
MIN = timedelta(minutes=1)


def world(tmp: Path, containers: int = 3) -> tuple[TestApp, list[Fact], Operator]:
    """`guardian run` (dry run: incidents stay open) over `containers` healthy containers, the
    facts it publishes from now on, and a person's CLI over a store connection of its own."""
    t = make_app(tmp, daemon=True, restart={"dry_run": True})
    for n in range(containers):
        t.engine.add(f"app-{n:03d}", health="healthy", labels=WATCHED)
    t.healer.sweep()
    seen: list[Fact] = []
    t.app.facts.subscribe(seen.append)
    return t, seen, build_operator(t.settings, host=HOST)


def incident_of(t: TestApp, name: str) -> Incident:
    t.engine.set(name, health="unhealthy")
    t.healer.sweep()
    [incident] = t.store.open_incidents(HOST, name)
    return incident


def look(t: TestApp) -> bool:
    assert t.app.elsewhere is not None
    return t.app.elsewhere.look()


def raw(t: TestApp) -> sqlite3.Connection:
    """The store's file opened by someone who writes it by hand (the sqlite3 shell)."""
    return sqlite3.connect(t.settings["store.path"], isolation_level=None)


def test_a_cli_acknowledgement_reaches_the_page_as_its_row_alone(tmp_path: Path) -> None:
    t, seen, cli = world(tmp_path, 100)
    incident = incident_of(t, "app-042")
    page = PageReader(t.healer, t.app.operator, t.app.changes)
    page.read(True)
    version, lists = t.app.changes.version, t.engine.list_calls
    seen.clear()

    cli.change(incident.id or 0, "ack", "alice")  # `guardian incidents ack`, another process
    assert look(t)

    assert seen == [RecordWrittenElsewhere("app-042", incident.id, "incident.changed")]
    _, since = t.app.changes.since(version)
    assert not since.everything
    assert (since.store, since.incidents, since.wrote) == (
        {"app-042"},
        {incident.id},
        {Record.INCIDENTS},
    )
    rows = {r["name"]: r for r in page.read(True).rows}
    assert rows["app-042"]["incident_text"].endswith("acknowledged")
    # Before, a write elsewhere read everything again: a whole list and every row judged.
    assert (page.statuses.whole_reads, t.engine.list_calls - lists) == (1, 0)


def test_silences_and_approvals_from_elsewhere_name_their_containers(tmp_path: Path) -> None:
    t, seen, cli = world(tmp_path)
    version = t.app.changes.version
    cli.silence("app-001", MIN, "upgrade", "bob")
    cli.silence("app-002", MIN, "upgrade", "bob")
    cli.unsilence("app-001", "bob")
    assert look(t)
    assert seen == [
        RecordWrittenElsewhere("app-001", None, "silence.set"),
        RecordWrittenElsewhere("app-002", None, "silence.set"),
        RecordWrittenElsewhere("app-001", None, "silence.lifted"),
    ]
    _, since = t.app.changes.since(version)
    assert (since.store, since.wrote, since.wrote_shared) == (
        {"app-001", "app-002"},
        {Record.SILENCES},
        False,
    )
    assert since.silences_written is None  # the silences in force are read again


def test_an_approval_from_elsewhere_names_its_container_and_incident(tmp_path: Path) -> None:
    t, seen, cli = world(tmp_path)
    t.engine.add("asks", health="healthy", labels={**WATCHED, "guardian.action": "ask"})
    t.healer.sweep()
    incident = incident_of(t, "asks")
    seen.clear()
    version = t.app.changes.version
    cli.answer(incident.id or 0, True, "alice")  # `guardian incidents approve`
    assert look(t)
    assert seen == [RecordWrittenElsewhere("asks", incident.id, "approval.given")]
    _, since = t.app.changes.since(version)
    assert (since.store, since.incidents, since.wrote) == (
        {"asks"},
        {incident.id},
        {Record.APPROVALS},
    )


def test_the_daemons_own_writes_are_not_told_again(tmp_path: Path) -> None:
    t, seen, _cli = world(tmp_path)
    incident_of(t, "app-001")  # the loop writes an incident and its decision
    t.app.operator.silence("app-002", MIN, "upgrade", "bob")  # the API, in this process
    seen.clear()
    assert not look(t)
    assert seen == []


def test_a_rolled_back_write_of_the_daemon_hides_no_other_processs_row(tmp_path: Path) -> None:
    """The daemon's own rows are noted in the writing transaction: a rollback forgets its row,
    so the next writer taking the same cursor is told."""
    t, seen, cli = world(tmp_path)
    with pytest.raises(StoreError), t.store.db.transaction() as conn:
        conn.execute(
            "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
            " VALUES (?, 'app-000', '2026-01-01', '2026-01-02', 'x', 'y')",
            (HOST,),
        )
        raise StoreError("the disk filled")
    cli.silence("app-001", MIN, "upgrade", "bob")
    assert look(t)
    assert seen == [RecordWrittenElsewhere("app-001", None, "silence.set")]


def test_each_record_is_told_once_per_look(tmp_path: Path) -> None:
    t, seen, cli = world(tmp_path)
    for _ in range(3):
        cli.silence("app-001", MIN, "upgrade", "bob")  # each one lifts the one before
    assert look(t)
    assert seen == [
        RecordWrittenElsewhere("app-001", None, "silence.set"),
        RecordWrittenElsewhere("app-001", None, "silence.lifted"),
    ]


# What the feed cannot attribute, by what another process wrote by hand.
UNATTRIBUTED = {
    "a container name with a control character": (
        "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
        " VALUES ('h', 'app' || char(27) || '[2J', '2026-01-01', '2026-01-02', 'x', 'y')"
    ),
    "a container name with a C1 escape": (
        "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
        " VALUES ('h', 'app' || char(155) || '2J', '2026-01-01', '2026-01-02', 'x', 'y')"
    ),
    "an overlong container name": (
        "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
        " VALUES ('h', printf('%.300c', 'a'), '2026-01-01', '2026-01-02', 'x', 'y')"
    ),
    "a kind naming no container's record": (
        "INSERT INTO maintenance (host, name, containers, schedule, started_at, until)"
        " VALUES ('h', 'nightly', '*', '0 3 * * *', '2026-01-01', '2026-01-02')"
    ),
    "a kind of its own": (
        "INSERT INTO events (host, kind, at, container, incident_id, fields)"
        " VALUES ('h', 'made.up', '2026-01-01', 'app-001', NULL, '{}')"
    ),
    "an incident of the wrong type": (
        "INSERT INTO events (host, kind, at, container, incident_id, fields)"
        " VALUES ('h', 'incident.changed', '2026-01-01', 'app-001', 'one', '{}')"
    ),
}


@pytest.mark.parametrize("written", UNATTRIBUTED.values(), ids=UNATTRIBUTED.keys())
def test_a_write_the_feed_cannot_attribute_reads_everything_again(
    tmp_path: Path, written: str
) -> None:
    t, seen, cli = world(tmp_path)
    cli.silence("app-002", MIN, "upgrade", "bob")  # told with it: the look tells anything
    raw(t).execute(written)
    version = t.app.changes.version
    assert look(t)
    assert seen == [StoreWrittenElsewhere()]
    assert t.app.changes.since(version)[1].everything


def test_a_write_the_feed_does_not_tell_of_reads_everything_again(tmp_path: Path) -> None:
    """`guardian check` counting an occurrence, say: no feed row, so anything may have changed
    (one landing in the same look as a write the feed tells of is read with the next change
    of its kind, or the next whole read: docs/status-page.md)."""
    t, seen, _cli = world(tmp_path)
    raw(t).execute("INSERT INTO counter_resets (host, container, reset_at) VALUES ('h', 'a', 'x')")
    version = t.app.changes.version
    assert look(t)
    assert seen == [StoreWrittenElsewhere()]
    assert t.app.changes.since(version)[1].everything


def test_more_rows_than_a_look_reads_read_everything_again(tmp_path: Path) -> None:
    t, seen, cli = world(tmp_path)
    facts = FactStream()
    facts.subscribe(seen.append)
    elsewhere = Elsewhere(SqliteFeed(t.store.db), facts, HOST, max_rows=2)
    for n in range(3):
        cli.silence(f"app-00{n}", MIN, "upgrade", "bob")
    assert elsewhere.look()
    assert seen == [StoreWrittenElsewhere()]
    seen.clear()
    cli.unsilence("app-000", "bob")
    assert elsewhere.look()  # the cursor moved past the flood: one row again
    assert seen == [RecordWrittenElsewhere("app-000", None, "silence.lifted")]


def test_rows_retention_forgot_after_the_cursor_read_everything_again(tmp_path: Path) -> None:
    t, seen, cli = world(tmp_path)
    cli.silence("app-001", MIN, "upgrade", "bob")
    other = SqliteStore(t.settings["store.path"])  # `guardian` pruning from another process
    prune(other.db, t.clock.now() + timedelta(days=365))
    other.close()
    assert look(t)
    assert seen == [StoreWrittenElsewhere()]


def test_a_look_that_failed_tells_what_it_may_have_read_as_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t, _seen, cli = world(tmp_path)
    feed = SqliteFeed(t.store.db)
    cli.silence("app-001", MIN, "upgrade", "bob")
    real = feed.db.reading

    def failing() -> Any:
        raise StoreError("database is locked")

    monkeypatch.setattr(feed.db, "reading", failing)
    with pytest.raises(StoreError):
        feed.written_elsewhere(HOST, 10)
    monkeypatch.setattr(feed.db, "reading", real)
    found = feed.written_elsewhere(HOST, 10)
    assert (found.changed, found.rows, found.whole) == (True, (), False)


def test_every_record_a_feed_row_names_is_one_the_readers_know() -> None:
    assert {Record(record) for record, _ in FEED_WRITES.values()} == {
        Record.INCIDENTS,
        Record.ACTIONS,
        Record.APPROVALS,
        Record.SILENCES,
    }
    changes = Changes()
    changes.on_fact(RecordWrittenElsewhere("web", None, "something.new"))
    assert changes.since(0)[1].everything
