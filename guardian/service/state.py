"""LoopState: the healing loop's mutable state and its one lock, owned here and nowhere else.

Event threads, the sweep, verification and probes all read and change it; every method takes the
lock, and `lock` is public for the few sequences that must be atomic (decide, then claim).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta

from guardian.core.verification import PendingVerify

VERIFY_BACKOFF_MIN = timedelta(seconds=1)
VERIFY_BACKOFF_MAX = timedelta(seconds=8)


class LoopState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Restart calls running, by container name, with the stop timeout Docker may wait.
        self._restarting: dict[str, timedelta] = {}
        self._pending: dict[str, PendingVerify] = {}  # restarted, awaiting verification
        # Containers restart.max_concurrent held back, oldest first: name -> container id.
        self._slot_waiters: dict[str, str] = {}
        # The verify tick's next look at each pending verification, and the gap after it.
        self._next_look: dict[int, tuple[datetime, timedelta]] = {}
        self._healthy_since: dict[str, datetime] = {}
        self._reset_checked: dict[str, datetime] = {}  # healthy streaks already reset or checked
        self._stopped_by_person: set[str] = set()  # container ids
        self._muted: set[str] = set()  # containers labelled guardian.notify=false
        self._engine_up: bool | None = None
        self._watched = 0

    # -- restarts in flight and awaiting verification ----------------------------------------

    def claim(self, container: str, stop_timeout: timedelta = timedelta(0)) -> None:
        """A restart call for `container` starts (call under `lock`, after deciding); Docker
        may legitimately take `stop_timeout` longer than any other engine call."""
        with self.lock:
            self._restarting[container] = stop_timeout
            self._slot_waiters.pop(container, None)

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

    def release(self, container: str) -> None:
        with self.lock:
            self._restarting.pop(container, None)

    def longest_stop(self) -> timedelta:
        """The longest stop timeout of the restarts running now: how much longer than usual
        the loop may legitimately take to turn (the watchdog's and /healthz's allowance)."""
        with self.lock:
            return max(self._restarting.values(), default=timedelta(0))

    def restarts_in_flight(self) -> int:
        with self.lock:
            return len(self._restarting)

    def busy(self, container: str) -> bool:
        """A restart of `container` is running or awaits its verification."""
        with self.lock:
            return container in self._restarting or container in self._pending

    def await_verification(self, p: PendingVerify) -> None:
        with self.lock:
            self._pending[p.container] = p

    def due_pending(self, now: datetime) -> list[PendingVerify]:
        """The verifications the periodic tick should look at now: each one after 1 s, then 2,
        4, up to VERIFY_BACKOFF_MAX between looks, and at its deadline. A burst's restarts would
        otherwise cost the engine an inspect each per second while it restarts them all (its
        own health events are judged at once, outside this backoff)."""
        with self.lock:
            due = []
            for p in self._pending.values():
                look = self._next_look.get(p.action_id)
                if look is None or now >= min(p.deadline, look[0]):
                    due.append(p)
            return due

    def looked(self, p: PendingVerify, now: datetime) -> None:
        """The tick looked at `p` and found no verdict yet: double the gap to the next look."""
        with self.lock:
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
        """Take `p` off the pending list; False when another thread already settled it."""
        with self.lock:
            if self._pending.get(p.container) is not p:
                return False
            del self._pending[p.container]
            self._next_look.pop(p.action_id, None)
            return True

    def ours(self, container_id: str, container: str) -> bool:
        """Whether an engine event about this container comes from a restart Guardian made."""
        with self.lock:
            return container in self._restarting or any(
                p.container_id == container_id for p in self._pending.values()
            )

    # -- healthy streaks (the attempt counter resets after reset_after) ----------------------

    def healthy_since(self, container: str, now: datetime) -> datetime:
        """When the current healthy streak began (now, if it begins now)."""
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
            for streaks in (self._healthy_since, self._reset_checked):
                for name in [n for n in streaks if n not in present]:
                    del streaks[name]

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

    # -- what people and labels said ----------------------------------------------------------

    def person_stopped(self, container_id: str) -> None:
        with self.lock:
            self._stopped_by_person.add(container_id)

    def started(self, container_id: str) -> None:
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
