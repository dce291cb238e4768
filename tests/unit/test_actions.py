"""guardian.action per container (issue 29): stop, notify and ask, through the real decision
point and store, over a fake engine and a fake clock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import rules_for
from guardian.core.model import ActionKind, IncidentState
from guardian.ports import EngineEvent
from guardian.service.operator import Refused
from tests.app import TestApp, make_app


def app(tmp: Path, action: str = "restart", **restart: object) -> TestApp:
    return make_app(
        tmp, restart={"cooldown": "2s", "action": action, "approval_ttl": "10m", **restart}
    )


def incident_of(w: TestApp, name: str) -> int:
    [incident] = w.store.open_incidents(w.host, name)
    assert incident.id is not None
    return incident.id


def queued(w: TestApp) -> list[str]:
    return [str(r["kind"]) for r in w.store.db.query("SELECT kind FROM outbox ORDER BY id")]


def test_notify_opens_the_incident_tells_people_and_never_acts(tmp_path: Path) -> None:
    w = app(tmp_path, "notify")
    w.engine.add("db", health="unhealthy")
    for _ in range(3):
        w.healer.sweep()
        w.clock.advance(60)
    assert w.engine.restarts == [] and w.engine.stops == []
    assert w.store.open_incidents(w.host, "db")
    assert "opened" in queued(w)


def test_stop_stops_it_once_and_leaves_it_to_a_person(tmp_path: Path) -> None:
    w = app(tmp_path, "stop")
    w.engine.add("db", health="unhealthy")
    w.healer.sweep()
    assert w.engine.stops == [w.engine.id_of("db")] and w.engine.restarts == []
    for _ in range(3):
        w.clock.advance(60)
        w.healer.sweep()
    assert len(w.engine.stops) == 1 and w.engine.restarts == []
    [incident] = w.store.open_incidents(w.host, "db")
    assert incident.escalated and incident.state is IncidentState.IN_PROGRESS
    [stop] = [a for a in w.actions("db") if a.kind == ActionKind.STOP]
    assert stop.outcome is not None and stop.outcome.value == "stopped"


def test_no_action_undoes_a_persons_kill_heard_while_a_read_still_shows_it_running(
    tmp_path: Path,
) -> None:
    """A stop (as a recreate or a restart) is not done to a container a person is killing: the
    read that judged it unhealthy came before the kill was heard."""
    w = app(tmp_path, "stop")
    snap = w.engine.add("db", health="unhealthy")
    w.healer.on_event(EngineEvent("kill", snap.id, "db", w.clock.now(), {"signal": "15"}))
    w.healer.sweep()
    assert w.engine.stops == [] and w.engine.restarts == []
    assert w.store.open_incidents(w.host, "db")  # the problem was seen, and stays as it is


def test_ask_waits_for_approval_and_an_approval_is_used_once(tmp_path: Path) -> None:
    w = app(tmp_path, "ask")
    w.engine.add("db", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"  # the approved restart does not heal it
    for _ in range(3):
        w.healer.sweep()
        w.clock.advance(60)
    assert w.engine.restarts == []
    number = incident_of(w, "db")
    assert "approval" in queued(w)
    [ask] = [n for n in w.store.db.query("SELECT payload FROM outbox WHERE kind='approval'")]
    assert f"guardian incidents approve {number} --by NAME" in ask["payload"]

    w.app.operator.answer(number, True, "ana", "db checked")
    with pytest.raises(Refused, match="already approved"):
        w.app.operator.answer(number, True, "bob")
    w.healer.sweep()
    assert w.engine.restarts == [w.engine.id_of("db")]
    [restart] = w.restarts()
    assert restart.reason == "approved" and restart.extra["approved_by"] == "ana"
    w.verify()  # unhealthy after the restart: a second restart needs a second approval
    for _ in range(3):
        w.clock.advance(60)
        w.healer.sweep()
        w.verify()
    assert len(w.engine.restarts) == 1
    w.app.operator.answer(number, True, "ana")  # asked again: a fresh approval is possible
    w.healer.sweep()
    assert len(w.engine.restarts) == 2


def test_an_expired_approval_does_nothing(tmp_path: Path) -> None:
    w = app(tmp_path, "ask")
    w.engine.add("db", health="unhealthy")
    w.healer.sweep()
    number = incident_of(w, "db")
    w.app.operator.silence("db", timedelta(minutes=30), "upgrade", "ana")
    w.app.operator.answer(number, True, "ana")
    w.clock.advance(11 * 60)  # past restart.approval_ttl, still silenced
    w.healer.sweep()
    w.clock.advance(20 * 60)  # the silence ended
    w.healer.sweep()
    assert w.engine.restarts == []


def test_a_denial_ends_the_question_for_this_incident_only(tmp_path: Path) -> None:
    w = app(tmp_path, "ask")
    w.engine.add("db", health="unhealthy")
    w.healer.sweep()
    number = incident_of(w, "db")
    w.app.operator.answer(number, False, "ana", "leave it")
    with pytest.raises(Refused, match="denied by ana"):
        w.app.operator.answer(number, True, "bob")
    w.clock.advance(600)
    w.healer.sweep()
    assert w.engine.restarts == []
    timeline = w.app.operator.timeline(w.store.get_incident(number))  # type: ignore[arg-type]
    assert any(getattr(e, "kind", "") == ActionKind.APPROVAL for e in timeline)


def test_refused_answers_are_one_line(tmp_path: Path) -> None:
    w = app(tmp_path, "ask")
    with pytest.raises(Refused, match="incident 99 not found"):
        w.app.operator.answer(99, True, "ana")
    w.engine.add("web", health="unhealthy", labels={"guardian.enable": "true"})
    plain = app(tmp_path / "plain")
    plain.engine.add("web", health="unhealthy")
    plain.healer.sweep()
    with pytest.raises(Refused, match="not awaiting approval"):
        plain.app.operator.answer(incident_of(plain, "web"), True, "ana")


@pytest.mark.parametrize(
    ("operator", "label", "applies", "warned"),
    [
        ("restart", "ask", "ask", False),
        ("restart", "notify", "notify", False),
        ("ask", "notify", "notify", False),
        ("ask", "restart", "ask", True),  # a label may not do more than the operator allows
        ("notify", "stop", "notify", True),
        ("restart", "reboot-the-host", "restart", True),
    ],
)
def test_a_label_may_only_ask_guardian_to_do_less(
    operator: str, label: str, applies: str, warned: bool
) -> None:
    base = RestartPolicy(action=operator)
    rules = rules_for(
        {"guardian.enable": "true", "guardian.action": label},
        base,
        base.cooldown,
        "guardian.enable",
    )
    assert rules.policy.action == applies
    assert bool(rules.warnings) == warned


def test_a_label_may_only_ask_for_more_patience() -> None:

    base = RestartPolicy(act_after=timedelta(seconds=30))
    longer = rules_for({"guardian.act_after": "2m"}, base, base.cooldown, "all")
    shorter = rules_for({"guardian.act_after": "0s"}, base, base.cooldown, "all")
    hostile = rules_for({"guardian.act_after": "9" * 400}, base, base.cooldown, "all")
    assert longer.policy.act_after == timedelta(minutes=2) and not longer.warnings
    assert shorter.policy.act_after == timedelta(seconds=30) and shorter.warnings
    assert hostile.policy.act_after == timedelta(seconds=30) and len(hostile.warnings) == 1
    assert len(hostile.warnings[0]) < 200
