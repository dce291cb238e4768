"""Never fight an owner: orchestrators' containers are observed, and a container recreated
under an old name is a new container with a fresh budget (the loop over fakes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardian.config import ConfigError, load_settings
from guardian.core.model import ActionKind, IncidentState, Outcome, Reason
from guardian.core.relations.orchestrators import ORCHESTRATORS
from tests.app import TestApp, make_app, make_world

SWARM_TASK = {
    "guardian.enable": "true",
    "com.docker.swarm.task.id": "t0ask1d",
    "com.docker.swarm.service.name": "shop_web",
}


def queued(w: TestApp) -> list[dict]:
    rows = w.store.db.query("SELECT payload FROM outbox ORDER BY id")
    return [json.loads(r["payload"]) for r in rows]


def sick_for_a_while(w: TestApp, sweeps: int = 10) -> None:
    for _ in range(sweeps):
        w.healer.sweep()
        w.clock.advance(30)
        w.healer.verifier.verify()


def test_a_swarm_task_is_reported_and_never_restarted(w: TestApp) -> None:
    w.engine.add("shop_web.1.abc", health="unhealthy", labels=SWARM_TASK)
    sick_for_a_while(w)
    assert w.engine.restarts == []
    [incident] = w.store.open_incidents("h")
    assert incident.state is IncidentState.ACTIVE  # seen by every sweep: still one incident
    assert incident.last_seen > incident.opened_at
    [held] = w.actions("shop_web.1.abc")  # recorded once, not on every sweep
    assert (held.kind, held.reason, held.outcome) == (
        ActionKind.DECISION,
        Reason.ORCHESTRATOR_MANAGED,
        Outcome.POLICY_DENIED,
    )
    assert "Docker Swarm (service shop_web) owns it" in held.detail
    [opened] = queued(w)
    assert opened["kind"] == "opened"
    assert "Docker Swarm (service shop_web) owns it" in opened["next_step"]
    denied = w.metric(
        "guardian_restart_decisions_total", decision="deny", reason="orchestrator_managed"
    )
    assert denied >= 10  # still counted: a flapping service is seen


@pytest.mark.parametrize("o", ORCHESTRATORS, ids=[o.name for o in ORCHESTRATORS])
def test_every_orchestrator_of_the_table_is_recognised(w: TestApp, o) -> None:
    w.engine.add("c", health="unhealthy", labels={"guardian.enable": "true", o.marker: "x"})
    w.healer.sweep()
    assert w.engine.restarts == []
    [held] = w.actions("c")
    assert held.reason == Reason.ORCHESTRATOR_MANAGED and o.name in held.detail


def test_an_operator_can_opt_in_to_acting_on_orchestrated_containers(tmp_path: Path) -> None:
    w = make_app(tmp_path, watch={"orchestrated": "act"})
    w.engine.add("shop_web.1.abc", health="unhealthy", labels=SWARM_TASK)
    w.healer.sweep()
    assert w.restarted() == ["shop_web.1.abc"]


def test_a_hostile_service_name_is_bounded_and_printable(w: TestApp) -> None:
    labels = {**SWARM_TASK, "com.docker.swarm.service.name": "\x1b[31m" + "x" * 5000}
    w.engine.add("t", health="unhealthy", labels=labels)
    w.healer.sweep()
    [held] = w.actions("t")
    assert "\x1b" not in held.detail and len(held.detail) < 200


def test_watch_orchestrated_accepts_observe_or_act_only(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("watch:\n  orchestrated: fight\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    assert str(err.value) == "watch.orchestrated = 'fight': expected one of observe, act"


# -- a container's identity is its id ---------------------------------------------------------


def recreate(w: TestApp, name: str, **fields: object) -> str:
    """`docker rm -f name && docker run --name name ...`: same name, new id."""
    del w.engine.containers[w.engine.id_of(name)]
    return w.engine.add(name, id=f"{name}-new".ljust(64, "1"), **fields).id


def escalate(w: TestApp, name: str) -> None:
    w.engine.add(name, health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    sick_for_a_while(w, 20)
    [incident] = w.store.open_incidents("h")
    assert incident.escalated and len(w.engine.restarts) == 3


def test_a_recreated_container_is_healed_at_its_first_problem(w: TestApp) -> None:
    escalate(w, "web")
    [old] = w.store.open_incidents("h")
    new_id = recreate(w, "web", health="unhealthy")
    w.engine.after_restart_health = "healthy"
    w.healer.sweep()
    assert w.engine.restarts[-1] == new_id and len(w.engine.restarts) == 4
    [new] = w.store.open_incidents("h")
    assert new.id != old.id and new.container_id == new_id and not new.escalated
    [restart] = [a for a in w.restarts() if a.container_id == new_id]
    assert restart.attempt == 1  # a fresh budget, not "gave up, attempt 2 of 2"
    closed = w.store.get_incident(old.id or 0)
    assert closed is not None
    assert (closed.state, closed.close_reason) == (IncidentState.CLOSED, "container_replaced")
    timeline = w.store.transitions(old.id or 0)
    assert new_id[:12] in timeline[-2].reason  # the resolution names the new container
    w.clock.advance(2)
    w.healer.verifier.verify()
    assert w.store.open_incidents("h")[0].state is IncidentState.RESOLVED


def test_a_healthy_replacement_closes_the_old_incident_as_replaced(w: TestApp) -> None:
    escalate(w, "web")
    [old] = w.store.open_incidents("h")
    recreate(w, "web", health="healthy")
    w.healer.sweep()
    assert w.store.open_incidents("h") == []
    closed = w.store.get_incident(old.id or 0)
    assert closed is not None and closed.close_reason == "container_replaced"
    assert closed.resolved_by == "guardian"
    resolved = [n for n in queued(w) if n["kind"] == "resolved"]
    assert [n["incident_id"] for n in resolved] == [old.id]
    assert "container replaced" in resolved[0]["detail"]


def test_a_container_recreated_while_its_restart_is_verified_closes_its_incident_once(
    w: TestApp,
) -> None:
    """`docker compose up` during the verification: the replacement retires the incident,
    then the verdict finds the old container gone; neither fails, the incident closes once."""
    w.engine.add("web", health="unhealthy")
    w.healer.sweep()  # restarted: its verification is pending
    [old] = w.store.open_incidents("h")
    recreate(w, "web", health="unhealthy")
    w.healer.sweep()  # the replacement retires the old incident and opens its own
    w.clock.advance(60)
    w.healer.verifier.verify()  # the old container's verdict: gone
    closed = w.store.get_incident(old.id or 0)
    assert closed is not None and closed.close_reason == "container_replaced"
    assert [t.to_state for t in w.store.transitions(old.id or 0)].count(IncidentState.CLOSED) == 1
    [new] = w.store.open_incidents("h")
    assert new.id != old.id


def test_a_restarted_container_keeps_its_incident_and_its_budget(w: TestApp) -> None:
    """The same id (a restart, not a recreation) is the same container: nothing is reset."""
    escalate(w, "web")
    sick_for_a_while(w, 5)
    assert len(w.engine.restarts) == 3
    [incident] = w.store.open_incidents("h")
    assert incident.escalated


@pytest.fixture
def w(tmp_path: Path) -> TestApp:
    return make_world(tmp_path)
