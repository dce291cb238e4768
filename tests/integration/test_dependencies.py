"""Dependency-aware healing with real containers: depends_on holds, restart_with follows."""

from __future__ import annotations

from datetime import datetime

from tests.helpers import wait_until
from tests.integration.see_more import HEALTH, WATCH, actions, incidents, watched


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_app_waits_for_db_and_restart_with_follows_db(containers, guardian):
    db_name = containers.name("db")
    db = containers.run("db", health_cmd=HEALTH, enable=None, labels=watched())
    app = containers.run(
        "app", health_cmd=HEALTH, enable=None, labels=watched(**{"guardian.depends_on": db_name})
    )
    cache = containers.run(
        "cache", health_cmd=HEALTH, enable=None, labels=watched(**{"guardian.restart_with": db})
    )
    for name in (db, app, cache):
        containers.wait_health(name, "healthy")
    cache_started = containers.started_at(cache)

    # db fails, and app fails because of it: both unhealthy when Guardian looks.
    containers.make_unhealthy(db)
    containers.make_unhealthy(app)
    containers.wait_health(db, "unhealthy")
    containers.wait_health(app, "unhealthy")
    g = guardian(watch={"label": WATCH})
    store = g.store_path

    # db is restarted; app is held back, its decision naming db's incident.
    wait_until(lambda: incidents(store, db) and incidents(store, db)[0]["state"] == "resolved", 30)
    db_incident = incidents(store, db)[0]
    held = [a for a in actions(store, app) if a["kind"] == "decision"]
    assert held and held[0]["reason"] == "dependency_unhealthy"
    assert f"waiting for {db} (incident {db_incident['id']}" in held[0]["detail"]

    # cache (restart_with=db) is restarted once db is healthy again, with its own reason.
    wait_until(lambda: containers.started_at(cache) != cache_started, 20, message="cache")
    [follow] = [a for a in actions(store, cache) if a["kind"] == "restart"]
    assert follow["reason"] == "restart_with"
    assert follow["incident_id"] == db_incident["id"]
    assert at(follow["requested_at"]) >= at(db_incident["resolved_at"])

    # app is still unhealthy on its own: restarted only after db was healthy again.
    wait_until(lambda: [a for a in actions(store, app) if a["kind"] == "restart"], 30)
    [app_restart] = [a for a in actions(store, app) if a["kind"] == "restart"]
    assert at(app_restart["requested_at"]) >= at(db_incident["resolved_at"])
    [db_restart] = [a for a in actions(store, db) if a["kind"] == "restart"]
    assert db_restart["outcome"] == "succeeded"
    assert g.stop() == 0
