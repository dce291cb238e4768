"""Claims: the restart calls running, each held by a Claim that ends exactly once, and the
restart.max_concurrent slots they hold, each until a moment of the monotonic clock (a step of
the wall clock changes no slot's length: docs/design.md rule 12)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType

from guardian.core.stamps import Reading
from guardian.core.verification import PendingVerify
from guardian.ports import Clock
from guardian.service.state.epochs import RestartEpochs
from guardian.service.state.verifications import Verifications


@dataclass(frozen=True)
class RestartCall:
    """A restart call running: the stop timeout the engine may wait out, and until when it holds
    a restart.max_concurrent slot, on the monotonic clock (None: until it returns)."""

    stop_timeout: timedelta
    slot_until: float | None = None

    def holds_slot(self, mono: float) -> bool:
        return self.slot_until is None or mono < self.slot_until


class Claim:
    """One restart (or stop) call's hold on its container, from the decision that allowed it
    to the call's return. It ends exactly once: released, or handed over to verification; a
    second end does nothing, so no path can end another claim of the same container.

    Who ends it: the block that holds it (`with claim:`) on leaving, unless it passed the claim
    on with the call (`carried_by`) and handed that call over without an error; then the call
    ends it, on its own thread, when it returns or raises (or earlier, by release or hand_over,
    once the engine is done with the container)."""

    def __init__(self, claims: Claims, container: str, call: RestartCall, sent: bool) -> None:
        self._claims = claims
        self.container = container
        self.call = call
        self.ended = False  # guarded by the restart lock (Claims)
        # Its call went to the engine (guarded by the restart lock): from then on a stop of the
        # container may be the call's own (LoopState.caused_by_restart), not before.
        self.sent = sent
        self._passed = False  # only the holding block's thread reads and writes it

    @property
    def slot_until(self) -> datetime | None:
        """Until when the call holds its restart.max_concurrent slot, on the wall clock as it
        reads now (None: until it ends)."""
        return self._claims.on_wall_clock(self.call.slot_until)

    def release(self) -> bool:
        """The call is over without a verification to follow; False if the claim had ended."""
        return self._claims.end(self, None)

    def hand_over(self, p: PendingVerify) -> bool:
        """The restart call returned: from running to verifying in one step, before any I/O.
        With a gap between the two (the outcome's SQLite write), a sweep or an event saw the
        container neither restarting nor verifying and resolved its incident "observed healthy"
        without the verification. `p` is judged once its outcome is written."""
        return self._claims.end(self, p)

    def carried_by(self, call: Callable[[], None]) -> Callable[[], None]:
        """`call`, made to end this claim when it returns or raises, wherever it runs."""
        self._passed = True

        def carried() -> None:
            try:
                call()
            finally:
                self.release()

        return carried

    def __enter__(self) -> Claim:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # An error after the call was passed on means it was refused or never handed over.
        if exc_type is not None or not self._passed:
            self.release()


class Claims:
    """Invariant: at most one claim per container, made under the restart lock by the decision
    that allowed it (decide() reads the claims under that lock, so two threads never both
    claim), and its entry leaves once, when that claim ends.

    It shares the restart lock with Verifications: a claim ends by becoming a verification in
    one step (Claim.hand_over), and both change the containers' RestartEpochs."""

    def __init__(
        self,
        lock: threading.RLock,
        epochs: RestartEpochs,
        verifications: Verifications,
        clock: Clock,
    ) -> None:
        self._lock = lock
        self._clock = clock
        self._epochs = epochs
        self._verifications = verifications
        self._running: dict[str, Claim] = {}
        # Containers restart.max_concurrent held back, oldest first: name -> container id.
        self._slot_waiters: dict[str, str] = {}
        self._recording = True

    def _clocks(self) -> Reading:
        return Reading(self._clock.now(), self._clock.monotonic())

    def claim(
        self,
        container: str,
        stop_timeout: timedelta = timedelta(0),
        slot_until: datetime | None = None,
        waits: bool = False,
    ) -> Claim:
        """A restart call for `container` starts (under the restart lock, after deciding);
        Docker may legitimately take `stop_timeout` longer than any other engine call. It counts
        against restart.max_concurrent until `slot_until` (None: until it returns), a time of
        this run's wall clock, held on the monotonic clock. `waits`: the call is not sent yet
        (its worker sends it: LoopState.send)."""
        until = None if slot_until is None else self._clocks().mono_of(slot_until)
        with self._lock:
            claim = Claim(self, container, RestartCall(stop_timeout, until), sent=not waits)
            self._running[container] = claim
            self._slot_waiters.pop(container, None)
            self._epochs.advance(container, claimed=True)
            return claim

    def end(self, claim: Claim, verify: PendingVerify | None) -> bool:
        """End `claim` (Claim.release, Claim.hand_over to `verify`); False if it had ended."""
        with self._lock:
            if claim.ended:
                return False
            claim.ended = True
            if self._running.get(claim.container) is claim:
                del self._running[claim.container]
            if verify is not None:
                self._verifications.handed_over(verify)
            else:
                self._epochs.advance(claim.container)
            return True

    def running(self, container: str) -> bool:
        """Guardian's restart call for `container` runs now (claimed, not yet ended)."""
        with self._lock:
            return container in self._running

    def sent(self, container: str) -> bool:
        """Guardian's call for `container` runs and was sent to the engine (not only decided,
        waiting for its worker)."""
        with self._lock:
            claim = self._running.get(container)
            return claim is not None and claim.sent

    def names(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def wait_for_slot(self, container: str, container_id: str) -> None:
        """restart.max_concurrent held `container`'s restart back: judge it again when a
        restart call ends (next_slot_waiter), not only at the next sweep."""
        with self._lock:
            self._slot_waiters.setdefault(container, container_id)

    def next_slot_waiter(self) -> str | None:
        """The id of the container held back longest for a free slot, taken off the list."""
        with self._lock:
            if not self._slot_waiters:
                return None
            name = next(iter(self._slot_waiters))
            return self._slot_waiters.pop(name)

    def slots_held(self, now: datetime) -> int:
        """The restart calls that hold a restart.max_concurrent slot at `now`."""
        at = self._clocks().mono_of(now)
        with self._lock:
            return sum(1 for c in self._running.values() if c.call.holds_slot(at))

    def long_stops(self, now: datetime) -> int:
        """The restart calls past their slot: only waiting out a container's own stop timeout."""
        at = self._clocks().mono_of(now)
        with self._lock:
            return sum(1 for c in self._running.values() if not c.call.holds_slot(at))

    def next_slot_free(self, now: datetime) -> datetime | None:
        """When the next running restart call gives its slot up by time (None: none will)."""
        clocks = self._clocks()
        at = clocks.mono_of(now)
        with self._lock:
            ends = [c.call.slot_until for c in self._running.values()]
            soonest = min((t for t in ends if t is not None and t > at), default=None)
        return None if soonest is None else clocks.wall_of(soonest)

    def on_wall_clock(self, mono: float | None) -> datetime | None:
        """A slot's end held on the monotonic clock, on the wall clock as it reads now."""
        return None if mono is None else self._clocks().wall_of(mono)

    def longest_stop(self) -> timedelta:
        """The longest stop timeout of the restarts running now: how much longer than usual
        the loop may legitimately take to turn (the watchdog's and /healthz's allowance)."""
        with self._lock:
            return max((c.call.stop_timeout for c in self._running.values()), default=timedelta(0))

    def stop_recording(self) -> None:
        """Guardian stops: restart calls still running are left to the engine; what they return
        is not recorded (their intents are reconciled at the next start, as after a crash)."""
        with self._lock:
            self._recording = False

    @property
    def recording(self) -> bool:
        """What a returning restart call says is still recorded (Guardian is not stopping)."""
        with self._lock:
            return self._recording
