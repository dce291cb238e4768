"""What Guardian must never do, and how it behaves when things go wrong, against a real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.integration.conftest import ENGINES
from tests.integration.see_more import HEALTH, gave_up, rows
from tests.proxy import DockerProxy


def sweeps(g) -> int:
    return len(g.lines('msg="sweep done"'))


def test_unlabelled_and_opted_out_containers_are_never_touched(containers, guardian):
    plain = containers.run("plain", health_cmd="false", enable=None)
    optout = containers.run("optout", health_cmd="false", enable=False)
    for name in (plain, optout):
        containers.wait_health(name, "unhealthy")
    starts = {n: containers.started_at(n) for n in (plain, optout)}

    g = guardian(watch={"label": "guardian.enable"})
    wait_until(lambda: sweeps(g) >= 3, 20, message="three sweeps")
    assert g.stop() == 0
    assert {n: containers.started_at(n) for n in starts} == starts
    assert rows(g.store_path, "SELECT * FROM incidents") == []

    # watch.label=all: everything is watched except guardian.enable=false.
    g.config["watch"]["label"] = "all"
    g.start()
    wait_until(lambda: containers.started_at(plain) != starts[plain], 20, message="plain healed")
    first = sweeps(g)
    wait_until(lambda: sweeps(g) >= first + 3, 20, message="three more sweeps")
    assert containers.started_at(optout) == starts[optout]
    touched = {r["container"] for r in rows(g.store_path, "SELECT container FROM actions")}
    assert optout not in touched and plain in touched


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_always_unhealthy_gives_up_after_max_attempts_even_across_kill_9(
    containers, guardian, engine_events
):
    name = containers.run("bad", health_cmd="false")
    g = guardian(restart={"cooldown": "2s", "max_attempts": 3, "verify_timeout": "4s"})
    db = g.store_path
    gave_up(db)
    actions = rows(db, "SELECT kind, outcome, detail FROM actions")
    # Real restarts, counted from the engine's own events, not from Guardian's records.
    assert engine_events.count(name, "restart") == 3, actions
    [incident] = rows(db, "SELECT * FROM incidents")
    assert incident["state"] == "in_progress" and incident["escalated"] == 1

    g.kill9()
    g.start()
    wait_until(lambda: sweeps(g) >= 3, 30, message="three sweeps after restart")
    assert engine_events.count(name, "restart") == 3
    assert len(rows(db, "SELECT * FROM incidents WHERE state != 'closed'")) == 1
    outcomes = [a["outcome"] for a in rows(db, "SELECT * FROM actions WHERE kind='restart'")]
    assert outcomes == ["unhealthy_after_restart"] * 3


def test_event_and_sweep_see_one_problem_as_one_incident(containers, guardian):
    name = containers.run("dup", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = guardian(restart={"dry_run": True}, watch={"interval": "1s"})
    containers.make_unhealthy(name)
    containers.wait_health(name, "unhealthy")
    db = g.store_path
    seen_again = "SELECT * FROM incidents WHERE last_seen > opened_at"
    wait_until(lambda: rows(db, seen_again), 20, message="seen again by a sweep")
    incidents = rows(db, "SELECT * FROM incidents")
    assert len(incidents) == 1 and incidents[0]["occurrences"] == 1
    detected = g.lines("problem detected")
    assert len(detected) == 1
    # Both paths saw it: the first detection came from the event, the rest from sweeps.
    assert "source=event" in detected[0]
    assert rows(db, "SELECT reason FROM actions") == [{"reason": "dry_run"}]


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_paused_stopped_and_docker_restarting_containers_are_left_alone(containers, guardian):
    paused = containers.run("paused", health_cmd="false")
    containers.wait_health(paused, "unhealthy")
    containers.api.pause(paused)
    looping = containers.run(
        "looping", ["sh", "-c", "sleep 1; exit 3"], restart_policy={"Name": "always"}
    )
    stopped_before = containers.run("stopped-before", ["sh", "-c", "sleep 86400"])
    containers.api.stop(stopped_before, timeout=1)
    stopped_during = containers.run("stopped-during", ["sh", "-c", "sleep 86400"])
    g = guardian()
    wait_until(lambda: sweeps(g) >= 1, 20, message="first sweep")
    containers.api.stop(stopped_during, timeout=1)
    first = sweeps(g)
    wait_until(lambda: sweeps(g) >= first + 3, 20, message="three more sweeps")
    # Nothing acted on. Docker's restart loop may be reported as a crash_loop incident (Podman
    # restarts without a `restarting` state), its decision recorded once: report_only.
    acted = rows(g.store_path, "SELECT container, kind, reason FROM actions")
    assert all(
        a == {"container": looping, "kind": "decision", "reason": "report_only"} for a in acted
    )
    assert len(acted) <= 1
    incidents = rows(g.store_path, "SELECT container, type FROM incidents")
    assert all(i == {"container": looping, "type": "crash_loop"} for i in incidents)
    assert containers.inspect(paused)["State"]["Status"] == "paused"
    assert containers.inspect(stopped_during)["State"]["Status"] == "exited"
    assert containers.inspect(looping)["RestartCount"] > 0  # Docker really was restarting it
    containers.api.unpause(paused)


def test_container_removed_just_before_its_restart_closes_the_incident(
    containers, guardian, docker_api, tmp_path: Path
):
    name = containers.run("doomed", health_cmd="false")
    containers.wait_health(name, "unhealthy")
    keeper = containers.run("keeper", health_cmd=HEALTH)

    doomed_id = containers.inspect(name)["Id"]

    def remove_then_forward(method: str, path: str) -> int | None:
        if method == "POST" and path == f"/containers/{doomed_id}/restart":
            docker_api.remove_container(doomed_id, force=True)
        return None

    proxy = DockerProxy(tmp_path / "docker.sock", rule=remove_then_forward).start()
    try:
        g = guardian(docker={"url": proxy.url})
        db = g.store_path
        wait_until(
            lambda: rows(db, "SELECT * FROM incidents WHERE state='closed'"),
            30,
            message="incident closed",
        )
        [action] = rows(db, "SELECT * FROM actions WHERE kind='restart'")
        assert action["outcome"] == "permanent_failure" and "404" in action["detail"]
        [incident] = rows(db, "SELECT * FROM incidents")
        assert incident["close_reason"] == "container_gone"
        # Guardian carries on: another container is still healed afterwards.
        containers.make_unhealthy(keeper)
        wait_until(
            lambda: rows(
                db, "SELECT * FROM actions WHERE container=? AND outcome='succeeded'", keeper
            ),
            30,
            message="keeper healed",
        )
        assert g.proc is not None and g.proc.poll() is None
    finally:
        proxy.stop()


def test_no_engine_at_start_then_heals_once_it_is_back(containers, guardian, tmp_path: Path):
    name = containers.run("later", health_cmd="false")
    containers.wait_health(name, "unhealthy")
    proxy = DockerProxy(tmp_path / "late.sock")  # not listening yet: no engine
    g = guardian(docker={"url": proxy.url, "timeout": "2s"})
    wait_until(lambda: g.lines("docker engine unreachable"), 20, message="unreachable logged")
    first = g.lines("docker engine unreachable")
    assert len(first) == 1 and "level=error" in first[0]
    assert g.proc is not None and g.proc.poll() is None
    proxy.start()
    try:
        wait_until(
            lambda: rows(g.store_path, "SELECT * FROM actions WHERE kind='restart'"),
            40,
            message="restart after the engine came back",
        )
        assert g.lines("docker engine reachable")
        assert len(g.lines("docker engine unreachable")) == 1  # one clear line, not a flood
    finally:
        proxy.stop()


@pytest.mark.parametrize("bad", ["restart:\n  max_attempts: 0\n", "watch:\n  colour: red\n"])
def test_bad_config_exits_2_with_one_line(tmp_path: Path, bad: str):
    import subprocess
    import sys

    cfg = tmp_path / "c.yaml"
    cfg.write_text(bad)
    proc = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", "run", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("guardian: config error: ")
    assert len(proc.stderr.splitlines()) == 1


def test_restart_forbidden_by_a_socket_proxy_is_policy_denied_once(
    containers, guardian, tmp_path: Path
):
    name = containers.run("locked", health_cmd="false")
    containers.wait_health(name, "unhealthy")

    def no_restarts(method: str, path: str) -> int | None:
        return 403 if method == "POST" and path.endswith("/restart") else None

    proxy = DockerProxy(tmp_path / "ro.sock", rule=no_restarts).start()
    try:
        g = guardian(docker={"url": proxy.url})
        db = g.store_path
        wait_until(
            lambda: rows(db, "SELECT * FROM actions WHERE outcome='policy_denied'"),
            20,
            message="policy_denied recorded",
        )
        first = sweeps(g)
        wait_until(lambda: sweeps(g) >= first + 3, 20, message="three more sweeps")
        assert proxy.count("POST", r"/restart$") == 1  # never retried
        [action] = rows(db, "SELECT * FROM actions WHERE kind='restart'")
        assert action["outcome"] == "policy_denied" and "403" in action["detail"]
    finally:
        proxy.stop()


def test_event_stream_reconnects_after_the_engine_goes_away(containers, guardian, tmp_path):
    name = containers.run("after", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    proxy = DockerProxy(tmp_path / "flaky.sock").start()
    try:
        guardian(docker={"url": proxy.url}, watch={"interval": "60s"})
        wait_until(lambda: proxy.subscriptions() == 1, 10, message="subscribed")
        proxy.stop()  # the engine "goes away": every connection is cut
        proxy.start()
        wait_until(lambda: proxy.subscriptions() >= 2, 30, message="resubscribed")
        # With a 60 s sweep, only the reconnected event stream can heal this quickly.
        before = containers.started_at(name)
        containers.make_unhealthy(name)
        wait_until(lambda: containers.started_at(name) != before, 15, message="healed by event")
    finally:
        proxy.stop()
