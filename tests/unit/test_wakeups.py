"""Nothing wakes without a reason: the verify tick runs only while a restart awaits its
verification, and the delivery worker sleeps until a row is queued or a send falls due."""

from __future__ import annotations

import logging
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_operator
from guardian.core import incidents
from guardian.core.model import Decision, HealthCheckResult, ProblemType, Reason, Verdict
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import Result, RetryPolicy, Status
from guardian.entrypoints.daemon import Daemon
from guardian.service.outbound.delivery import DeliveryWorker, WorkerSettings
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine, FakeNotifier
from tests.helpers import run_in_main_thread, wait_until

S = timedelta(seconds=1)
HOST = "host1"


def test_the_verify_tick_runs_only_while_a_restart_awaits_verification(tmp_path: Path) -> None:
    t = make_app(tmp_path, daemon=True)
    d = Daemon(t.app)
    d.schedule()
    d.scheduler.start(paused=True)  # jobs are kept and judged, none runs
    try:
        verify = lambda: d.scheduler.get_job("verify").next_run_time  # noqa: E731
        t.engine.add("web")
        d.sweep_job()
        d.follow_work()  # the main loop's tick
        assert verify() is None  # all healthy: nothing to verify, no tick
        t.engine.set("web", health="unhealthy")
        d.sweep_job()  # restarts web
        assert t.restarted() == ["web"]
        d.follow_work()
        assert verify() is not None
        t.engine.set("web", health="healthy")
        d.verify()
        assert [a.outcome for a in t.restarts()] == ["succeeded"]
        d.follow_work()
        assert verify() is None
    finally:
        d.scheduler.shutdown(wait=False)
        t.store.close()


def test_the_main_loop_has_no_timer_and_wakes_for_signals_and_for_work(tmp_path, caplog) -> None:
    """Outside systemd's watchdog the main thread sleeps without a timeout: a SIGHUP reloads,
    a restart wakes it to resume the verify job (which pauses again once verified), SIGTERM
    stops it. Each step fails (times out) if the wake-up it needs is missing."""
    caplog.set_level(logging.INFO)
    t = make_app(tmp_path, daemon=True, http={"listen": "127.0.0.1:0"})
    d = Daemon(t.app)
    t.engine.add("web")
    verify = lambda: d.scheduler.get_job("verify").next_run_time  # noqa: E731
    seen: dict[str, Any] = {}

    def scenario() -> None:
        wait_until(d.first_sweep_done.is_set, 10, message="first sweep")
        seen["timer"] = d.systemd.next_tick_in()
        os.kill(os.getpid(), signal.SIGHUP)
        wait_until(lambda: "config reloaded" in caplog.messages, 10, message="reload")
        t.engine.set("web", health="unhealthy")
        d.kick_sweep()
        wait_until(lambda: t.restarted() == ["web"], 10, message="restart")
        wait_until(lambda: verify() is not None, 10, message="verify job resumed")
        t.engine.set("web", health="healthy")
        wait_until(lambda: [a.outcome for a in t.restarts()] == ["succeeded"], 10)
        wait_until(lambda: verify() is None, 10, message="verify job paused")
        seen["done"] = True

    # the real main loop, in the main thread; SIGTERM ends it
    run_in_main_thread(d.run_forever, scenario, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert seen["timer"] is None and seen["done"]
    assert "signal received" in caplog.messages


@pytest.fixture
def store(tmp_path: Path):
    s = SqliteStore(tmp_path / "g.db")
    yield s
    s.close()


def make_worker(store: SqliteStore, clock: FakeClock, *channels, group_wait=0 * S):
    metrics = PrometheusMetrics(CollectorRegistry())
    settings = WorkerSettings(HOST, group_wait, retry=RetryPolicy(5, 2 * S, 60 * S, 30 * S))
    return DeliveryWorker(SqliteOutbox(store.db), list(channels), clock, metrics, settings)


def open_incident(store: SqliteStore, clock: FakeClock, container: str = "web") -> None:
    result = HealthCheckResult(
        f"{container}-id", container, clock.now(), ProblemType.UNHEALTHY, "db down"
    )
    change = incidents.record_detection(None, HOST, result, clock.now())
    store.save_incident(change, [notifications.opened(change.incident, None, clock.now())])


def test_a_worker_without_channels_sleeps_until_woken(store) -> None:
    worker = make_worker(store, FakeClock())
    worker.tick()
    assert worker.pause() is None


def test_an_idle_worker_with_a_channel_wakes_only_when_a_reminder_falls_due(store) -> None:
    clock = FakeClock()
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack)
    worker.tick()
    assert worker.pause() is None  # nothing escalated: no reminder to wait for
    open_incident(store, clock)
    incident = store.open_incidents(HOST)[0]
    decision = Decision(Verdict.GIVE_UP, Reason.MAX_ATTEMPTS, None, 3, 3)
    change = incidents.escalate(incident)
    store.save_incident(change, [notifications.gave_up(change.incident, decision, clock.now())])
    for _ in range(3):  # the opening, the give-up (paced a minute apart), then nothing
        worker.tick()
        clock.advance(30)
    repeat = WorkerSettings(HOST).repeat_interval
    assert worker.pause() == (repeat - 90 * S).total_seconds()  # the reminder's due time
    clock.advance(worker.pause() or 0)
    for _ in range(3):  # queued, sent, then nothing
        worker.tick()
        clock.advance(30)
    assert [b[0].kind for b in slack.sent] == ["opened", "gave_up", "reminder"]
    assert worker.pause() == (repeat - 90 * S).total_seconds()  # the next reminder's


def test_a_failed_send_wakes_the_worker_at_its_retry_time(store) -> None:
    clock = FakeClock()
    slack = FakeNotifier("slack", results=[Result(Status.TRANSIENT, "500 oops")])
    worker = make_worker(store, clock, slack)
    open_incident(store, clock)
    worker.tick()
    worker.tick()  # the row waits for its retry: nothing to send now
    assert len(slack.sent) == 1
    assert worker.pause() == 2.0  # the first backoff
    clock.advance(2)
    worker.tick()
    assert len(slack.sent) == 2


def test_a_gathering_group_wakes_the_worker_when_its_group_wait_ends(store) -> None:
    clock = FakeClock()
    slack = FakeNotifier("slack")
    worker = make_worker(store, clock, slack, group_wait=10 * S)
    open_incident(store, clock)
    clock.advance(3)
    worker.tick()
    assert slack.sent == [] and worker.pause() == 7.0
    clock.advance(7)
    worker.tick()
    assert len(slack.sent) == 1


def test_a_notification_the_loop_writes_wakes_the_sleeping_worker_at_once(tmp_path) -> None:
    t = make_app(tmp_path, daemon=True, notify={"group_wait": "0s"})
    worker = t.app.delivery
    assert worker is not None
    slack = FakeNotifier("slack")
    worker.channels.append(slack)
    worker.routing = None  # no receivers configured: the one channel hears everything
    worker.start()
    try:
        # Idle, it sleeps until woken: only the store's signal can make this quick.
        wait_until(lambda: worker.outbox.queue_depth() == 0, 5, message="the worker never ran")
        t.engine.add("web", health="unhealthy")
        t.healer.sweep()
        wait_until(lambda: slack.sent, 10, message="the queued notification was not sent")
        assert slack.sent[0][0].kind == "opened"
    finally:
        worker.stop()
        t.store.close()


def test_a_notification_another_process_queues_goes_out_after_the_next_sweep(tmp_path) -> None:
    """`guardian incidents resolve` writes the resolution's notification from another
    process: the sleeping worker has no timer, so the daemon's sweep looks for such writes."""
    t = make_app(tmp_path, daemon=True, host=HOST, notify={"group_wait": "0s"})
    d = Daemon(t.app)
    worker = t.app.delivery
    assert worker is not None
    slack = FakeNotifier("slack")
    worker.channels.append(slack)
    worker.routing = None  # no receivers configured: the one channel hears everything
    t.engine.add("web")
    open_incident(t.store, t.clock, "web")  # found earlier; web is fine now
    worker.start()
    try:
        wait_until(lambda: slack.sent and not worker.outbox.queue_depth(), 10)  # all sent
        wait_until(lambda: worker.pause() is None, 5, message="asleep until woken")
        cli = SqliteStore(t.app.settings["store.path"])  # the CLI's own connection
        try:
            incident = cli.open_incidents(HOST)[0]
            operator = build_operator(t.app.settings, store=cli, clock=t.app.clock, host=HOST)
            operator.change(incident.id or 0, "resolve", "alice", "fixed by hand")
        finally:
            cli.close()
        d.sweep_job()
        kinds = lambda: [n.kind for batch in slack.sent[1:] for n in batch]  # noqa: E731
        wait_until(kinds, 10, message="the resolution was not sent")
        assert kinds() == ["resolved"]
    finally:
        worker.stop()
        t.store.close()


def test_only_a_committed_outbox_row_signals(store) -> None:
    calls: list[int] = []
    store.db.on_outbox_written(lambda: calls.append(1))
    clock = FakeClock()
    result = HealthCheckResult("web-id", "web", clock.now(), ProblemType.UNHEALTHY, "x")
    change = incidents.record_detection(None, HOST, result, clock.now())
    store.save_incident(change, [])  # no notification: no signal
    assert calls == []
    with pytest.raises(Exception, match="UNIQUE"):  # the same open incident twice: rolled back
        store.save_incident(change, [notifications.opened(change.incident, None, clock.now())])
    assert calls == []
    open_incident(store, clock, "db")
    assert calls == [1]


def test_a_firing_alert_wakes_the_worker_to_keep_it_alive(store) -> None:
    """Alertmanager forgets an alert that is not re-sent before its endsAt: the sleeping worker
    wakes at the channel's next resend while an alert fires, and not otherwise."""
    from guardian.adapters.notify.alertmanager import AlertmanagerNotifier

    clock = FakeClock()
    outbox = SqliteOutbox(store.db)
    am = AlertmanagerNotifier("http://127.0.0.1:9", outbox, clock, 1 * S, 20 * S)
    worker = make_worker(store, clock, am)
    worker.tick()
    assert worker.pause() is None  # nothing fires: nothing to keep
    result = HealthCheckResult("web-id", "web", clock.now(), ProblemType.UNHEALTHY, "db down")
    incident = store.save_incident(incidents.record_detection(None, HOST, result, clock.now()))
    outbox.set_ref(am.name, incident.id or 0, "firing", "{}")  # an alert already fires
    worker.tick()  # the refresh re-sends it (a closed port here: it is tried again next time)
    assert worker.pause() == 20.0  # woken for the next resend, before the reminder check


class CountingEngine(FakeEngine):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.inspects = 0

    def inspect(self, container_id: str):  # type: ignore[no-untyped-def]
        self.inspects += 1
        return super().inspect(container_id)


def test_the_verify_tick_backs_off_while_a_restart_has_no_verdict_and_judges_at_the_deadline(
    tmp_path: Path,
) -> None:
    """A burst's restarts each awaited verification with an inspect every second, while the
    engine was restarting them all (bench: a 100-container burst's max to the restart request
    fell from 1.93 s to 0.57 s without it). The tick now looks after 1, 2, 4, then every 8 s,
    and at the deadline; the container's own health event is still judged at once."""
    clock = FakeClock()
    engine = CountingEngine(clock)
    engine.after_restart_health = "starting"  # no verdict until it turns healthy or times out
    t = make_app(tmp_path, engine=engine, clock=clock, daemon=True)
    engine.add("web", health="unhealthy")
    t.healer.sweep()
    assert t.restarted() == ["web"]
    before = engine.inspects
    for _ in range(30):  # the tick, once a second for 30 s
        clock.advance(1)
        t.app.verifier.verify()
    assert engine.inspects - before <= 7  # 1, 3, 7, 15, 23 s (and 30 s): not 30
    assert [str(a.outcome) for a in t.restarts()] == ["restarted"]  # no verdict yet
    engine.set("web", health="healthy")
    t.app.verifier.verify(only="web")  # its health event: judged at once, no backoff
    assert [str(a.outcome) for a in t.restarts()] == ["succeeded"]


def test_the_main_loop_wakes_with_its_pipe_past_descriptor_1023() -> None:
    """A Guardian holding many connections gets its alarm's pipe past descriptor 1023, which
    select() refuses (the main loop ended with "filedescriptor out of range")."""
    import resource

    from guardian.runtime.wakeup import Wakeup

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2048 if hard == resource.RLIM_INFINITY else min(hard, 2048)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY))
        alarm = Wakeup()
        assert alarm.signal_fd >= 1024
        alarm.wake()
        started = time.monotonic()
        alarm.wait(5)  # woken at once
        assert time.monotonic() - started < 4
        alarm.wait(0.01)  # and a timeout still ends a wait
        alarm.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
