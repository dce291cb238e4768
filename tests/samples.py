"""Sample values shared by the notification channel tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from guardian.core.model import Incident, IncidentState, ProblemType
from guardian.core.outbound import notifications
from tests.fakes import T0

S = timedelta(seconds=1)
INCIDENT = Incident(
    7,
    "vm1",
    "web",
    "c" * 64,
    ProblemType.UNHEALTHY,
    IncidentState.ACTIVE,
    T0,
    T0,
    detail="curl: (7) Failed to connect   to localhost port 80",
)


def opened(incident=INCIDENT, nid=1):
    n = notifications.opened(incident, None, T0)
    return replace(n, id=nid)
