"""Acknowledging an incident (for the CLI and the HTTP API): the transition and its
"acknowledged" notification are written in one transaction."""

from __future__ import annotations

from datetime import datetime

from guardian.core import incidents, notifications
from guardian.core.model import Incident, IncidentState
from guardian.ports import Store


class UnknownIncident(LookupError):
    """No incident with that id; the message is one line for people."""


def acknowledge(
    store: Store, incident_id: int, actor: str, reason: str, now: datetime, notify: bool = True
) -> Incident:
    """Move incident `incident_id` to acknowledged by `actor` and queue the "acknowledged"
    notification (unless `notify` is False, e.g. for a muted container).

    Raises UnknownIncident, or incidents.InvalidTransition with a message for people.
    """
    incident = store.get_incident(incident_id)
    if incident is None:
        raise UnknownIncident(f"no incident {incident_id}")
    changed, t = incidents.transition(incident, IncidentState.ACKNOWLEDGED, actor, reason, now)
    note = notifications.acknowledged(changed, actor, now)
    return store.save_incident(incidents.IncidentChange(changed, (t,)), (note,) if notify else ())
