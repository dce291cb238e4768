"""The one store the loop holds: its writes never stop healing, and each is followed by its fact.

Reads and a person's writes are the inner store's own, reached directly (a person sees a
failure at once). The loop's writes (the recorder's, the remediator's, the verifier's, the
healer's, the host watch's, hooks') take one path, `LoopStore._write`: a write the store refuses
(a full disk, an I/O error) is logged and counted (guardian_store_errors_total) instead of
stopping the loop, and then its fact (core.facts) is published, under one lock, so facts come in
the order of the writes: a reader takes the incident a fact carries for reading it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from guardian.core.escalation.rollback import Kept
from guardian.core.facts import (
    AttemptWritten,
    Fact,
    IncidentWritten,
    NotificationsNotQueued,
    NotificationsWithdrawn,
    ProblemStartsMoved,
    ResetWritten,
    StoreRecovered,
)
from guardian.core.incidents import IncidentChange
from guardian.core.model import ActionKind, Incident, Outcome, RemediationAction
from guardian.core.outbound.notifications import Notification
from guardian.logs import kv
from guardian.ports import Facts, Metrics, Stamps, Store, StoreError

log = logging.getLogger("guardian.store")

T = TypeVar("T")

MAX_ABOUT = 10_000  # the latest actions whose container is remembered for their outcomes
MAX_RELEASES = 1024  # held notifications' releases kept while the store refuses them
# A counter reset placed before a restart stamped at the same moment (last_reset): the budget
# counts the restarts later than the reset, and the stamps keep microseconds.
EARLIER = timedelta(microseconds=1)


def _counts(action: RemediationAction) -> bool:
    """Whether an action may change other containers' decisions: a restart or a stop counts in
    the host's budget and holds its dependents back; a recorded decision does neither."""
    return action.kind != ActionKind.DECISION


def _nothing() -> None:
    return None


class LoopStore:
    """The Store port over another (SQLite) for the loop and the operator. A refused write
    degrades to "healing without a record": an incident comes back as the change's own object
    (published as "may be unwritten": read again), an intent is held in memory under a negative
    id, still counts against the restart budget (restart_times) and is written before the next
    write that lands (published as StoreRecovered); the notifications a refused write would have
    queued are published to be sent directly (NotificationsNotQueued)."""

    def __init__(self, inner: Store, metrics: Metrics, facts: Facts, stamps: Stamps) -> None:
        """`stamps`: this run's restart requests and counter resets, read back as the monotonic
        clock places them; a restart request is stamped whether or not the store takes it, so
        one held in memory counts against the budget as this run's. Stamps are written under
        this store's lock, one at a time (adapters/run_stamps.py keeps none of its own)."""
        self.inner = inner
        self.metrics = metrics
        self.facts = facts
        self.stamps = stamps
        self._lock = threading.RLock()  # the loop's writes and their facts, one at a time
        self._next_id = -1
        # Actions not yet written, by their temporary (negative) id, in order.
        self._unwritten: dict[int, RemediationAction] = {}
        # Held notifications a refused write left held (release_held), by incident (None: all),
        # with what they are to be told; at most MAX_RELEASES (beyond: the next start's).
        self._releases: dict[int | None, str] = {}
        # What an action awaiting its outcome is about, by id: record_outcome is told its id only.
        self._about: dict[int, tuple[str, int | None, bool]] = {}
        # The containers (host, name) whose latest stored counter reset this run wrote: placed
        # by the monotonic clock, as are the restarts written after it (last_reset).
        self._reset_here: set[tuple[str, str]] = set()
        self.failing = False
        self._why = ""  # the last failure, for degraded()

    def __getattr__(self, name: str) -> Any:
        """What this class does not define (the reads, a person's writes, the store's path) is
        the inner store's own."""
        if name.startswith("_") or "inner" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- the one write path -----------------------------------------------------------------

    def _write(
        self,
        op: str,
        write: Callable[[], T],
        *,
        refused: Callable[[], T],
        fact: Callable[[T], Fact | None] = lambda _: None,
        notifications: Sequence[Notification] = (),
        after_held: bool = False,
    ) -> T:
        """`write`, or, when the store refuses it, the failure counted, the `notifications` it
        would have queued handed on and `refused()` instead; then `fact` of what it returned.
        `after_held`: the actions held in memory are written first (the write must not pass
        them); while they cannot be, the write is refused without being tried."""
        with self._lock:
            if after_held and not self._flush():
                self._hand_on(notifications)
                result = refused()
            else:
                try:
                    result = write()
                except StoreError as exc:
                    self._failed(op, exc)
                    self._hand_on(notifications)
                    result = refused()
                else:
                    self._recovered()
            told = fact(result)
            if told is not None:
                self.facts.publish(told)
        return result

    def _hand_on(self, notifications: Sequence[Notification]) -> None:
        """What a write the store refused would have queued: to be sent directly."""
        if notifications:
            self.facts.publish(NotificationsNotQueued(tuple(notifications)))

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
        """Write the actions held in memory, oldest first, so the history stays in order, then
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
            if held:  # what was read while they were held may have changed
                self.facts.publish(StoreRecovered())
            try:
                self._release_kept()
            except StoreError as exc:
                self._failed("release_held", exc)
                return False
            return True

    def _release_kept(self) -> int:
        """Release what refused writes left held, oldest first: how many notifications."""
        count = 0
        for incident_id, output in list(self._releases.items()):
            count += self.inner.release_held(incident_id, output)
            del self._releases[incident_id]
        return count

    def _keep(self, action: RemediationAction) -> int:
        temp_id, self._next_id = self._next_id, self._next_id - 1
        self._unwritten[temp_id] = action
        self.metrics.store_holding(len(self._unwritten))
        return temp_id

    @property
    def in_order(self) -> AbstractContextManager[object]:
        """Held around a person's write and the publishing of its fact (service/operator.py):
        the write's fact then goes out in the order the writes landed, the loop's and people's
        alike, which is this lock's one reason."""
        return self._lock

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

    # -- the loop's writes --------------------------------------------------------------------

    def save_incident(
        self, change: IncidentChange, notifications: Sequence[Notification] = ()
    ) -> Incident:
        """Refused: the change's own object, recorded at the next detection once writable."""
        return self._write(
            "save_incident",
            lambda: self.inner.save_incident(change, notifications),  # read back in its write
            refused=lambda: change.incident,
            fact=lambda saved: IncidentWritten(
                saved.container, saved.id, None if saved is change.incident else saved
            ),
            notifications=notifications,
            after_held=True,
        )

    def record_intent(
        self, action: RemediationAction, notifications: Sequence[Notification] = ()
    ) -> int:
        """Refused: held in memory under a negative id, written later without its notifications
        (they go out now, directly)."""
        about = (action.container, action.incident_id, _counts(action))
        with self._lock:
            if action.kind == ActionKind.RESTART:  # stamps are written one at a time
                self.stamps.wrote_restart(
                    action.host, action.container, action.container_id, action.requested_at
                )
            action_id = self._write(
                "record_intent",
                lambda: self.inner.record_intent(action, notifications),
                refused=lambda: self._keep(action),
                fact=lambda written: AttemptWritten(*about) if written >= 0 else None,
                notifications=notifications,
                after_held=True,
            )
            if action.outcome is None:
                self._about[action_id] = about
                if len(self._about) > MAX_ABOUT:  # the oldest one's outcome: about anything
                    del self._about[next(iter(self._about))]
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
        """A held action's outcome is held with it (published once written: StoreRecovered)."""
        with self._lock:
            held = self._unwritten.get(action_id)
            if held is not None:
                self._unwritten[action_id] = replace(
                    held,
                    outcome=outcome,
                    detail=detail,
                    finished_at=finished_at,
                    successor=successor or held.successor,
                )
                self._hand_on(notifications)  # a held action is written without them
                if self._flush():
                    self._recovered()
                return
            # An action's outcome may be written more than once (returned, then verified).
            about = self._about.get(action_id, (None, None, True))
            self._write(
                "record_outcome",
                lambda: self.inner.record_outcome(
                    action_id, outcome, detail, finished_at, notifications, successor
                ),
                refused=_nothing,
                fact=lambda _: AttemptWritten(*about) if action_id >= 0 else None,
                notifications=notifications,
            )

    def withdraw_unsent(self, host: str) -> int:
        return self._write(
            "withdraw_unsent",
            lambda: self.inner.withdraw_unsent(host),
            refused=lambda: 0,
            fact=lambda _: NotificationsWithdrawn(),
        )

    def release_held(self, incident_id: int | None, output: str = "") -> int:
        """Refused, they are released by the first write that lands (else by the next start)."""
        with self._lock:
            if len(self._releases) < MAX_RELEASES or incident_id in self._releases:
                self._releases[incident_id] = output
            return self._write("release_held", self._release_kept, refused=lambda: 0)

    def record_reset(self, host: str, container: str, at: datetime) -> None:
        def write() -> None:
            self.inner.record_reset(host, container, at)
            self._reset_here.add((host, container))

        with self._lock:  # stamps are written one at a time
            self.stamps.wrote_reset(host, container, at)
            self._write(
                "record_reset", write, refused=_nothing, fact=lambda _: ResetWritten(container)
            )

    def remember(self, host: str, mark: str, at: datetime) -> None:
        """Written only once the actions held in memory are: a mark says how far the store's
        record reaches, so it never passes an attempt the store does not hold."""
        self._write(
            "remember",
            lambda: self.inner.remember(host, mark, at),
            refused=_nothing,
            after_held=True,
        )

    def keep_record(self, host: str, record: Kept) -> None:
        self._write("keep_record", lambda: self.inner.keep_record(host, record), refused=_nothing)

    def touch_kept(self, host: str, name: str, container_id: str, at: datetime) -> bool:
        """Refused: taken as kept, so a failing store costs no inspect per look (the record is
        kept again at the next day's look)."""
        return self._write(
            "touch_kept",
            lambda: self.inner.touch_kept(host, name, container_id, at),
            refused=lambda: True,
        )

    def move_problem_starts(self, host: str, step: timedelta) -> None:
        self._write(
            "move_problem_starts",
            lambda: self.inner.move_problem_starts(host, step),
            refused=_nothing,
            fact=lambda _: ProblemStartsMoved(),
        )

    def close(self) -> None:
        self._flush()
        self.inner.close()

    # -- the reads of what this run stamped, placed by the monotonic clock ---------------------

    def restart_times(
        self,
        host: str,
        since: datetime,
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        """The stored ones, and those held in memory (this run's own, stamped)."""
        return self.stamps.restart_times(
            host,
            since,
            lambda after: self.inner.restart_times(host, after, container, container_id),
            container,
            container_id,
        )

    def last_reset(self, host: str, container: str) -> datetime | None:
        """The last counter reset, this run's own placed by the monotonic clock; one from an
        earlier run never after this run began, nor after a restart written after it whatever
        its stamp: a step back of the wall clock between them (where no monotonic reading of
        this run places them) left the restarts' stamps earlier than the reset's, and they
        still count against the budget."""
        stored = self.inner.last_reset(host, container)
        placed = self.stamps.last_reset(host, container, stored)
        if placed is None or stored is None or (host, container) in self._reset_here:
            return placed  # none, or this run's: the restarts after it are this run's too
        # An earlier run's came before every restart of this run, those held in memory too (a
        # full disk: the store has no row of them), even when a step back of the wall clock
        # before this run began (which no reading of this run can tell from time passing)
        # left its stamp ahead of theirs.
        placed = min(placed, self.stamps.began())
        first = self.inner.first_restart_after_reset(host, container)
        if first is None or first > stored:
            return placed
        # Just before that restart, placed as a stamp from before this run is (no reset of this
        # run carries it); the earlier of the two wins (more restarts count: the safe side).
        before = self.stamps.last_reset(host, container, first - EARLIER)
        return placed if before is None else min(placed, before)
