"""Verifications: restarts whose call returned, awaiting the Verifier's verdict, and when the
verify tick looks at each one next. Their deadlines and looks are held on the monotonic clock
(a step of the wall clock changes no verify_timeout: docs/design.md rule 12), and a
verification is judged placed on the wall clock as it reads then (placed)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from guardian.core.stamps import Reading
from guardian.core.verification import PendingVerify
from guardian.ports import Clock
from guardian.service.state.epochs import RestartEpochs

VERIFY_BACKOFF_MIN = timedelta(seconds=1)
VERIFY_BACKOFF_MAX = timedelta(seconds=8)


@dataclass(frozen=True)
class _Moments:
    """A verification's stamps as moments of the monotonic clock: the restart's request and
    its deadline; and the container's start before it (an engine stamp, None: unknown), kept
    as the engine wrote it with the reading it was placed at. It is compared for equality with
    the start an inspect shows, so it moves only with a step of the wall clock (the engine's
    stamps are shown moved alike: adapters.engine.engine_clock), never by the microseconds two
    readings of the clocks differ by."""

    restarted_at: float
    deadline: float
    previous_started_at: datetime | None
    read: Reading

    @classmethod
    def of(cls, p: PendingVerify, clocks: Reading) -> _Moments:
        return cls(
            clocks.mono_of(p.restarted_at),
            clocks.mono_of(p.deadline),
            p.previous_started_at,
            clocks,
        )

    def previous_start(self, clocks: Reading) -> datetime | None:
        """The container's start before the restart, in the frame of `clocks`."""
        before = self.previous_started_at
        if before is None or not clocks.stepped_since(self.read):
            return before
        return clocks.wall_of(self.read.mono_of(before))


class Verifications:
    """Invariant: at most one verification per container. It is judged only once its call's
    outcome is in the store (a verdict must not be overwritten by that row), by one thread at a
    time (begin_verdict), and it stays verifying until its verdict is written (verdict_written):
    a sweep in between would otherwise see the container neither verifying nor resolved, and
    resolve it "observed healthy".

    It shares the restart lock with Claims, not a lock of its own: a claim becomes a
    verification in one step (Claim.hand_over), and decide() reads both under it."""

    def __init__(self, lock: threading.RLock, epochs: RestartEpochs, clock: Clock) -> None:
        self._lock = lock
        self._epochs = epochs
        self._clock = clock
        self._pending: dict[str, PendingVerify] = {}
        self._moments: dict[str, _Moments] = {}  # by container, with its entry in _pending
        # Handed over, the call's outcome not yet written (action ids): verifying, not judged.
        self._unwritten: set[int] = set()
        self._judging: set[int] = set()  # a thread writes their verdict (action ids)
        # The verify tick's next look at each verification (monotonic), and the gap after it.
        self._next_look: dict[int, tuple[float, timedelta]] = {}

    def handed_over(self, p: PendingVerify) -> None:
        """A restart call returned (Claims calls this under the lock as its claim ends): `p`
        awaits its verdict, judged once `outcome_written(p)`. Its stamps are of this run's
        wall clock as it reads now."""
        moments = _Moments.of(p, Reading(self._clock.now(), self._clock.monotonic()))
        with self._lock:
            self._pending[p.container], self._moments[p.container] = p, moments
            self._unwritten.add(p.action_id)
            self._epochs.advance(p.container)

    def resume(self, p: PendingVerify) -> None:
        """A restart from before this start (its outcome already written) awaits its verdict."""
        moments = _Moments.of(p, Reading(self._clock.now(), self._clock.monotonic()))
        with self._lock:
            self._pending[p.container], self._moments[p.container] = p, moments

    def outcome_written(self, p: PendingVerify) -> None:
        """The call's outcome is in the store: a verdict may now be written over it."""
        with self._lock:
            self._unwritten.discard(p.action_id)

    def due(self, now: datetime, only: str | None = None) -> list[PendingVerify]:
        """The verifications to judge now: container `only`'s at once (its event), or those the
        periodic tick should look at: after 1 s, then 2, 4, up to VERIFY_BACKOFF_MAX between
        looks, and at its deadline, so many restarts at once cost the busy engine fewer inspects."""
        at = Reading(self._clock.now(), self._clock.monotonic()).mono_of(now)
        with self._lock:
            due = []
            for name, p in self._pending.items():
                if p.action_id in self._unwritten or p.action_id in self._judging:
                    continue
                if only is not None and name != only:
                    continue
                look = self._next_look.get(p.action_id)
                deadline = self._moments[name].deadline
                if only is not None or look is None or at >= min(deadline, look[0]):
                    due.append(p)
            return due

    def looked(self, p: PendingVerify, now: datetime) -> None:
        """The tick looked at `p` and found no verdict yet: double the gap to the next look
        (nothing when another thread settled `p` meanwhile: its entry stays forgotten)."""
        at = Reading(self._clock.now(), self._clock.monotonic()).mono_of(now)
        with self._lock:
            if self._pending.get(p.container) is not p:
                return
            last = self._next_look.get(p.action_id)
            gap = VERIFY_BACKOFF_MIN if last is None else min(last[1] * 2, VERIFY_BACKOFF_MAX)
            self._next_look[p.action_id] = (at + gap.total_seconds(), gap)

    def placed(self, p: PendingVerify, clocks: Reading) -> PendingVerify:
        """`p` with its stamps on the wall clock as `clocks` read it, as the core judges it
        against a snapshot and `now` of the same reading; `p` itself once it was settled."""
        with self._lock:
            if self._pending.get(p.container) is not p:
                return p
            m = self._moments[p.container]
        return replace(
            p,
            restarted_at=clocks.wall_of(m.restarted_at),
            deadline=clocks.wall_of(m.deadline),
            previous_started_at=m.previous_start(clocks),
        )

    def begin_verdict(self, p: PendingVerify) -> bool:
        """This thread writes `p`'s verdict; False when another thread already does, or when
        `p` is no longer the container's verification (settled)."""
        with self._lock:
            if self._pending.get(p.container) is not p:
                return False
            if p.action_id in self._unwritten or p.action_id in self._judging:
                return False
            self._judging.add(p.action_id)
            return True

    def verdict_written(self, p: PendingVerify) -> None:
        """`p`'s verdict is in the store: the container is no longer verifying."""
        with self._lock:
            self._judging.discard(p.action_id)
            self._next_look.pop(p.action_id, None)
            if self._pending.get(p.container) is p:
                del self._pending[p.container], self._moments[p.container]
                self._epochs.advance(p.container)

    def verifying(self, container: str) -> bool:
        with self._lock:
            return container in self._pending

    def pending(self, only: str | None = None) -> list[PendingVerify]:
        """The verifications awaiting a verdict (or the one of container `only`)."""
        with self._lock:
            return [p for name, p in self._pending.items() if only is None or name == only]

    def name_of(self, container_id: str) -> str | None:
        """The name of the container with this id whose restart awaits verification."""
        with self._lock:
            return next(
                (n for n, p in self._pending.items() if p.container_id == container_id), None
            )
