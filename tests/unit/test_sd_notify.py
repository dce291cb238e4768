"""sd_notify over a real datagram socket, and what the daemon tells systemd when."""

from __future__ import annotations

import errno
import itertools
import os
import resource
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.adapters.systemd import SystemdSupervisor, watchdog_interval
from guardian.entrypoints.daemon import Daemon
from guardian.runtime.watchdog import SupervisorLink, SweepLiveness
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import wait_until
from tests.notify import NotifySocket, RecordingNotifier, Ticks

ON = {"guardian.enable": "true"}


@pytest.fixture
def notify_socket():
    s = NotifySocket()
    yield s
    s.close()


def test_sends_to_an_abstract_namespace_socket(notify_socket):
    notifier = SystemdSupervisor.from_env({"NOTIFY_SOCKET": notify_socket.address})

    assert notifier.ready("watching 2 containers")

    notify_socket.wait_for("READY=1")
    assert notify_socket.values("STATUS") == ["watching 2 containers"]


def test_sends_to_a_socket_path(tmp_path: Path):
    s = NotifySocket(tmp_path / "notify")
    try:
        assert SystemdSupervisor.from_env({"NOTIFY_SOCKET": s.address}).stopping()
        s.wait_for("STOPPING=1")
    finally:
        s.close()


def test_is_a_no_op_outside_systemd():
    notifier = SystemdSupervisor.from_env({})
    assert not notifier.enabled and notifier.watchdog is None
    assert notifier.ping() is False


def test_a_vanished_socket_is_reported_not_raised(tmp_path: Path):
    notifier = SystemdSupervisor.from_env({"NOTIFY_SOCKET": str(tmp_path / "gone")})
    assert notifier.ready("x") is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WATCHDOG_USEC": "30000000"}, timedelta(seconds=30)),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"}, timedelta(seconds=30)),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"}, None),  # another process's
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_from_the_environment(env, expected):
    assert watchdog_interval(env, pid=42) == expected


def link(
    ticks: Ticks, watchdog_s: float, limit_s: float
) -> tuple[SupervisorLink, RecordingNotifier]:
    notifier = RecordingNotifier(ticks, watchdog_s)
    liveness = SweepLiveness(timedelta(seconds=limit_s), ticks)
    return SupervisorLink(notifier, liveness, ticks), notifier


def test_ready_as_soon_as_serving_whatever_the_engine_then_status_on_changes():
    s, sent = link(Ticks(), watchdog_s=8, limit_s=10)

    s.serving("serving; looking for the docker engine")
    s.sweep_started()
    s.sweep_finished("docker engine unreachable; retrying")
    s.sweep_started()
    s.sweep_finished("watching 3 containers, 0 open incidents")
    s.sweep_finished("watching 3 containers, 0 open incidents")
    s.sweep_finished("watching 3 containers, 1 open incident")

    assert [fields for _, fields in sent.sent] == [
        ("READY=1", "STATUS=serving; looking for the docker engine"),
        ("STATUS=docker engine unreachable; retrying",),
        ("STATUS=watching 3 containers, 0 open incidents",),
        ("STATUS=watching 3 containers, 1 open incident",),  # only changes are sent
    ]


def test_ready_carries_the_status_of_a_sweep_that_finished_first():
    s, sent = link(Ticks(), watchdog_s=8, limit_s=10)
    s.sweep_finished("watching 1 container, 0 open incidents")

    s.serving("serving; looking for the docker engine")

    assert sent.sent[-1][1] == ("READY=1", "STATUS=watching 1 container, 0 open incidents")


def test_a_reload_is_bracketed_by_reloading_and_ready():
    s, sent = link(Ticks(), watchdog_s=8, limit_s=10)
    s.serving("watching 2 containers, 0 open incidents")

    s.reloading()
    s.reloaded()

    reloading, ready = (fields for _, fields in sent.sent[1:])
    assert reloading[0] == "RELOADING=1" and reloading[1].startswith("MONOTONIC_USEC=")
    assert int(reloading[1].split("=")[1]) > 0
    assert ready == ("READY=1", "STATUS=watching 2 containers, 0 open incidents")


def test_pings_about_every_half_timeout_and_stop_when_the_sweep_stalls():
    ticks = Ticks()
    s, sent = link(ticks, watchdog_s=8, limit_s=10)
    assert s.tick_interval == 1.0

    for second in range(40):
        if second < 16 and second % 2 == 0:  # a sweep every 2 s ...
            s.sweep_started()
            s.sweep_finished("ok")
        if second == 16:  # ... until one never returns
            s.sweep_started()
        s.tick()
        ticks.t += 1

    # never more than half the timeout (4 s) apart; the stalled sweep counts as alive for the
    # limit (10 s, until second 26), then the pings stop and systemd's watchdog fires.
    assert sent.at("WATCHDOG=1") == [0, 3, 6, 9, 12, 15, 18, 21, 24]
    assert sent.at("STATUS=sweep stalled for 11s") == [27]


def test_the_main_loop_sleeps_until_the_next_ping_falls_due():
    """The main loop's only timer is the watchdog: it sleeps until a ping is due (half the
    timeout less a second), and looks again each second while a stalled sweep withholds it."""
    ticks = Ticks()
    s, sent = link(ticks, watchdog_s=60, limit_s=100)
    assert s.next_tick_in() == 0.0  # the first ping at once
    for _ in range(4):
        s.tick()
        ticks.t += s.next_tick_in()
    assert sent.at("WATCHDOG=1") == [0, 29, 58, 87]

    s.sweep_started()  # and never returns
    ticks.t += 101
    s.tick()
    assert s.next_tick_in() == s.tick_interval == 1.0
    s.supervisor.watchdog = None
    assert s.next_tick_in() is None  # no watchdog: no timer at all


def test_pings_resume_when_the_stalled_sweep_returns():
    ticks = Ticks()
    s, sent = link(ticks, watchdog_s=8, limit_s=1)
    s.sweep_started()
    ticks.t += 5
    s.tick()
    assert sent.at("WATCHDOG=1") == []

    s.sweep_finished("ok")
    s.tick()

    assert sent.at("WATCHDOG=1") == [5]


def test_no_pings_without_a_watchdog():
    ticks = Ticks()
    s, sent = link(ticks, watchdog_s=0, limit_s=1)
    s.supervisor.watchdog = None
    s.tick()
    assert sent.sent == [] and s.tick_interval == 1.0


class SlowStopEngine(FakeEngine):
    """A container that ignores SIGTERM: the restart call lasts its whole stop timeout, during
    which the daemon's main loop keeps ticking (`during_restart`)."""

    during_restart: Callable[[timedelta], None] = lambda self, stop_timeout: None

    def restart(self, container_id, stop_timeout, previous_started_at):
        self.during_restart(stop_timeout)
        return super().restart(container_id, stop_timeout, previous_started_at)


def test_a_restart_with_a_ten_minute_stop_timeout_keeps_the_pings_and_a_frozen_loop_stops_them(
    tmp_path: Path,
):
    ticks = Ticks()
    notifier = RecordingNotifier(ticks, watchdog_s=60)
    clock = FakeClock()
    engine = SlowStopEngine(clock)
    t = make_app(
        tmp_path,
        daemon=True,
        engine=engine,
        clock=clock,
        supervisor=notifier,
        watch={"interval": "10s"},
        docker={"timeout": "30s"},
        restart={"stop_timeout": "1s"},  # the container's label asks for more
    )
    daemon = Daemon(t.app, monotonic=ticks)
    engine.add("slow", labels={**ON, "guardian.stop_timeout": "10m"})

    def ten_minutes(stop_timeout: timedelta) -> None:
        assert stop_timeout == timedelta(minutes=10)
        for _ in range(600):  # the main loop ticks while Docker waits for the stop
            ticks.t += 1
            clock.advance(1)
            daemon.systemd.tick()
            assert daemon.healthz()[0], daemon.healthz()

    engine.during_restart = ten_minutes
    try:
        daemon.sweep_job()
        engine.set("slow", health="unhealthy")
        daemon.sweep_job()
        assert t.restarted() == ["slow"]
        pings = notifier.at("WATCHDOG=1")
        # never more than half the watchdog timeout apart, all through the restart
        assert pings[-1] >= 570 and max(b - a for a, b in itertools.pairwise(pings)) <= 30

        # Now the loop freezes: a sweep starts and never returns, no restart running.
        daemon.systemd.sweep_started()
        frozen_at = ticks.t - 1000
        for _ in range(120):
            ticks.t += 1
            daemon.systemd.tick()
        limit = 3 * 10 + 30
        assert notifier.at("WATCHDOG=1")[-1] <= frozen_at + limit
        assert notifier.at(f"STATUS=sweep stalled for {limit + 1}s")
    finally:
        t.store.close()


def test_pings_reach_systemd_while_the_process_has_no_descriptor_left(notify_socket):
    notifier = SystemdSupervisor.from_env({"NOTIFY_SOCKET": notify_socket.address})
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
    try:
        with pytest.raises(OSError) as exhausted:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        assert exhausted.value.errno == errno.EMFILE
        sent = [notifier.ping(), notifier.status("still here"), notifier.ping()]
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    assert sent == [True, True, True]
    wait_until(lambda: len(notify_socket.times("WATCHDOG=1")) == 2, 5, message="pings")


def test_a_failing_notify_socket_is_logged_once_not_per_ping(tmp_path: Path, caplog):
    notifier = SystemdSupervisor.from_env({"NOTIFY_SOCKET": str(tmp_path / "gone")})

    assert [notifier.ping() for _ in range(5)] == [False] * 5
    assert [r.getMessage() for r in caplog.records].count("sd_notify failed") == 1
