"""The loop over fakes: a FakeEngine, a FakeClock and a real SQLite store in a temp dir."""

from __future__ import annotations

from pathlib import Path

from guardian.core.detection.checks import CheckSettings, evaluate
from guardian.core.incidents import record_detection
from guardian.core.model import (
    ActionKind,
    ActionOutcome,
    IncidentState,
    Outcome,
    RemediationAction,
)
from guardian.ports import EngineEvent
from tests.app import TestApp, make_world


def test_heals_an_unhealthy_container_and_resolves_its_incident(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy", health_output="probe failed")
    w.healer.sweep()
    assert len(w.engine.restarts) == 1
    w.clock.advance(2)
    w.healer.verifier.verify()
    [incident] = w.store.open_incidents("h")
    assert incident.state is IncidentState.RESOLVED and incident.resolved_by == "guardian"
    assert [a.outcome for a in w.restarts()] == [Outcome.SUCCEEDED]
    states = [t.to_state for t in w.store.transitions(incident.id or 0)]
    assert states == [IncidentState.ACTIVE, IncidentState.IN_PROGRESS, IncidentState.RESOLVED]
    assert w.metric("guardian_restarts_total", container="app", outcome="succeeded") == 1


def test_a_sweep_makes_one_list_call_and_inspects_only_candidates(w: TestApp) -> None:
    for i in range(20):
        w.engine.add(f"ok{i}")
    w.engine.add("sick", health="unhealthy")
    w.engine.add("gone", state="exited", exit_code=3)
    report = w.healer.sweep(apply=False)
    assert w.engine.list_calls == 1 and w.engine.inspect_calls == 2
    assert len(report.rows) == 22


def test_nothing_wrong_is_an_honest_empty_result(w: TestApp) -> None:
    w.engine.add("a")
    w.healer.sweep()
    assert w.store.open_incidents("h") == [] and w.store.actions("h") == []
    assert w.metric("guardian_containers_watched") == 1
    assert w.metric("guardian_containers_unhealthy") == 0


def test_gives_up_after_max_attempts_and_a_restarted_guardian_does_not_retry(w: TestApp) -> None:
    w.engine.add("bad", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    for _ in range(20):
        w.healer.sweep()
        w.clock.advance(1)
        w.healer.verifier.verify()
        w.clock.advance(2)
    assert len(w.engine.restarts) == 3
    assert [a.outcome for a in w.restarts()] == [Outcome.UNHEALTHY_AFTER_RESTART] * 3
    [incident] = w.store.open_incidents("h")
    assert incident.escalated and incident.state is IncidentState.IN_PROGRESS
    exhausted = [a for a in w.store.actions("h") if a.outcome is Outcome.RETRY_EXHAUSTED]
    assert len(exhausted) == 1  # escalated once, not on every sweep

    w = w.restart_guardian()  # Guardian restarted: history comes from the store
    w.healer.verifier.reconcile()
    for _ in range(5):
        w.healer.sweep()
        w.clock.advance(60)
    assert len(w.engine.restarts) == 3


def test_event_and_sweep_detections_make_one_incident(w: TestApp) -> None:
    snap = w.engine.add("app", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    w.healer.react(snap.id)
    w.clock.advance(1)
    w.healer.sweep()
    incidents = w.store.open_incidents("h")
    assert len(incidents) == 1 and incidents[0].occurrences == 1  # one continuous problem
    assert incidents[0].last_seen == w.clock.now()  # the sweep saw it again


def test_container_removed_before_restart_closes_the_incident(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.engine.restart_outcomes = [
        ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists (404)")
    ]
    w.healer.sweep()
    [action] = w.restarts()
    assert action.outcome is Outcome.PERMANENT_FAILURE
    [incident] = [w.store.get_incident(action.incident_id or 0)]
    assert incident is not None and incident.state is IncidentState.CLOSED
    assert incident.close_reason == "container_gone"


def test_policy_denied_by_the_engine_is_not_retried(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.POLICY_DENIED, "403 from socket proxy")]
    for _ in range(5):
        w.healer.sweep()
        w.clock.advance(60)
    assert len(w.engine.restarts) == 1
    assert w.restarts()[0].outcome is Outcome.POLICY_DENIED
    held = [a.reason for a in w.store.actions("h") if a.kind == ActionKind.DECISION]
    assert held == ["engine_denied"]  # reported once, not on every sweep
    assert w.metric("guardian_restarts_total", container="app", outcome="policy_denied") == 1


def test_transient_failure_is_retried_once_on_the_same_attempt(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    refused = ActionOutcome(Outcome.TRANSIENT_FAILURE, "connection refused", True)
    w.engine.restart_outcomes = [refused, refused]
    w.healer.sweep()
    assert len(w.engine.restarts) == 2  # the original and exactly one retry
    assert [a.outcome for a in w.restarts()] == [Outcome.TRANSIENT_FAILURE]


def test_unknown_outcome_is_settled_by_observation_not_by_restarting(w: TestApp) -> None:
    snap = w.engine.add("app", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.UNKNOWN, "timed out after sending")]
    w.healer.sweep()
    w.clock.advance(1)
    w.healer.sweep()
    assert len(w.engine.restarts) == 1  # not repeated blindly
    w.engine.set("app", health="healthy", started_at=w.clock.now())
    w.healer.verifier.verify()
    [action] = w.restarts()
    assert action.outcome is Outcome.SUCCEEDED
    assert snap.id == action.container_id


def test_dry_run_decides_and_records_but_never_restarts(tmp_path: Path) -> None:
    w = make_world(tmp_path, dry_run=True)
    w.engine.add("app", health="unhealthy")
    w.healer.sweep()
    w.healer.sweep()
    assert w.engine.restarts == []
    decisions = [a for a in w.store.actions("h") if a.kind == ActionKind.DECISION]
    assert [a.reason for a in decisions] == ["dry_run"]  # recorded once, not per sweep


def test_cooldown_hold_is_recorded_once_with_its_retry_time(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    w.healer.sweep()
    w.healer.verifier.verify()  # still unhealthy right after the restart: counted as failed
    w.healer.sweep()
    w.healer.sweep()
    holds = [a for a in w.store.actions("h") if a.reason == "cooldown"]
    assert len(holds) == 1 and "retry at" in holds[0].detail


def test_not_opted_in_containers_are_never_touched(w: TestApp) -> None:
    w.engine.add("other", health="unhealthy", labels={})
    w.engine.add("optout", health="unhealthy", labels={"guardian.enable": "false"})
    w.healer.sweep()
    assert w.engine.restarts == [] and w.store.open_incidents("h") == []


def test_label_all_watches_everything_but_opt_outs(tmp_path: Path) -> None:
    w = make_world(tmp_path, label="all")
    w.engine.add("plain", health="unhealthy", labels={})
    w.engine.add("optout", health="unhealthy", labels={"guardian.enable": "false"})
    w.healer.sweep()
    assert [w.engine.containers[c].name for c in w.engine.restarts] == ["plain"]


def test_guardian_never_restarts_itself(w: TestApp) -> None:
    w.engine.add(
        "guardian", health="unhealthy", labels={"guardian.enable": "true", "guardian.self": "true"}
    )
    w.healer.sweep()
    assert w.engine.restarts == []
    assert [a.reason for a in w.store.actions("h")] == ["self"]


def test_engine_unreachable_then_back(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.engine.reachable = False
    report = w.healer.sweep()
    assert report.engine_error and w.metric("guardian_docker_up") == 0
    w.engine.reachable = True
    w.healer.sweep()
    assert w.metric("guardian_docker_up") == 1 and len(w.engine.restarts) == 1


def test_counter_resets_only_after_continuous_health_and_closes_resolved(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.healer.sweep()
    w.healer.verifier.verify()
    w.clock.advance(300)
    w.healer.sweep()
    assert w.store.last_reset("h", "app") is None
    [incident] = w.store.open_incidents("h")
    assert incident.state is IncidentState.RESOLVED
    w.clock.advance(301)
    w.healer.sweep()
    assert w.store.last_reset("h", "app") == w.clock.now()
    assert w.store.open_incidents("h") == []  # resolved -> closed after reset_after


def test_recovery_without_restart_resolves_with_a_reason(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.POLICY_DENIED, "403")]
    w.healer.sweep()
    w.engine.set("app", health="healthy")
    w.healer.sweep()
    [incident] = w.store.open_incidents("h")
    assert incident.state is IncidentState.RESOLVED
    assert w.store.transitions(incident.id or 0)[-1].reason == "observed healthy"


def test_a_person_stopping_a_container_is_respected(w: TestApp) -> None:
    snap = w.engine.add("app", state="exited", exit_code=1, health=None)
    w.healer.on_event(EngineEvent("stop", snap.id, "app", w.clock.now(), {}))
    w.healer.sweep()
    assert w.engine.restarts == []


def test_crash_between_intent_and_outcome_is_reconciled(w: TestApp) -> None:
    snap = w.engine.add("app", health="unhealthy")
    result = evaluate(snap, w.clock.now(), CheckSettings())
    incident = w.store.save_incident(record_detection(None, "h", result, w.clock.now()))
    w.store.record_intent(
        RemediationAction(
            None,
            incident.id,
            "h",
            "app",
            snap.id,
            ActionKind.RESTART,
            w.clock.now(),
            "allowed",
            attempt=1,
        )
    )
    w.clock.advance(5)
    healer = w.restart_guardian().healer
    assert healer.verifier.reconcile() == 1
    # Within the call's stop timeout the engine may still be restarting it: no second restart.
    healer.sweep()
    assert w.engine.restarts == []
    [action] = w.restarts()
    assert action.outcome is None
    w.clock.advance(120)  # past the stop timeout and verify_timeout: it never restarted
    healer.verifier.verify()
    [action] = w.restarts()
    assert action.outcome is Outcome.INTERRUPTED and "did not restart" in action.detail
    # The interrupted attempt still counts: the next one waits for the cooldown like any other.
    assert w.store.unfinished_actions("h") == []


def test_a_crash_long_after_the_intent_is_reconciled_at_once(w: TestApp) -> None:
    snap = w.engine.add("app", health="unhealthy")
    result = evaluate(snap, w.clock.now(), CheckSettings())
    incident = w.store.save_incident(record_detection(None, "h", result, w.clock.now()))
    w.store.record_intent(
        RemediationAction(
            None, incident.id, "h", "app", snap.id, ActionKind.RESTART, w.clock.now(), "allowed"
        )
    )
    w.clock.advance(3600)
    healer = w.restart_guardian().healer
    assert healer.verifier.reconcile() == 1
    [action] = w.restarts()
    assert action.outcome is Outcome.INTERRUPTED and "did not restart" in action.detail


def test_vanished_container_incident_is_closed(w: TestApp) -> None:
    snap = w.engine.add("app", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.POLICY_DENIED, "403")]
    w.healer.sweep()
    del w.engine.containers[snap.id]
    w.healer.sweep()
    assert w.store.open_incidents("h") == []
