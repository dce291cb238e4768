"""Crash loops, OOM details and Guardian-run probes, over fakes and a fake clock."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest

from guardian.adapters.engine.engine_payloads import parse_event
from guardian.core.detection.checks import CheckSettings, evaluate
from guardian.core.detection.probes import ProbeSpec, parse_probe
from guardian.core.model import ProblemType
from guardian.ports import EngineEvent
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import wait_until

ON = {"guardian.enable": "true"}


def incidents_of(loop, kind):
    return [i for i in loop.store.open_incidents(loop.host) if i.type == kind]


def test_a_crash_loop_is_one_incident_with_exit_codes_and_log_tail_and_no_restart(tmp_path):
    loop = make_app(
        tmp_path, crash_loop={"restarts": 3, "window": "5m"}, restart={"cooldown": "60s"}
    )
    snap = loop.engine.add("worker", health=None, restart_policy="always", state="restarting")
    loop.engine.output[snap.id] = "starting\nerror: cannot open /data\nstarting\nerror: again\n"
    for count in range(6):
        loop.engine.set("worker", restart_count=count, exit_code=2)
        loop.healer.sweep()
        loop.clock.advance(10)
    [incident] = incidents_of(loop, ProblemType.CRASH_LOOP)
    assert incident.occurrences == 1  # one loop, seen by every sweep
    assert incident.last_seen > incident.opened_at
    assert "last exit codes: 2, 2, 2" in incident.detail
    assert "log tail: starting | error: cannot open /data | starting | error: again" in (
        incident.detail
    )
    assert loop.restarted() == []
    assert [a for a in loop.actions() if a.kind == "restart"] == []


def test_two_restarts_are_not_a_crash_loop_and_a_quiet_window_resolves_it(tmp_path):
    loop = make_app(
        tmp_path, crash_loop={"restarts": 3, "window": "60s"}, restart={"cooldown": "60s"}
    )
    loop.engine.add("worker", health=None, restart_policy="always", state="restarting")
    for count in range(3):
        loop.engine.set("worker", restart_count=count)
        loop.healer.sweep()
        loop.clock.advance(5)
    assert incidents_of(loop, ProblemType.CRASH_LOOP) == []
    loop.engine.set("worker", restart_count=3)
    loop.healer.sweep()
    [incident] = incidents_of(loop, ProblemType.CRASH_LOOP)
    loop.engine.set("worker", state="running")
    loop.clock.advance(61)
    loop.healer.sweep()
    assert loop.store.get_incident(incident.id).state == "resolved"


def test_a_loop_caught_running_between_two_crashes_stays_one_active_incident(tmp_path):
    # Podman restarts a looping container with no `restarting` state in between: a sweep may
    # list it running. It restarted 3 times within the window: it is still looping.
    loop = make_app(
        tmp_path, crash_loop={"restarts": 3, "window": "60s"}, restart={"cooldown": "60s"}
    )
    loop.engine.add("worker", health=None, restart_policy="always", state="exited")
    for count in range(5):
        loop.engine.set("worker", restart_count=count, exit_code=3, state="exited")
        loop.healer.sweep()
        loop.clock.advance(5)
    loop.engine.set("worker", restart_count=5, state="running", exit_code=0)
    loop.healer.sweep()
    [incident] = incidents_of(loop, ProblemType.CRASH_LOOP)
    assert incident.state == "active" and incident.occurrences == 1
    assert "RestartCount 5" in incident.detail
    assert incident.detail.endswith("last exit codes: 3, 3, 3, 3")  # not the running one's 0


def test_a_loop_always_seen_running_again_reports_the_exit_codes_its_die_events_carried(
    tmp_path,
):
    # A fast loop under load: every inspect finds it started again (exit code 0), but each
    # death's `die` event carried its code. A hostile one is no code.
    loop = make_app(
        tmp_path, crash_loop={"restarts": 3, "window": "60s"}, restart={"cooldown": "60s"}
    )
    snap = loop.engine.add("worker", health=None, restart_policy="always", state="running")
    for count, code in enumerate(["3", "3", "x9", "4", "99999999999", "3"]):
        died = EngineEvent("die", snap.id, "worker", loop.clock.now(), {**ON, "exitCode": code})
        loop.healer.on_event(died)
        loop.engine.set("worker", restart_count=count + 1, state="running", exit_code=0)
        loop.healer.react(snap.id)
        loop.clock.advance(5)
    [incident] = incidents_of(loop, ProblemType.CRASH_LOOP)
    assert incident.detail.endswith("last exit codes: 3, 3, 4, 3")


def test_podmans_exit_code_attribute_reads_as_dockers():
    raw = {
        "Action": "died",
        "Actor": {"ID": "c1", "Attributes": {"name": "w", "containerExitCode": "3"}},
        "timeNano": 1,
    }
    event = parse_event(raw)
    assert event is not None and (event.action, event.attributes["exitCode"]) == ("die", "3")


def test_oom_killed_details_name_the_memory_limit():
    clock = FakeClock()
    snap = FakeEngine(clock).add(
        "hog", state="exited", exit_code=137, oom_killed=True, memory_limit=8 * 1024 * 1024
    )
    result = evaluate(snap, clock.now(), CheckSettings())
    assert result.problem is ProblemType.OOM_KILLED
    assert "memory limit 8.0 MiB, usage reached the limit" in result.detail


DEFAULTS = ProbeSpec("http", "", 0)


@pytest.mark.parametrize(
    ("labels", "kind", "host", "port", "path", "warnings"),
    [
        ({"guardian.probe.http": "http://:8080/healthz"}, "http", "", 8080, "/healthz", 0),
        ({"guardian.probe.http": "http://localhost:81"}, "http", "localhost", 81, "/", 0),
        ({"guardian.probe.tcp": ":5432"}, "tcp", "", 5432, "/", 0),
        ({"guardian.probe.tcp": "db:99999"}, None, None, None, None, 1),
        ({"guardian.probe.http": "ftp://:21/"}, None, None, None, None, 1),
        ({"guardian.probe.tcp": ":1", "guardian.probe.period": "x"}, "tcp", "", 1, "/", 1),
    ],
)  # fmt: skip
def test_probe_labels(labels, kind, host, port, path, warnings):
    spec, warned = parse_probe(labels, DEFAULTS)
    assert len(warned) == warnings
    if kind is None:
        assert spec is None
    else:
        assert (spec.kind, spec.host, spec.port, spec.path) == (kind, host, port, path)


def test_probe_thresholds_and_periods_from_labels():
    spec, _ = parse_probe(
        {
            "guardian.probe.http": "http://:8080/",
            "guardian.probe.failure_threshold": "5",
            "guardian.probe.success_threshold": "2",
            "guardian.probe.period": "3s",
            "guardian.probe.expect": "200,204-206",
        },
        DEFAULTS,
    )
    assert (spec.failure_threshold, spec.success_threshold) == (5, 2)
    assert spec.period == timedelta(seconds=3)
    assert spec.expect == ((200, 200), (204, 206))


def tick(loop, times, seconds=1.0):
    """Each tick starts the due probes; the next one records them once they have answered."""
    for _ in range(times):
        loop.healer.probe_tick(loop.prober)
        wait_until(lambda: loop.prober.in_flight() == 0, 10, 0.01, "probes answered")
        loop.healer.probe_tick(loop.prober)
        loop.clock.advance(seconds)


def test_a_tcp_probe_failing_threshold_times_restarts_and_success_resolves(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    loop = make_app(
        tmp_path,
        probe={"period": "1s", "failure_threshold": 3, "success_threshold": 2},
        restart={"cooldown": "60s"},
    )
    # A host-network container: its own address is the host's loopback.
    loop.engine.add(
        "db",
        health=None,
        addresses=("127.0.0.1",),
        labels={**ON, "guardian.probe.tcp": f"127.0.0.1:{port}"},
    )
    loop.healer.sweep()
    tick(loop, 2)
    server.close()
    tick(loop, 2)  # two failures: below the threshold
    assert loop.store.open_incidents(loop.host) == []
    tick(loop, 1)
    [incident] = incidents_of(loop, ProblemType.PROBE_FAILED)
    assert "probe failed 3 times in a row: tcp://127.0.0.1" in incident.detail
    assert loop.restarted() == ["db"]

    server = socket.create_server(("127.0.0.1", port))
    try:
        verifications = loop.healer.ctx.state.verifications  # not what this test is about
        for pending in verifications.pending():
            verifications.begin_verdict(pending)
            verifications.verdict_written(pending)
        tick(loop, 1)
        assert loop.store.get_incident(incident.id).state == "in_progress"
        tick(loop, 1)
        assert loop.store.get_incident(incident.id).state == "resolved"
    finally:
        server.close()


def test_an_oom_event_turns_an_unflagged_exit_137_into_oom_killed(tmp_path):
    from guardian.ports import EngineEvent

    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    hog = loop.engine.add("hog", health=None, state="exited", exit_code=137, memory_limit=8 << 20)
    loop.engine.add("killed", health=None, state="exited", exit_code=137)
    loop.healer.on_event(EngineEvent("oom", hog.id, "hog", loop.clock.now(), {}))
    loop.healer.sweep()
    [incident] = loop.store.open_incidents(loop.host)
    assert (incident.container, incident.type) == ("hog", ProblemType.OOM_KILLED)
    assert "from the engine's oom event); memory limit 8.0 MiB" in incident.detail

    # Started again: the old oom event no longer speaks for a later exit.
    loop.healer.on_event(EngineEvent("start", hog.id, "hog", loop.clock.now(), {}))
    exited = loop.engine.set("hog", state="exited", exit_code=137, oom_killed=False)
    again = loop.healer.assess(exited, "sweep")
    assert again.result.skipped == "stopped_by_signal"
