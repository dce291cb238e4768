"""The incident state machine: every edge, the refusals people see, dedup, and a property."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardian.core.incidents import (
    ALLOWED,
    InvalidTransition,
    probe_said,
    record_detection,
    record_recovery,
    start_remediation,
    transition,
)
from guardian.core.model import HealthCheckResult, Incident, IncidentState, ProblemType
from tests.fakes import T0

S = IncidentState


def incident(state: S = S.ACTIVE, id: int | None = 7) -> Incident:
    return Incident(id, "host", "app", "cid", ProblemType.UNHEALTHY, state, T0, T0)


def detection(problem: ProblemType = ProblemType.UNHEALTHY, source: str = "sweep"):
    return HealthCheckResult("cid", "app", T0, problem, "check failed", source=source)


EDGES = [
    (S.ACTIVE, S.ACKNOWLEDGED, ""),
    (S.ACTIVE, S.IN_PROGRESS, ""),
    (S.ACTIVE, S.RESOLVED, "recovered on its own"),
    (S.ACKNOWLEDGED, S.IN_PROGRESS, ""),
    (S.ACKNOWLEDGED, S.RESOLVED, "fixed by hand"),
    (S.IN_PROGRESS, S.RESOLVED, ""),
    (S.RESOLVED, S.CLOSED, ""),
    (S.RESOLVED, S.ACTIVE, "recurred"),
]


@pytest.mark.parametrize(("frm", "to", "reason"), EDGES)
def test_allowed_transitions_are_recorded(frm: S, to: S, reason: str) -> None:
    now = T0 + timedelta(minutes=5)
    changed, t = transition(incident(frm), to, "alice", reason, now)
    assert changed.state is to
    assert (t.from_state, t.to_state, t.actor, t.at, t.reason) == (frm, to, "alice", now, reason)
    if to is S.RESOLVED:
        assert (changed.resolved_by, changed.resolved_at) == ("alice", now)
    if to is S.ACTIVE:
        assert changed.resolved_by is None and changed.resolved_at is None


ALL_PAIRS = [(a, b) for a in S for b in S]
FORBIDDEN = [
    (a, b)
    for a, b in ALL_PAIRS
    if (
        a,
        b,
    )
    not in {(f, t) for f, t, _ in EDGES}
]


@pytest.mark.parametrize(("frm", "to"), FORBIDDEN)
def test_every_other_transition_is_refused(frm: S, to: S) -> None:
    with pytest.raises(InvalidTransition):
        transition(incident(frm), to, "alice", "because", T0)


@pytest.mark.parametrize(
    ("frm", "to", "message"),
    [
        (S.ACTIVE, S.CLOSED, "cannot close incident 7: it is active; resolve it first"),
        (S.IN_PROGRESS, S.CLOSED, "cannot close incident 7: it is in_progress; resolve it first"),
        (
            S.CLOSED,
            S.RESOLVED,
            "cannot resolve incident 7: it is closed; a closed incident cannot change",
        ),
        (
            S.ACKNOWLEDGED,
            S.ACKNOWLEDGED,
            "cannot acknowledge incident 7: it is acknowledged already",
        ),
        (
            S.IN_PROGRESS,
            S.ACKNOWLEDGED,
            "cannot acknowledge incident 7: it is in_progress; allowed from in_progress: resolved",
        ),
    ],
)
def test_refusals_say_why_in_words(frm: S, to: S, message: str) -> None:
    with pytest.raises(InvalidTransition) as err:
        transition(incident(frm), to, "alice", "x", T0)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("frm", "to"), [(S.ACTIVE, S.RESOLVED), (S.ACKNOWLEDGED, S.RESOLVED), (S.RESOLVED, S.ACTIVE)]
)
def test_shortcut_edges_need_a_reason(frm: S, to: S) -> None:
    with pytest.raises(InvalidTransition, match="a reason is required"):
        transition(incident(frm), to, "alice", "  ", T0)


def test_an_actor_is_required() -> None:
    with pytest.raises(InvalidTransition, match="actor"):
        transition(incident(S.ACTIVE), S.ACKNOWLEDGED, "", "", T0)


def test_first_detection_opens_an_active_incident() -> None:
    change = record_detection(None, "host", detection(source="event"), T0)
    assert change.opened and change.incident.state is S.ACTIVE
    assert change.incident.occurrences == 1
    assert change.transitions[0].reason == "unhealthy detected by event"


def test_a_second_detection_of_an_open_problem_is_seen_again_not_another_occurrence() -> None:
    open_one = incident(S.IN_PROGRESS)
    later = T0 + timedelta(seconds=30)
    change = record_detection(open_one, "host", detection(), later)
    assert change.transitions == ()
    assert change.incident.id == 7
    assert change.incident.occurrences == 1 and change.incident.last_seen == later


def test_recurrence_before_close_reopens_the_same_incident() -> None:
    resolved = replace(incident(S.RESOLVED), resolved_by="guardian", resolved_at=T0)
    change = record_detection(resolved, "host", detection(), T0 + timedelta(minutes=1))
    assert change.reopened and change.incident.id == 7
    assert change.incident.state is S.ACTIVE and change.incident.resolved_by is None
    assert change.incident.occurrences == 2  # the problem began again


def test_after_close_a_new_incident_opens() -> None:
    change = record_detection(incident(S.CLOSED), "host", detection(), T0)
    assert change.opened and change.incident.id is None


def s(seconds: float):
    return T0 + timedelta(seconds=seconds)


# (what was kept: state, problem_since; what the look tells: since, exact; now) -> kept after.
PROBLEM_STARTS = [
    ("a first look takes the engine's start", None, None, s(-40), True, s(0), s(-40)),
    ("a first look without evidence starts now", None, None, None, False, s(0), s(0)),
    ("a start ahead of the clock counts as now", None, None, s(5), True, s(0), s(0)),
    ("the log moved on: the kept start stays", S.ACTIVE, s(-40), s(-10), False, s(0), s(-40)),
    ("earlier evidence moves it earlier", S.IN_PROGRESS, s(-40), s(-60), False, s(0), s(-60)),
    ("the same exact turn again: kept", S.ACTIVE, s(-40), s(-40), True, s(0), s(-40)),
    ("a later exact turn: a new episode", S.ACTIVE, s(-40), s(-5), True, s(0), s(-5)),
    ("no evidence: the kept start stays", S.ACKNOWLEDGED, s(-40), None, False, s(0), s(-40)),
    ("a row from before: its opening stands in", S.ACTIVE, None, s(10), False, s(60), s(0)),
    ("a recurrence starts again", S.RESOLVED, s(-40), s(30), True, s(60), s(30)),
    ("a recurrence: never before its resolution", S.RESOLVED, s(-40), s(-60), False, s(60), s(0)),
    ("after close: a new incident, a new start", S.CLOSED, s(-40), s(50), True, s(60), s(50)),
]


@pytest.mark.parametrize(
    ("case", "state", "kept", "since", "exact", "now", "expected"),
    PROBLEM_STARTS,
    ids=[row[0] for row in PROBLEM_STARTS],
)
def test_the_problem_start_is_kept_while_it_lasts_and_taken_afresh_when_it_recurs(
    case, state, kept, since, exact, now, expected
) -> None:
    existing = None
    if state is not None:
        existing = replace(incident(state), problem_since=kept)
        if state is S.RESOLVED:
            existing = replace(existing, resolved_by="guardian", resolved_at=T0)
    result = replace(detection(), since=since, since_exact=exact)
    assert record_detection(existing, "host", result, now).incident.problem_since == expected


@pytest.mark.parametrize(
    ("output", "detail"),
    [
        ("db: connection refused", "db: connection refused"),
        ("\x1b[31mred\x1b[0m\nline two", "red line two"),  # made fit to store and show
        ("", "health check failing"),  # nothing said: the detail stays
    ],
)
def test_what_the_probe_said_becomes_the_detail_without_a_transition(output, detail) -> None:
    held = replace(incident(S.IN_PROGRESS), detail="health check failing")
    change = probe_said(held, output)
    assert change.transitions == ()
    assert change.incident.detail == detail
    assert change.incident.state is S.IN_PROGRESS


def test_recovery_resolves_by_guardian_and_ignores_closed() -> None:
    change = record_recovery(incident(S.ACTIVE), "observed healthy", T0)
    assert change.incident.state is S.RESOLVED and change.incident.resolved_by == "guardian"
    assert record_recovery(incident(S.CLOSED), "x", T0).transitions == ()


def test_start_remediation_is_idempotent() -> None:
    once = start_remediation(incident(S.ACTIVE), "restarting", T0).incident
    assert start_remediation(once, "restarting", T0).transitions == ()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(S)), st.sampled_from(["", "why"])), max_size=40))
def test_no_transition_outside_the_allowed_set(moves) -> None:
    current = incident(S.ACTIVE)
    for to, reason in moves:
        try:
            nxt, t = transition(current, to, "bob", reason, T0)
        except InvalidTransition:
            continue
        assert t.to_state in ALLOWED[t.from_state]
        if nxt.state is S.CLOSED:
            assert current.state is S.RESOLVED
        if nxt.state is S.RESOLVED:
            assert nxt.resolved_by and nxt.resolved_at
        current = nxt
