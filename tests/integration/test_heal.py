"""The healing loop end to end: a real engine, real containers, a real `guardian run`."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from tests.helpers import wait_until

HEALTH = "test ! -f /run/sick"


def rows(db, sql, *params):
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, params)]
    finally:
        con.close()


def engine_events(api, name: str, since: datetime) -> list[tuple[str, float]]:
    """The engine's own record of what happened to a container: (action, unix time)."""
    events = api.events(
        since=since, until=datetime.now(UTC), filters={"container": name}, decode=True
    )
    return [(e["Action"], e["timeNano"] / 1e9) for e in events]


def test_restarts_an_unhealthy_container_and_resolves_the_incident(
    containers, guardian, docker_api
):
    name = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = guardian(watch={"interval": "30s"})  # only the event can be this fast
    t0 = datetime.now(UTC)
    before = containers.started_at(name)

    containers.make_unhealthy(name)
    wait_until(lambda: containers.started_at(name) != before, 15, 0.05, "restart")
    containers.wait_health(name, "healthy")

    # Measured on the engine's clock: Docker reports unhealthy -> Guardian's restart arrives.
    events = engine_events(docker_api, name, t0)
    unhealthy = next(t for a, t in events if a == "health_status: unhealthy")
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
