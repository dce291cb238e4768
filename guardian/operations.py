"""What operators can do, shared by the CLI and the HTTP API: steer incidents, silence containers.

Every incident change is judged by core.incidents; this module reads the store, writes with a
compare-and-set so a concurrent daemon update is never lost, and builds the plain-dict views
that the CLI prints as tables or JSON and the API returns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from guardian.core import incidents, notifications
from guardian.core.labels import opted_in
from guardian.core.model import (
    Incident,
    IncidentState,
    RemediationAction,
    Silence,
    Transition,
    Verdict,
)
from guardian.healer import Healer
from guardian.logs import kv
from guardian.ports import Clock, Store

log = logging.getLogger("guardian.operations")

MAX_NAME = 100
MAX_REASON = 1000
MAX_CONTAINER = 255
MAX_SILENCE = timedelta(days=30)

# The incident changes people may ask for, by the verb the CLI and the API use.
HUMAN_CHANGES = {
    "ack": IncidentState.ACKNOWLEDGED,
    "resolve": IncidentState.RESOLVED,
    "close": IncidentState.CLOSED,
}


class NotFound(Exception):
    """The incident or silence asked for does not exist; the message is meant for people."""


class BadRequest(Exception):
    """Input that cannot be used (empty name, overlong reason, ...); the message is for people."""


def on_acknowledged(store: Store, incident: Incident, actor: str, now: datetime) -> None:
    """The single place an acknowledgement is announced, whoever made it (CLI or API).

    The "acknowledged" notification itself is queued with the transition (see _announce).
    """
    log.info(
        "incident acknowledged",
        extra=kv(incident=incident.id, container=incident.container, by=actor),
    )


def _announce(
    incident: Incident, actor: str, reason: str, now: datetime
) -> tuple[notifications.Notification, ...]:
    """What a person's change tells the notification channels (queued in its transaction)."""
    if incident.state is IncidentState.ACKNOWLEDGED:
        return (notifications.acknowledged(incident, actor, now),)
    if incident.state is IncidentState.RESOLVED:
        why = f"resolved by {actor}" + (f": {reason}" if reason else "")
        return (notifications.resolved(incident, why, now),)
    return ()


def _text(what: str, value: str, limit: int, required: bool = True) -> str:
    value = value.strip()
    if required and not value:
        raise BadRequest(f"{what} is required")
    if len(value) > limit:
        raise BadRequest(f"{what} is longer than {limit} characters")
    if any(ord(c) < 32 for c in value):
        raise BadRequest(f"{what} must not contain control characters")
    return value


@dataclass
class Operator:
    """Operator actions against one host's store, with the clock as a port."""

    store: Store
    clock: Clock
    host: str

    def incident(self, incident_id: int) -> Incident:
        incident = self.store.get_incident(incident_id)
        if incident is None or incident.host != self.host:
            raise NotFound(f"incident {incident_id} not found")
        return incident

    def change(self, incident_id: int, verb: str, actor: str, reason: str = "") -> Incident:
        """Acknowledge, resolve or close an incident; raises InvalidTransition when refused."""
        to = HUMAN_CHANGES[verb]
        actor = _text("the name of who does it (--by)", actor, MAX_NAME)
        reason = _text("the reason", reason, MAX_REASON, required=False)
        for _ in range(3):
            incident = self.incident(incident_id)
            now = self.clock.now()
            change = incidents.by_person(incident, to, actor, reason, now)
            saved = self.store.save_state_change(
                change, incident.state, _announce(change.incident, actor, reason, now)
            )
            if saved is None:
                continue  # the daemon changed it meanwhile: judge again on the fresh state
            t = change.transitions[0]
            log.info(
                "incident transition",
                extra=kv(
                    incident=saved.id,
                    container=saved.container,
                    from_state=t.from_state,
                    to_state=t.to_state,
                    by=actor,
                    reason=reason,
                ),
            )
            if to is IncidentState.ACKNOWLEDGED:
                on_acknowledged(self.store, saved, actor, now)
            return saved
        raise BadRequest(f"incident {incident_id} keeps changing; try again")

    def silence(self, container: str, duration: timedelta, reason: str, by: str) -> Silence:
        container = _text("the container name", container, MAX_CONTAINER)
        reason = _text("the reason (--reason)", reason, MAX_REASON)
        by = _text("the name of who does it (--by)", by, MAX_NAME)
        if not timedelta(0) < duration <= MAX_SILENCE:
            raise BadRequest("a silence lasts more than 0s and at most 30d")
        now = self.clock.now()
        silence = self.store.add_silence(
            Silence(None, self.host, container, now, now + duration, reason, by)
        )
        log.info(
            "container silenced",
            extra=kv(container=container, until=silence.until.isoformat(), by=by, reason=reason),
        )
        return silence

    def unsilence(self, container: str, by: str) -> Silence:
        container = _text("the container name", container, MAX_CONTAINER)
        by = _text("the name of who does it (--by)", by, MAX_NAME)
        ended = self.store.end_silence(self.host, container, by, self.clock.now())
        if ended is None:
            raise NotFound(f"no silence in force for {container}")
        log.info("silence lifted", extra=kv(container=container, by=by))
        return ended

    def timeline(self, incident: Incident) -> list[dict[str, Any]]:
        """Every transition and action of an incident, oldest first, with actor and reason."""
        assert incident.id is not None
        timed = [(t.at, transition_view(t)) for t in self.store.transitions(incident.id)]
        timed += [
            (a.requested_at, timeline_action(a))
            for a in self.store.actions(self.host, incident.container)
            if a.incident_id == incident.id
        ]
        # Stable on the full timestamps: the views show whole seconds only.
        return [entry for _, entry in sorted(timed, key=lambda pair: pair[0])]


# -- views: flat dicts of strings, numbers and None, identical for tables and JSON -----------


def when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value is not None else None


def incident_view(i: Incident) -> dict[str, Any]:
    return {
        "id": i.id,
        "container": i.container,
        "type": str(i.type),
        "state": str(i.state),
        "opened_at": when(i.opened_at),
        "last_seen": when(i.last_seen),
        "occurrences": i.occurrences,
        "escalated": i.escalated,
        "resolved_by": i.resolved_by,
        "resolved_at": when(i.resolved_at),
        "closed_at": when(i.closed_at),
        "close_reason": i.close_reason,
        "detail": i.detail,
    }


def action_view(a: RemediationAction) -> dict[str, Any]:
    return {
        "id": a.id,
        "incident": a.incident_id,
        "container": a.container,
        "kind": a.kind,
        "requested_at": when(a.requested_at),
        "attempt": a.attempt,
        "reason": a.reason,
        "outcome": str(a.outcome) if a.outcome is not None else None,
        "finished_at": when(a.finished_at),
        "detail": a.detail,
    }


def silence_view(s: Silence, now: datetime) -> dict[str, Any]:
    return {
        "container": s.container,
        "until": when(s.until),
        "reason": s.reason,
        "by": s.created_by,
        "created_at": when(s.created_at),
        "active": s.active(now),
        "ended_at": when(s.ended_at),
        "ended_by": s.ended_by,
    }


def transition_view(t: Transition) -> dict[str, Any]:
    frm = str(t.from_state) if t.from_state is not None else "opened"
    return {
        "at": when(t.at),
        "actor": t.actor,
        "event": f"{frm} -> {t.to_state}",
        "reason": t.reason,
        "detail": "",
    }


def timeline_action(a: RemediationAction) -> dict[str, Any]:
    outcome = str(a.outcome) if a.outcome is not None else "pending"
    return {
        "at": when(a.requested_at),
        "actor": incidents.GUARDIAN,
        "event": f"{a.kind} #{a.attempt}: {outcome}" if a.kind == "restart" else a.kind,
        "reason": a.reason,
        "detail": a.detail,
    }


def container_rows(healer: Healer) -> list[dict[str, Any]]:
    """Watched containers with their health, open incidents and what decide() says right now.

    The next allowed restart and the reason it is held back come from the real decision point
    (Healer.decide), never from a copy of its rules. Raises EngineUnavailable.
    """
    settings = healer.settings
    snaps = healer.engine.list_containers(settings.watch_label)
    open_by_name: dict[str, list[Incident]] = {}
    for i in healer.store.open_incidents(settings.host):
        open_by_name.setdefault(i.container, []).append(i)
    rows = []
    now = healer.clock.now()
    for snap in sorted(snaps, key=lambda s: s.name):
        if not opted_in(snap.labels, settings.watch_label):
            continue
        decision = healer.decide(snap.name, healer.rules(snap), now)
        if decision.verdict is Verdict.RESTART:
            next_restart: str | None = "now"
        else:
            next_restart = when(decision.retry_at)
        silence = healer.store.active_silence(settings.host, snap.name, now)
        rows.append(
            {
                "container": snap.name,
                "state": snap.state,
                "health": snap.health or "none",
                "incidents": " ".join(f"#{i.id}:{i.state}" for i in open_by_name.get(snap.name, []))
                or None,
                "next_restart": next_restart,
                "held_back": None if decision.restart else str(decision.reason),
                "silenced_until": when(silence.until) if silence else None,
            }
        )
    return rows
