"""PagerDutyNotifier: Events API v2; dedup_key = Guardian's incident (host-qualified), so
trigger / acknowledge / resolve land on one PagerDuty incident and resends are harmless.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

import requests

from guardian.adapters.notify.transport import Reply, classify, post
from guardian.core.outbound.delivery import DELIVERED, Result
from guardian.core.outbound.notifications import NOTICES, Kind, Notification

# A test resolves an incident that never was: the routing key is checked, nobody is paged.
_ACTION = {Kind.ACKNOWLEDGED: "acknowledge", Kind.RESOLVED: "resolve", Kind.TEST: "resolve"}
_ESCALATIONS = frozenset({Kind.GAVE_UP, Kind.REMINDER, Kind.ACKNOWLEDGED, Kind.RESOLVED})


def dedup_key(n: Notification) -> str:
    return f"guardian/{n.host}/{'test' if n.kind is Kind.TEST else n.incident_id}"


class PagerDutyNotifier:
    idempotent = True
    max_batch = 1

    def __init__(
        self,
        routing_key: str,
        url: str,
        timeout: timedelta,
        events: str = "escalations",
        session: requests.Session | None = None,
        name: str = "pagerduty",
    ) -> None:
        self.name = name
        self.min_interval = timedelta(0)
        self._key = routing_key
        self._url = url
        self._timeout = timeout
        self._events = events
        self._session = session or requests.Session()

    def send(self, batch: Sequence[Notification]) -> Result:
        n = batch[0]
        if (n.notice and n.kind is not Kind.TEST) or (
            self._events == "escalations" and n.kind not in _ESCALATIONS | NOTICES
        ):
            return DELIVERED  # only escalations page a human; healing alone does not
        doc = {
            "routing_key": self._key,
            "event_action": _ACTION.get(n.kind, "trigger"),
            "dedup_key": dedup_key(n),
            "payload": {
                "summary": n.headline[:1024],
                "source": n.host,
                "severity": "critical" if n.kind in (Kind.GAVE_UP, Kind.REMINDER) else "warning",
                "component": n.container,
                "group": n.incident_type,
                "custom_details": {"state": n.state, "detail": n.detail, "next": n.next_step},
            },
        }
        reply = post(self._session, self._url, self._timeout, body=json.dumps(doc).encode())
        return classify(reply) if isinstance(reply, Reply) else reply
