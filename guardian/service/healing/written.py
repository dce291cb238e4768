"""The loop's own store writes, published as facts (core.facts) once written.

Every part of the loop (the recorder, the remediator, the verifier, the healer, hooks) writes
through this Store, so each write it makes is followed by its fact, and no adapter tells readers
what it wrote. Incident writes are published under one lock in the order written: a reader takes
the incident a fact carries for reading it, so a later write's fact must not come first.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from guardian.core.facts import (
    AttemptWritten,
    IncidentWritten,
    NotificationsWithdrawn,
    ProblemStartsMoved,
    ResetWritten,
)
from guardian.core.history import History
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    ActionKind,
    Approval,
    EventHorizon,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    RecordedEvent,
    RemediationAction,
    Silence,
    Transition,
)
from guardian.core.outbound.notifications import Notification
from guardian.ports import Facts, Store

MAX_ABOUT = 10_000  # the latest actions whose container is remembered for their outcomes


def _counts(action: RemediationAction) -> bool:
    """Whether an action may change other containers' decisions: a restart or a stop counts in
    the host's budget and holds its dependents back; a recorded decision does neither."""
    return action.kind != ActionKind.DECISION


class PublishingStore:
    """The Store port over another Store (the resilient one); each loop write is published.

    The resilient store swallows a failed write: an incident it could not write comes back as
    the change's own object (published as "may be unwritten"), an action it holds in memory gets
    a negative id (published once written, as StoreRecovered)."""

    def __init__(self, inner: Store, facts: Facts) -> None:
        self.inner = inner
        self.facts = facts
        self._lock = threading.Lock()  # incident writes and their facts, in the same order
        # What an action awaiting its outcome is about, by id: record_outcome is told its id only.
        self._about: dict[int, tuple[str, int | None, bool]] = {}
        self._about_lock = threading.Lock()

    @property
    def path(self) -> object:
        return getattr(self.inner, "path", "")

    # -- writes, each followed by its fact ----------------------------------------------------

    def save_incident(
        self, change: IncidentChange, notifications: Sequence[Notification] = ()
    ) -> Incident:
        with self._lock:
            saved = self.inner.save_incident(change, notifications)
            landed = saved is not change.incident
            self.facts.publish(
                IncidentWritten(saved.container, saved.id, saved if landed else None)
            )
        return saved

    def record_intent(
        self, action: RemediationAction, notifications: Sequence[Notification] = ()
    ) -> int:
        action_id = self.inner.record_intent(action, notifications)
        if action.outcome is None:
            with self._about_lock:
                self._about[action_id] = (action.container, action.incident_id, _counts(action))
                if len(self._about) > MAX_ABOUT:  # the oldest one's outcome: about anything
                    del self._about[next(iter(self._about))]
        if action_id >= 0:  # written (a negative id: held until the store recovers)
            self.facts.publish(
                AttemptWritten(action.container, action.incident_id, _counts(action))
            )
        return action_id

    def record_outcome(
        self,
        action_id: int,
        outcome: Outcome,
        detail: str,
        finished_at: datetime,
        notifications: Sequence[Notification] = (),
        successor: str = "",
    ) -> None:
        self.inner.record_outcome(action_id, outcome, detail, finished_at, notifications, successor)
        # An action's outcome may be written more than once (returned, then verified).
        with self._about_lock:
            container, incident, others = self._about.get(action_id, (None, None, True))
        if action_id >= 0:  # a held action's outcome is published when the store recovers
            self.facts.publish(AttemptWritten(container, incident, others))

    def withdraw_unsent(self, host: str) -> int:
        count = self.inner.withdraw_unsent(host)
        self.facts.publish(NotificationsWithdrawn())
        return count

    def release_held(self, incident_id: int | None, output: str = "") -> int:
        return self.inner.release_held(incident_id, output)

    def record_reset(self, host: str, container: str, at: datetime) -> None:
        self.inner.record_reset(host, container, at)
        self.facts.publish(ResetWritten(container))

    def move_problem_starts(self, host: str, step: timedelta) -> None:
        self.inner.move_problem_starts(host, step)
        self.facts.publish(ProblemStartsMoved())

    # -- everything else goes straight through ---------------------------------------------

    def restart_times(
        self,
        host: str,
        since: datetime,
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        return self.inner.restart_times(host, since, container, container_id)

    def current_incident(self, host: str, container: str, kind: ProblemType) -> Incident | None:
        return self.inner.current_incident(host, container, kind)

    def open_incidents(self, host: str, container: str | None = None) -> list[Incident]:
        return self.inner.open_incidents(host, container)

    def get_incident(self, incident_id: int) -> Incident | None:
        return self.inner.get_incident(incident_id)

    def transitions(
        self, incident_id: int, limit: int | None = None, after: int | None = None
    ) -> list[Transition]:
        return self.inner.transitions(incident_id, limit, after)

    def actions(
        self,
        host: str,
        container: str | None = None,
        since: datetime | None = None,
        *,
        incident: int | None = None,
        limit: int | None = None,
    ) -> list[RemediationAction]:
        return self.inner.actions(host, container, since, incident=incident, limit=limit)

    def last_action(self, incident_id: int) -> RemediationAction | None:
        return self.inner.last_action(incident_id)

    def unfinished_actions(self, host: str) -> list[RemediationAction]:
        return self.inner.unfinished_actions(host)

    def last_reset(self, host: str, container: str) -> datetime | None:
        return self.inner.last_reset(host, container)

    def remembered(self, host: str, mark: str) -> datetime | None:
        return self.inner.remembered(host, mark)

    def history(
        self, host: str, since: datetime, containers: Collection[str] | None = None
    ) -> History:
        return self.inner.history(host, since, containers)

    def remember(self, host: str, mark: str, at: datetime) -> None:
        self.inner.remember(host, mark, at)

    def list_incidents(self, *args: Any, **kwargs: Any) -> list[Incident]:
        return self.inner.list_incidents(*args, **kwargs)

    def save_state_change(
        self,
        change: IncidentChange,
        expected: IncidentState,
        notifications: Sequence[Notification] = (),
    ) -> Incident | None:
        return self.inner.save_state_change(change, expected, notifications)

    def add_silence(self, silence: Silence) -> Silence:
        return self.inner.add_silence(silence)

    def end_silence(self, host: str, container: str, by: str, at: datetime) -> Silence | None:
        return self.inner.end_silence(host, container, by, at)

    def active_silence(self, host: str, container: str, now: datetime) -> Silence | None:
        return self.inner.active_silence(host, container, now)

    def silences(self, host: str, now: datetime, include_ended: bool = False) -> list[Silence]:
        return self.inner.silences(host, now, include_ended)

    def add_approval(
        self, approval: Approval, notifications: Sequence[Notification] = ()
    ) -> Approval:
        return self.inner.add_approval(approval, notifications)

    def approvals(self, incident_id: int) -> list[Approval]:
        return self.inner.approvals(incident_id)

    def approval_for(self, host: str, container: str) -> Approval | None:
        return self.inner.approval_for(host, container)

    def use_approval(self, approval_id: int, at: datetime) -> bool:
        return self.inner.use_approval(approval_id, at)

    def unused_approvals(self, host: str, now: datetime) -> list[Approval]:
        return self.inner.unused_approvals(host, now)

    def events_after(self, host: str, cursor: int, limit: int) -> list[RecordedEvent]:
        return self.inner.events_after(host, cursor, limit)

    def event_cursor_at(self, host: str, at: datetime) -> int:
        return self.inner.event_cursor_at(host, at)

    def event_horizon(self) -> EventHorizon:
        return self.inner.event_horizon()

    def close(self) -> None:
        self.inner.close()
