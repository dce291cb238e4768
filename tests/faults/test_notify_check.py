"""The crash test's notification check itself: it must see a lost or a doubled notification."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from guardian.adapters.notify.apprise_text import render
from guardian.adapters.notify.slack_blocks import message
from guardian.core.outbound.notifications import Kind, Notification, to_dict
from tests.faults.notify_check import (
    APPRISE_CHANNEL,
    APPRISE_PATH,
    HOOK_PATH,
    SLACK_PATH,
    apprise_headlines,
    check_notifications,
)
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


def apprise(ns: list[Notification], at: float) -> Recorded:
    m = render(ns, markdown=True)
    body = json.dumps({"title": m.title, "message": m.body}).encode()
    return Recorded("POST", APPRISE_PATH + "x", {}, body, at, 200)


def test_apprise_batches_are_read_back_headline_by_headline() -> None:
    odd = Notification(Kind.OPENED, 3, "h", "my_app[1]", "unhealthy", "active", AT, id=3)
    assert apprise_headlines(apprise([N1, odd], 0).body) == [N1.headline, odd.headline]
    assert apprise_headlines(apprise([odd], 0).body) == [odd.headline]


def test_apprise_is_checked_like_slack_lost_or_doubled(tmp_path: Path, rx: FakeReceiver) -> None:
    channels = ("slack", "webhook", APPRISE_CHANNEL)
    states = {**ALL_DELIVERED, **{(i, APPRISE_CHANNEL): "delivered" for i in (1, 2)}}
    told = [slack(N1, 1), slack(N2, 2), hook([N1, N2], 2)]
    rx.requests = [*told, apprise([N1, N2], 3)]
    fig = check_notifications(store(tmp_path, states), rx, [0], killed_runs=0, channels=channels)
    assert fig.problems == [] and fig.apprise_messages == 1
    rx.requests = [*told, apprise([N1], 3)]  # N2 recorded delivered, never received
    fig = check_notifications(store(tmp_path / "b", states), rx, [0], 0, channels=channels)
    assert fig.lost == 1 and fig.problems[0].startswith("apprise:json: recorded delivered but")
    rx.requests = [*told, apprise([N1], 3), apprise([N2], 4), apprise([N1], 5)]  # N1 twice
    fig = check_notifications(store(tmp_path / "c", states), rx, [0], 0, channels=channels)
    assert fig.apprise_duplicates == 1 and "outside the kill window" in fig.problems[0]
    del states[(2, APPRISE_CHANNEL)]  # Guardian never fanned N2 out to Apprise
    rx.requests = [*told, apprise([N1], 3)]
    fig = check_notifications(store(tmp_path / "d", states), rx, [0], 0, channels=channels)
    assert fig.problems == ["apprise:json: no delivery row for outbox ids [2]"]
