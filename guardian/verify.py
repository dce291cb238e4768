"""Verification after a restart, and reconciliation of actions a crash left unfinished.

A restart is `succeeded` only when the container is observed healthy (or, without a
healthcheck, running and stable) within verify_timeout. Nothing is reported healed otherwise.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from guardian.core import incidents, notifications
from guardian.core.model import ContainerSnapshot, IncidentState, Outcome
from guardian.healer import Healer
from guardian.logs import kv
from guardian.ports import EngineUnavailable
from guardian.remediation import PendingVerify

log = logging.getLogger("guardian.verify")

# Without a healthcheck, "healed" means running without a restart for this long.
STABLE_FOR = timedelta(seconds=10)


def _restarted(p: PendingVerify, snap: ContainerSnapshot) -> bool:
    if snap.started_at is None:
        return False
    if p.previous_started_at is not None:
        return snap.started_at > p.previous_started_at
    # Clocks of engine and Guardian may differ slightly; a second of slack is plenty.
    return snap.started_at >= p.restarted_at - timedelta(seconds=1)


def judge(
    p: PendingVerify, snap: ContainerSnapshot, now: datetime, timeout: timedelta
) -> Outcome | None:
    """Outcome of a pending verification, or None to keep watching."""
    restarted = _restarted(p, snap)
    if snap.state in ("exited", "dead") and restarted:
        return Outcome.UNHEALTHY_AFTER_RESTART
    if snap.state == "running":
        if snap.health == "healthy":
            return Outcome.SUCCEEDED if restarted else Outcome.UNKNOWN
        if snap.health == "unhealthy" and restarted:
            # Docker resets health to "starting" on restart: unhealthy now is a fresh failure.
            return Outcome.UNHEALTHY_AFTER_RESTART
        stable = snap.started_at is not None and now - snap.started_at >= min(STABLE_FOR, timeout)
        if snap.health is None and restarted and stable:
            return Outcome.SUCCEEDED
    if now >= p.deadline:
        return Outcome.UNHEALTHY_AFTER_RESTART
    return None


def verify_pending(healer: Healer, only: str | None = None) -> None:
    """Check every pending verification (or the one for container `only`)."""
    with healer._lock:
        todo = [p for name, p in healer.pending.items() if only is None or name == only]
    for p in todo:
        try:
            snap = healer.engine.inspect(p.container_id)
        except EngineUnavailable:
            return  # judged when the engine answers again
        now = healer.clock.now()
        if snap is None:
            finish(
                healer, p, Outcome.PERMANENT_FAILURE, "container removed during verification", now
            )
            continue
        outcome = judge(p, snap, now, healer.settings.verify_timeout)
        if outcome is not None:
            detail = {
                Outcome.SUCCEEDED: f"observed {snap.health or 'running and stable'} after restart",
                Outcome.UNKNOWN: "observed healthy, but the restart was not confirmed",
                Outcome.UNHEALTHY_AFTER_RESTART: f"not healthy within verify_timeout "
                f"(state={snap.state} health={snap.health or 'none'})",
            }[outcome]
            finish(healer, p, outcome, detail, now)


def finish(healer: Healer, p: PendingVerify, outcome: Outcome, detail: str, now: datetime) -> None:
    with healer._lock:
        if healer.pending.get(p.container) is not p:
            return
        del healer.pending[p.container]
    incident = healer.store.get_incident(p.incident_id) if p.incident_id is not None else None
    notes: tuple[notifications.Notification, ...] = ()
    if incident is not None and outcome is Outcome.UNHEALTHY_AFTER_RESTART:
        note = notifications.attempt(incident, p.attempt, p.max_attempts, outcome, detail, now)
        notes = healer.notes(incident, note)
    healer.store.record_outcome(p.action_id, outcome, detail, now, notes)
    healer.metrics.restarts_total.labels(container=p.container, outcome=str(outcome)).inc()
    level = logging.INFO if outcome is Outcome.SUCCEEDED else logging.WARNING
    log.log(
        level, "restart verified", extra=kv(container=p.container, outcome=outcome, detail=detail)
    )
    if incident is None:
        return
    if outcome in (Outcome.SUCCEEDED, Outcome.UNKNOWN) and incident.is_open:
        reason = "healthy after restart" if outcome is Outcome.SUCCEEDED else "observed healthy"
        change = incidents.record_recovery(incident, reason, now)
        note = notifications.resolved(change.incident, reason, now)
        healer._save(change, healer.notes(incident, note))
        healer._healthy_since.setdefault(p.container, now)
        # Seen healthy: the storm breaker and dependencies stop counting it as unhealthy now,
        # not at the next sweep (a few quick, separate failures are no storm).
        for recovered in healer.hooks.recovered:
            recovered(p.container)
        if outcome is Outcome.SUCCEEDED:
            for healed in healer.hooks.healed:
                healed(p.container)
    elif outcome is Outcome.PERMANENT_FAILURE:
        healer._gone(incident, detail, now)
    healer.refresh_incident_gauge()


def reconcile(healer: Healer) -> int:
    """On start-up: give every action a crash left without an outcome one, and resume
    verifications that were pending. Returns how many actions were reconciled."""
    host = healer.settings.host
    now = healer.clock.now()
    count = 0
    for action in healer.store.unfinished_actions(host):
        count += 1
        if action.outcome is Outcome.RESTARTED:
            # Restarted, but Guardian died before verifying: verify now, honestly.
            snap = healer.engine.inspect(action.container_id)
            if snap is not None:
                _resume(healer, action.id or 0, action.incident_id, snap, action.requested_at)
                continue
        if action.kind != "restart":
            healer.store.record_outcome(
                action.id or 0, Outcome.INTERRUPTED, "Guardian stopped", now
            )
            continue
        snap = healer.engine.inspect(action.container_id)
        if snap is None:
            healer.store.record_outcome(
                action.id or 0, Outcome.PERMANENT_FAILURE, "container gone after restart", now
            )
            incident = healer.store.get_incident(action.incident_id or 0)
            if incident is not None and incident.state is not IncidentState.CLOSED:
                healer._gone(incident, "container gone", now)
            continue
        restarted = snap.started_at is not None and snap.started_at >= action.requested_at
        detail = (
            "Guardian stopped mid-restart; State.StartedAt shows the container restarted"
            if restarted
            else "Guardian stopped before the restart completed; the container did not restart"
        )
        healer.store.record_outcome(action.id or 0, Outcome.INTERRUPTED, detail, now)
        if not restarted:
            healer.metrics.restarts_total.labels(
                container=action.container, outcome=str(Outcome.INTERRUPTED)
            ).inc()
        log.warning(
            "reconciled unfinished action", extra=kv(container=action.container, detail=detail)
        )
        if restarted:
            _resume(healer, action.id or 0, action.incident_id, snap, action.requested_at)
    return count


def _resume(
    healer: Healer, action_id: int, incident_id: int | None, snap: ContainerSnapshot, at: datetime
) -> None:
    with healer._lock:
        healer.pending[snap.name] = PendingVerify(
            action_id,
            incident_id,
            snap.name,
            snap.id,
            at,
            at + healer.settings.verify_timeout,
            None,
        )
