"""Operator actions over a real SQLite store and a FakeClock: incident changes and silences."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.incidents import InvalidTransition
from guardian.core.model import HealthCheckResult, IncidentState, ProblemType
from guardian.readside.views import incident_view
from guardian.service.operator import BadRequest, NotFound, Operator
from tests.fakes import FakeClock

HOST = "host"


@pytest.fixture
def op(tmp_path: Path) -> Operator:
    store = SqliteStore(tmp_path / "guardian.db")
    return Operator(store, FakeClock(), HOST)


def open_incident(op: Operator, container: str = "app") -> int:
    now = op.clock.now()
    result = HealthCheckResult("id-" + container, container, now, ProblemType.UNHEALTHY, "bad")
    saved = op.store.save_incident(incidents.record_detection(None, HOST, result, now))
    assert saved.id is not None
    return saved.id


def test_ack_records_who_and_when(op: Operator) -> None:
    iid = open_incident(op)
    op.clock.advance(30)  # type: ignore[attr-defined]
    incident = op.change(iid, "ack", "alice")
    assert incident.state is IncidentState.ACKNOWLEDGED
    last = op.store.transitions(iid)[-1]
    assert (last.actor, last.to_state, last.at) == ("alice", "acknowledged", op.clock.now())


def test_close_from_active_is_refused_with_a_message_for_people(op: Operator) -> None:
    iid = open_incident(op)
    with pytest.raises(InvalidTransition) as refused:
        op.change(iid, "close", "alice")
    assert str(refused.value) == f"cannot close incident {iid}: it is active; resolve it first"
    assert op.incident(iid).state is IncidentState.ACTIVE


def test_resolve_needs_a_reason_then_records_it(op: Operator) -> None:
    iid = open_incident(op)
    with pytest.raises(InvalidTransition, match="a reason is required"):
        op.change(iid, "resolve", "alice", "  ")
    incident = op.change(iid, "resolve", "alice", "fixed the config")
    assert (incident.state, incident.resolved_by) == (IncidentState.RESOLVED, "alice")
    assert incident.resolved_at == op.clock.now()
    assert op.store.transitions(iid)[-1].reason == "fixed the config"
    closed = op.change(iid, "close", "bob")
    assert closed.state is IncidentState.CLOSED


def test_resolving_an_in_progress_incident_by_hand_also_needs_a_reason(op: Operator) -> None:
    iid = open_incident(op)
    op.store.save_incident(
        incidents.start_remediation(op.incident(iid), "restarting", op.clock.now())
    )
    with pytest.raises(InvalidTransition, match="a reason is required"):
        op.change(iid, "resolve", "alice")


def test_a_person_is_named(op: Operator) -> None:
    iid = open_incident(op)
    with pytest.raises(BadRequest, match="--by"):
        op.change(iid, "ack", " ")


def test_unknown_incident_is_not_found(op: Operator) -> None:
    with pytest.raises(NotFound, match="incident 42 not found"):
        op.change(42, "ack", "alice")


def test_a_change_by_the_daemon_in_between_is_not_lost(op: Operator) -> None:
    """The daemon counted another occurrence after we read: the write keeps its count."""
    iid = open_incident(op)
    stale = op.incident(iid)
    op.store.save_incident(incidents.IncidentChange(replace(stale, occurrences=5)))
    op.change(iid, "ack", "alice")
    assert op.incident(iid).occurrences == 5


def test_a_detection_update_by_the_daemon_keeps_a_persons_acknowledgement(op: Operator) -> None:
    """The daemon read the incident as active, then saw the problem again after the ack."""
    iid = open_incident(op)
    stale = op.incident(iid)
    op.change(iid, "ack", "alice")
    result = HealthCheckResult("id-app", "app", op.clock.now(), ProblemType.UNHEALTHY, "again")
    op.store.save_incident(incidents.record_detection(stale, HOST, result, op.clock.now()))
    incident = op.incident(iid)
    assert (incident.state, incident.detail) == (IncidentState.ACKNOWLEDGED, "again")


def test_a_write_from_a_stale_state_is_refused(op: Operator) -> None:
    """Compare-and-set: a change judged on `active` is not written once the state moved on."""
    iid = open_incident(op)
    stale = op.incident(iid)
    op.change(iid, "ack", "alice")
    ack, t = incidents.transition(stale, IncidentState.ACKNOWLEDGED, "bob", "", op.clock.now())
    assert op.store.save_state_change(incidents.IncidentChange(ack, (t,)), stale.state) is None
    assert [t.actor for t in op.store.transitions(iid)] == ["guardian", "alice"]
    with pytest.raises(InvalidTransition, match="acknowledged already"):
        op.change(iid, "ack", "bob")


def test_silence_expires_on_time_and_can_be_lifted(op: Operator) -> None:
    clock = op.clock
    s = op.silence("app", timedelta(hours=2), "db migration", "alice")
    assert s.until == clock.now() + timedelta(hours=2)
    assert op.store.active_silence(HOST, "app", clock.now()) == s
    assert op.store.active_silence(HOST, "other", clock.now()) is None
    clock.advance(hours=2)  # type: ignore[attr-defined]
    assert op.store.active_silence(HOST, "app", clock.now()) is None
    assert op.store.silences(HOST, clock.now()) == []
    assert len(op.store.silences(HOST, clock.now(), include_ended=True)) == 1

    op.silence("app", timedelta(hours=1), "again", "alice")
    lifted = op.unsilence("app", "bob")
    assert lifted.ended_by == "bob"
    assert op.store.active_silence(HOST, "app", clock.now()) is None
    with pytest.raises(NotFound, match="no silence in force for app"):
        op.unsilence("app", "bob")


def test_a_new_silence_replaces_the_one_in_force(op: Operator) -> None:
    op.silence("app", timedelta(hours=2), "first", "alice")
    op.silence("app", timedelta(minutes=10), "shorter", "bob")
    active = op.store.silences(HOST, op.clock.now())
    assert [(s.reason, s.created_by) for s in active] == [("shorter", "bob")]


@pytest.mark.parametrize(
    ("container", "duration", "reason", "message"),
    [
        ("", timedelta(hours=1), "x", "container name is required"),
        ("app", timedelta(0), "x", "more than 0s"),
        ("app", timedelta(days=31), "x", "at most 30d"),
        ("app", timedelta(hours=1), "", "reason"),
        ("app", timedelta(hours=1), "x" * 1001, "longer than 1000"),
    ],
)
def test_bad_silences_are_refused(
    op: Operator, container: str, duration: timedelta, reason: str, message: str
) -> None:
    with pytest.raises(BadRequest, match=message):
        op.silence(container, duration, reason, "alice")


def test_views_are_flat_json_values(op: Operator) -> None:
    iid = open_incident(op)
    view = incident_view(op.incident(iid))
    assert view["state"] == "active" and view["resolved_by"] is None
    assert all(isinstance(v, str | int | bool | type(None)) for v in view.values())
