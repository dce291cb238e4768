"""guardian.action and guardian.act_after against a real engine and a real `guardian run`
(issue 29): ask waits for a person and restarts once approved, stop and notify do what they say
and nothing more, patience waits act_after from the engine's unhealthy event, however many
probes Docker has let go since (issue 41)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import (
    REPO,
    RUN_ID,
    Containers,
    Engine,
    EventRecorder,
    GuardianProcess,
    base_config,
)
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


# Patience longer than the five probes Docker keeps (a probe every second): the start of the
# problem must be remembered, not re-read from a log that has let it go (issue 41).
PATIENCE = 8.0
PATIENCE_CASES = {
    "label": ({"guardian.act_after": "8s"}, {}),
    "config": ({}, {"act_after": "8s"}),
    "restarted": ({"guardian.act_after": "8s"}, {}),
}


def test_act_after_counts_from_the_engines_unhealthy_event_past_its_five_kept_probes(
    containers: Containers, tmp_path: Path, engine: Engine, engine_events: EventRecorder
) -> None:
    """Three Guardians at once, each scoped to its own container: patience by label, by config,
    and by a label across a Guardian stopped and started again 4 s into it. Each kill comes
    8-9.5 s after the engine's `health_status: unhealthy` event, by the engine's own events."""
    names, guardians = {}, {}
    try:
        for case, (labels, restart) in PATIENCE_CASES.items():
            scope = {"guardian.test.patience": f"{RUN_ID}-{case}"}
            names[case] = containers.run(case, health_cmd=HEALTH, labels={**labels, **scope})
            tmp = tmp_path / case
            tmp.mkdir()
            config = base_config(tmp, **engine.config(), restart=restart)
            config["watch"]["scope"] = "guardian.test.patience=" + scope["guardian.test.patience"]
            guardians[case] = GuardianProcess(tmp, config)
        for name in names.values():
            containers.wait_health(name, "healthy")
        for g in guardians.values():
            g.start()
        for name in names.values():
            containers.make_unhealthy(name)

        def unhealthy_at(name: str) -> float:
            found = [t for a, t in engine_events.of(name) if a == "health_status: unhealthy"]
            return found[0] if found else 0.0

        first = wait_until(lambda: unhealthy_at(names["restarted"]), 20, message="unhealthy")
        restarted = guardians["restarted"]
        wait_until(lambda: time.time() >= first + PATIENCE / 2, 10, message="4 s of patience")
        assert restarted.stop() == 0
        restarted.start()
        for case, name in names.items():
            wait_until(lambda n=name: times(engine_events, n, "kill"), 30, message=f"{case} kill")
        waited = {
            case: round(times(engine_events, name, "kill")[0] - unhealthy_at(name), 2)
            for case, name in names.items()
        }
        assert all(PATIENCE <= w <= PATIENCE + 1.5 for w in waited.values()), waited
        assert all(g.stop() == 0 for g in guardians.values())
    finally:
        for g in guardians.values():
            if g.proc is not None and g.proc.poll() is None:
                g.proc.kill()
                g.proc.wait(10)
