"""AlertmanagerNotifier: the Alertmanager API v2 client contract.

Labels are the alert's identity (alertname, instance, container, incident_type, severity), named
like the rule alerts' so one routing tree covers both: `GuardianIncident` (severity warning) while
Guardian is at it, `GuardianIncidentEscalated` (critical) once it gave up; an escalation ends the
first alert. A firing alert is re-sent every `resend_interval` with endsAt in the future, so it
expires by itself if Guardian dies; a resolved incident is sent once with endsAt = now.
Alertmanager deduplicates, so resends are safe. Firing alerts are kept in the store (notify_refs)
and survive restarts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import requests

from guardian.adapters.notify.transport import Reply, classify, post
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.core.outbound.delivery import DELIVERED, Result
from guardian.core.outbound.notifications import Kind, Notification
from guardian.logs import kv
from guardian.ports import Clock

log = logging.getLogger("guardian.notify")
ALERTNAME = "GuardianIncident"
ESCALATED_ALERTNAME = "GuardianIncidentEscalated"
_ESCALATIONS = frozenset({Kind.GAVE_UP, Kind.REMINDER})


def labels(n: Notification) -> dict[str, str]:
    escalated = n.escalated or n.kind in _ESCALATIONS
    return {
        "alertname": ESCALATED_ALERTNAME if escalated else ALERTNAME,
        "severity": "critical" if escalated else "warning",
        "instance": n.host,
        "container": n.container,
        "incident_type": n.incident_type,
    }


class AlertmanagerNotifier:
    idempotent = True
    max_batch = 100

    def __init__(
        self,
        url: str,
        outbox: SqliteOutbox,
        clock: Clock,
        timeout: timedelta,
        resend_interval: timedelta = timedelta(seconds=60),
        session: requests.Session | None = None,
        name: str = "alertmanager",
    ) -> None:
        self.name = name
        self.min_interval = timedelta(0)
        self._url = url.rstrip("/") + "/api/v2/alerts"
        self._outbox = outbox
        self._clock = clock
        self._timeout = timeout
        self.resend_interval = resend_interval
        self._session = session or requests.Session()
        self._last_refresh: datetime | None = None

    def _ends(self, now: datetime) -> str:
        # Four resend intervals: a missed resend or two does not resolve the alert.
        return (now + 4 * self.resend_interval).isoformat()

    def _post(self, alerts: list[dict[str, Any]]) -> Result:
        reply = post(self._session, self._url, self._timeout, body=json.dumps(alerts).encode())
        return classify(reply) if isinstance(reply, Reply) else reply

    def send(self, batch: Sequence[Notification]) -> Result:
        now = self._clock.now()
        alerts: list[dict[str, Any]] = []
        firing: list[tuple[Notification, dict[str, Any]]] = []
        resolved: list[Notification] = []
        sent: dict[int, dict[str, Any]] = {}  # an incident's latest alert in this batch
        for n in batch:
            if n.notice and n.kind is not Kind.TEST:
                continue  # an alert is an incident that fires; Guardian's own notices are none
            known = self._outbox.ref(self.name, n.incident_id or 0)
            starts = known[0] if known else n.at.isoformat()
            previous = sent.get(n.incident_id or 0) or (
                json.loads(known[1]) if known and known[1] else None
            )
            these = labels(n)
            if previous is not None and previous["labels"] != these:
                if n.firing:
                    # Escalated: a new identity; the first alert ends, it does not linger.
                    alerts.append({**previous, "endsAt": now.isoformat()})
                else:
                    these = previous["labels"]  # resolve the alert that fires
            alert = {
                "labels": these,
                "annotations": {
                    "summary": n.headline,
                    "description": n.text(),
                    "state": n.state + (" (escalated)" if these["severity"] == "critical" else ""),
                },
                "startsAt": starts,
                "endsAt": self._ends(now) if n.firing else now.isoformat(),
            }
            sent[n.incident_id or 0] = alert
            alerts.append(alert)
            if n.firing:
                firing.append((n, alert))
            else:
                resolved.append(n)
        if not alerts:
            return DELIVERED
        result = self._post(alerts)
        if result.ok:
            for n, alert in firing:
                self._outbox.set_ref(
                    self.name, n.incident_id or 0, str(alert["startsAt"]), json.dumps(alert)
                )
            for n in resolved:
                self._outbox.drop_ref(self.name, n.incident_id or 0)
        return result

    def next_refresh_at(self) -> datetime | None:
        """When refresh() next has work (the delivery worker sleeps until then): a resend
        interval after the last one while an alert fires; None while none does."""
        if not self._outbox.refs(self.name):
            return None
        if self._last_refresh is None:
            return self._clock.now()
        return self._last_refresh + self.resend_interval

    def refresh(self) -> None:
        """Re-send every firing alert once per resend_interval, with a fresh endsAt."""
        now = self._clock.now()
        if self._last_refresh is not None and now - self._last_refresh < self.resend_interval:
            return
        self._last_refresh = now
        alerts, ended = [], []
        for incident_id, _starts, data in self._outbox.refs(self.name):
            alert = json.loads(data)
            incident = self._outbox.incident(incident_id)
            if incident is None or not incident.is_open:
                # Resolved without a message here (e.g. muted meanwhile): end it, do not
                # keep it firing for ever.
                alert["endsAt"] = now.isoformat()
                ended.append(incident_id)
            else:
                alert["endsAt"] = self._ends(now)
            alerts.append(alert)
        if alerts:
            result = self._post(alerts)
            if not result.ok:
                log.debug("alert resend failed", extra=kv(channel=self.name, reason=result.reason))
                return
            for incident_id in ended:
                self._outbox.drop_ref(self.name, incident_id)
