"""The metrics Guardian exports: names, types and labels as documented, and the values the loop
leaves in them (read back with get_sample_value from a fresh registry per test)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.engine.engine_payloads import inspect_snapshot
from guardian.adapters.prometheus import NOTIFICATION_OUTCOMES, PrometheusMetrics
from guardian.core.model import RemediationAction
from tests.app import make_app
from tests.fakes import T0, FakeClock, FakeEngine

# name, type, label names: the list, plus what the alerts need.
EXPORTED = [
    ("guardian_containers_watched", "gauge", ()),
    ("guardian_containers_unhealthy", "gauge", ()),
    ("guardian_incidents_open", "gauge", ("type", "state")),
    ("guardian_incidents", "counter", ("type",)),
    ("guardian_restart_decisions", "counter", ("decision", "reason")),
    ("guardian_restarts", "counter", ("container", "outcome")),
    ("guardian_restarts_exhausted", "gauge", ("container",)),
    ("guardian_detection_to_restart_seconds", "histogram", ()),
    ("guardian_restart_duration_seconds", "histogram", ()),
    ("guardian_sweep_duration_seconds", "histogram", ()),
    ("guardian_last_sweep_timestamp_seconds", "gauge", ()),
    ("guardian_docker_up", "gauge", ()),
    ("guardian_store_errors", "counter", ()),
    ("guardian_store_held_intents", "gauge", ()),
    ("guardian_log_rules_unfollowed", "gauge", ()),
    ("guardian_clock_steps", "counter", ("direction",)),
    ("guardian_notifications", "counter", ("channel", "outcome")),
    ("guardian_notification_queue_depth", "gauge", ()),
    ("guardian_notification_channel_up", "gauge", ("channel",)),
    ("guardian_heartbeat_pings", "counter", ("ping", "outcome")),
    ("guardian_hook_runs", "counter", ("outcome",)),
    ("guardian_build", "info", ("version", "engine", "engine_version")),
]


def test_every_metric_has_its_documented_name_type_and_labels():
    metrics = PrometheusMetrics(CollectorRegistry())
    collectors = [c for c in vars(metrics).values() if hasattr(c, "describe")]
    found = {}
    for collector in collectors:
        for family in collector.describe():
            labels = getattr(family, "_labelnames", None) or getattr(collector, "_labelnames", ())
            found[family.name] = (family.type, tuple(labels))
    expected = {name: (kind, labels) for name, kind, labels in EXPORTED}
    expected["guardian_build"] = ("info", ())  # an Info's labels are its value, not label names
    assert found == expected


def test_build_info_carries_the_version_and_the_engine_once_it_answers(tmp_path: Path):
    from guardian import __version__

    w = make_app(tmp_path, engine=FakeEngine(FakeClock(), kind="podman"))
    unknown = {"version": __version__, "engine": "unknown", "engine_version": "unknown"}
    assert w.registry.get_sample_value("guardian_build_info", unknown) == 1
    w.healer.sweep()
    podman = {"version": __version__, "engine": "podman", "engine_version": "0.0-fake"}
    assert w.registry.get_sample_value("guardian_build_info", podman) == 1
    assert w.registry.get_sample_value("guardian_build_info", unknown) is None


def test_alerted_counters_exist_at_zero_before_anything_happens():
    registry = CollectorRegistry()
    PrometheusMetrics(registry)
    for kind in ("unhealthy", "exited", "oom_killed"):
        assert registry.get_sample_value("guardian_incidents_total", {"type": kind}) == 0
    restart = {"decision": "restart", "reason": "allowed"}
    assert registry.get_sample_value("guardian_restart_decisions_total", restart) == 0


def test_notification_channels_start_at_zero_and_unknown_outcomes_are_refused():
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    metrics.add_notification_channel("slack")
    for outcome in NOTIFICATION_OUTCOMES:
        labels = {"channel": "slack", "outcome": outcome}
        assert registry.get_sample_value("guardian_notifications_total", labels) == 0
    metrics.count_notification("slack", "delivered")
    labels = {"channel": "slack", "outcome": "delivered"}
    assert registry.get_sample_value("guardian_notifications_total", labels) == 1
    with pytest.raises(ValueError, match="notification outcome 'lost'"):
        metrics.count_notification("slack", "lost")


# -- the loop fills them ---------------------------------------------------------------------


@pytest.fixture
def loop(tmp_path: Path):
    t = make_app(tmp_path, restart={"cooldown": "10s", "max_attempts": 2, "verify_timeout": "30s"})
    yield t.healer, t.engine, t.clock, t.registry
    t.store.close()


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_heal_shows_in_counters_gauges_and_histograms(loop):
    healer, engine, clock, registry = loop
    engine.add("db")
    # Docker turned "web" unhealthy 4 s before the sweep that restarts it.
    engine.add("web", health="unhealthy", unhealthy_since=T0 - timedelta(seconds=4))

    healer.sweep()
    assert sample(registry, "guardian_containers_watched") == 2
    assert sample(registry, "guardian_containers_unhealthy") == 1
    assert sample(registry, "guardian_incidents_total", type="unhealthy") == 1
    assert sample(registry, "guardian_incidents_open", type="unhealthy", state="in_progress") == 1
    restart = {"decision": "restart", "reason": "allowed"}
    assert sample(registry, "guardian_restart_decisions_total", **restart) == 1
    assert sample(registry, "guardian_detection_to_restart_seconds_count") == 1
    assert sample(registry, "guardian_detection_to_restart_seconds_sum") == 4.0
    assert sample(registry, "guardian_detection_to_restart_seconds_bucket", le="5.0") == 1
    assert sample(registry, "guardian_detection_to_restart_seconds_bucket", le="2.0") == 0
    assert sample(registry, "guardian_restart_duration_seconds_count") == 1
    # Not healed until observed healthy.
    assert sample(registry, "guardian_restarts_total", container="web", outcome="succeeded") is None

    clock.advance(1)
    healer.verifier.verify()
    assert sample(registry, "guardian_restarts_total", container="web", outcome="succeeded") == 1
    assert sample(registry, "guardian_incidents_open", type="unhealthy", state="resolved") == 1
    in_progress = {"type": "unhealthy", "state": "in_progress"}
    assert sample(registry, "guardian_incidents_open", **in_progress) is None

    healer.sweep()
    assert sample(registry, "guardian_containers_unhealthy") == 0


def test_an_exited_container_is_timed_from_its_exit(loop):
    healer, engine, _clock, registry = loop
    engine.add(
        "job", state="exited", health=None, exit_code=3, finished_at=T0 - timedelta(seconds=7)
    )
    healer.sweep()
    assert sample(registry, "guardian_incidents_total", type="exited") == 1
    assert sample(registry, "guardian_detection_to_restart_seconds_sum") == 7.0


def test_giving_up_raises_the_exhausted_gauge_until_the_container_recovers(loop):
    healer, engine, clock, registry = loop
    engine.after_restart_health = "unhealthy"
    engine.add("web", health="unhealthy")
    for _ in range(2):  # max_attempts=2, each restart fails verification
        healer.sweep()
        clock.advance(1)
        healer.verifier.verify()
        clock.advance(10)
    failed = {"container": "web", "outcome": "unhealthy_after_restart"}
    assert sample(registry, "guardian_restarts_total", **failed) == 2
    assert sample(registry, "guardian_restarts_exhausted", container="web") is None

    healer.sweep()
    gave_up = {"decision": "give_up", "reason": "max_attempts"}
    assert sample(registry, "guardian_restart_decisions_total", **gave_up) == 1
    assert sample(registry, "guardian_restarts_total", container="web", outcome="retry_exhausted")
    assert sample(registry, "guardian_restarts_exhausted", container="web") == 1

    engine.set("web", health="healthy")
    healer.sweep()
    assert sample(registry, "guardian_restarts_exhausted", container="web") is None


def test_a_restart_cut_short_by_a_crash_is_counted_as_interrupted(loop):
    healer, engine, clock, registry = loop
    web = engine.add("web", health="unhealthy")  # started an hour ago: never restarted
    intent = RemediationAction(
        None, None, healer.ctx.settings.host, "web", web.id, "restart", clock.now(), "allowed"
    )
    healer.ctx.store.record_intent(intent)
    assert healer.verifier.reconcile() == 1
    clock.advance(3600)  # past its stop timeout and verify_timeout: it never restarted
    healer.verifier.verify()
    interrupted = {"container": "web", "outcome": "interrupted"}
    assert sample(registry, "guardian_restarts_total", **interrupted) == 1


def test_docker_up_follows_the_engine(loop):
    healer, engine, _clock, registry = loop
    healer.sweep()
    assert sample(registry, "guardian_docker_up") == 1
    engine.reachable = False
    healer.sweep()
    assert sample(registry, "guardian_docker_up") == 0


# -- when Docker reported the problem ---------------------------------------------------------


def probe(second: int, code: int) -> dict[str, object]:
    return {"End": f"2026-01-01T12:00:{second:02d}.5Z", "ExitCode": code}


@pytest.mark.parametrize(
    ("codes", "streak", "retries", "expected_second", "exact"),
    [
        ([0, 0, 1, 1, 1], 3, 3, 4, True),  # the third failure turned it unhealthy
        ([0, 0, 0, 1, 1], 2, 1, 3, True),  # retries=1: the first failure did
        ([1, 1, 1, 1, 1], 9, 3, 0, False),  # the turning probe rotated out: the oldest kept one
        ([1, 1, 1, 1, 1], 8, 3, 0, False),  # out by one probe
        ([1, 1, 1, 1, 1], 7, 3, 0, True),  # the oldest kept one is the turn: still there
        ([0, 1, 1, 1, 1], 4, 0, 3, True),  # retries unset: Docker's default of 3
    ],
)
def test_unhealthy_since_is_the_probe_that_completed_the_failing_streak(
    codes, streak, retries, expected_second, exact
):
    data = {
        "Id": "a" * 64,
        "Name": "/web",
        "State": {
            "Status": "running",
            "Health": {
                "Status": "unhealthy",
                "FailingStreak": streak,
                "Log": [probe(i, c) for i, c in enumerate(codes)],
            },
        },
        "Config": {"Healthcheck": {"Retries": retries}},
    }
    snap = inspect_snapshot(data)
    at = T0.replace(second=expected_second, microsecond=500000)
    # Once rotated out, only a bound is left: unhealthy at least since the oldest kept failure.
    assert (snap.unhealthy_since, snap.unhealthy_by) == ((at, None) if exact else (None, at))


def test_a_healthy_container_has_no_unhealthy_since():
    data = {
        "Id": "a" * 64,
        "Name": "/web",
        "State": {"Status": "running", "Health": {"Status": "healthy", "Log": [probe(1, 0)]}},
    }
    assert inspect_snapshot(data).unhealthy_since is None


def test_the_last_sweep_is_nan_until_the_first_sweep_not_1970():
    import math

    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    assert math.isnan(registry.get_sample_value("guardian_last_sweep_timestamp_seconds"))
    metrics.sweep_finished(0.1, T0)
    assert registry.get_sample_value("guardian_last_sweep_timestamp_seconds") == T0.timestamp()


def test_open_incidents_count_an_engine_outage_while_it_lasts(tmp_path):
    loop = make_app(tmp_path, docker={"timeout": "30s"})
    loop.engine.add("web")
    loop.healer.sweep()
    loop.engine.reachable = False
    loop.healer.sweep()
    loop.clock.advance(31)
    loop.healer.sweep()  # no sweep completes: the engine does not answer
    labels = {"type": "engine_unreachable", "state": "active"}
    assert loop.metric("guardian_incidents_open", **labels) == 1
    loop.engine.reachable = True
    loop.clock.advance(5)
    loop.healer.sweep()
    assert loop.metric("guardian_incidents_open", **labels) == 0
    assert loop.metric("guardian_incidents_open", type="engine_unreachable", state="resolved") == 1


def test_a_storm_escalation_is_no_containers_exhausted_restarts(tmp_path):
    loop = make_app(tmp_path, storm={"hold": "10s"})
    for i in range(6):
        loop.engine.add(f"c{i}", health="unhealthy")
    loop.engine.after_restart_health = "unhealthy"
    loop.healer.sweep()
    loop.clock.advance(10)
    loop.healer.sweep()
    loop.healer.verifier.verify()  # the canary did not heal: the storm escalates
    storm = loop.store.open_incidents(loop.host, "(host)")[0]
    assert storm.escalated
    assert loop.metric("guardian_incidents_open", type="storm", state="active") == 1
    assert loop.metric("guardian_restarts_exhausted", container="(host)") == 0


def test_a_scrape_during_updates_never_misses_a_series_that_exists():
    import threading

    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    metrics = PrometheusMetrics(CollectorRegistry())
    # Always open: one unhealthy incident and one container given up on; the rest come and go.
    metrics.open_incidents({("unhealthy", "active"): 1}, {"db"})
    metrics.restart_ended("db", "succeeded")
    stop = threading.Event()

    def update(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            counts = {("unhealthy", "active"): 1 + i % 3, ("exited", "resolved"): i % 2}
            metrics.open_incidents({k: v for k, v in counts.items() if v}, {"db", f"c{n}-{i % 4}"})
            metrics.swept(10 + i % 5, i % 3)
            metrics.restart_ended(f"c{n}-{i % 4}", "succeeded")
            metrics.containers_present({"db", f"c{n}-{i % 4}"})
            metrics.notification_queue(i % 7)

    updaters = [threading.Thread(target=update, args=(n,), daemon=True) for n in range(6)]
    for t in updaters:
        t.start()
    try:
        for _ in range(300):
            text = generate_latest(metrics.registry).decode()
            seen = {
                (s.name, tuple(sorted(s.labels.items())))
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
            assert ("guardian_incidents_open", (("state", "active"), ("type", "unhealthy"))) in seen
            assert ("guardian_restarts_exhausted", (("container", "db"),)) in seen
            assert ("guardian_containers_watched", ()) in seen
    finally:
        stop.set()
        for t in updaters:
            t.join(10)
    restarts = {("db", "succeeded")} | {
        (f"c{n}-{i}", "succeeded") for n in range(6) for i in range(4)
    }
    assert sample(metrics.registry, "guardian_restarts_total", container="db", outcome="succeeded")
    assert {k for k, _ in metrics.loop_now.now.restarts} <= restarts


def test_a_removed_containers_series_end(loop):
    healer, engine, clock, registry = loop
    engine.add("web", health="unhealthy")
    engine.add("db")
    healer.sweep()
    clock.advance(1)
    healer.verifier.verify()
    assert sample(registry, "guardian_restarts_total", container="web", outcome="succeeded") == 1
    del engine.containers[engine.id_of("web")]
    healer.sweep()
    assert sample(registry, "guardian_restarts_total", container="web", outcome="succeeded") is None
    assert sample(registry, "guardian_containers_watched") == 1
