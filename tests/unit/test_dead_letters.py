"""Dead letters on the status page: read bounded however many the outbox holds, and shown on an
open page as soon as the delivery worker records one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import DELIVERED, Next, Result, RowState, Status
from guardian.entrypoints.http_server import Routes
from guardian.entrypoints.page.mount import mount_page
from guardian.readside.page import MAX_DEAD_LETTERS, PageReader
from tests.app import TestApp, make_app
from tests.fakes import FakeClock, FakeNotifier

MANY = 3000


@pytest.fixture
def t(tmp_path: Path) -> Iterator[TestApp]:
    app = make_app(tmp_path, daemon=True, notify={"group_wait": "0s"})
    yield app
    app.store.close()


def outbox_of(t: TestApp) -> SqliteOutbox:
    assert t.app.delivery is not None
    outbox = t.app.delivery.outbox
    assert isinstance(outbox, SqliteOutbox)
    return outbox


def dead_letter(outbox: SqliteOutbox, clock: FakeClock, count: int) -> None:
    """`count` notifications queued for one channel and given up on, through the outbox."""
    outbox.enqueue([notifications.test_message("h", "slack", clock.now())] * count)
    outbox.fan_out(["slack"])
    rows = [q.pending.row_id for q in outbox.pending("slack")]
    outbox.record(rows, Next(RowState.DEAD), "404 no_service", clock.now())


def open_incident(t: TestApp, container: str) -> None:
    """An incident and its opening notification, written straight to the SQLite store (so
    nothing but the delivery worker announces a change)."""
    now = t.clock.now()
    result = HealthCheckResult(f"{container}-id", container, now, ProblemType.UNHEALTHY, "down")
    change = incidents.record_detection(None, t.host, result, now)
    t.store.save_incident(change, [notifications.opened(change.incident, None, now)])


def test_the_page_shows_the_newest_dead_letters_of_thousands_oldest_first(t: TestApp) -> None:
    outbox = outbox_of(t)
    dead_letter(outbox, t.clock, MANY)
    every = [r["id"] for r in outbox.dead_letters()]
    assert len(every) == MANY and every == sorted(every)
    newest = every[-MAX_DEAD_LETTERS:]
    assert [r["id"] for r in outbox.dead_letters(MAX_DEAD_LETTERS)] == newest
    page = mount_page(Routes(), t.app)
    assert [d["id"] for d in page.reader.read(True).dead_letters] == newest


def test_the_page_asks_the_outbox_for_no_more_dead_letters_than_it_shows(t: TestApp) -> None:
    outbox = outbox_of(t)
    dead_letter(outbox, t.clock, MAX_DEAD_LETTERS * 3)

    def bounded(limit: int) -> list[dict[str, Any]]:
        """The outbox's dead letters, for a reader that never asks for more than it shows."""
        if limit > MAX_DEAD_LETTERS:
            raise AssertionError(f"asked for {limit} dead letters")
        return outbox.dead_letters(limit)

    reader = PageReader(t.healer, t.app.operator, t.app.changes, bounded)
    newest = [r["id"] for r in outbox.dead_letters()][-MAX_DEAD_LETTERS:]
    assert [d["id"] for d in reader.read(True).dead_letters] == newest


def test_an_open_page_shows_a_dead_letter_as_soon_as_it_is_recorded(t: TestApp) -> None:
    worker = t.app.delivery
    assert worker is not None
    slack = FakeNotifier("slack", results=[DELIVERED, Result(Status.PERMANENT, "404 no_service")])
    worker.channels.append(slack)
    worker.routing = None  # no receivers configured: the one channel hears everything
    page = mount_page(Routes(), t.app)
    changes = t.app.changes

    open_incident(t, "web")
    shown = changes.version
    page.feed.snapshot(True)  # the page as an open browser has it
    assert worker.tick() == 1
    assert changes.version == shown  # a delivery changes nothing the page shows

    open_incident(t, "db")
    assert worker.tick() == 1
    assert changes.version > shown  # what a live page waits on
    part = page.feed.snapshot(True).parts["part-dead"]
    assert "404 no_service" in part and "opened" in part
    [dead] = page.reader.read(True).dead_letters
    assert (dead["channel"], dead["kind"], dead["error"]) == ("slack", "opened", "404 no_service")
