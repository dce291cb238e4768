"""What `guardian status` and `GET /api/v1/containers` show: the watched containers, their
open incidents and what decide() says right now.

The containers are the sweep's own (Healer.watched: the one "watched" predicate), and the next
allowed restart comes from the real decision point, never from a copy of its rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from guardian.core.model import Incident, Silence, Verdict
from guardian.service.healer import Healer


@dataclass(frozen=True)
class ContainerStatus:
    name: str
    state: str
    health: str | None
    incidents: tuple[Incident, ...]
    restart_now: bool
    retry_at: datetime | None
    held_back: str | None  # the reason decide() holds a restart back
    silence: Silence | None


def container_status(healer: Healer) -> list[ContainerStatus]:
    """Raises EngineUnavailable when the engine does not answer."""
    ctx = healer.ctx
    host = ctx.settings.host
    _, watched = healer.watched()
    open_by_name: dict[str, list[Incident]] = {}
    for i in ctx.store.open_incidents(host):
        open_by_name.setdefault(i.container, []).append(i)
    now = ctx.clock.now()
    out = []
    for snap in sorted(watched, key=lambda s: s.name):
        decision = healer.remediator.decisions.decision_for(snap, ctx.rules.of(snap), now)
        out.append(
            ContainerStatus(
                snap.name,
                snap.state,
                snap.health,
                tuple(open_by_name.get(snap.name, [])),
                decision.verdict is Verdict.RESTART,
                decision.retry_at,
                None if decision.restart else str(decision.reason),
                ctx.store.active_silence(host, snap.name, now),
            )
        )
    return out
