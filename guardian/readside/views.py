"""Views for people and scripts: flat dicts of strings, numbers and None, identical for the CLI's
tables, its --json and the HTTP API. Free text is shown redacted and without control sequences,
whatever an older version stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from guardian.core import incidents
from guardian.core.model import (
    ActionKind,
    Approval,
    Incident,
    RecordedEvent,
    RemediationAction,
    Silence,
    Transition,
)
from guardian.core.redaction import redact_patterns, scrub_url, strip_controls

if TYPE_CHECKING:  # the service loads only for the commands that read containers
    from guardian.ports import EngineIdentity
    from guardian.readside.status import ContainerStatus


def when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value is not None else None


def text(value: str | None) -> str | None:
    """Free text fit to show: redacted by pattern, no terminal control sequences."""
    return redact_patterns(strip_controls(value)) if value else value


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
        "close_reason": text(i.close_reason),
        "detail": text(i.detail),
    }


def action_view(a: RemediationAction) -> dict[str, Any]:
    return {
        "id": a.id,
        "incident": a.incident_id,
        "container": a.container,
        "kind": a.kind,
        "requested_at": when(a.requested_at),
        "attempt": a.attempt,
        "reason": text(a.reason),
        "outcome": str(a.outcome) if a.outcome is not None else None,
        "finished_at": when(a.finished_at),
        "detail": text(a.detail),
    }


def event_view(e: RecordedEvent) -> dict[str, Any]:
    """An event of the feed: its free text (reasons, details) shown as every other view shows
    it; the times in its fields as the store keeps them (RFC 3339)."""
    return {
        "cursor": e.cursor,
        "kind": e.kind,
        "at": when(e.at),
        "container": e.container,
        "incident": e.incident_id,
        "fields": {k: text(v) if isinstance(v, str) else v for k, v in e.fields.items()},
    }


def silence_view(s: Silence, now: datetime) -> dict[str, Any]:
    return {
        "container": s.container,
        "until": when(s.until),
        "reason": text(s.reason),
        "by": s.created_by,
        "created_at": when(s.created_at),
        "active": s.active(now),
        "ended_at": when(s.ended_at),
        "ended_by": s.ended_by,
    }


def maintenance_view(statuses: Iterable[ContainerStatus], now: datetime) -> list[dict[str, Any]]:
    """One row per container and maintenance window: whether it is in force now (until when)
    and when it starts next."""
    rows = []
    for c in statuses:
        for w in c.maintenance:
            span = w.active_at(now)
            rows.append(
                {
                    "container": c.name,
                    "window": w.describe(),
                    "from": w.origin,
                    "in_force_until": when(span[1]) if span is not None else None,
                    "next_start": when(w.next_start(now)),
                }
            )
    return rows


def approval_view(a: Approval) -> dict[str, Any]:
    return {
        "incident": a.incident_id,
        "container": a.container,
        "approved": a.approved,
        "by": a.by,
        "reason": text(a.reason),
        "created_at": when(a.created_at),
        "expires_at": when(a.expires_at),
        "used_at": when(a.used_at),
    }


def transition_view(t: Transition) -> dict[str, Any]:
    frm = str(t.from_state) if t.from_state is not None else "opened"
    return {
        "at": when(t.at),
        "actor": t.actor,
        "event": f"{frm} -> {t.to_state}",
        "reason": text(t.reason),
        "detail": "",
    }


def timeline_action(a: RemediationAction, container: str = "") -> dict[str, Any]:
    """An action in the timeline of `container`'s incident; one about another container (a
    follower restarted after it) names that container."""
    outcome = str(a.outcome) if a.outcome is not None else "pending"
    event = a.kind
    if a.kind == ActionKind.RESTART:
        event = f"{a.kind} #{a.attempt}: {outcome}"
    elif a.kind == ActionKind.HOOK:
        event = f"{a.kind}: {outcome}"
    if container and a.container != container:
        event = f"{event} ({text(a.container)})"
    # A person's answer (guardian.action=ask) is theirs in the audit trail, not Guardian's.
    actor = a.extra.get("by", incidents.GUARDIAN) if a.kind == ActionKind.APPROVAL else None
    return {
        "at": when(a.requested_at),
        "actor": actor or incidents.GUARDIAN,
        "event": event,
        "reason": text(a.reason),
        "detail": text(a.detail),
    }


def timeline_view(
    entries: list[Transition | RemediationAction],
    container: str = "",
    transition: Callable[[Transition], dict[str, Any]] = transition_view,
) -> list[dict[str, Any]]:
    """`transition`: a transition's view (the status page keeps them built)."""
    return [
        transition(e) if isinstance(e, Transition) else timeline_action(e, container)
        for e in entries
    ]


def engine_view(engine: EngineIdentity, url: str) -> dict[str, Any]:
    """Which engine Guardian watches, and where (the URL without userinfo or query values)."""
    return {
        "kind": engine.kind,
        "version": engine.version,
        "api_version": engine.api_version,
        "url": scrub_url(url),
    }


def container_view(c: ContainerStatus) -> dict[str, Any]:
    return {
        "container": c.name,
        "state": c.state,
        "health": c.health or "none",
        "incidents": " ".join(
            f"#{i.id}:{i.state}" + (",escalated" if i.escalated else "") for i in c.incidents
        )
        or None,
        "next_restart": "now" if c.restart_now else when(c.retry_at),
        "held_back": c.held_back,
        "silenced_until": when(c.silence.until) if c.silence else None,
        "notes": list(c.notes),
    }
