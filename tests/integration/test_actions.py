"""guardian.action and guardian.act_after against a real engine and a real `guardian run`
(issue 29): ask waits for a person and restarts once approved, stop and notify do what they say
and nothing more, patience waits act_after from the engine's unhealthy event."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import REPO, Containers, EventRecorder
from tests.integration.see_more import rows

HEALTH = "test ! -f /run/sick"


def cli(g: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", *args, "--config", str(g.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def incident_id(g: Any, name: str) -> int:
    found = rows(g.store_path, "SELECT id FROM incidents WHERE container=? ORDER BY id", name)
    return int(found[-1]["id"])


def awaiting(g: Any, name: str) -> bool:
    return bool(
        rows(
            g.store_path,
            "SELECT id FROM actions WHERE container=? AND reason='awaiting_approval'",
            name,
        )
    )


def times(events: EventRecorder, name: str, action: str) -> list[float]:
    return [t for a, t in events.of(name) if a == action]


def test_ask_stop_and_notify_each_do_what_they_say_and_nothing_more(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    ask = {"guardian.action": "ask"}
    asked = containers.run("ask", health_cmd=HEALTH, labels=ask)
    held = containers.run("ask-silenced", health_cmd=HEALTH, labels=ask)
    expiring = containers.run("ask-expiring", health_cmd=HEALTH, labels=ask)
    stopped = containers.run("stop", health_cmd="false", labels={"guardian.action": "stop"})
    told = containers.run("notify", health_cmd="false", labels={"guardian.action": "notify"})
    for name in (asked, held, expiring):
        containers.wait_health(name, "healthy")
    # Five containers failing at once would read as a host storm, a guard of its own.
    g = guardian(restart={"approval_ttl": "1m", "cooldown": "2s"}, storm={"min_containers": 100})
    for name in (asked, held, expiring):
        containers.make_unhealthy(name)
    wait_until(lambda: all(awaiting(g, n) for n in (asked, held, expiring)), 30, message="asked")
    asked_at = time.time()
    outbox = rows(g.store_path, "SELECT payload FROM outbox WHERE kind='approval'")
    assert any(
        f"guardian incidents approve {incident_id(g, asked)}" in r["payload"] for r in outbox
    )

    # Approved while silenced: held until the silence ends, then restarted.
    silenced = cli(g, "silence", held, "--for", "8s", "--reason", "upgrade", "--by", "ana")
    assert silenced.returncode == 0, silenced.stderr
    silence_end = time.time() + 8
    assert cli(g, "incidents", "approve", str(incident_id(g, held)), "--by", "ana").returncode == 0
    # Approved, but silenced for longer than the approval lives: the approval expires unused.
    assert (
        cli(g, "silence", expiring, "--for", "5m", "--reason", "x", "--by", "ana").returncode == 0
    )
    assert (
        cli(g, "incidents", "approve", str(incident_id(g, expiring)), "--by", "ana").returncode == 0
    )

    wait_until(lambda: times(engine_events, held, "restart"), 30, message="held restarted")
    assert silence_end - 0.5 <= times(engine_events, held, "restart")[0] <= silence_end + 3

    # stop: stopped once, never started again; notify: never touched.
    wait_until(lambda: containers.inspect(stopped)["State"]["Status"] == "exited", 30)
    wait_until(lambda: rows(g.store_path, "SELECT id FROM incidents WHERE container=?", told), 20)

    # No restart of `asked` for 60 s (the approval of `expiring` lives as long).
    wait_until(lambda: time.time() - asked_at >= 60, 90, 1.0, "a minute without approval")
    assert times(engine_events, asked, "restart") == []
    approve = cli(g, "incidents", "approve", str(incident_id(g, asked)), "--by", "ana")
    approved_at = time.time()
    assert approve.returncode == 0, approve.stderr
    wait_until(lambda: times(engine_events, asked, "restart"), 10, message="asked restarted")
    assert times(engine_events, asked, "restart")[0] - approved_at <= 2.0
    again = cli(g, "incidents", "approve", str(incident_id(g, asked)), "--by", "bob")
    assert again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1, again.stderr

    # The expired approval does nothing once the silence is lifted.
    assert cli(g, "unsilence", expiring, "--by", "ana").returncode == 0
    swept = len(g.lines('msg="sweep done"'))
    wait_until(lambda: len(g.lines('msg="sweep done"')) >= swept + 2, 20, message="two sweeps")
    assert times(engine_events, expiring, "restart") == []

    assert len(times(engine_events, stopped, "die")) == 1
    assert (
        times(engine_events, stopped, "start") == []
        or len(times(engine_events, stopped, "start")) == 1
    )
    assert [a for a, _ in engine_events.of(told) if a in ("kill", "restart", "stop")] == []
    assert g.stop() == 0


def test_act_after_restarts_no_sooner_and_not_much_later_than_asked(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    name = containers.run("patient", health_cmd=HEALTH, labels={"guardian.act_after": "5s"})
    containers.wait_health(name, "healthy")
    g = guardian()
    containers.make_unhealthy(name)
    wait_until(lambda: times(engine_events, name, "kill"), 30, message="restarted")
    [unhealthy] = [t for a, t in engine_events.of(name) if a == "health_status: unhealthy"][:1]
    waited = times(engine_events, name, "kill")[0] - unhealthy
    assert 5.0 <= waited <= 6.0, waited
    assert g.stop() == 0
