"""ResilientStore: keeps healing going when the store cannot be written (disk full, I/O error).

Reads go straight to the wrapped store. A failed write is logged and counted
(guardian_store_errors_total) instead of stopping the loop; restart intents that could not be
written are kept in memory, still count against the restart budget (restart_times), and are
written as soon as the store accepts writes again. Given a clock, this run's restart requests
and counter resets are read back as the monotonic clock places them (RunStamps).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from guardian.adapters.run_stamps import RunStamps
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
from guardian.logs import kv
from guardian.ports import Clock, Metrics, Store, StoreError

log = logging.getLogger("guardian.store")


MAX_RELEASES = 1024  # held notifications' releases kept while the store refuses them


class ResilientStore:
    """The Store port over another Store; write failures degrade to "healing without a record"."""

    def __init__(
        self,
        inner: Store,
        metrics: Metrics,
        clock: Clock | None = None,
        on_recovered: Callable[[], None] = lambda: None,
        on_unqueued: Callable[[Sequence[Notification]], None] = lambda _: None,
    ) -> None:
        """`on_recovered`: called once actions held in memory were written (what was read
        while they were held may have changed). `on_unqueued`: given the notifications a
        refused write would have queued, so they can still be sent."""
        self.inner = inner
        self.metrics = metrics
        self.run_stamps = RunStamps(clock) if clock is not None else None
        self.on_recovered = on_recovered
        self.on_unqueued = on_unqueued
        self._lock = threading.RLock()
        self._next_id = -1
        # Actions not yet written, by their temporary (negative) id, in order.
        self._unwritten: dict[int, RemediationAction] = {}
        # Held notifications a refused write left held (release_held), by incident (None: all),
        # with what they are to be told; at most MAX_RELEASES (beyond: the next start's).
        self._releases: dict[int | None, str] = {}
        self.failing = False
        self._why = ""  # the last failure, for degraded()

    @property
    def path(self) -> object:
        return getattr(self.inner, "path", "")

    # -- failure handling -------------------------------------------------------------------

    def _failed(self, op: str, exc: StoreError) -> None:
        self.metrics.store_failed()
        self._why = f"{op}: {exc}"
        if not self.failing:
            log.error(
                "store write failed; healing continues, recording resumes when the store recovers",
                extra=kv(op=op, reason=str(exc)),
            )
        else:
            log.warning("store write failed", extra=kv(op=op, reason=str(exc)))
        self.failing = True

    def _recovered(self) -> None:
        """A write landed."""
        if self.failing:
            self.failing = False
            log.info("store writable again; recording resumed")

    def _flush(self) -> bool:
        """Write the actions kept in memory, oldest first, so the history stays in order, then
        the releases of held notifications kept. False (and the failure counted) when the
        store still refuses."""
        with self._lock:
            held = bool(self._unwritten)
            for temp_id, action in list(self._unwritten.items()):
                try:
                    self.inner.record_intent(replace(action, id=None))
                except StoreError as exc:
                    self._failed("record_intent", exc)
                    return False
                del self._unwritten[temp_id]
                self.metrics.store_holding(len(self._unwritten))
            if held:
                self.on_recovered()
            return self._release_kept() is not None

    def _release_kept(self) -> int | None:
        """Release what refused writes left held, oldest first: how many notifications, or
        None (and the failure counted) when the store still refuses."""
        count = 0
        for incident_id, output in list(self._releases.items()):
            try:
                count += self.inner.release_held(incident_id, output)
            except StoreError as exc:
                self._failed("release_held", exc)
                return None
            del self._releases[incident_id]
        return count

    def _unqueued(self, notifications: Sequence[Notification]) -> None:
        if notifications:
            self.on_unqueued(notifications)

    def _keep(self, action: RemediationAction) -> int:
        temp_id, self._next_id = self._next_id, self._next_id - 1
        self._unwritten[temp_id] = action
        self.metrics.store_holding(len(self._unwritten))
        return temp_id

    def degraded(self) -> str:
        """Why the store is not keeping Guardian's record now ("" when it is): for /readyz."""
        # Without the lock: a write holds it for the store's whole busy timeout, and /healthz
        # must answer meanwhile (len() of a dict is one atomic read).
        held = len(self._unwritten)
        if held:
            return (
                f"store degraded: {held} intent(s) held in memory only, not written ({self._why})"
            )
        if self.failing:
            return f"store degraded: writes failing ({self._why})"
        return ""

    # -- writes -----------------------------------------------------------------------------

    def save_incident(
        self, change: IncidentChange, notifications: Sequence[Notification] = ()
    ) -> Incident:
        with self._lock:
            if not self._flush():
                self._unqueued(notifications)
                return change.incident  # unsaved: recorded at the next detection once writable
            try:
                saved = self.inner.save_incident(change, notifications)
            except StoreError as exc:
                self._failed("save_incident", exc)
                self._unqueued(notifications)
                return change.incident  # the change's own object: not written
            self._recovered()
        return saved  # read back in its transaction

    def record_intent(
        self, action: RemediationAction, notifications: Sequence[Notification] = ()
    ) -> int:
        # While the store refuses writes, a kept action is written later without its
        # notifications: they go out now, directly (on_unqueued).
        if self.run_stamps is not None and action.kind == ActionKind.RESTART:
            self.run_stamps.wrote_restart(
                action.host, action.container, action.container_id, action.requested_at
            )
        with self._lock:
            if not self._flush():
                self._unqueued(notifications)
                return self._keep(action)  # a negative id: held in memory
            try:
                action_id = self.inner.record_intent(action, notifications)
            except StoreError as exc:
                self._failed("record_intent", exc)
                self._unqueued(notifications)
                return self._keep(action)
        self._recovered()
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
        with self._lock:
            if action_id in self._unwritten:
                held = self._unwritten[action_id]
                self._unwritten[action_id] = replace(
                    held,
                    outcome=outcome,
                    detail=detail,
                    finished_at=finished_at,
                    successor=successor or held.successor,
                )
                self._unqueued(notifications)
                if self._flush():
                    self._recovered()
                return
            try:
                self.inner.record_outcome(
                    action_id, outcome, detail, finished_at, notifications, successor
                )
            except StoreError as exc:
                self._failed("record_outcome", exc)
                self._unqueued(notifications)
                return
        self._recovered()

    def withdraw_unsent(self, host: str) -> int:
        try:
            count = self.inner.withdraw_unsent(host)
        except StoreError as exc:
            self._failed("withdraw_unsent", exc)
            return 0
        self._recovered()
        return count

    def release_held(self, incident_id: int | None, output: str = "") -> int:
        """Refused, they are released by the first write that lands (else by the next start)."""
        with self._lock:
            if len(self._releases) < MAX_RELEASES or incident_id in self._releases:
                self._releases[incident_id] = output
            count = self._release_kept()
        if count is None:
            return 0
        self._recovered()
        return count

    def record_reset(self, host: str, container: str, at: datetime) -> None:
        if self.run_stamps is not None:
            self.run_stamps.wrote_reset(host, container, at)
        try:
            self.inner.record_reset(host, container, at)
        except StoreError as exc:
            self._failed("record_reset", exc)
            return
        self._recovered()

    def remember(self, host: str, mark: str, at: datetime) -> None:
        """Written only once the actions held in memory are: a mark says how far the store's
        record reaches, so it never passes an attempt the store does not hold."""
        with self._lock:
            if not self._flush():
                return
            try:
                self.inner.remember(host, mark, at)
            except StoreError as exc:
                self._failed("remember", exc)
                return
        self._recovered()

    def remembered(self, host: str, mark: str) -> datetime | None:
        return self.inner.remembered(host, mark)

    def history(
        self, host: str, since: datetime, containers: Collection[str] | None = None
    ) -> History:
        return self.inner.history(host, since, containers)

    def move_problem_starts(self, host: str, step: timedelta) -> None:
        try:
            self.inner.move_problem_starts(host, step)
        except StoreError as exc:
            self._failed("move_problem_starts", exc)
            return
        self._recovered()

    # -- reads ------------------------------------------------------------------------------

    def restart_times(
        self,
        host: str,
        since: datetime,
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        if self.run_stamps is not None:
            recorded = self.run_stamps.restart_times(
                host,
                since,
                lambda after: self.inner.restart_times(host, after, container, container_id),
                container,
                container_id,
            )
            return recorded  # the ones kept in memory are among this run's
        recorded = self.inner.restart_times(host, since, container, container_id)
        with self._lock:
            kept = tuple(
                a.requested_at
                for a in self._unwritten.values()
                if a.kind == ActionKind.RESTART
                and a.host == host
                and a.requested_at > since
                and (container is None or a.container == container)
                and (container_id is None or a.container_id == container_id)
            )
        return recorded + kept

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
        stored = self.inner.last_reset(host, container)
        if self.run_stamps is None:
            return stored
        return self.run_stamps.last_reset(host, container, stored)

    # -- operator reads and writes go straight through (a person sees errors at once) ---------

    def list_incidents(self, *args: Any, **kwargs: Any) -> list[Incident]:
        return self.inner.list_incidents(*args, **kwargs)

    def save_state_change(
        self,
        change: IncidentChange,
        expected: IncidentState,
        notifications: Sequence[Notification] = (),
    ) -> Incident | None:
        return self.inner.save_state_change(change, expected, notifications)

    # A person's writes (a change of state, a silence, an approval and its use) are never
    # dropped: a failure reaches the caller.

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
        self._flush()
        self.inner.close()
