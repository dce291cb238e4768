"""The storm breaker and the engine_unreachable incident with a real engine and `guardian run`."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import wait_until
from tests.integration.conftest import REPO
from tests.integration.see_more import HEALTH, WATCH, actions, exec_in, incidents, rows, watched


def five_of_six_unhealthy(containers):
    names = [
        containers.run(f"s{i}", health_cmd=HEALTH, enable=None, labels=watched()) for i in range(6)
    ]
    for name in names:
        containers.wait_health(name, "healthy")
    started = {name: containers.started_at(name) for name in names}
    for name in names[:5]:
        containers.make_unhealthy(name)
    for name in names[:5]:
        containers.wait_health(name, "unhealthy")
    return names, started


def test_five_of_six_unhealthy_is_one_host_incident_that_holds_restarts(containers, guardian):
    names, started = five_of_six_unhealthy(containers)
    sick, well = names[:5], names[5]
    g = guardian(watch={"label": WATCH}, storm={"threshold": "50%", "window": "60s"})
    db = g.store_path
    wait_until(lambda: incidents(db, "(host)", "storm"), 20, message="storm incident")
    # Every sick container was judged and held back with reason `storm`.
    held = lambda: {a["container"] for a in actions(db) if a["reason"] == "storm"}  # noqa: E731
    wait_until(lambda: held() == set(sick), 20, message="all five held")
    wait_until(lambda: len(g.lines("sweep done")) >= 3, 20, message="more sweeps")

    [storm] = incidents(db, "(host)")
    assert storm["state"] == "active"
    assert storm["detail"].startswith("5 of 6 watched containers unhealthy within 60s")
    assert [a for a in actions(db) if a["kind"] == "restart"] == []
    assert all(containers.started_at(n) == started[n] for n in names)
    # One notification for the whole host, none per container.
    queued = rows(db, "SELECT incident_id, kind FROM outbox")
    assert queued == [{"incident_id": storm["id"], "kind": "opened"}]
    assert len(g.lines("msg=notification ")) == 1

    # The shared cause goes away for four of them: the host recovers, restarts resume.
    for name in sick[:4]:
        exec_in(containers, name, "rm", "/run/sick")
    wait_until(lambda: incidents(db, "(host)")[0]["state"] == "resolved", 30, message="over")
    last = sick[4]
    wait_until(lambda: containers.started_at(last) != started[last], 30, message="restart")
    assert [a["container"] for a in actions(db) if a["kind"] == "restart"] == [last]
    assert containers.started_at(well) == started[well]
    storm_notes = rows(db, "SELECT kind FROM outbox WHERE incident_id=?", storm["id"])
    assert [n["kind"] for n in storm_notes] == ["opened", "resolved"]
    assert g.stop() == 0


def test_an_unreachable_engine_is_a_host_incident_resolved_when_it_answers(
    containers, guardian, tmp_path
):
    socket_path = tmp_path / "docker.sock"  # nothing listens here yet
    g = guardian(
        watch={"label": WATCH, "interval": "1s"},
        docker={"url": f"unix://{socket_path}", "timeout": "2s"},
    )
    db = g.store_path
    wait_until(lambda: incidents(db, "(host)", "engine_unreachable"), 20, message="incident")
    [incident] = incidents(db, "(host)")
    assert incident["state"] == "active"
    assert "docker engine unreachable for" in incident["detail"]

    os.symlink("/var/run/docker.sock", socket_path)  # the engine answers again
    wait_until(lambda: incidents(db, "(host)")[0]["state"] == "resolved", 20, message="resolved")
    assert incidents(db, "(host)")[0]["resolved_by"] == "guardian"
    assert g.stop() == 0


def test_acknowledging_the_storm_lets_restarts_through(containers, guardian):
    names, started = five_of_six_unhealthy(containers)
    sick = names[:5]
    g = guardian(watch={"label": WATCH}, restart={"max_concurrent": 5})
    db = g.store_path
    wait_until(lambda: incidents(db, "(host)", "storm"), 20, message="storm incident")
    [storm] = incidents(db, "(host)")
    assert [a for a in actions(db) if a["kind"] == "restart"] == []

    ack = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", "incidents", "ack", str(storm["id"]),
         "--by", "alice", "--reason", "NFS server rebooted", "--config", str(g.config_path)],
        cwd=REPO, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert ack.returncode == 0, ack.stderr
    for name in sick:
        wait_until(lambda n=name: containers.started_at(n) != started[n], 30, message=name)
    restarted = {a["container"] for a in actions(db) if a["kind"] == "restart"}
    assert restarted == set(sick)
    assert incidents(db, "(host)")[0]["state"] in ("acknowledged", "resolved")
    opened = rows(db, "SELECT incident_id FROM outbox WHERE kind='opened'")
    assert opened == [{"incident_id": storm["id"]}]
    assert g.stop() == 0
