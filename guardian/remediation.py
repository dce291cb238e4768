"""Acting on a decision and recording it: restart, give up, or note a held-back restart.

A mixin of the Healer (healer.py observes and decides; this module acts). Every state change of
an incident goes through core.incidents; every action is written before and after it happens.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from guardian.core import incidents, notifications
from guardian.core.model import (
    ContainerSnapshot,
    Decision,
    Incident,
    IncidentState,
    Outcome,
    Reason,
    RemediationAction,
)
from guardian.core.notifications import Notification
from guardian.hooks import Hooks
from guardian.logs import kv
from guardian.metrics import Metrics
from guardian.ports import Clock, Engine, Store

if TYPE_CHECKING:
    from guardian.healer import Assessment, HealerSettings

log = logging.getLogger("guardian.healer")

# Reasons that never change while the inputs stay the same: record them once per incident.
_QUIET_WAITS = frozenset({Reason.IN_FLIGHT})


@dataclass
class PendingVerify:
    action_id: int
    incident_id: int | None
    container: str
    container_id: str
    restarted_at: datetime
    deadline: datetime
    previous_started_at: datetime | None
    attempt: int = 0
    max_attempts: int = 0


class Remediation:
    """The acting half of the Healer; the attributes below are set by Healer.__init__."""

    engine: Engine
    store: Store
    clock: Clock
    settings: HealerSettings
    metrics: Metrics
    hooks: Hooks
    pending: dict[str, PendingVerify]
    _lock: threading.RLock
    _restarting: set[str]

    if TYPE_CHECKING:

        def notes(self, incident: Incident, *notes: Notification) -> tuple[Notification, ...]: ...

    def _restart(self, a: Assessment, incident: Incident, decision: Decision) -> None:
        snap, host = a.snapshot, self.settings.host
        now = self.clock.now()
        try:
            incident = self._save(incidents.start_remediation(incident, "restarting", now))
            action_id = self.store.record_intent(
                RemediationAction(
                    None,
                    incident.id,
                    host,
                    snap.name,
                    snap.id,
                    "restart",
                    now,
                    str(decision.reason),
                    attempt=decision.attempt,
                )
            )
        except Exception:
            with self._lock:
                self._restarting.discard(snap.name)
            raise
        if a.detected_at is not None:
            self.metrics.detection_to_restart.observe(
                max(0.0, (now - a.detected_at).total_seconds())
            )
        log.warning(
            "restarting container",
            extra=kv(
                container=snap.name,
                incident=incident.id,
                attempt=decision.attempt,
                max_attempts=decision.max_attempts,
                stop_timeout=int(a.rules.stop_timeout.total_seconds()),
            ),
        )
        try:
            outcome = self.engine.restart(snap.id, a.rules.stop_timeout, snap.started_at)
            if outcome.outcome is Outcome.TRANSIENT_FAILURE and outcome.retryable:
                # One retry on identical input: the request never reached the engine.
                outcome = self.engine.restart(snap.id, a.rules.stop_timeout, snap.started_at)
        finally:
            with self._lock:
                self._restarting.discard(snap.name)
        done = self.clock.now()
        self.metrics.restart_duration.observe((done - now).total_seconds())
        log.info(
            "restart finished",
            extra=kv(container=snap.name, outcome=outcome.outcome, detail=outcome.detail),
        )
        note = notifications.attempt(
            incident, decision.attempt, decision.max_attempts, outcome.outcome, outcome.detail, done
        )
        self.store.record_outcome(
            action_id, outcome.outcome, outcome.detail, done, self.notes(incident, note)
        )
        match outcome.outcome:
            case Outcome.RESTARTED | Outcome.UNKNOWN:
                # UNKNOWN is never repeated blindly: verification observes what really happened.
                with self._lock:
                    self.pending[snap.name] = PendingVerify(
                        action_id,
                        incident.id,
                        snap.name,
                        snap.id,
                        now,
                        done + self.settings.verify_timeout,
                        snap.started_at,
                        decision.attempt,
                        decision.max_attempts,
                    )
            case Outcome.PERMANENT_FAILURE:
                self.metrics.restarts_total.labels(
                    container=snap.name, outcome=str(outcome.outcome)
                ).inc()
                self._gone(incident, outcome.detail, done)
            case _:
                self.metrics.restarts_total.labels(
                    container=snap.name, outcome=str(outcome.outcome)
                ).inc()

    def _give_up(self, incident: Incident, decision: Decision) -> None:
        if incident.escalated:
            return
        now = self.clock.now()
        change = incidents.escalate(incident)
        note = notifications.gave_up(change.incident, decision, now)
        incident = self._save(change, self.notes(incident, note))
        self.store.record_intent(
            RemediationAction(
                None,
                incident.id,
                incident.host,
                incident.container,
                incident.container_id,
                "decision",
                now,
                str(decision.reason),
                outcome=Outcome.RETRY_EXHAUSTED,
                detail=f"{decision.max_attempts} attempts used; next allowed at "
                f"{decision.retry_at.isoformat() if decision.retry_at else 'never'}",
                finished_at=now,
                attempt=decision.attempt,
            )
        )
        self.metrics.restarts_total.labels(
            container=incident.container, outcome="retry_exhausted"
        ).inc()
        log.error(
            "giving up: attempts exhausted, incident escalated",
            extra=kv(
                container=incident.container,
                incident=incident.id,
                attempts=decision.attempt,
                retry_at=decision.retry_at,
            ),
        )

    def _note_decision(
        self, incident: Incident, snap: ContainerSnapshot, decision: Decision
    ) -> None:
        """Record a held-back restart once per incident and reason, not on every sweep."""
        if decision.reason in _QUIET_WAITS or incident.id is None:
            return
        last = self.store.last_action(incident.id)
        if last is not None and last.kind == "decision" and last.reason == str(decision.reason):
            return
        now = self.clock.now()
        self.store.record_intent(
            RemediationAction(
                None,
                incident.id,
                incident.host,
                snap.name,
                snap.id,
                "decision",
                now,
                str(decision.reason),
                outcome=Outcome.POLICY_DENIED,
                detail=(
                    f"{decision.verdict}; retry at {decision.retry_at.isoformat()}"
                    if decision.retry_at
                    else str(decision.verdict)
                )
                + (f"; {decision.detail}" if decision.detail else ""),
                finished_at=now,
                attempt=decision.attempt,
            )
        )
        log.info(
            "restart held back",
            extra=kv(
                container=snap.name,
                incident=incident.id,
                verdict=decision.verdict,
                reason=decision.reason,
                retry_at=decision.retry_at,
            ),
        )

    def _gone(self, incident: Incident, reason: str, now: datetime) -> None:
        """The container no longer exists: resolve and close its incident with that reason."""
        if incident.is_open:
            change = incidents.record_recovery(incident, f"container removed: {reason}", now)
            note = notifications.resolved(change.incident, f"container removed: {reason}", now)
            incident = self._save(change, self.notes(incident, note))
        self._close(incident, "container_gone", now)

    def _close(self, incident: Incident, reason: str, now: datetime) -> None:
        changed, t = incidents.transition(
            incident, IncidentState.CLOSED, incidents.GUARDIAN, reason, now
        )
        self._save(incidents.IncidentChange(changed, (t,)))

    def _save(
        self, change: incidents.IncidentChange, notes: tuple[Notification, ...] = ()
    ) -> Incident:
        saved = self.store.save_incident(change, notes)
        for t in change.transitions:
            self._log_transition(saved, t.from_state, t.to_state, t.reason)
        return saved

    def _log_transition(self, incident: Incident, frm: object, to: object, reason: str) -> None:
        log.info(
            "incident transition",
            extra=kv(
                incident=incident.id,
                container=incident.container,
                type=incident.type,
                from_state=frm,
                to_state=to,
                reason=reason,
            ),
        )
