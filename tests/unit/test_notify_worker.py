"""The delivery worker over a real SQLite outbox, fake channels and a FakeClock: no sleeps."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.facts import IncidentWritten, NotificationsNotQueued
from guardian.core.model import Decision, HealthCheckResult, ProblemType, Reason, Verdict
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import Result, RetryPolicy, Status
from guardian.ports import StoreError
from guardian.service.outbound.delivery import DIRECT_MAX, DeliveryWorker, WorkerSettings
from tests.fakes import FakeClock, FakeNotifier

S = timedelta(seconds=1)
HOST = "host1"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "g.db")
    yield s
    s.close()


def make_worker(store, clock, *channels, group_wait=0 * S, max_attempts=5, repeat=4 * 3600 * S):
    metrics = PrometheusMetrics(CollectorRegistry())
    settings = WorkerSettings(
        HOST, group_wait, repeat, RetryPolicy(max_attempts, 1 * S, 60 * S, 30 * S)
    )
    return DeliveryWorker(SqliteOutbox(store.db), list(channels), clock, metrics, settings)


def open_incident(store, clock, container="web"):
    result = HealthCheckResult(
        f"{container}-id", container, clock.now(), ProblemType.UNHEALTHY, "db down"
    )
    change = incidents.record_detection(None, HOST, result, clock.now())
    note = notifications.opened(change.incident, None, clock.now())
    return store.save_incident(change, [note])


def sample(worker, channel, outcome):
    return worker.metrics.registry.get_sample_value(
        "guardian_notifications_total", {"channel": channel, "outcome": outcome}
    )


def test_the_notification_is_queued_with_the_incident_and_delivered_once(store, clock):
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack)
    incident = open_incident(store, clock)
    assert worker.tick() == 1
    assert worker.tick() == 0
    [[n]] = slack.sent
    assert n.kind == "opened" and n.incident_id == incident.id and n.container == "web"
    assert sample(worker, "slack", "delivered") == 1
    assert worker.metrics.registry.get_sample_value("guardian_notification_queue_depth") == 0


def test_a_rolled_back_incident_change_queues_no_notification(store, clock):
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack)
    incident = open_incident(store, clock)
    worker.tick()
    # A second open incident for the same (host, container, type) violates the unique index:
    # the whole transaction, its notification included, is rolled back.
    dup = incidents.record_detection(
        None,
        HOST,
        HealthCheckResult("web-id", "web", clock.now(), ProblemType.UNHEALTHY, "x"),
        clock.now(),
    )
    with pytest.raises(Exception, match="UNIQUE"):
        store.save_incident(dup, [notifications.opened(dup.incident, None, clock.now())])
    worker.tick()
    assert len(slack.sent) == 1 and slack.sent[0][0].incident_id == incident.id


def test_429_waits_retry_after_then_delivers_exactly_once(store, clock):
    slack = FakeNotifier("slack", results=[Result(Status.RATE_LIMITED, "429", 2 * S)])
    worker = make_worker(store, clock, slack)
    open_incident(store, clock)
    worker.tick()
    clock.advance(1.9)
    worker.tick()
    assert len(slack.sent) == 1
    clock.advance(0.1)
    worker.tick()
    worker.tick()
    assert len(slack.sent) == 2
    assert sample(worker, "slack", "transient_failure") == 1
    assert sample(worker, "slack", "delivered") == 1


def test_5xx_is_retried_with_backoff_until_delivered(store, clock):
    failures = [Result(Status.TRANSIENT, "500 oops")] * 3
    slack = FakeNotifier("slack", results=list(failures))
    worker = make_worker(store, clock, slack)
    open_incident(store, clock)
    for _ in range(10):
        worker.tick()
        clock.advance(1)
    assert len(slack.sent) == 4  # sent at 0s, 1s, 3s, 7s
    assert sample(worker, "slack", "delivered") == 1
    assert sample(worker, "slack", "transient_failure") == 3


def test_a_permanent_refusal_is_dead_lettered_and_never_retried(store, clock):
    slack = FakeNotifier("slack", results=[Result(Status.PERMANENT, "404 no_service")])
    worker = make_worker(store, clock, slack)
    open_incident(store, clock)
    worker.tick()
    clock.advance(3600)
    worker.tick()
    assert len(slack.sent) == 1
    [dead] = worker.outbox.dead_letters()
    assert dead["channel"] == "slack" and dead["last_error"] == "404 no_service"
    assert dead["kind"] == "opened"
    assert sample(worker, "slack", "permanent_failure") == 1


def test_retries_exhausted_end_in_a_dead_letter(store, clock):
    slack = FakeNotifier("slack", results=[Result(Status.TRANSIENT, "refused")] * 10)
    worker = make_worker(store, clock, slack, max_attempts=3)
    open_incident(store, clock)
    for _ in range(20):
        worker.tick()
        clock.advance(5)
    assert len(slack.sent) == 3
    assert len(worker.outbox.dead_letters()) == 1
    assert sample(worker, "slack", "transient_failure") == 2
    assert sample(worker, "slack", "dead_letter") == 1


def test_an_unknown_outcome_is_resent_only_where_the_channel_deduplicates(store, clock):
    timeout = Result(Status.UNKNOWN, "no answer")
    slack = FakeNotifier("slack", idempotent=False, results=[timeout])
    hook = FakeNotifier("webhook", idempotent=True, results=[timeout])
    worker = make_worker(store, clock, slack, hook)
    open_incident(store, clock)
    for _ in range(5):
        worker.tick()
        clock.advance(2)
    assert len(slack.sent) == 1
    assert len(hook.sent) == 2
    assert worker.outbox.dead_letters() == []


def test_a_burst_within_group_wait_is_one_message_per_channel(store, clock):
    slack, hook = FakeNotifier("slack"), FakeNotifier("webhook")
    worker = make_worker(store, clock, slack, hook, group_wait=10 * S)
    for i in range(20):
        open_incident(store, clock, f"c{i}")
        clock.advance(0.05)
        worker.tick()
    assert slack.sent == [] and hook.sent == []
    clock.advance(10)
    worker.tick()
    worker.tick()
    assert [len(b) for b in slack.sent] == [20]
    assert [len(b) for b in hook.sent] == [20]


def test_pacing_keeps_one_message_per_second_per_channel(store, clock):
    slack = FakeNotifier("slack", min_interval=1 * S, max_batch=1)
    worker = make_worker(store, clock, slack)
    for i in range(3):
        open_incident(store, clock, f"c{i}")
    worker.tick()
    worker.tick()
    clock.advance(0.5)
    worker.tick()
    assert len(slack.sent) == 1
    clock.advance(0.5)
    worker.tick()
    assert len(slack.sent) == 2


def test_an_escalated_incident_gets_a_reminder_every_repeat_interval(store, clock):
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack, repeat=3600 * S)
    incident = open_incident(store, clock)
    decision = Decision(Verdict.GIVE_UP, Reason.MAX_ATTEMPTS, None, 3, 3)
    change = incidents.escalate(incident)
    store.save_incident(change, [notifications.gave_up(change.incident, decision, clock.now())])
    worker.tick()
    clock.advance(1800)
    worker.tick()
    assert [b[0].kind for b in slack.sent] == ["opened", "gave_up"]
    clock.advance(1800)
    worker.tick()
    worker.tick()
    clock.advance(60)
    worker.tick()
    assert [b[0].kind for b in slack.sent] == ["opened", "gave_up", "reminder"]
    assert "still open after 1.0h" in slack.sent[2][0].next_step


def test_no_reminder_without_a_give_up_message(store, clock):
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack, repeat=60 * S)
    incident = open_incident(store, clock)
    store.save_incident(incidents.escalate(incident))  # e.g. muted: no gave_up queued
    clock.advance(3600)
    worker.tick()
    worker.tick()
    assert [b[0].kind for b in slack.sent] == ["opened"]


def test_a_channel_that_raises_does_not_stop_delivery_to_the_others(store, clock):
    class Broken(FakeNotifier):
        def send(self, batch):
            raise RuntimeError("bug")

    broken, slack = Broken("broken"), FakeNotifier("slack")
    worker = make_worker(store, clock, broken, slack)
    open_incident(store, clock)
    worker.tick()
    assert len(slack.sent) == 1
    assert sample(worker, "broken", "transient_failure") == 1


@pytest.mark.parametrize("hours", [-1, 1])
def test_a_step_of_the_wall_clock_neither_stops_nor_hurries_a_retry(store, clock, hours):
    """A 429 asks for 2 s: after a step back of an hour the retry used to wait the hour, after
    a step forward it went out at once. The step (StepWatch) moves the retry time with it."""
    slack = FakeNotifier("slack", results=[Result(Status.RATE_LIMITED, "429", 2 * S)])
    worker = make_worker(store, clock, slack)
    open_incident(store, clock)
    worker.tick()
    clock.step(hours=hours)
    worker.follow_step(timedelta(hours=hours))
    clock.advance(1.9)
    worker.tick()
    assert len(slack.sent) == 1
    assert worker.pause() < 1  # not the step's length
    clock.advance(0.1)
    worker.tick()
    assert len(slack.sent) == 2


@pytest.mark.parametrize("fanned_out", [False, True])
def test_a_notification_queued_before_a_step_back_goes_out_after_its_group_wait(
    store, clock, fanned_out
):
    """Followed within the run (StepWatch): the queueing stamp moves with the step, so
    group_wait keeps its length. It used to wait for the clock to pass the old stamp."""
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack, group_wait=10 * S)
    open_incident(store, clock)
    if fanned_out:
        worker.tick()
    clock.step(hours=-1)
    worker.follow_step(timedelta(hours=-1))
    clock.advance(5)
    worker.tick()
    assert slack.sent == []  # its group still gathers
    clock.advance(5)
    worker.tick()
    assert len(slack.sent) == 1


@pytest.mark.parametrize("fanned_out", [False, True])
def test_a_notification_queued_before_a_step_back_no_run_followed_waits_no_longer(
    store, clock, fanned_out
):
    """The clock stepped back while Guardian was down: the next run takes the queueing stamp
    ahead of the clock as now once, writes it back, and group_wait then runs its length. It
    used to count as queued now at every tick, and a first try waited for the old stamp."""
    slack = FakeNotifier("slack")
    open_incident(store, clock)
    if fanned_out:  # its delivery's first try stamped with its queueing time
        make_worker(store, clock).outbox.fan_out(["slack"])
    clock.step(hours=-1)  # no follow_step: no run saw it
    worker = make_worker(store, clock, slack, group_wait=10 * S)
    worker.tick()
    clock.advance(5)
    worker.tick()
    assert slack.sent == []
    clock.advance(5)
    worker.tick()
    assert len(slack.sent) == 1


def test_a_retry_after_a_step_back_no_run_followed_waits_at_most_the_longest_backoff(store, clock):
    """A retry time an hour ahead of the clock cannot be a backoff's (60 s at most here): it
    falls due within the longest backoff from the moment the next run sees it."""
    slack = FakeNotifier("slack", results=[Result(Status.TRANSIENT, "500 oops")])
    open_incident(store, clock)
    make_worker(store, clock, slack).tick()  # 500: retried in 1 s
    clock.step(hours=-1)
    worker = make_worker(store, clock, slack)
    worker.tick()
    assert len(slack.sent) == 1  # not yet: it may still be a backoff
    assert worker.pause() <= 60
    clock.advance(60)
    worker.tick()
    assert len(slack.sent) == 2
    assert sample(worker, "slack", "delivered") == 1


@pytest.mark.parametrize("followed", [True, False])
def test_a_reminder_after_a_step_back_comes_after_repeat_interval(store, clock, followed):
    """An hour's repeat_interval, then the wall clock steps back an hour (followed by the
    run, or while Guardian was down): the reminder comes an hour of real time after the give-up
    at the latest, not two (the last reminder's stamp ahead of the clock)."""
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack, repeat=3600 * S)
    incident = open_incident(store, clock)
    decision = Decision(Verdict.GIVE_UP, Reason.MAX_ATTEMPTS, None, 3, 3)
    change = incidents.escalate(incident)
    store.save_incident(change, [notifications.gave_up(change.incident, decision, clock.now())])
    worker.tick()
    worker.tick()
    assert [b[0].kind for b in slack.sent] == ["opened", "gave_up"]
    clock.step(hours=-1)
    if followed:
        worker.follow_step(timedelta(hours=-1))
    else:
        worker = make_worker(store, clock, slack, repeat=3600 * S)
    worker.tick()
    clock.advance(3600)
    worker.tick()
    worker.tick()
    assert [b[0].kind for b in slack.sent] == ["opened", "gave_up", "reminder"]


def test_a_step_back_the_store_refused_to_follow_holds_no_notification(store, clock):
    """The disk was full when the step came: the next tick brings the stamps back instead."""

    class FullOutbox(SqliteOutbox):
        def follow_step(self, step):
            raise StoreError("database or disk is full")

    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack, group_wait=10 * S)
    worker.outbox = FullOutbox(store.db)
    worker.tick()  # nothing queued yet
    open_incident(store, clock)
    clock.step(hours=-1)
    with pytest.raises(StoreError):
        worker.follow_step(timedelta(hours=-1))  # StepWatch logs it and carries on
    worker.tick()
    clock.advance(10)
    worker.tick()
    assert len(slack.sent) == 1


def test_what_the_store_could_not_queue_is_sent_once_marked_and_never_retried(store, clock):
    slack = FakeNotifier("slack", results=[Result(Status.TRANSIENT, "500 oops")])
    hook = FakeNotifier("hook")
    worker = make_worker(store, clock, slack, hook)
    note = notifications.test_message(HOST, "any", clock.now())
    worker.on_fact(NotificationsNotQueued((note,)))
    worker.on_fact(IncidentWritten("web", None, None))  # another fact: nothing to send
    assert worker.tick() == 2
    for _ in range(5):
        clock.advance(60)
        assert worker.tick() == 0  # the failed one is not retried, nothing is sent twice
    [[to_slack]] = slack.sent
    [[to_hook]] = hook.sent
    assert to_slack == to_hook
    assert to_hook.headline == note.headline and notifications.UNRECORDED in to_hook.next_step
    assert sample(worker, "hook", "delivered") == 1
    assert sample(worker, "slack", "dead_letter") == 1
    assert SqliteOutbox(store.db).queue_depth() == 0  # nothing went through the outbox


def test_the_direct_sends_are_bounded_per_channel(store, clock):
    slack = FakeNotifier("slack", max_batch=1000)
    worker = make_worker(store, clock, slack)
    note = notifications.test_message(HOST, "any", clock.now())
    worker.on_fact(NotificationsNotQueued(tuple([note] * (DIRECT_MAX + 50))))
    worker.tick()
    [batch] = slack.sent
    assert len(batch) == DIRECT_MAX
