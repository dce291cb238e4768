"""The heartbeat over a fake pinger and a stepped monotonic clock: when it pings, which URL, what
a failure costs; and its config through bootstrap: secrets, bad URLs, derived failure URLs."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.heartbeat import failure_url
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.bootstrap import build_heartbeat
from guardian.config import ConfigError, load_settings
from guardian.core.outbound.delivery import DELIVERED, Result, Status
from guardian.core.redaction import Redactor
from guardian.service.outbound.heartbeat import Heartbeat
from tests.notify import Ticks
from tests.samples import S


@dataclass
class FakePinger:
    results: list[Result] = field(default_factory=list)
    pings: list[bool] = field(default_factory=list)

    def ping(self, up: bool) -> Result:
        self.pings.append(up)
        return self.results.pop(0) if self.results else DELIVERED


def make(interval=60 * S):
    ticks, pinger = Ticks(), FakePinger()
    metrics = PrometheusMetrics(CollectorRegistry())
    beat = Heartbeat(pinger, interval, metrics, monotonic=ticks, threaded=False)
    return beat, pinger, ticks, metrics


def count(metrics, ping, outcome):
    return metrics.registry.get_sample_value(
        "guardian_heartbeat_pings_total", {"ping": ping, "outcome": outcome}
    )


def test_pings_after_a_sweep_then_at_most_once_per_interval():
    beat, pinger, ticks, metrics = make()
    for step in range(0, 185, 10):  # a sweep every 10 s for three minutes
        ticks.t = 1000 + step
        beat.swept(engine_reached=True)
        beat.flush()
    assert pinger.pings == [True, True, True, True]  # at 0, 60, 120 and 180 s
    assert count(metrics, "up", "delivered") == 4 and count(metrics, "fail", "failed") == 0


def test_the_engine_going_away_sends_the_failure_ping_at_once_then_per_interval():
    beat, pinger, ticks, _ = make()
    beat.swept(True)
    beat.flush()
    ticks.t += 10
    beat.swept(False)  # news: not held back by the interval
    beat.flush()
    ticks.t += 30
    beat.swept(False)
    assert beat.flush() is None
    ticks.t += 30
    beat.swept(False)
    beat.flush()
    ticks.t += 1
    beat.swept(True)
    beat.flush()
    assert pinger.pings == [True, False, False, True]


def test_a_failed_ping_is_counted_logged_and_not_retried(caplog):
    beat, pinger, ticks, metrics = make()
    refused = Result(Status.TRANSIENT, "connection refused")
    pinger.results = [refused]
    beat.swept(True)
    assert beat.flush() == refused
    assert beat.flush() is None  # nothing asked since: no retry
    ticks.t += 59
    beat.swept(True)
    assert beat.flush() is None
    assert count(metrics, "up", "failed") == 1 and count(metrics, "up", "delivered") == 0
    assert "heartbeat ping failed; not retried" in caplog.text


def test_a_ping_asked_while_one_waits_replaces_it():
    beat, pinger, ticks, _ = make()
    beat.swept(True)
    ticks.t += 1
    beat.swept(False)
    beat.flush()
    assert pinger.pings == [False]


@pytest.mark.parametrize(
    ("url", "fail"),
    [
        ("https://hc-ping.com/5a0c", "https://hc-ping.com/5a0c/fail"),
        ("https://hc-ping.com/5a0c/", "https://hc-ping.com/5a0c/fail"),
        (
            "https://hc.example/ping/key/slug?create=1",
            "https://hc.example/ping/key/slug/fail?create=1",
        ),
        (
            "https://kuma.example/api/push/Tok3n?status=up&msg=OK&ping=",
            "https://kuma.example/api/push/Tok3n?status=down"
            "&msg=Guardian+cannot+reach+the+Docker+engine",
        ),
    ],
)
def test_the_failure_url_follows_the_monitor(url, fail):
    assert failure_url(url) == fail


def settings(env):
    return load_settings(None, env=env)


def test_no_url_no_heartbeat():
    assert build_heartbeat(settings({}), PrometheusMetrics(CollectorRegistry()), {}) is None


@pytest.mark.parametrize(
    "value",
    [
        "hc-ping.com/gdtSecret",
        "ftp://gdtSecret.example/x",
        "https://",
        "http://[gdtSecret/x",
        "https://h/" + "gdtSecret" * 300,
        "https://h/gdt\tSecret",
    ],
)
def test_a_bad_url_is_one_line_that_does_not_quote_it(value):
    env = {"GUARDIAN_HEARTBEAT_URL_ENV": "GDT_BEAT", "GDT_BEAT": value}
    with pytest.raises(ConfigError) as exc:
        build_heartbeat(settings(env), PrometheusMetrics(CollectorRegistry()), env)
    message = str(exc.value)
    assert message.startswith("heartbeat.url: expected an http:// or https:// URL")
    assert "gdtSecret" not in message and "\n" not in message


def test_a_failure_url_alone_is_refused_and_both_sources_at_once_too(tmp_path):
    env = {"GUARDIAN_HEARTBEAT_FAIL_URL_ENV": "GDT_FAIL", "GDT_FAIL": "https://h/x"}
    with pytest.raises(ConfigError, match=r"heartbeat\.fail_url: needs heartbeat\.url_env"):
        build_heartbeat(settings(env), PrometheusMetrics(CollectorRegistry()), env)
    env = {"GUARDIAN_HEARTBEAT_URL_ENV": "A", "GUARDIAN_HEARTBEAT_URL_FILE": str(tmp_path / "f")}
    with pytest.raises(
        ConfigError, match=r"heartbeat\.url_env and heartbeat\.url_file: set only one"
    ):
        build_heartbeat(settings(env), PrometheusMetrics(CollectorRegistry()), env)


def test_the_metric_series_exist_before_the_first_ping():
    metrics = PrometheusMetrics(CollectorRegistry())
    env = {"GUARDIAN_HEARTBEAT_URL_ENV": "GDT_BEAT", "GDT_BEAT": "https://hc-ping.com/gdtSecret1"}
    assert build_heartbeat(settings(env), metrics, env) is not None
    for ping in ("up", "fail"):
        for outcome in ("delivered", "failed"):
            assert count(metrics, ping, outcome) == 0


def test_a_monitor_that_echoes_the_url_gets_no_secret_into_the_log(caplog):
    redact = Redactor()
    redact.add("https://hc-ping.com/gdtSecretUuid")
    pinger = FakePinger([Result(Status.PERMANENT, "404 no check at /gdtSecretUuid")])
    metrics = PrometheusMetrics(CollectorRegistry())
    beat = Heartbeat(pinger, 60 * S, metrics, redact, monotonic=Ticks(), threaded=False)
    beat.swept(True)
    beat.flush()
    assert "heartbeat ping failed" in caplog.text and "gdtSecret" not in caplog.text
