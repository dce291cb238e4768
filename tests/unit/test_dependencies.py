"""Dependency-aware healing over fakes: depends_on holds dependents, restart_with follows."""

from __future__ import annotations

import json

from guardian.core.model import ActionKind, ActionOutcome, Outcome
from guardian.core.relations.dependencies import names
from tests.app import make_app

ON = {"guardian.enable": "true"}


def test_label_lists_accept_compose_syntax():
    assert names("db, cache") == ["db", "cache"]
    assert names("db:service_healthy:false,cache:service_started:true") == ["db", "cache"]
    assert names("") == []


def test_dependent_waits_while_its_dependency_is_unhealthy(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    # app is listed first: the sweep must still see that db is unhealthy before deciding for app.
    loop.engine.add("app", health="unhealthy", labels={**ON, "guardian.depends_on": "db"})
    loop.engine.add("db", health="unhealthy")
    loop.healer.sweep()
    assert loop.restarted() == ["db"]
    [held] = [a for a in loop.actions("app") if a.kind == "decision"]
    assert held.reason == "dependency_unhealthy"
    db_incident = loop.store.open_incidents(loop.host, "db")[0]
    assert f"db (incident {db_incident.id}" in held.detail

    # db is verified healthy; app, still unhealthy, now gets its own restart.
    loop.healer.verifier.verify()
    loop.clock.advance(5)
    loop.healer.sweep()
    assert loop.restarted() == ["db", "app"]


def test_compose_depends_on_names_a_service_of_the_same_project(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    compose = {**ON, "com.docker.compose.project": "shop"}
    loop.engine.add(
        "shop-web-1",
        health="unhealthy",
        labels={
            **compose,
            "com.docker.compose.service": "web",
            "com.docker.compose.depends_on": "db:service_healthy:false",
        },
    )
    loop.engine.add(
        "shop-db-1", health="unhealthy", labels={**compose, "com.docker.compose.service": "db"}
    )
    loop.engine.add(
        "other-db-1",
        labels={**ON, "com.docker.compose.project": "other", "com.docker.compose.service": "db"},
    )
    loop.healer.sweep()
    assert loop.restarted() == ["shop-db-1"]


def test_restart_with_restarts_the_follower_after_the_dependency_is_healthy(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    loop.engine.add("db", health="unhealthy")
    loop.engine.add("app", labels={**ON, "guardian.restart_with": "db"})
    loop.healer.sweep()
    assert loop.restarted() == ["db"]
    loop.healer.verifier.verify()
    assert loop.restarted() == ["db", "app"]
    [follow] = [a for a in loop.actions("app") if a.kind == "restart"]
    assert follow.reason == "restart_with"
    assert follow.extra["restart_with"] == "db"
    assert follow.incident_id == loop.store.open_incidents(loop.host, "db")[0].id


def test_restart_with_goes_through_decide_with_its_own_budget(tmp_path):
    loop = make_app(tmp_path, restart={"max_attempts": 1, "cooldown": "0s"})
    loop.engine.add("db", health="unhealthy")
    loop.engine.add("app", labels={**ON, "guardian.restart_with": "db"})
    for _ in range(2):
        loop.engine.set("db", health="unhealthy")
        loop.clock.advance(1)
        loop.healer.sweep()
        loop.healer.verifier.verify()
        loop.healer.verifier.verify()
    # db's budget of one attempt is spent on the first round; app's single attempt as well.
    assert loop.restarted() == ["db", "app"]


def test_a_restart_with_follower_gets_the_retry_the_metrics_and_the_attempt_notification(tmp_path):
    """restart_with goes through the one restart path, not a copy of it."""
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    loop.engine.add("db", health="unhealthy")
    loop.engine.add("app", labels={**ON, "guardian.restart_with": "db"})
    loop.healer.sweep()
    # The follower's first request never reaches the engine: one retry on identical input.
    loop.engine.restart_outcomes = [
        ActionOutcome(Outcome.TRANSIENT_FAILURE, "connection refused", True)
    ]
    loop.healer.verifier.verify()
    assert loop.restarted() == ["db", "app", "app"]
    [follow] = [a for a in loop.actions("app") if a.kind == ActionKind.RESTART]
    assert follow.outcome is Outcome.RESTARTED
    assert loop.metric("guardian_restart_duration_seconds_count") == 2  # db's and app's
    rows = loop.store.db.query("SELECT payload FROM outbox ORDER BY id")
    told = [json.loads(r["payload"]) for r in rows]
    assert [(n["kind"], n["outcome"]) for n in told if n["container"] == "app"] == [
        ("attempt", "restarted")
    ]
    loop.clock.advance(1)
    loop.healer.verifier.verify()
    assert loop.metric("guardian_restarts_total", container="app", outcome="succeeded") == 1
