"""The storm breaker and the engine_unreachable incident with a real engine and `guardian run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta

from tests.helpers import wait_until
from tests.integration.conftest import REPO, Containers, EventRecorder
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
    assert incident["detail"].startswith("docker engine unreachable since ")
    time.sleep(8)  # a real outage, longer than docker.timeout: its length must be told true
    os.symlink("/var/run/docker.sock", socket_path)  # the engine answers again
    wait_until(lambda: incidents(db, "(host)")[0]["state"] == "resolved", 20, message="resolved")
    [resolved] = incidents(db, "(host)")
    assert resolved["resolved_by"] == "guardian"
    [note] = rows(db, "SELECT payload FROM outbox WHERE kind='resolved'")
    told = json.loads(note["payload"])["detail"]
    since = re.search(r"unreachable since (\S+) ", incident["detail"]).group(1)
    outage = datetime.fromisoformat(resolved["resolved_at"]) - datetime.fromisoformat(since)
    said = int(re.search(r"after (\d+)s unreachable", told).group(1))
    assert said >= 8 and abs(said - outage.total_seconds()) <= 1.5, told
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


def test_eight_broken_at_once_hold_then_a_canary_heals_then_all_eight_heal(containers, guardian):
    # Broken before Guardian starts, so its first sweep sees all eight at once; each stays
    # broken until restarted (/run is a tmpfs). Nobody acts.
    names = [
        containers.run(f"e{i}", health_cmd=HEALTH, enable=None, labels=watched()) for i in range(8)
    ]
    for name in names:
        containers.wait_health(name, "healthy")
    started = {name: containers.started_at(name) for name in names}
    for name in names:
        containers.make_unhealthy(name)
    for name in names:
        containers.wait_health(name, "unhealthy")
    g = guardian(watch={"label": WATCH, "interval": "1s"}, storm={"hold": "10s"})
    db = g.store_path
    storm = wait_until(lambda: incidents(db, "(host)", "storm"), 20, message="storm")[0]
    opened_at = datetime.fromisoformat(storm["opened_at"])

    restarts = lambda: [a for a in actions(db) if a["kind"] == "restart"]  # noqa: E731
    [canary] = wait_until(restarts, 40, message="canary restart")
    assert canary["reason"] == "storm_canary"
    held_for = datetime.fromisoformat(canary["requested_at"]) - opened_at
    assert timedelta(seconds=10) <= held_for < timedelta(seconds=25)
    # The canary healed: the storm names it, and the other seven follow within the budget
    # (default: 10 a minute, 2 at once).
    wait_until(lambda: all(containers.health(n) == "healthy" for n in names), 120, message="all")
    assert all(containers.started_at(n) != started[n] for n in names)
    assert sorted(a["container"] for a in restarts()) == sorted(names)
    assert [a["reason"] for a in restarts()].count("storm_canary") == 1
    wait_until(lambda: incidents(db, "(host)")[0]["state"] == "resolved", 30, message="over")
    reasons = [t["reason"] for t in rows(db, "SELECT * FROM transitions WHERE incident_id=?",
                                         storm["id"])]  # fmt: skip
    assert f"canary {canary['container']} healthy after restart" in " ".join(reasons)
    # The story in three messages: opened (held, then a canary), the canary healed, resolved.
    told = rows(db, "SELECT incident_id, kind FROM outbox ORDER BY id")
    assert told == [
        {"incident_id": storm["id"], "kind": kind} for kind in ("opened", "attempt", "resolved")
    ]
    assert g.stop() == 0


def test_fresh_failing_containers_hold_an_older_one_at_most_one_cooldown(
    containers: Containers, guardian, engine_events: EventRecorder
):
    # Whoever can start opted-in containers starts six that fail from their first check: they
    # make a storm, and it holds them (for an hour here). An older container that turns
    # unhealthy once the storm's window has closed is none of its own: it waits one cooldown.
    old = containers.run("old", health_cmd=HEALTH, enable=None, labels=watched())
    containers.wait_health(old, "healthy")
    cooldown, window = 4, 6
    g = guardian(
        watch={"label": WATCH, "interval": "1s"},
        restart={"cooldown": f"{cooldown}s"},
        storm={"hold": "1h", "max_hold": "1h", "window": f"{window}s"},
    )
    db = g.store_path
    wait_until(lambda: g.lines("sweep done"), 20, message="a first sweep that sees the old one")
    sick = ["sh", "-c", "touch /run/sick; exec sleep 86400"]  # unhealthy after every start
    fresh = [
        containers.run(f"f{i}", sick, health_cmd=HEALTH, enable=None, labels=watched(), start=False)
        for i in range(6)
    ]
    for name in fresh:  # all at once: they fail within the storm's window of each other
        containers.api.start(name)
    [storm] = wait_until(lambda: incidents(db, "(host)", "storm"), 30, message="storm")
    opened = datetime.fromisoformat(storm["opened_at"])

    # The moment the storm's window closes is the point of the test, not a guess at a delay.
    wait_until(lambda: time.time() > opened.timestamp() + window + 1, window + 5, 0.2)
    containers.make_unhealthy(old)
    unhealthy = lambda: times(engine_events, old, "health_status: unhealthy")  # noqa: E731
    restarted = lambda: times(engine_events, old, "restart")  # noqa: E731
    wait_until(restarted, 20 + cooldown, message="the old container restarted")
    # Its cooldown, a sweep and the restart call itself; never the storm's hour.
    assert restarted()[0] - unhealthy()[0] <= cooldown + 4, engine_events.of(old)
    wait_until(lambda: containers.health(old) == "healthy", 20, message="old healthy again")

    # The storm still holds the containers that made it: none restarted once it was on.
    [storm] = incidents(db, "(host)", "storm")
    assert storm["state"] == "active"
    later = [
        a["container"]
        for a in actions(db)
        if a["kind"] == "restart"
        and datetime.fromisoformat(a["requested_at"]) > opened + timedelta(seconds=1)
    ]
    assert later == [old]
    assert {a["container"] for a in actions(db) if a["reason"] == "storm"} >= set(fresh)
    # People hear of the old one's incident; the storm's one notification speaks for its own.
    told = rows(db, "SELECT i.container, o.kind FROM outbox o JOIN incidents i"
                " ON i.id = o.incident_id WHERE o.kind = 'opened' ORDER BY o.id")  # fmt: skip
    assert [t["container"] for t in told if t["container"] in (old, "(host)")] == ["(host)", old]
    assert g.stop() == 0


def times(events: EventRecorder, name: str, action: str) -> list[float]:
    return [t for a, t in events.of(name) if a == action]
