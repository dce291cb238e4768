"""The crash test's notification check itself: it must see a lost or a doubled notification."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from guardian.adapters.notify.slack_blocks import message
from guardian.core.notifications import Kind, Notification, to_dict
from tests.faults.notify_check import HOOK_PATH, SLACK_PATH, check_notifications
from tests.receiver import FakeReceiver, Recorded

AT = datetime(2026, 11, 30, tzinfo=UTC)
N1 = Notification(Kind.OPENED, 1, "h", "storm0", "unhealthy", "active", AT, id=1)
N2 = Notification(Kind.OPENED, 2, "h", "storm1", "unhealthy", "active", AT, id=2)


def store(tmp_path: Path, states: dict[tuple[int, str], str]) -> Path:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "guardian.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE outbox (id INTEGER, payload TEXT, dispatched INTEGER)")
    db.execute("CREATE TABLE deliveries (outbox_id INTEGER, channel TEXT, state TEXT)")
    for n in (N1, N2):
        db.execute("INSERT INTO outbox VALUES (?,?,1)", (n.id, json.dumps(to_dict(n))))
    db.executemany("INSERT INTO deliveries VALUES (?,?,?)", [(*k, v) for k, v in states.items()])
    db.commit()
    db.close()
    return path


ALL_DELIVERED = {(i, c): "delivered" for i in (1, 2) for c in ("slack", "webhook")}


def slack(n: Notification, at: float) -> Recorded:
    return Recorded("POST", SLACK_PATH + "x", {}, json.dumps(message([n])).encode(), at, 200)


def hook(ns: list[Notification], at: float) -> Recorded:
    body = json.dumps({"notifications": [to_dict(n) for n in ns]}).encode()
    return Recorded("POST", HOOK_PATH + "x", {}, body, at, 200)


@pytest.fixture
def rx() -> Iterator[FakeReceiver]:
    r = FakeReceiver()
    yield r
    r.stop()


def test_each_notification_received_once_passes(tmp_path: Path, rx: FakeReceiver) -> None:
    rx.requests = [slack(N1, 1), hook([N1, N2], 2), slack(N2, 3)]
    fig = check_notifications(store(tmp_path, ALL_DELIVERED), rx, [0, 10], killed_runs=1)
    assert fig.problems == [] and fig.slack_duplicates == 0


def test_a_resend_of_the_send_in_flight_at_a_kill_is_counted_not_failed(
    tmp_path: Path, rx: FakeReceiver
) -> None:
    # N2 arrived as run 0's last Slack message, run 0 was killed before recording it: resent.
    rx.requests = [slack(N1, 1), slack(N2, 2), hook([N1, N2], 12), slack(N2, 13)]
    fig = check_notifications(store(tmp_path, ALL_DELIVERED), rx, [0, 10], killed_runs=1)
    assert fig.problems == []
    assert (fig.slack_duplicates, fig.duplicates_at_kills) == (1, 1)


def test_a_duplicate_outside_the_kill_window_fails(tmp_path: Path, rx: FakeReceiver) -> None:
    # N1 twice, but it was not the last Slack message of the killed run.
    rx.requests = [slack(N1, 1), slack(N2, 2), hook([N1, N2], 12), slack(N1, 13)]
    fig = check_notifications(store(tmp_path, ALL_DELIVERED), rx, [0, 10], killed_runs=1)
    assert fig.slack_duplicates == 1
    assert len(fig.problems) == 1 and "outside the kill window" in fig.problems[0]
    # Twice within the last run, which was not killed: no window at all.
    rx.requests = [slack(N1, 11), slack(N2, 12), hook([N1, N2], 12), slack(N2, 13)]
    fig = check_notifications(store(tmp_path / "second", ALL_DELIVERED), rx, [0, 10], killed_runs=1)
    assert len(fig.problems) == 1 and "outside the kill window" in fig.problems[0]


def test_a_lost_notification_fails(tmp_path: Path, rx: FakeReceiver) -> None:
    states = {**ALL_DELIVERED, (2, "webhook"): "pending"}
    rx.requests = [slack(N1, 1), hook([N1], 2)]
    fig = check_notifications(store(tmp_path, states), rx, [0], killed_runs=0)
    assert fig.problems == [
        "webhook: neither delivered nor dead: ids [2]",
        "slack: recorded delivered but never received: {'Incident opened: storm1 on h:"
        " unhealthy': 1}",
    ]
    assert fig.lost == 2
    rx.requests = [slack(N1, 1), slack(N2, 1), hook([N1], 2)]
    fig = check_notifications(store(tmp_path / "second", ALL_DELIVERED), rx, [0], killed_runs=0)
    assert fig.problems == ["webhook: recorded delivered but never received: ids [2]"]
