"""LoopState: the healing loop's mutable state, owned here and nowhere else, in parts by what
each guards, each with its own invariant: restart claims and verifications (one lock shared by
the two, and by whose a stop is), approvals awaited, notification routing, healthy streaks,
person stops, engine liveness, the engine's record of starts, the containers as the engine's
events keep them, the containers a sweep need not judge again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from guardian.core.stamps import Reading
from guardian.core.verification import PendingVerify
from guardian.ports import Clock
from guardian.service.state.claims import Claim, Claims
from guardian.service.state.container_cache import ContainerCache
from guardian.service.state.engine_memory import EngineMemory
from guardian.service.state.epochs import RestartEpochs
from guardian.service.state.maintenance import MaintenanceHolds
from guardian.service.state.own_stops import OwnStops
from guardian.service.state.person_stops import PersonStops
from guardian.service.state.present import drop_absent
from guardian.service.state.quiet import FOREVER, QuietRows
from guardian.service.state.verifications import Verifications


class Approvals:
    """The containers whose restart awaits a person's approval (guardian.action=ask).

    Invariant: a container awaits at most one approval, for the container (its id) seen last;
    it leaves when a decision no longer waits for one, its problem ends or it is gone.

    No lock: a container's entry is set or popped on its turn (its worker, or the sweep holding
    its key), read whole by the approvals job and the daemon's main loop in one copy, and the
    sweep drops the absent ones one pop at a time; each is one dict operation, atomic in
    CPython, and none reads then writes in two steps."""

    def __init__(self) -> None:
        self._awaited: dict[str, str] = {}  # name -> container id

    def awaiting(self, container: str, container_id: str | None) -> None:
        """`container`'s restart waits for a person's approval (None: no longer)."""
        if container_id is None:
            self._awaited.pop(container, None)
        else:
            self._awaited[container] = container_id

    def awaited(self) -> dict[str, str]:
        """The containers whose restart awaits approval: name -> id."""
        return dict(self._awaited)

    def keep_only(self, present: set[str]) -> None:
        drop_absent(self._awaited, present)


class RollbackRequests:
    """The containers a person's usable rollback request names (id -> name): a look reads the
    store for the request only then (service/healing/requested.py). Under the restart lock, a
    dict operation at a time."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._pending: dict[str, str] = {}

    def requested(self, container_id: str, container: str) -> None:
        with self._lock:
            self._pending[container_id] = container

    def pending(self, container_id: str) -> bool:
        with self._lock:
            return container_id in self._pending

    def done(self, container_id: str) -> None:
        with self._lock:
            self._pending.pop(container_id, None)

    def keep_only(self, present: set[str]) -> None:
        with self._lock:
            self._pending = {c: n for c, n in self._pending.items() if n in present}


class NotificationRouting:
    """What each container's guardian.notify label said when the loop last observed it.

    Invariant: a container is muted, or routed to the receivers its label names, or neither
    (the operator's routes); an empty list of receivers is never kept.

    No lock: a container's routing is one immutable pair, set or dropped in one assignment
    (its worker, the sweep's resource update and a follower's restart may observe its labels
    at once: the last whole pair stands) and read in one lookup (the recorder)."""

    NEITHER: tuple[bool, tuple[str, ...]] = (False, ())

    def __init__(self) -> None:
        self._routes: dict[str, tuple[bool, tuple[str, ...]]] = {}  # name -> (muted, receivers)

    def update(self, container: str, muted: bool, receivers: tuple[str, ...]) -> None:
        """`container`'s label mutes it (or not) and names these receivers (() none)."""
        if muted or receivers:
            self._routes[container] = (muted, receivers)
        else:
            self._routes.pop(container, None)

    def muted(self, container: str) -> bool:
        return self._routes.get(container, self.NEITHER)[0]

    def receivers_of(self, container: str) -> tuple[str, ...]:
        return self._routes.get(container, self.NEITHER)[1]


class HealthyStreaks:
    """Since when each container has been seen healthy (the attempt counter resets after
    reset_after).

    Invariant: a streak begins at the first healthy look after a problem and ends at the next
    problem; its start is a moment of the monotonic clock (a step of the wall clock changes no
    streak's length), placed on the wall clock as it reads when asked; the store is asked about
    a reset at most once per streak.

    No lock: a container's streak begins, ends and is checked on its turn (its worker, or the
    sweep or verify tick holding its key); the sweep reads it for its quiet rows (a row heard of
    meanwhile is not kept: QuietRows.keep) and drops absent names one pop at a time. Beginning a
    streak and taking its one reset check are each one setdefault, atomic in CPython, so even
    two threads at one name (a container recreated under it) start one streak and check once."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._since: dict[str, float] = {}
        self._reset_checked: dict[str, object] = {}  # their streak was already reset or checked

    def seen_healthy(self, container: str, now: datetime) -> datetime:
        """`container` was seen healthy at `now`: returns when its healthy streak began (now,
        when this starts one), on the wall clock as it reads now."""
        clocks = Reading(self._clock.now(), self._clock.monotonic())
        fresh = clocks.mono_of(now)
        since = self._since.setdefault(container, fresh)
        if since is fresh:  # this look began the streak
            self._reset_checked.pop(container, None)
        return clocks.wall_of(since)

    def ended(self, container: str) -> None:
        self._since.pop(container, None)
        self._reset_checked.pop(container, None)

    def first_reset_check(self, container: str, since: datetime) -> bool:
        """True once per healthy streak (the one seen_healthy said began at `since`): reset
        marks only move forward, so a streak that was checked (or reset) needs no second look
        at the store."""
        mine = object()
        return self._reset_checked.setdefault(container, mine) is mine

    def quiet_until(self, container: str, reset_after: timedelta) -> datetime | None:
        """Until when another healthy look at `container` changes nothing (service/state/quiet.py):
        until its streak's reset check is due, FOREVER once it was made (or when it lies beyond
        any date); None: no streak."""
        clocks = Reading(self._clock.now(), self._clock.monotonic())
        since = self._since.get(container)
        if since is None:
            return None
        if container not in self._reset_checked:
            with contextlib.suppress(OverflowError):
                return clocks.wall_of(since) + reset_after
        return FOREVER

    def keep_only(self, present: set[str]) -> None:
        drop_absent(self._since, present)
        drop_absent(self._reset_checked, present)


class EngineLiveness:
    """What the last sweep saw of the engine: whether it answered, and how many containers it
    watched. Invariant: each value is the latest answer; `up` is None until the first; each
    change of `up` is returned as a change (before != up) to exactly one answered().

    Under the host lock (LoopState.lock), not one of its own: answered() reads the value before
    and writes the new one, and the sweep and the workers' reactions to an unreachable engine
    both answer, so two threads must not both take the same `before` (the change would be
    logged twice, or a change missed). Whether the engine answers is host state, as is what
    decide() reads under that lock; the swap is two attribute operations, no I/O and no other
    lock under it. `up` and `watched` are each one value read in one load; `watched` has one
    writer (the sweep)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._up: bool | None = None
        self._watched = 0

    def answered(self, up: bool) -> bool | None:
        """Record whether the engine answered; returns what was known before."""
        with self._lock:
            before, self._up = self._up, up
            return before

    @property
    def up(self) -> bool | None:
        return self._up

    def swept(self, watched: int) -> None:
        self._watched = watched

    @property
    def watched(self) -> int:
        return self._watched


class LoopState:
    """The parts, and the questions about restarts that span claims and verifications.

    `lock` is the host lock (docs/design.md rule 21: the only state shared across containers is
    what decide() reads of the host), shared by `claims` and `verifications` and by the storm's
    hold (service/healing/host.py HostWatch, handed this lock by bootstrap): decide() reads the
    restarts running and verifying and claims under one hold of it, a claim becomes a
    verification in one step, and a storm's canary is set with its claim. It also guards the
    parts whose read-then-write is host state: a person's rollbacks asked, the maintenance holds,
    the engine's liveness, and what the engine's record says of the host's budget (remembered;
    never held across the record's read). No other part has a lock: each is written by one
    owner (a container's worker on its turn, or the sweep), or in one atomic dict operation (a
    setdefault claim, a pop), or swapped whole as one value; the container cache keeps its own,
    its docstring saying why."""

    def __init__(self, clock: Clock) -> None:
        self.lock = threading.RLock()
        self.epochs = RestartEpochs()
        self.verifications = Verifications(self.lock, self.epochs, clock)
        self.claims = Claims(self.lock, self.epochs, self.verifications, clock)
        self.approvals = Approvals()
        self.rollbacks = RollbackRequests(self.lock)  # a person's rollbacks asked
        self.routing = NotificationRouting()
        self.streaks = HealthyStreaks(clock)
        self.person_stops = PersonStops()
        self.engine = EngineLiveness(self.lock)  # whether the engine answers, a host's fact
        # The engine's record (docs/design.md rule 16): what the host's budget counts of it.
        self.remembered = EngineMemory(clock, self.lock)
        self.maintenance = MaintenanceHolds(clock, self.lock)  # windows in force, to their end
        self.cache = ContainerCache()  # containers as the events keep them (docs/design.md rule 18)
        self.quiet = QuietRows()  # the containers a sweep need not judge again
        # Whose each stop is, Guardian's restart's or a person's, and when a call is sent.
        self.own = OwnStops(
            self.lock, self.epochs, self.claims, self.verifications, self.person_stops, clock
        )

    # -- restarts: claims and verifications together -----------------------------------------

    def restart_underway(self, container: str) -> bool:
        """A restart of `container` is running or awaits its verification."""
        with self.lock:
            return self.claims.running(container) or self.verifications.verifying(container)

    def present_or_underway(self, present: set[str]) -> set[str]:
        """`present` and the containers whose restart runs or awaits its verification (they
        still change, whatever the list said); `present` itself while none is under way."""
        underway = self.underway_names()
        return present | set(underway) if underway else present

    def underway_names(self) -> list[str]:
        """The containers whose restart runs or awaits its verification."""
        with self.lock:
            return [*self.claims.names(), *(p.container for p in self.verifications.pending())]

    def heard_start(self, container: str, at: datetime | None = None) -> None:
        """The engine started `container`, stamped `at` (OwnStops.heard_start)."""
        self.own.heard_start(container, at)

    def caused_by_restart(
        self, container_id: str, container: str, at: datetime | None = None
    ) -> bool:
        """Whether a stop or kill of this container stamped `at` may be a restart's own
        (OwnStops.caused_by_restart)."""
        return self.own.caused_by_restart(container_id, container, at)

    def stop_heard(
        self,
        container_id: str,
        container: str,
        at: datetime | None = None,
        asked: Sequence[tuple[datetime, timedelta]] = (),
    ) -> bool:
        """A stop or kill of the container was heard (`asked`: the store's restarts of it that
        may have made it); True: held as a person's (OwnStops.stop_heard)."""
        return self.own.stop_heard(container_id, container, at, asked)

    def restart_seen(self, p: PendingVerify, started_at: datetime) -> bool:
        """A look shows verification `p`'s restart started at `started_at`; True: a stop heard
        after it is held as a person's now (OwnStops.restart_seen)."""
        return self.own.restart_seen(p, started_at)

    def send(self, claim: Claim, container_id: str) -> bool:
        """Whether `claim`'s call may go to the engine now, marked sent (OwnStops.send)."""
        return self.own.send(claim, container_id)

    def epoch_of(self, container: str) -> int:
        """Read before reading `container`'s incidents or history from the store;
        `no_restart_since(name, epoch)` afterwards says whether what was read is still true."""
        with self.lock:
            return self.epochs.of(container)

    def no_restart_since(self, container: str, epoch: int) -> bool:
        """No restart of `container` runs or awaits verification, and none did since `epoch`."""
        with self.lock:
            return self.epochs.of(container) == epoch and not self.restart_underway(container)

    def claimed(self) -> int:
        """How many restarts were ever reserved on the host: read before reading a decision's
        history from the store (outside `lock`) and again under `lock` before deciding; the
        difference is what other containers reserved meanwhile."""
        with self.lock:
            return self.epochs.claimed

    # -- every part -----------------------------------------------------------------------------

    def forget_absent(self, present: set[str]) -> None:
        """Forget what is kept about containers the engine no longer lists (a restart under
        way keeps its epoch: it still changes)."""
        self.approvals.keep_only(present)
        self.rollbacks.keep_only(present)
        self.streaks.keep_only(present)
        self.maintenance.keep_only(present)
        with self.lock:
            keep = self.present_or_underway(present)
            self.epochs.forget_except(keep)
            self.own.keep_only(keep)
