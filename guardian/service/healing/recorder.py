"""Writing incident changes: the one transition writer, the one transition log line, and who
hears of a change (a label can mute a container; an open storm speaks for new openings).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from guardian.core import incidents
from guardian.core.model import HOST_PROBLEMS, Incident, IncidentState, Transition
from guardian.core.outbound import notifications
from guardian.core.outbound.notifications import Kind, Notification
from guardian.logs import kv
from guardian.ports import Store
from guardian.service.context import LoopContext

log = logging.getLogger("guardian.incidents")


def log_transition(incident: Incident, t: Transition) -> None:
    """The log line of every incident transition, whoever made it."""
    log.info(
        "incident transition",
        extra=kv(
            incident=incident.id,
            container=incident.container,
            type=incident.type,
            from_state=t.from_state,
            to_state=t.to_state,
            by=t.actor,
            reason=t.reason,
        ),
    )


def save_logged(
    store: Store, change: incidents.IncidentChange, notes: tuple[Notification, ...] = ()
) -> Incident:
    """The one transition writer: the incident, its transitions and the notifications it causes
    in one transaction, then one log line per transition."""
    saved = store.save_incident(change, notes)
    for t in change.transitions:
        log_transition(saved, t)
    return saved


class Recorder:
    """Saves the loop's incident changes with the notifications they cause (one transaction)."""

    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx

    def notes(self, container: str, *notes: Notification) -> tuple[Notification, ...]:
        """The notifications to queue about `container`: none when its label mutes it; no
        opening while a storm incident that it made is open (the storm's notification speaks
        for it; the store then queues none of its later news but escalations, see
        insert_notifications)."""
        if self.ctx.state.routing.muted(container):
            return ()
        receivers = self.ctx.state.routing.receivers_of(container)
        notes = tuple(replace(n, receivers=receivers) for n in notes)
        if self.ctx.pipeline.storm_speaks_for(container):
            return tuple(n for n in notes if n.kind is not Kind.OPENED)
        return notes

    def save(
        self, change: incidents.IncidentChange, notes: tuple[Notification, ...] = ()
    ) -> Incident:
        return save_logged(self.ctx.store, change, notes)

    def recovered(self, incident: Incident, reason: str, now: datetime) -> Incident:
        """Resolve an open incident whose container was seen well, telling who was told."""
        change = incidents.record_recovery(incident, reason, now)
        note = notifications.resolved(change.incident, reason, now)
        return self.save(change, self.notes(incident.container, note))

    def gone(self, incident: Incident, reason: str, now: datetime) -> None:
        """The container no longer exists: resolve and close its incident with that reason."""
        self._retire(incident, f"container removed: {reason}", "container_gone", now)

    def replaced(self, incident: Incident, new_id: str, now: datetime) -> None:
        """Another container now carries the incident's name: resolve and close the incident
        as replaced; the resolution names the new container (the link in the timeline)."""
        why = f"container replaced: {incident.container} is now container {new_id[:12]}"
        self._retire(incident, why, "container_replaced", now)

    def _retire(self, incident: Incident, why: str, close_reason: str, now: datetime) -> None:
        if incident.state is IncidentState.CLOSED:
            # Retired already: replaced by `docker compose up` while its restart was verified,
            # the verdict then finds the old container gone.
            return
        if incident.is_open:
            incident = self.recovered(incident, why, now)
        self.close(incident, close_reason, now)

    def close(self, incident: Incident, reason: str, now: datetime) -> None:
        changed, t = incidents.transition(
            incident, IncidentState.CLOSED, incidents.GUARDIAN, reason, now
        )
        self.save(incidents.IncidentChange(changed, (t,)))

    def refresh_gauges(self) -> None:
        """Recount open incidents, and the containers Guardian gave up on, from the store."""
        counts: dict[tuple[str, str], int] = {}
        exhausted: set[str] = set()
        for incident in self.ctx.store.open_incidents(self.ctx.settings.host):
            key = (str(incident.type), str(incident.state))
            counts[key] = counts.get(key, 0) + 1
            # A storm's escalation is no container's exhausted restarts.
            if incident.escalated and incident.is_open and incident.type not in HOST_PROBLEMS:
                exhausted.add(incident.container)
        self.ctx.metrics.open_incidents(counts, exhausted)
