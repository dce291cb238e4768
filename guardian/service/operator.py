"""What operators can do, shared by the CLI and the HTTP API: steer incidents, silence containers.

Every incident change is judged by core.incidents; this module reads the store and writes with a
compare-and-set so a concurrent daemon update is never lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.core import incidents
from guardian.core.escalation.recreate import Refusal
from guardian.core.escalation.rollback import (
    Kept,
    for_person,
    image_gone_command,
    running_of,
)
from guardian.core.facts import (
    ApprovalGiven,
    IncidentChangedByPerson,
    RollbackRequested,
    SilenceLifted,
    SilenceSet,
)
from guardian.core.history import History
from guardian.core.labels import ALL
from guardian.core.model import (
    ActionKind,
    Approval,
    EventPage,
    Incident,
    IncidentState,
    Reason,
    RemediationAction,
    RollbackRequest,
    Silence,
    Transition,
)
from guardian.core.outbound import notifications
from guardian.core.relations.orchestrators import owner
from guardian.logs import kv
from guardian.ports import Clock, Engine, Facts, Store
from guardian.service.facts import FactStream
from guardian.service.healing.recorder import log_transition

log = logging.getLogger("guardian.operations")

MAX_NAME = 100
MAX_REASON = 1000
MAX_CONTAINER = 255
MAX_SILENCE = timedelta(days=30)

# The incident changes people may ask for, by the verb the CLI and the API use.
HUMAN_CHANGES = {
    "ack": IncidentState.ACKNOWLEDGED,
    "resolve": IncidentState.RESOLVED,
    "close": IncidentState.CLOSED,
}


class NotFound(Exception):
    """The incident or silence asked for does not exist; the message is meant for people."""


class BadRequest(Exception):
    """Input that cannot be used (empty name, overlong reason, ...); the message is for people."""


class Refused(Exception):
    """An answer that cannot be given now (not awaiting approval, already approved or used);
    the message is one line for people (the API answers 409)."""


class Gone(Exception):
    """The events asked for are older than the store holds (retention forgot them); `oldest`:
    the cursor to ask from instead (the API answers 410)."""

    def __init__(self, oldest: int) -> None:
        super().__init__(
            "the events after this cursor are no longer held (store.retention); ask from"
            f" {oldest}, the oldest cursor held"
        )
        self.oldest = oldest


def on_acknowledged(store: Store, incident: Incident, actor: str, now: datetime) -> None:
    """The single place an acknowledgement is announced, whoever made it (CLI or API).

    The "acknowledged" notification itself is queued with the transition (see _announce).
    """
    log.info(
        "incident acknowledged",
        extra=kv(incident=incident.id, container=incident.container, by=actor),
    )


def _announce(
    incident: Incident, actor: str, reason: str, now: datetime
) -> tuple[notifications.Notification, ...]:
    """What a person's change tells the notification channels (queued in its transaction)."""
    if incident.state is IncidentState.ACKNOWLEDGED:
        return (notifications.acknowledged(incident, actor, now),)
    if incident.state is IncidentState.RESOLVED:
        why = f"resolved by {actor}" + (f": {reason}" if reason else "")
        return (notifications.resolved(incident, why, now),)
    return ()


def _text(what: str, value: str, limit: int, required: bool = True) -> str:
    value = value.strip()
    if required and not value:
        raise BadRequest(f"{what} is required")
    if len(value) > limit:
        raise BadRequest(f"{what} is longer than {limit} characters")
    if any(ord(c) < 32 for c in value):
        raise BadRequest(f"{what} must not contain control characters")
    return value


@dataclass
class Operator:
    """Operator actions against one host's store, with the clock as a port."""

    store: Store
    clock: Clock
    host: str
    approval_ttl: timedelta = timedelta(hours=1)
    facts: Facts = field(default_factory=FactStream)
    # What a container runs now, for a person's rollback (None: a command without the engine).
    engine: Engine | None = None
    # In the daemon: the loop looks at a container a person's rollback was asked for.
    on_rollback: Callable[[], object] | None = None
    # A silence's fact carries the silence as the store keeps it: the facts of two writes go
    # out in the order the writes landed, so the later one is the one a reader keeps. Held
    # around each write and its fact: in the daemon, the loop store's lock, under which the
    # loop's own writes publish theirs (LoopStore.in_order); a CLI command writes once, and its
    # facts have no reader.
    in_order: AbstractContextManager[object] = field(
        default_factory=nullcontext, repr=False, compare=False
    )

    def incident(self, incident_id: int) -> Incident:
        incident = self.store.get_incident(incident_id)
        if incident is None or incident.host != self.host:
            raise NotFound(f"incident {incident_id} not found")
        return incident

    def change(self, incident_id: int, verb: str, actor: str, reason: str = "") -> Incident:
        """Acknowledge, resolve or close an incident; raises InvalidTransition when refused."""
        to = HUMAN_CHANGES[verb]
        actor = _text("the name of who does it (--by)", actor, MAX_NAME)
        reason = _text("the reason", reason, MAX_REASON, required=False)
        for _ in range(3):
            incident = self.incident(incident_id)
            now = self.clock.now()
            change = incidents.by_person(incident, to, actor, reason, now)
            saved = self.store.save_state_change(
                change, incident.state, _announce(change.incident, actor, reason, now)
            )
            self.facts.publish(IncidentChangedByPerson(incident.container, incident.id))
            if saved is None:
                continue  # the daemon changed it meanwhile: judge again on the fresh state
            log_transition(saved, change.transitions[0])
            if to is IncidentState.ACKNOWLEDGED:
                on_acknowledged(self.store, saved, actor, now)
            return saved
        raise BadRequest(f"incident {incident_id} keeps changing; try again")

    def answer(self, incident_id: int, approve: bool, by: str, reason: str = "") -> Approval:
        """A person's answer to a restart that awaits approval (guardian.action=ask): approve
        allows one restart of this incident (decide() still holds it for cooldown, budget,
        silence, storm) until restart.approval_ttl; deny ends the question for this incident.
        Raises NotFound, BadRequest or Refused (one line each)."""
        by = _text("the name of who does it (--by)", by, MAX_NAME)
        reason = _text("the reason", reason, MAX_REASON, required=False)
        try:
            incident = self.incident(incident_id)
        except NotFound as exc:
            raise Refused(str(exc)) from None
        if not incident.is_open:
            raise Refused(f"incident {incident_id} is {incident.state}: nothing to approve")
        now = self.clock.now()
        answers = self.store.approvals(incident_id)
        last = answers[-1] if answers else None
        if last is not None and not last.approved:
            raise Refused(f"incident {incident_id}: restarts were denied by {last.by}")
        if last is not None and last.usable(now):
            raise Refused(
                f"incident {incident_id}: already approved by {last.by}, not used yet"
                f" (expires {last.expires_at.isoformat(timespec='seconds')})"
            )
        if not self._awaiting(incident, last):
            used = " (the approval was used)" if last is not None and last.used_at else ""
            raise Refused(f"incident {incident_id} is not awaiting approval{used}")
        answer = Approval(
            None,
            incident_id,
            self.host,
            incident.container,
            approve,
            by,
            reason,
            now,
            now + self.approval_ttl,
        )
        saved = self.store.add_approval(answer)
        self.facts.publish(ApprovalGiven(incident.container, incident_id))
        log.info(
            "restart approved" if approve else "restart denied",
            extra=kv(incident=incident_id, container=incident.container, by=by, reason=reason),
        )
        return saved

    def request_rollback(
        self, container: str, by: str, reason: str = ""
    ) -> tuple[RollbackRequest, Kept]:
        """A person's rollback of the container named `container` to the last record of the
        name that ran healthy (and differs from the one it runs now), judged here before
        anything is written: the daemon acts on it at its next look, through decide() (a
        silence, a storm or the budget may hold it), once, until restart.approval_ttl.
        Returns the request and the record it goes back to. Raises BadRequest, NotFound,
        Refused (one line each) or EngineUnavailable."""
        container = _text("the container name", container, MAX_CONTAINER)
        by = _text("the name of who does it (--by)", by, MAX_NAME)
        reason = _text("the reason", reason, MAX_REASON, required=False)
        if self.engine is None:
            raise Refused("a rollback needs the engine, to read what the container runs now")
        found = self.engine.list_containers(ALL, "", names=(container,))
        snap = next((c for c in found if c.name == container), None)
        record = self.engine.record(snap.id) if snap is not None else None
        if snap is None or record is None:
            raise NotFound(f"no container named {container}")
        running = running_of(record, container, snap.created, self.clock.now(), False)
        if owner(running.labels):
            raise Refused(
                f"{container}: {owner(running.labels)} owns it; Guardian never replaces it"
            )
        target = for_person(running, self.store.kept_records(self.host, container))
        if isinstance(target, Refusal):
            raise Refused(f"{container}: {target.reason}")
        if not self.engine.has_image(target.image_id):
            raise Refused(
                f"{container}: {target.told}, which ran healthy, is no longer on the host and"
                f" Guardian pulls nothing; {image_gone_command(target, running.labels, container)}"
            )
        now = self.clock.now()
        self._not_requested(container, snap.id, now)
        request = self.store.add_rollback_request(
            RollbackRequest(
                None,
                self.host,
                container,
                snap.id,
                target.digest,
                target.image_id,
                target.image_ref,
                by,
                reason,
                now,
                now + self.approval_ttl,
            )
        )
        self.facts.publish(RollbackRequested(container))
        if self.on_rollback is not None:
            self.on_rollback()
        log.info(
            "rollback requested",
            extra=kv(container=container, to=target.short, by=by, reason=reason),
        )
        return request, target

    def _not_requested(self, container: str, container_id: str, now: datetime) -> None:
        """Refused: a rollback of this container is requested already and not used."""
        for pending in self.store.rollback_requests(self.host, now):
            if pending.container == container and pending.container_id == container_id:
                raise Refused(
                    f"{container}: a rollback was already requested by {pending.by}, not done"
                    f" yet (expires {pending.expires_at.isoformat(timespec='seconds')})"
                )

    # -- what people read (the read side's Records) -------------------------------------------

    def open_incidents(self) -> list[Incident]:
        return self.store.open_incidents(self.host)

    def silences_in_force(self, now: datetime) -> list[Silence]:
        return self.store.silences(self.host, now)

    def recent_actions(self, since: datetime, limit: int) -> list[RemediationAction]:
        return self.store.actions(self.host, None, since, limit=limit)

    def events(self, since: int | datetime | None, limit: int) -> EventPage:
        """The events recorded after cursor `since` (or at and after a time; None: from the
        oldest held), at most `limit`. Raises Gone when retention forgot events after it, and
        BadRequest for a cursor never handed out."""
        horizon = self.store.event_horizon()
        if since is None:
            after = horizon.forgotten
        elif isinstance(since, datetime):
            after = self.store.event_cursor_at(self.host, since)
        elif since > horizon.newest:
            raise BadRequest(f"since {since}: no such cursor (the newest is {horizon.newest})")
        else:
            after = since
        events = tuple(self.store.events_after(self.host, after, limit))
        # Read after the events: a prune that ran meanwhile is seen, never a gap behind it.
        horizon = self.store.event_horizon()
        if isinstance(since, datetime):
            if horizon.cutoff is not None and since < horizon.cutoff:
                raise Gone(horizon.forgotten)
        elif since is not None and since < horizon.forgotten:
            raise Gone(horizon.forgotten)
        return EventPage(events, events[-1].cursor if events else after)

    def history(self, since: datetime, containers: Collection[str] | None = None) -> History:
        return self.store.history(self.host, since, containers)

    def awaiting_approval(self, incident: Incident) -> bool:
        """Whether a person's answer may be given now for this open incident: Guardian held its
        restart back for approval and no answer stands (the status page's approve button)."""
        if not incident.is_open or incident.id is None:
            return False
        answers = self.store.approvals(incident.id)
        last = answers[-1] if answers else None
        if last is not None and (not last.approved or last.usable(self.clock.now())):
            return False
        return self._awaiting(incident, last)

    def _awaiting(self, incident: Incident, last: Approval | None) -> bool:
        """Whether Guardian held a restart of this incident back for a person's approval
        (guardian.action=ask; a silence, cooldown or storm may hold it as well) since the last
        answer (an answer used or expired needs a fresh request)."""
        assert incident.id is not None
        return any(
            a.kind == ActionKind.DECISION
            and (a.reason == str(Reason.AWAITING_APPROVAL) or a.extra.get("action") == "ask")
            and (last is None or a.requested_at >= last.created_at)
            for a in self.store.actions(self.host, incident=incident.id)
        )

    def silence(self, container: str, duration: timedelta, reason: str, by: str) -> Silence:
        container = _text("the container name", container, MAX_CONTAINER)
        reason = _text("the reason (--reason)", reason, MAX_REASON)
        by = _text("the name of who does it (--by)", by, MAX_NAME)
        if not timedelta(0) < duration <= MAX_SILENCE:
            raise BadRequest("a silence lasts more than 0s and at most 30d")
        now = self.clock.now()
        with self.in_order:
            silence = self.store.add_silence(
                Silence(None, self.host, container, now, now + duration, reason, by)
            )
            self.facts.publish(SilenceSet(silence))
        log.info(
            "container silenced",
            extra=kv(container=container, until=silence.until.isoformat(), by=by, reason=reason),
        )
        return silence

    def unsilence(self, container: str, by: str) -> Silence:
        container = _text("the container name", container, MAX_CONTAINER)
        by = _text("the name of who does it (--by)", by, MAX_NAME)
        with self.in_order:
            ended = self.store.end_silence(self.host, container, by, self.clock.now())
            self.facts.publish(SilenceLifted(container, ended))
        if ended is None:
            raise NotFound(f"no silence in force for {container}")
        log.info("silence lifted", extra=kv(container=container, by=by))
        return ended

    def timeline(
        self,
        incident: Incident,
        newest: int | None = None,
        known: Sequence[Transition] = (),
    ) -> list[Transition | RemediationAction]:
        """Every transition and action of an incident, oldest first; `newest`: the newest
        this many only (read as such: a long-flapping container's incident holds thousands).
        `known`: its transitions the caller read before (oldest first, as written; a
        transition never changes): only later ones are read."""
        assert incident.id is not None
        after = known[-1].id if known else None
        if after is None:  # none known, or never written
            known = ()
        transitions = [*known, *self.store.transitions(incident.id, newest, after)]
        if newest is not None:
            transitions = transitions[max(0, len(transitions) - newest) :]
        timed: list[tuple[datetime, Transition | RemediationAction]] = [
            (t.at, t) for t in transitions
        ]
        # Every action told under it, a follower's restart among them (its own container).
        timed += [
            (a.requested_at, a)
            for a in self.store.actions(self.host, incident=incident.id, limit=newest)
        ]
        # Stable on the full timestamps: the views show whole seconds only.
        entries = [entry for _, entry in sorted(timed, key=lambda pair: pair[0])]
        return entries if newest is None else entries[max(0, len(entries) - newest) :]
