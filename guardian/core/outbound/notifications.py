"""What Guardian tells people: one Notification value per incident event worth a message.

Pure values and builders; channels render them (adapters/notify/), the outbox stores them as the
JSON of `to_dict()`. Messages go out on state changes and escalations, never per detection.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from guardian.core.model import Decision, Incident, Outcome, ProblemType, Reason, Verdict
from guardian.core.redaction import untrusted
from guardian.core.relations.namespaces import next_step_of

DETAIL_MAX = 300  # characters of health output kept in a message


class Kind(StrEnum):
    OPENED = "opened"
    ATTEMPT = "attempt"
    RESOLVED = "resolved"
    GAVE_UP = "gave_up"
    ACKNOWLEDGED = "acknowledged"
    REMINDER = "reminder"
    TEST = "test"  # `guardian notify test`: a channel check, about no incident
    STARTED = "started"  # notify.on_start: Guardian started, about no incident
    APPROVAL = "approval"  # guardian.action=ask: a restart waits for a person's approval
    CHANNEL_FAILED = "channel_failed"  # a channel dead-lettered: told through the others


# Messages about Guardian itself, not an incident: no container, no state, never paged.
NOTICES = frozenset({Kind.TEST, Kind.STARTED, Kind.CHANNEL_FAILED})


# What may be the first a receiver hears of an incident; any other kind is news of an incident
# the receiver was already told of, and is only sent then.
FIRST_NEWS = frozenset({Kind.OPENED, Kind.GAVE_UP, Kind.REMINDER, Kind.APPROVAL})


@dataclass(frozen=True)
class Notification:
    """One event of one incident, as every channel renders it."""

    kind: Kind
    incident_id: int | None
    host: str
    container: str
    incident_type: str
    state: str
    at: datetime
    attempt: int = 0
    max_attempts: int = 0
    outcome: str = ""
    detail: str = ""  # the last health output or the reason, trimmed
    next_step: str = ""  # what Guardian does next, in words
    actor: str = ""
    escalated: bool = False  # Guardian gave up on the incident: a human must look at it
    id: int | None = None  # the outbox row, once stored
    # The receivers its container's guardian.notify label names (core.outbound.routing); () none.
    # None: unknown where it is built (a reminder, an acknowledgement): the outbox reuses the
    # incident's earlier receivers.
    receivers: tuple[str, ...] | None = None
    channel: str = ""  # CHANNEL_FAILED: the channel that failed (it is not told)
    # An opening judged from the container cache, which keeps no probe output: the outbox holds
    # it until the restart call returned and the probe's output was read (told_output).
    held: bool = False

    @property
    def firing(self) -> bool:
        """True while the incident needs attention (for alerting channels)."""
        return self.kind not in (Kind.RESOLVED, *NOTICES)

    @property
    def notice(self) -> bool:
        """About Guardian itself (a test, a start-up), not about an incident."""
        return self.kind in NOTICES

    @property
    def headline(self) -> str:
        what = f"{self.container} on {self.host}: {self.incident_type}"
        if self.incident_type == ProblemType.STORM and self.kind is Kind.ATTEMPT:
            return f"Storm canary restart on {self.host}: {self.outcome}"
        if self.incident_type == ProblemType.STORM and self.kind is Kind.GAVE_UP:
            return f"Storm escalated, canary not healed, needs a human: {what}"
        match self.kind:
            case Kind.OPENED:
                return f"Incident opened: {what}"
            case Kind.ATTEMPT if self.outcome == Outcome.STOPPED:
                return f"Stopped (guardian.action=stop), left to a person: {what}"
            case Kind.ATTEMPT:
                n = f"{self.attempt} of {self.max_attempts}"
                return f"Restart attempt {n}: {what} — {self.outcome}"
            case Kind.RESOLVED:
                return f"Resolved: {what}"
            case Kind.GAVE_UP:
                return f"Gave up, needs a human: {what}"
            case Kind.ACKNOWLEDGED:
                return f"Acknowledged by {self.actor or 'someone'}: {what}"
            case Kind.REMINDER:
                return f"Still unresolved: {what}"
            case Kind.TEST:
                return f"[TEST] Guardian on {self.host}: a test message, nothing is wrong"
            case Kind.STARTED:
                return f"Guardian started on {self.host}"
            case Kind.APPROVAL:
                return f"Restart awaits approval: {what}"
            case Kind.CHANNEL_FAILED:
                return f"Guardian on {self.host} cannot deliver to the channel {self.channel}"

    def text(self) -> str:
        """The plain-text rendering (Slack fallback, email body, Discord content)."""
        if self.notice:
            return "\n".join(line for line in (self.headline, self.detail, self.next_step) if line)
        lines = [self.headline, f"state: {self.state}" + (", escalated" if self.escalated else "")]
        if self.max_attempts:
            lines.append(f"attempt {self.attempt} of {self.max_attempts}")
        if self.detail:
            lines.append(f"last output: {self.detail}")
        if self.next_step:
            lines.append(f"next: {self.next_step}")
        return "\n".join(lines)


def to_dict(n: Notification) -> dict[str, Any]:
    d = asdict(n)
    d["kind"] = str(n.kind)
    d["at"] = n.at.isoformat()
    return d


def from_dict(d: dict[str, Any]) -> Notification:
    fields = dict(d)
    fields["kind"] = Kind(fields["kind"])
    fields["at"] = datetime.fromisoformat(fields["at"])
    if fields.get("receivers") is not None:
        fields["receivers"] = tuple(fields["receivers"])
    return Notification(**fields)


def told_output(n: Notification, output: str) -> Notification:
    """A held opening, released: its detail what the probe said (`output`; "" keeps it)."""
    detail = untrusted(output, DETAIL_MAX)
    return replace(n, detail=detail or n.detail, held=False)


def _base(incident: Incident, kind: Kind, now: datetime, **fields: Any) -> Notification:
    return Notification(
        kind=kind,
        incident_id=incident.id,
        host=incident.host,
        container=incident.container,
        incident_type=str(incident.type),
        state=str(incident.state),
        at=now,
        escalated=incident.escalated,
        **fields,
    )


def _when(at: datetime | None) -> str:
    return at.isoformat(timespec="seconds") if at is not None else "never"


def plan(decision: Decision | None) -> str:
    """What happens next, in words, for a decision about a restart."""
    if decision is None:
        return "Guardian is watching it"
    match decision.verdict:
        case Verdict.RESTART:
            return (
                f"Guardian restarts it now (attempt {decision.attempt} of {decision.max_attempts})"
            )
        case Verdict.WAIT if decision.reason is Reason.AWAITING_APPROVAL and decision.rung:
            return f"the ladder's {decision.rung} awaits a person's approval ({decision.detail})"
        case Verdict.WAIT if decision.reason is Reason.AWAITING_APPROVAL:
            return "a restart awaits a person's approval (guardian incidents approve)"
        case Verdict.WAIT:
            return f"restart held back ({decision.reason}) until {_when(decision.retry_at)}"
        case Verdict.DENY:
            why = f" ({decision.detail})" if decision.detail else ""
            return f"not restarted: {decision.reason}{why}"
        case Verdict.GIVE_UP:
            return "attempts exhausted: a human must look at it"
        case Verdict.STOP if decision.reason in (Reason.ESCALATED, Reason.APPROVED):
            return f"Guardian stops it and leaves it to a person ({decision.detail})"
        case Verdict.STOP:
            return "Guardian stops it (guardian.action=stop) and leaves it to a person"
        case Verdict.RECREATE:
            return f"Guardian recreates it from its own record ({decision.detail})"
        case Verdict.ROLLBACK:
            return f"Guardian rolls it back to the record that last ran healthy ({decision.detail})"


def opened(incident: Incident, decision: Decision | None, now: datetime) -> Notification:
    # An orphan is never restarted: its next step is the command its detail names.
    orphan = incident.type is ProblemType.ORPHANED_NAMESPACE and next_step_of(incident.detail)
    return _base(
        incident,
        Kind.OPENED,
        now,
        attempt=(decision.used if decision.rung else max(decision.attempt - 1, 0))
        if decision
        else 0,
        max_attempts=decision.max_attempts if decision else 0,
        detail=untrusted(incident.detail, DETAIL_MAX),
        next_step=orphan or plan(decision),
    )


_AFTER = {
    Outcome.RESTARTED: "verifying that it turns healthy",
    Outcome.UNKNOWN: "checking whether the restart happened before trying again",
    Outcome.TRANSIENT_FAILURE: "retrying after the cooldown",
    Outcome.PERMANENT_FAILURE: "the container is gone; the incident is closed",
    Outcome.UNHEALTHY_AFTER_RESTART: "another attempt after the cooldown, if any are left",
    Outcome.SUCCEEDED: "nothing: it is healthy",
    Outcome.STOPPED: "nothing: stopped as guardian.action=stop asks; a person starts it again",
}


def attempt(
    incident: Incident,
    number: int,
    max_attempts: int,
    outcome: Outcome,
    detail: str,
    now: datetime,
) -> Notification:
    return _base(
        incident,
        Kind.ATTEMPT,
        now,
        attempt=number,
        max_attempts=max_attempts,
        outcome=str(outcome),
        detail=untrusted(detail, DETAIL_MAX),
        next_step=_AFTER.get(outcome, "Guardian keeps watching"),
    )


def awaiting_approval(
    incident: Incident, decision: Decision, ttl: timedelta, now: datetime
) -> Notification:
    """A restart of `incident` is allowed but for a person's approval: name the commands."""
    n = incident.id
    return _base(
        incident,
        Kind.APPROVAL,
        now,
        attempt=max(decision.attempt - 1, 0),
        max_attempts=decision.max_attempts,
        detail=untrusted(incident.detail, DETAIL_MAX),
        next_step=(
            f"approve one restart: guardian incidents approve {n} --by NAME"
            f" (or POST /api/v1/incidents/{n}/approve); refuse: guardian incidents deny {n}"
            f" --by NAME; an approval expires after {int(ttl.total_seconds() // 60)} min"
        ),
    )


def resolved(incident: Incident, reason: str, now: datetime) -> Notification:
    return _base(
        incident, Kind.RESOLVED, now, detail=untrusted(reason, DETAIL_MAX), next_step="nothing"
    )


def gave_up(incident: Incident, decision: Decision, now: datetime) -> Notification:
    return _base(
        incident,
        Kind.GAVE_UP,
        now,
        attempt=decision.attempt,
        max_attempts=decision.max_attempts,
        outcome=str(Outcome.RETRY_EXHAUSTED),
        detail=untrusted(incident.detail, DETAIL_MAX),
        next_step=f"a human must look at it; next restart allowed at {_when(decision.retry_at)}",
    )


def storm_canary(
    incident: Incident, container: str, healed: bool, detail: str, now: datetime
) -> Notification:
    """The storm's canary restart ended: healed (restarts resume) or not (an escalation)."""
    next_step = (
        "the held containers are restarted within the budget"
        if healed
        else "a human should look for the shared cause; Guardian tries another canary when "
        "the hold ends"
    )
    return _base(
        incident,
        Kind.ATTEMPT if healed else Kind.GAVE_UP,
        now,
        outcome=f"{container} {'healed' if healed else 'not healed'}",
        detail=untrusted(detail, DETAIL_MAX),
        next_step=next_step,
    )


def acknowledged(incident: Incident, actor: str, now: datetime) -> Notification:
    """For the CLI/API: store it with the acknowledging transition (same transaction)."""
    return _base(incident, Kind.ACKNOWLEDGED, now, actor=actor, next_step="a human is on it")


def reminder(incident: Incident, open_for: timedelta, now: datetime) -> Notification:
    hours = open_for.total_seconds() / 3600
    return _base(
        incident,
        Kind.REMINDER,
        now,
        detail=untrusted(incident.detail, DETAIL_MAX),
        next_step=f"still open after {hours:.1f}h; a human must look at it",
    )


def with_incident(n: Notification, incident: Incident) -> Notification:
    """Fill in what is only known once the incident is saved (its id and state)."""
    return replace(
        n, incident_id=incident.id, state=str(incident.state), escalated=incident.escalated
    )


UNRECORDED = (
    "(Sent directly, once: Guardian's store refused to queue this message, so it is not "
    "recorded and not retried.)"
)


def unrecorded(n: Notification) -> Notification:
    """`n` marked as sent outside the outbox (its store write failed): every channel renders
    next_step, so every reader sees the mark."""
    return replace(n, next_step=f"{n.next_step} {UNRECORDED}" if n.next_step else UNRECORDED)


def _notice(
    kind: Kind, host: str, now: datetime, detail: str, next_step: str, **more: Any
) -> Notification:
    """A message about Guardian itself, not an incident: no container, no state."""
    return Notification(
        kind, None, host, "", "", "", now, detail=detail, next_step=next_step, **more
    )


def test_message(host: str, channel: str, now: datetime) -> Notification:
    """`guardian notify test`: one clearly marked message that asks for nothing."""
    return _notice(
        Kind.TEST,
        host,
        now,
        f"Sent by `guardian notify test` to the channel {channel}.",
        "nothing: this channel reaches you",
    )


def started(host: str, version: str, watching: str, now: datetime) -> Notification:
    """notify.on_start: Guardian is up, which version, and what it watches."""
    return _notice(
        Kind.STARTED,
        host,
        now,
        f"Guardian {version} watches {watching}.",
        "nothing: incidents follow as they happen",
    )


def channel_failed(host: str, channel: str, reason: str, now: datetime) -> Notification:
    """A channel dead-lettered a notification: the other channels hear it once."""
    return _notice(
        Kind.CHANNEL_FAILED,
        host,
        now,
        f"Its last answer: {reason or 'none'}. What it missed stays listed by"
        " `guardian notifications`.",
        f"fix the channel, then check it with `guardian notify test --channel {channel}`",
        channel=channel,
    )
