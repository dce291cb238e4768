"""notify.on_start and `guardian notify test` built through bootstrap: the start-up notice names
the host, the version and what is watched; the channel check reports each channel's outcome."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from guardian import __version__
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_channel_check, build_delivery
from guardian.config import load_settings
from guardian.core.outbound.delivery import Result, Status
from guardian.core.redaction import Redactor
from guardian.service.outbound.channel_check import ChannelCheck
from tests.fakes import FakeClock, FakeNotifier
from tests.helpers import wait_until
from tests.receiver import receiver

ENV = {"GUARDIAN_NOTIFY_SLACK_WEBHOOK_URL_ENV": "GDT_SLACK", "GUARDIAN_WATCH_SCOPE": "team=db"}


def test_on_start_sends_host_version_and_what_is_watched_once(tmp_path):
    with receiver() as rx:
        env = {**ENV, "GUARDIAN_NOTIFY_ON_START": "true", "GDT_SLACK": rx.url("/s")}
        env["GUARDIAN_NOTIFY_GROUP_WAIT"] = "0s"
        settings = load_settings(None, env=env)
        store = SqliteStore(tmp_path / "g.db")
        metrics = PrometheusMetrics(CollectorRegistry())
        worker = build_delivery(settings, store, FakeClock(), metrics, "vm1", env=env)
        worker.start()
        try:
            wait_until(lambda: rx.answered(), 10, message="start-up notice")
        finally:
            worker.stop()
            store.close()
    [doc] = [r.json for r in rx.requests]
    assert doc["text"].startswith("Guardian started on vm1")
    assert (
        f"Guardian {__version__} watches the containers labelled guardian.enable=true"
        in (doc["text"])
    )
    assert "within team=db" in doc["text"]


def test_without_on_start_nothing_is_queued_at_start(tmp_path):
    env = {**ENV, "GDT_SLACK": "http://127.0.0.1:9/s"}
    store = SqliteStore(tmp_path / "g.db")
    metrics = PrometheusMetrics(CollectorRegistry())
    worker = build_delivery(load_settings(None, env=env), store, FakeClock(), metrics, "vm1", env)
    assert worker.settings.on_start is None
    store.close()


def test_the_check_sends_one_marked_message_per_channel_and_types_each_outcome():
    ok = FakeNotifier("slack")
    refused = FakeNotifier("discord", results=[Result(Status.PERMANENT, "404 gdtSecretX")])
    broken = FakeNotifier("email")
    broken.send = lambda batch: 1 / 0  # type: ignore[method-assign]
    redact = Redactor()
    redact.add("gdtSecretX")
    check = ChannelCheck([ok, refused, broken], FakeClock(), "vm1", redact, lambda: 5.0)
    reports = {r.channel: r for r in check.run()}
    assert reports["slack"].delivered and reports["slack"].seconds == 0.0
    assert reports["discord"].status == "permanent" and not reports["discord"].delivered
    assert reports["discord"].error == "404 ***"
    assert reports["email"].error == "channel error: ZeroDivisionError"
    [message] = ok.sent[0]
    assert message.headline == "[TEST] Guardian on vm1: a test message, nothing is wrong"
    assert [r.channel for r in check.run("discord")] == ["discord"]


def test_the_check_over_no_channel_has_none():
    assert build_channel_check(load_settings(None, env={}), env={}).channels == []
