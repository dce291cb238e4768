"""A channel that dead-letters is reported once through the other channels (Slack refuses:
email says so), marked down in the metrics until it delivers again."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import Result, Status
from guardian.service.outbound.delivery import DeliveryWorker, WorkerSettings
from tests.fakes import FakeClock, FakeNotifier
from tests.samples import S

HOST = "vm1"
REFUSED = Result(Status.PERMANENT, "404 no_service")


def open_incident(store, clock, container):
    result = HealthCheckResult(
        f"{container}-id", container, clock.now(), ProblemType.UNHEALTHY, "x"
    )
    change = incidents.record_detection(None, HOST, result, clock.now())
    store.save_incident(change, [notifications.opened(change.incident, None, clock.now())])


def kinds(channel):
    return [(str(n.kind), n.container or n.channel) for batch in channel.sent for n in batch]


def up(metrics, channel):
    return metrics.registry.get_sample_value(
        "guardian_notification_channel_up", {"channel": channel}
    )


def test_a_refusing_channel_is_told_once_through_the_others_until_it_delivers_again(tmp_path):
    store, clock = SqliteStore(tmp_path / "g.db"), FakeClock()
    slack = FakeNotifier("slack", results=[REFUSED, REFUSED])
    email = FakeNotifier("email")
    metrics = PrometheusMetrics(CollectorRegistry())
    worker = DeliveryWorker(
        SqliteOutbox(store.db), [slack, email], clock, metrics, WorkerSettings(HOST, 0 * S)
    )

    def drain():
        for _ in range(4):
            worker.tick()
            clock.advance(5)

    assert up(metrics, "slack") == 1
    open_incident(store, clock, "web")
    drain()
    assert kinds(email) == [("opened", "web"), ("channel_failed", "slack")]
    assert up(metrics, "slack") == 0 and up(metrics, "email") == 1
    [[notice]] = email.sent[1:]
    assert notice.headline == "Guardian on vm1 cannot deliver to the channel slack"
    assert "404 no_service" in notice.detail

    open_incident(store, clock, "db")  # refused again: nobody is told twice
    drain()
    assert kinds(email)[2:] == [("opened", "db")]
    assert kinds(slack) == [("opened", "web"), ("opened", "db")]  # never its own failure

    open_incident(store, clock, "cache")  # delivers again ...
    drain()
    assert up(metrics, "slack") == 1
    slack.results = [REFUSED]  # ... and a new failure is news again
    open_incident(store, clock, "queue")
    drain()
    assert kinds(email)[-1] == ("channel_failed", "slack")
    assert [k for k, _ in kinds(email)].count("channel_failed") == 2
    store.close()


def test_the_mark_survives_a_restart_so_nobody_is_told_twice(tmp_path):
    store, clock = SqliteStore(tmp_path / "g.db"), FakeClock()
    for run in range(2):
        slack = FakeNotifier("slack", results=[REFUSED])
        email = FakeNotifier("email")
        worker = DeliveryWorker(
            SqliteOutbox(store.db),
            [slack, email],
            clock,
            PrometheusMetrics(CollectorRegistry()),
            WorkerSettings(HOST, 0 * S),
        )
        open_incident(store, clock, f"app{run}")
        for _ in range(4):
            worker.tick()
            clock.advance(5)
        told = [k for k, _ in kinds(email)].count("channel_failed")
        assert told == (1 if run == 0 else 0)
    store.close()


def test_alone_a_failing_channel_tells_nobody(tmp_path):
    store, clock = SqliteStore(tmp_path / "g.db"), FakeClock()
    slack = FakeNotifier("slack", results=[REFUSED])
    worker = DeliveryWorker(
        SqliteOutbox(store.db),
        [slack],
        clock,
        PrometheusMetrics(CollectorRegistry()),
        WorkerSettings(HOST, 0 * S),
    )
    open_incident(store, clock, "web")
    for _ in range(3):
        worker.tick()
        clock.advance(5)
    assert kinds(slack) == [("opened", "web")]
    store.close()
