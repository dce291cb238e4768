"""The healing loop end to end: a real engine, real containers, a real `guardian run`."""

from __future__ import annotations

import time

import pytest

from tests.helpers import wait_until
from tests.integration.conftest import ENGINES
from tests.integration.see_more import HEALTH, gave_up, rows


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_restarts_an_unhealthy_container_and_resolves_the_incident(
    containers, guardian, engine_events
):
    name = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = guardian(watch={"interval": "30s"})  # only the event can be this fast
    before = containers.started_at(name)

    sick_at = containers.make_unhealthy(name)
    wait_until(lambda: containers.started_at(name) != before, 15, 0.05, "restart")
    containers.wait_health(name, "healthy")

    # Measured on the engine's clock: the engine reports unhealthy -> Guardian's restart arrives.
    # The first health event after the change is the failing check's (Docker reports changes
    # only, "health_status: unhealthy"; Podman every check, with the status before it).
    events = engine_events.of(name)
    unhealthy = next(t for a, t in events if a.startswith("health_status") and t >= sick_at)
    restart_begins = next(t for a, t in events if a in ("kill", "restart") and t >= unhealthy)
    assert restart_begins - unhealthy < 2.0

    db = g.store_path
    wait_until(
        lambda: rows(db, "SELECT * FROM incidents WHERE state='resolved'"), 15, message="resolved"
    )
    incidents = rows(db, "SELECT * FROM incidents")
    assert len(incidents) == 1
    assert incidents[0]["container"] == name and incidents[0]["type"] == "unhealthy"
    assert incidents[0]["resolved_by"] == "guardian"
    actions = rows(db, "SELECT * FROM actions WHERE kind='restart'")
    assert [a["outcome"] for a in actions] == ["succeeded"]
    states = [t["to_state"] for t in rows(db, "SELECT * FROM transitions ORDER BY id")]
    assert states == ["active", "in_progress", "resolved"]
    assert g.stop() == 0


def test_sigterm_during_a_restart_leaves_it_to_the_engine_and_the_next_start_verifies_it(
    containers, guardian
):
    # PID 1 ignores SIGTERM, so Docker waits the full stop timeout: a slow restart.
    name = containers.run(
        "slow", health_cmd=HEALTH, stop_signal="SIGTERM", labels={"guardian.stop_timeout": "8"}
    )
    containers.wait_health(name, "healthy")
    before = containers.started_at(name)
    g = guardian(restart={"verify_timeout": "30s"})
    containers.make_unhealthy(name)
    wait_until(lambda: g.lines("restarting container"), 20, 0.05, "restart requested")
    t0 = time.monotonic()
    assert g.stop() == 0
    assert time.monotonic() - t0 < 8, "the stop waited for the container's stop timeout"
    [action] = rows(g.store_path, "SELECT * FROM actions WHERE kind='restart'")
    assert action["outcome"] is None  # the intent, for the next start to reconcile

    g.start()  # the engine finishes the restart; the next start verifies it, asks no second
    wait_until(
        lambda: rows(g.store_path, "SELECT * FROM actions WHERE outcome='succeeded'"),
        40,
        message="verified after restart of Guardian",
    )
    assert containers.started_at(name) != before
    assert len(rows(g.store_path, "SELECT * FROM actions WHERE kind='restart'")) == 1
    [incident] = rows(g.store_path, "SELECT * FROM incidents")
    assert incident["state"] == "resolved"


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_an_exited_container_is_restarted_max_attempts_times_then_escalated(
    containers, guardian, engine_events
):
    name = containers.run("quits", ["sh", "-c", "sleep 1; exit 3"])
    g = guardian(restart={"cooldown": "1s", "max_attempts": 3, "verify_timeout": "4s"})
    db = g.store_path
    gave_up(db, 90)
    # Judged by the engine: three restarts (its events), and it is down again (its inspect).
    assert engine_events.count(name, "start") == 1 + 3
    assert containers.inspect(name)["State"]["ExitCode"] == 3
    [incident] = rows(db, "SELECT * FROM incidents")
    assert incident["type"] == "exited" and incident["escalated"] == 1
    assert incident["state"] == "in_progress"
    assert g.stop() == 0
