"""What `guardian status` and `GET /api/v1/containers` show: the watched containers, their
open incidents and what decide() says right now.

The containers are the sweep's own (Healer.watched: the one "watched" predicate), and the next
allowed restart comes from the real decision point, never from a copy of its rules. A read:
nothing here changes the loop's state (Healer.look).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from guardian.core.model import Decision, Incident, Silence
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
    decision: Decision | None = None  # what decide() said (attempts used of max_attempts)


def container_status(healer: Healer) -> list[ContainerStatus]:
    """Raises EngineUnavailable when the engine does not answer."""
    ctx = healer.ctx
    host = ctx.settings.host
    _, watched = healer.watched()
    open_by_name: dict[str, list[Incident]] = {}
    for i in ctx.store.open_incidents(host):
        open_by_name.setdefault(i.container, []).append(i)
    now = ctx.clock.now()
    # One query for every silence in force, not one per container (the status page reads
    # this on every change it shows).
    silenced = {s.container: s for s in ctx.store.silences(host, now)}
    out = []
    for snap in sorted(watched, key=lambda s: s.name):
        # Judged as the sweep judges it, changing nothing: a healthy or skipped container has
        # no next restart; a held-back one says why (report-only, verifying, cooldown, ...).
        a = healer.look(snap)
        decision = a.decision
        held_back = None
        if a.result.skipped is not None:
            held_back = f"skipped: {a.result.skipped}"
        elif decision is not None and not decision.restart:
            held_back = str(decision.reason)
        out.append(
            ContainerStatus(
                snap.name,
                snap.state,
                snap.health,
                tuple(open_by_name.get(snap.name, [])),
                decision is not None and decision.restart,
                decision.retry_at if decision is not None else None,
                held_back,
                silenced.get(snap.name),
                decision,
            )
        )
    return out
