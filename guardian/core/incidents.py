"""The incident state machine and detection dedup.

active -> acknowledged -> in_progress -> resolved -> closed, plus active|acknowledged -> resolved
(observed recovery, reason required) and resolved -> active (recurrence before close). This module
is the only judge of which transitions are allowed; every change returns the Transition to record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from guardian.core.model import (
    HealthCheckResult,
    Incident,
    IncidentState,
    ProblemType,
    Transition,
)
from guardian.core.redaction import untrusted

S = IncidentState
GUARDIAN = "guardian"
MAX_DETAIL = 2000  # characters of detail an incident keeps

ALLOWED: dict[IncidentState, frozenset[IncidentState]] = {
    S.ACTIVE: frozenset({S.ACKNOWLEDGED, S.IN_PROGRESS, S.RESOLVED}),
    S.ACKNOWLEDGED: frozenset({S.IN_PROGRESS, S.RESOLVED}),
    S.IN_PROGRESS: frozenset({S.RESOLVED}),
    S.RESOLVED: frozenset({S.CLOSED, S.ACTIVE}),
    S.CLOSED: frozenset(),
}

# Edges that skip the normal path must say why.
REASON_REQUIRED = frozenset(
    {(S.ACTIVE, S.RESOLVED), (S.ACKNOWLEDGED, S.RESOLVED), (S.RESOLVED, S.ACTIVE)}
)

_VERBS = {
    S.ACTIVE: "reopen",
    S.ACKNOWLEDGED: "acknowledge",
    S.IN_PROGRESS: "start remediation of",
    S.RESOLVED: "resolve",
    S.CLOSED: "close",
}


class InvalidTransition(Exception):
    """A transition the state machine does not allow; the message is meant for people."""


def _refusal(incident: Incident, to: IncidentState) -> str:
    name = f"incident {incident.id}" if incident.id is not None else "the incident"
    head = f"cannot {_VERBS[to]} {name}: it is {incident.state}"
    if to is S.CLOSED and incident.is_open:
        return f"{head}; resolve it first"
    if incident.state is S.CLOSED:
        return f"{head}; a closed incident cannot change"
    if incident.state is to:
        return f"{head} already"
    allowed = ", ".join(sorted(ALLOWED[incident.state])) or "none"
    return f"{head}; allowed from {incident.state}: {allowed}"


def transition(
    incident: Incident, to: IncidentState, actor: str, reason: str, now: datetime
) -> tuple[Incident, Transition]:
    """Move `incident` to state `to`, or raise InvalidTransition with a message for people."""
    if to not in ALLOWED[incident.state]:
        raise InvalidTransition(_refusal(incident, to))
    if not actor.strip():
        raise InvalidTransition(f"cannot {_VERBS[to]} incident {incident.id}: an actor is required")
    if (incident.state, to) in REASON_REQUIRED and not reason.strip():
        raise InvalidTransition(
            f"cannot {_VERBS[to]} incident {incident.id} from {incident.state}: "
            "a reason is required"
        )
    changed = replace(incident, state=to)
    if to is S.RESOLVED:
        changed = replace(changed, resolved_by=actor, resolved_at=now)
    elif to is S.CLOSED:
        changed = replace(changed, closed_at=now, close_reason=reason or None)
    elif to is S.ACTIVE:
        # Recurrence: the earlier resolution no longer holds.
        changed = replace(changed, resolved_by=None, resolved_at=None, escalated=False)
    return changed, Transition(incident.state, to, actor, now, reason)


@dataclass(frozen=True)
class IncidentChange:
    """An incident after an event, with the transitions to record (possibly none)."""

    incident: Incident
    transitions: tuple[Transition, ...] = ()

    @property
    def opened(self) -> bool:
        return any(t.from_state is None for t in self.transitions)

    @property
    def reopened(self) -> bool:
        return any(t.to_state is S.ACTIVE and t.from_state is not None for t in self.transitions)


def record_detection(
    existing: Incident | None, host: str, result: HealthCheckResult, now: datetime
) -> IncidentChange:
    """Open an incident for a problem, or update the one already open for it (dedup).

    `existing` is the newest incident for (host, container, problem type), if any. An open one
    is seen again (last_seen, detail): one continuous problem is one occurrence, however often a
    sweep or an event looks at it. A resolved one is reopened (recurrence before close) and
    counts another occurrence; a closed one (or none) leads to a new incident. The problem's
    start (problem_since) is the earliest evidence (`result.since`, else now), kept while the
    problem lasts (kept_start) and taken afresh for a new episode.
    """
    if result.problem is None:
        raise ValueError("record_detection needs a result with a problem")
    problem: ProblemType = result.problem
    # Every detail an incident keeps passes here: container output and engine errors included.
    detail = untrusted(result.detail, MAX_DETAIL)
    # A stamp ahead of the clock counts as now (docs/design.md rule 12).
    began = min(result.since, now) if result.since is not None else now
    if existing is None or existing.state is S.CLOSED:
        incident = Incident(
            id=None,
            host=host,
            container=result.container_name,
            container_id=result.container_id,
            type=problem,
            state=S.ACTIVE,
            opened_at=now,
            last_seen=now,
            detail=detail,
            problem_since=began,
        )
        reason = f"{problem} detected by {result.source}"
        return IncidentChange(incident, (Transition(None, S.ACTIVE, GUARDIAN, now, reason),))
    recurs = existing.state is S.RESOLVED
    if recurs:
        # A new episode: patience starts again, never before the resolution it follows.
        resolved = existing.resolved_at
        since = max(began, resolved) if resolved is not None and resolved <= now else began
    else:
        since = kept_start(existing, result, began)
    seen = replace(
        existing,
        occurrences=existing.occurrences + (1 if recurs else 0),
        last_seen=now,
        container_id=result.container_id,
        detail=detail or existing.detail,
        problem_since=since,
    )
    if recurs:
        reopened, t = transition(seen, S.ACTIVE, GUARDIAN, f"{problem} recurred", now)
        return IncidentChange(reopened, (t,))
    return IncidentChange(seen)


def kept_start(existing: Incident, result: HealthCheckResult, began: datetime) -> datetime:
    """Since when the open incident's problem lasts after a new look at it (`began`: what the
    look tells, at the latest now). It never moves later while the problem lasts: the engine
    forgets (its five kept probes rotate), the incident does not. It moves earlier when earlier
    evidence arrives (an event's time). An exact start (the probe that turned it unhealthy,
    the exit) later than the kept one is another episode, ended and begun again between two
    looks (a healthy probe, a restart nobody saw): patience starts again from it."""
    kept = existing.began
    if result.since is not None and result.since_exact and began > kept:
        return began
    return min(kept, began)


def probe_said(incident: Incident, output: str) -> IncidentChange:
    """The incident whose detail is what its container's failing probe said, learnt after it
    was opened (a problem judged from the container cache, which keeps no probe output): no
    transition. Empty output leaves the detail as it was."""
    detail = untrusted(output, MAX_DETAIL)
    return IncidentChange(replace(incident, detail=detail) if detail else incident)


def record_recovery(incident: Incident, reason: str, now: datetime) -> IncidentChange:
    """Resolve an open incident because the container was observed healthy."""
    if not incident.is_open:
        return IncidentChange(incident)
    resolved, t = transition(incident, S.RESOLVED, GUARDIAN, reason, now)
    return IncidentChange(resolved, (t,))


def start_remediation(incident: Incident, reason: str, now: datetime) -> IncidentChange:
    """Mark an incident in progress when Guardian starts acting on it (idempotent)."""
    if incident.state is S.IN_PROGRESS:
        return IncidentChange(incident)
    changed, t = transition(incident, S.IN_PROGRESS, GUARDIAN, reason, now)
    return IncidentChange(changed, (t,))


def escalate(incident: Incident) -> IncidentChange:
    """Mark an open incident as escalated (attempts exhausted); it stays open for a human."""
    return IncidentChange(replace(incident, escalated=True))


def by_person(
    incident: Incident, to: IncidentState, actor: str, reason: str, now: datetime
) -> IncidentChange:
    """A transition asked for by a person (CLI or API): acknowledge, resolve or close.

    People may only move an incident forward along the human edges, and a person resolving an
    incident must always say why (Guardian's own resolutions carry their observation instead).
    """
    if to not in (S.ACKNOWLEDGED, S.RESOLVED, S.CLOSED):
        raise InvalidTransition(f"cannot {_VERBS[to]} incident {incident.id} by hand")
    # An edge the machine refuses is reported as such first; then the missing reason.
    if to is S.RESOLVED and to in ALLOWED[incident.state] and not reason.strip():
        raise InvalidTransition(f"cannot resolve incident {incident.id}: a reason is required")
    changed, t = transition(incident, to, actor, reason, now)
    return IncidentChange(changed, (t,))
