"""LoopState: the healing loop's mutable state and its one lock, owned here and nowhere else.

Event threads, the sweep, verification and probes all read and change it; every method takes the
lock, and `lock` is public for the few sequences that must be atomic (decide, then claim).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from guardian.core.verification import PendingVerify

VERIFY_BACKOFF_MIN = timedelta(seconds=1)
VERIFY_BACKOFF_MAX = timedelta(seconds=8)


@dataclass(frozen=True)
class RestartCall:
    """A restart call running: the stop timeout the engine may wait out, and until when it holds
    a restart.max_concurrent slot (None: until it returns)."""

    stop_timeout: timedelta
    slot_until: datetime | None = None

    def holds_slot(self, now: datetime) -> bool:
        return self.slot_until is None or now < self.slot_until


class LoopState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Restart calls running, by container name.
        self._restarting: dict[str, RestartCall] = {}
        self._pending: dict[str, PendingVerify] = {}  # restarted, awaiting verification
        # Handed over to verification, the call's outcome not yet written (action ids): busy and
        # verifying, but not judged before the row a verdict would overwrite exists.
        self._unrecorded: set[int] = set()
        self._finishing: set[int] = set()  # settled, their verdict being written (action ids)
        # Changes whenever a restart of the container starts, is handed to verification or ends:
        # what a thread read from the store before may be stale when it changed (turn()).
        self._turns: dict[str, int] = {}
        self._claims = 0  # restarts claimed so far, host-wide (mark())
        # Containers restart.max_concurrent held back, oldest first: name -> container id.
        self._slot_waiters: dict[str, str] = {}
        # The verify tick's next look at each pending verification, and the gap after it.
        self._next_look: dict[int, tuple[datetime, timedelta]] = {}
        self._healthy_since: dict[str, datetime] = {}
        self._reset_checked: dict[str, datetime] = {}  # healthy streaks already reset or checked
        self._stopped_by_person: set[str] = set()  # container ids
        self._muted: set[str] = set()  # containers labelled guardian.notify=false
        self._receivers: dict[str, tuple[str, ...]] = {}  # guardian.notify=<receiver names>
        self._engine_up: bool | None = None
        self._watched = 0
        self._stopped = False
        # Containers whose restart awaits a person's approval (guardian.action=ask): name -> id.
        self._awaiting_approval: dict[str, str] = {}

    # -- restarts in flight and awaiting verification ----------------------------------------

    def claim(
        self,
        container: str,
        stop_timeout: timedelta = timedelta(0),
        slot_until: datetime | None = None,
    ) -> None:
        """A restart call for `container` starts (call under `lock`, after deciding); Docker
        may legitimately take `stop_timeout` longer than any other engine call. It counts
        against restart.max_concurrent until `slot_until` (None: until it returns)."""
        with self.lock:
            self._restarting[container] = RestartCall(stop_timeout, slot_until)
            self._slot_waiters.pop(container, None)
            self._turn(container)
            self._claims += 1

    def wait_for_slot(self, container: str, container_id: str) -> None:
        """restart.max_concurrent held `container`'s restart back: judge it again when a
        restart call ends (next_slot_waiter), not only at the next sweep."""
        with self.lock:
            self._slot_waiters.setdefault(container, container_id)

    def next_slot_waiter(self) -> str | None:
        """The id of the container held back longest for a free slot, taken off the list."""
        with self.lock:
            if not self._slot_waiters:
                return None
            name = next(iter(self._slot_waiters))
            return self._slot_waiters.pop(name)

    def slot_until(self, container: str) -> datetime | None:
        """Until when `container`'s running restart call holds its slot (None: until it returns,
        or no call runs)."""
        with self.lock:
            call = self._restarting.get(container)
            return call.slot_until if call is not None else None

    def stop(self) -> None:
        """Guardian stops: restart calls still running are left to the engine; what they return
        is not recorded (their intents are reconciled at the next start, as after a crash)."""
        with self.lock:
            self._stopped = True

    @property
    def stopped(self) -> bool:
        with self.lock:
            return self._stopped

    def release(self, container: str) -> None:
        with self.lock:
            if self._restarting.pop(container, None) is not None:
                self._turn(container)

    def longest_stop(self) -> timedelta:
        """The longest stop timeout of the restarts running now: how much longer than usual
        the loop may legitimately take to turn (the watchdog's and /healthz's allowance)."""
        with self.lock:
            return max((c.stop_timeout for c in self._restarting.values()), default=timedelta(0))

    def in_flight_names(self) -> list[str]:
        """The containers whose restart runs or awaits its verification."""
        with self.lock:
            return [*self._restarting, *self._pending]

    def restarts_in_flight(self, now: datetime) -> int:
        """The restart calls that hold a restart.max_concurrent slot at `now`."""
        with self.lock:
            return sum(1 for c in self._restarting.values() if c.holds_slot(now))

    def long_stops(self, now: datetime) -> int:
        """The restart calls past their slot: only waiting out a container's own stop timeout."""
        with self.lock:
            return sum(1 for c in self._restarting.values() if not c.holds_slot(now))

    def next_slot_free(self, now: datetime) -> datetime | None:
        """When the next running restart call gives its slot up by time (None: none will)."""
        with self.lock:
            ends = [c.slot_until for c in self._restarting.values() if c.slot_until is not None]
            return min((t for t in ends if t > now), default=None)

    def busy(self, container: str) -> bool:
        """A restart of `container` is running or awaits its verification."""
        with self.lock:
            return container in self._restarting or container in self._pending

    def await_verification(self, p: PendingVerify) -> None:
        with self.lock:
            self._pending[p.container] = p

    def hand_over(self, p: PendingVerify) -> None:
        """The restart call of `p.container` returned: from running to verifying in one step,
        before any I/O. With a gap between the two (the outcome's SQLite write), a sweep or an
        event saw the container neither restarting nor verifying and resolved its incident
        "observed healthy" without the verification. `p` is judged once `recorded(p)`."""
        with self.lock:
            self._restarting.pop(p.container, None)
            self._pending[p.container] = p
            self._unrecorded.add(p.action_id)
            self._turn(p.container)

    def recorded(self, p: PendingVerify) -> None:
        """The call's outcome is in the store: a verdict may now be written over it."""
        with self.lock:
            self._unrecorded.discard(p.action_id)

    def due_pending(self, now: datetime, only: str | None = None) -> list[PendingVerify]:
        """The verifications to judge now: container `only`'s at once (its event), or those the
        periodic tick should look at: each one after 1 s, then 2, 4, up to VERIFY_BACKOFF_MAX
        between looks, and at its deadline. A burst's restarts would otherwise cost the engine
        an inspect each per second while it restarts them all. A verification whose call's
        outcome is not written yet is not due (hand_over)."""
        with self.lock:
            due = []
            for name, p in self._pending.items():
                if p.action_id in self._unrecorded or p.action_id in self._finishing:
                    continue
                if only is not None and name != only:
                    continue
                look = self._next_look.get(p.action_id)
                if only is not None or look is None or now >= min(p.deadline, look[0]):
                    due.append(p)
            return due

    def looked(self, p: PendingVerify, now: datetime) -> None:
        """The tick looked at `p` and found no verdict yet: double the gap to the next look
        (nothing when another thread settled `p` meanwhile: its entry stays forgotten)."""
        with self.lock:
            if self._pending.get(p.container) is not p:
                return
            last = self._next_look.get(p.action_id)
            gap = VERIFY_BACKOFF_MIN if last is None else min(last[1] * 2, VERIFY_BACKOFF_MAX)
            self._next_look[p.action_id] = (now + gap, gap)

    def restart_running(self, container: str) -> bool:
        """Guardian's restart call for `container` runs now (claimed, not yet returned)."""
        with self.lock:
            return container in self._restarting

    def verifying(self, container: str) -> bool:
        with self.lock:
            return container in self._pending

    def pending(self, only: str | None = None) -> list[PendingVerify]:
        """The verifications awaiting a verdict (or the one of container `only`)."""
        with self.lock:
            return [p for name, p in self._pending.items() if only is None or name == only]

    def verifying_id(self, container_id: str) -> str | None:
        """The name of the container with this id whose restart awaits verification."""
        with self.lock:
            return next(
                (n for n, p in self._pending.items() if p.container_id == container_id), None
            )

    def settle(self, p: PendingVerify) -> bool:
        """This thread writes `p`'s verdict; False when another thread already does. `p` stays
        verifying (busy) until `settled(p)`: a sweep in between would see the container neither
        verifying nor its incident resolved yet, and resolve it "observed healthy"."""
        with self.lock:
            if self._pending.get(p.container) is not p:
                return False
            if p.action_id in self._unrecorded or p.action_id in self._finishing:
                return False
            self._finishing.add(p.action_id)
            return True

    def settled(self, p: PendingVerify) -> None:
        """`p`'s verdict is written: the container is no longer verifying."""
        with self.lock:
            self._finishing.discard(p.action_id)
            self._next_look.pop(p.action_id, None)
            if self._pending.get(p.container) is p:
                del self._pending[p.container]
                self._turn(p.container)

    def turn(self, container: str) -> int:
        """Read before reading `container`'s incidents or history from the store; `idle(name,
        turn)` afterwards says whether no restart ran or started meanwhile."""
        with self.lock:
            return self._turns.get(container, 0)

    def idle(self, container: str, turn: int) -> bool:
        """No restart of `container` runs or awaits verification, and none did since `turn`."""
        with self.lock:
            return self._turns.get(container, 0) == turn and not (
                container in self._restarting or container in self._pending
            )

    def mark(self, container: str) -> tuple[int, int]:
        """Read before reading a decision's history from the store (outside `lock`), and again
        under `lock` before deciding: unchanged, no restart was claimed on the host, nor did
        one of `container` start or end meanwhile, so what was read is what decide() needs."""
        with self.lock:
            return self._claims, self._turns.get(container, 0)

    def _turn(self, container: str) -> None:
        self._turns[container] = self._turns.get(container, 0) + 1

    def ours(self, container_id: str, container: str) -> bool:
        """Whether an engine event about this container comes from a restart Guardian made."""
        with self.lock:
            return container in self._restarting or any(
                p.container_id == container_id for p in self._pending.values()
            )

    def awaiting_approval(self, container: str, container_id: str | None) -> None:
        """`container`'s restart waits for a person's approval (None: no longer)."""
        with self.lock:
            if container_id is None:
                self._awaiting_approval.pop(container, None)
            else:
                self._awaiting_approval[container] = container_id

    def approvals_awaited(self) -> dict[str, str]:
        """The containers whose restart awaits approval: name -> id."""
        with self.lock:
            return dict(self._awaiting_approval)

    # -- healthy streaks (the attempt counter resets after reset_after) ----------------------

    def note_healthy(self, container: str, now: datetime) -> datetime:
        """`container` was seen healthy at `now`: returns when its healthy streak began (now,
        when this starts one)."""
        with self.lock:
            return self._healthy_since.setdefault(container, now)

    def streak_ended(self, container: str) -> None:
        with self.lock:
            self._healthy_since.pop(container, None)

    def first_reset_check(self, container: str, since: datetime) -> bool:
        """True once per healthy streak: reset marks only move forward, so a streak that was
        checked (or reset) needs no second look at the store."""
        with self.lock:
            if self._reset_checked.get(container) == since:
                return False
            self._reset_checked[container] = since
            return True

    def forget_absent(self, present: set[str]) -> None:
        with self.lock:
            for name in [n for n in self._awaiting_approval if n not in present]:
                del self._awaiting_approval[name]
            for streaks in (self._healthy_since, self._reset_checked):
                for name in [n for n in streaks if n not in present]:
                    del streaks[name]
            busy = set(self._restarting) | set(self._pending)
            for name in [n for n in self._turns if n not in present and n not in busy]:
                del self._turns[name]

    # -- the wall clock stepped ---------------------------------------------------------------

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped by `step` (service.clock_steps): the stamps held here move
        with it, so a verification's timeout, the next look and a healthy streak keep their
        length (DESIGN 12); the engine presents the stamps it had shown moved alike
        (adapters.engine_clock). A verdict being judged from the stamps before the step is not
        settled (settle() sees a new entry) and is judged again at the next look."""
        with self.lock:
            for name, p in self._pending.items():
                before = p.previous_started_at
                self._pending[name] = replace(
                    p,
                    restarted_at=p.restarted_at + step,
                    deadline=p.deadline + step,
                    previous_started_at=before + step if before is not None else None,
                )
            self._next_look = {k: (at + step, gap) for k, (at, gap) in self._next_look.items()}
            self._healthy_since = {k: at + step for k, at in self._healthy_since.items()}
            self._reset_checked = {k: at + step for k, at in self._reset_checked.items()}
            self._restarting = {
                k: replace(c, slot_until=c.slot_until + step) if c.slot_until else c
                for k, c in self._restarting.items()
            }

    # -- what people and labels said ----------------------------------------------------------

    def person_stopped(self, container_id: str) -> None:
        with self.lock:
            self._stopped_by_person.add(container_id)

    def forget_person_stop(self, container_id: str) -> None:
        """The container started again (or is gone): no longer held as stopped by a person."""
        with self.lock:
            self._stopped_by_person.discard(container_id)

    def stopped_by_person(self, container_id: str) -> bool:
        with self.lock:
            return container_id in self._stopped_by_person

    def mute(self, container: str, muted: bool) -> None:
        with self.lock:
            if muted:
                self._muted.add(container)
            else:
                self._muted.discard(container)

    def muted(self, container: str) -> bool:
        with self.lock:
            return container in self._muted

    def address(self, container: str, receivers: tuple[str, ...]) -> None:
        """The receivers the container's guardian.notify label names (() none)."""
        with self.lock:
            if receivers:
                self._receivers[container] = receivers
            else:
                self._receivers.pop(container, None)

    def receivers_of(self, container: str) -> tuple[str, ...]:
        with self.lock:
            return self._receivers.get(container, ())

    # -- what the last sweep saw ---------------------------------------------------------------

    def engine_seen(self, up: bool) -> bool | None:
        """Record whether the engine answered; returns what was known before."""
        with self.lock:
            before, self._engine_up = self._engine_up, up
            return before

    @property
    def engine_up(self) -> bool | None:
        with self.lock:
            return self._engine_up

    def swept(self, watched: int) -> None:
        with self.lock:
            self._watched = watched

    @property
    def watched(self) -> int:
        with self.lock:
            return self._watched
