"""The secrets check itself: it must find a secret wherever it shows, or it proves nothing."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

from tests.faults.exposure import SECRET_SOURCES, Exposure
from tests.faults.notify_check import SLACK_PATH, expose_received
from tests.receiver import FakeReceiver


def test_the_check_finds_each_configured_secret_in_any_exposed_text() -> None:
    for name, value in SECRET_SOURCES.items():
        exposure = Exposure()
        exposure.add("a log line", "level=info msg=ok")
        exposure.add("a metric", f'guardian_x{{url="{value}"}} 1'.encode())
        assert exposure.leaks() == [f"{name} secret appears in a metric"]


def test_every_configured_secret_is_a_fresh_unguessable_value() -> None:
    values = list(SECRET_SOURCES.values())
    assert len(set(values)) == len(values)
    assert all(len(v) >= 24 for v in values)


def test_the_check_finds_a_secret_in_a_notification_the_receiver_got() -> None:
    # A real request to the fake receiver, carrying the HMAC key in its body and the Slack URL
    # in a header: both must be reported, the path (where a webhook URL's secret lives) not.
    rx = FakeReceiver()
    try:
        path = SLACK_PATH + SECRET_SOURCES["slack webhook url"]
        body = json.dumps({"text": f"key {SECRET_SOURCES['webhook hmac']}"}).encode()
        request = urllib.request.Request(
            rx.url(path), body, {"X-Leak": rx.url(path)}, method="POST"
        )
        urllib.request.urlopen(request, timeout=5).close()
    finally:
        rx.stop()
    exposure = Exposure()
    expose_received(exposure, rx)
    leaks = exposure.leaks()
    assert len(leaks) == 2
    assert leaks[0].startswith("slack webhook url secret appears in notification 0 received")
    assert leaks[1].startswith("webhook hmac secret appears in notification 0 received")
    exposure = Exposure()
    rx.requests[0].body = b'{"text": "Incident opened"}'
    rx.requests[0].headers = {}
    expose_received(exposure, rx)
    assert exposure.leaks() == []


def test_the_check_finds_a_secret_cut_short_and_a_secret_in_any_store_column(
    tmp_path: Path,
) -> None:
    value = SECRET_SOURCES["health output"]
    exposure = Exposure()
    exposure.add("an error cut at 120 characters", f"400 bad request: {value[:-10]}")
    assert exposure.leaks() == ["health output secret appears in an error cut at 120 characters"]
    store = tmp_path / "guardian.db"
    db = sqlite3.connect(store)
    db.execute("CREATE TABLE deliveries (id INTEGER, last_error TEXT)")
    db.execute("INSERT INTO deliveries VALUES (1, ?)", (f"echo {SECRET_SOURCES['api token']}",))
    db.commit()
    db.close()
    exposure = Exposure()
    exposure.add_store(store)
    assert exposure.leaks() == [f"api token secret appears in store {tmp_path.name}/guardian.db"]
