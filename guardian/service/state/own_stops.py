"""OwnStops: whose a container's stop or kill is, Guardian's own restart's or a person's (a
person's is never undone: docs/design.md rule 10), and the moment a decided call is sent to the
engine, which is where the one turns into the other."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from guardian.core.detection.stops import restart_made
from guardian.core.engine_record import EARLY
from guardian.core.stamps import Reading
from guardian.core.verification import PendingVerify
from guardian.ports import Clock
from guardian.service.state.claims import Claim, Claims
from guardian.service.state.epochs import RestartEpochs
from guardian.service.state.person_stops import PersonStops
from guardian.service.state.present import only_present
from guardian.service.state.verifications import Verifications

# One engine stamp placed on the monotonic clock at two readings: apart by float rounding only.
SAME_STAMP = 1e-6


class OwnStops:
    """Invariant: a stop or kill is a restart's own only between the moment its call was sent
    and its start: the start heard (the engine's events come in order), or shown by a look at
    the container when its event was lost; any other is held as a person's (PersonStops). A
    restart no claim or verification holds any more (its verdict is in, or an earlier run made
    it) is known from the store: a stop heard again (replayed) that its call may have made, no
    start heard between them, is its own too (core.detection.stops.restart_made).
    Deciding whose a stop is and sending a call happen under the restart lock (shared with
    Claims and Verifications), so a stop is heard either before the call was sent (a person's,
    and the call is not sent) or after (perhaps its own).

    Engine stamps are compared with engine stamps (docs/design.md rule 12), each held as the
    moment of the monotonic clock it was placed at when read: a step of the wall clock between
    the two readings moves neither."""

    def __init__(
        self,
        lock: threading.RLock,
        epochs: RestartEpochs,
        claims: Claims,
        verifications: Verifications,
        person_stops: PersonStops,
        clock: Clock,
    ) -> None:
        self._lock = lock
        self._epochs = epochs
        self._claims = claims
        self._verifications = verifications
        self._person_stops = person_stops
        self._clock = clock
        # The epoch at which the start of Guardian's own restart of a container was heard: the
        # restart's own stop and kill come before it in the event stream.
        self._start_heard: dict[str, int] = {}
        # A verifying restart's start as a look showed it, and the last stop heard while its
        # start was not known yet, each by container with the restart's action id.
        self._start_seen: dict[str, tuple[int, float]] = {}
        self._doubted: dict[str, tuple[int, float]] = {}
        # The engine's stamp of the last start heard of each container, whoever made it.
        self._started: dict[str, datetime] = {}

    def heard_start(self, container: str, at: datetime | None = None) -> None:
        """The engine started `container` (stamped `at`): while a restart of it runs or awaits
        its verdict, this is that restart's start (the engine's events come in order), unless
        it is stamped before the restart was asked (a start from before, replayed after a
        start of Guardian that resumed the restart's verification)."""
        with self._lock:
            if at is not None:
                self._started[container] = at
            p = next(iter(self._verifications.pending(container)), None)
            if p is not None and at is not None and at < p.restarted_at - EARLY:
                return  # an older start heard again (replayed): not its restart's
            if self._claims.running(container) or p is not None:
                self._start_heard[container] = self._epochs.of(container)
                self._doubted.pop(container, None)  # heard before its start: its own

    def caused_by_restart(
        self, container_id: str, container: str, at: datetime | None = None
    ) -> bool:
        """Whether a stop or kill of this container (stamped `at` by the engine, if known) may
        come from a restart Guardian made: its call was sent to the engine, or it awaits its
        verification, and its start has not been heard yet, nor shown by a look to lie before
        `at`. A stop before the call was sent (decided, waiting for its worker) or after the
        restart's start is a person's."""
        with self._lock:
            if self._claims.running(container):
                if not self._claims.sent(container):
                    return False
                # Its start is heard at the claim's epoch (a start heard before the call was
                # sent is dropped then: send).
                heard = self._start_heard.get(container)
                return heard is None or heard < self._epochs.of(container)
            p = self._verifying(container_id)
            if p is None:
                return False
            # A verification's epoch is its claim's plus one (Claims.claim, then the hand-over):
            # a start heard at either belongs to this restart, an older one to an earlier.
            heard = self._start_heard.get(container)
            if heard is not None and heard >= self._epochs.of(container) - 1:
                return False
            # Its start unheard (the stream cut and the engine's ring rolled over, or an earlier
            # run made the restart): a look at the container may have shown it. A stop stamped
            # with that start is the restart's own: the engine stamps the restart's stop and
            # start alike at its clock's resolution (a person's at that stamp comes after the
            # start's event, which decides above when it is heard).
            seen = self._start_seen.get(container)
            if at is None or seen is None or seen[0] != p.action_id:
                return True
            return self._mono(at) <= seen[1] + SAME_STAMP

    def stop_heard(
        self,
        container_id: str,
        container: str,
        at: datetime | None = None,
        asked: Sequence[tuple[datetime, timedelta]] = (),
    ) -> bool:
        """A stop or kill of the container, stamped `at` by the engine, was heard: held as a
        person's unless a restart of Guardian's caused it, one running or verifying, or one
        the store holds (`asked`: when its restarts near `at` were asked, with their stop
        timeouts). True: a person's. One taken for a verifying restart's own while that
        restart's start is not known is judged again when a look shows the start
        (restart_seen)."""
        with self._lock:
            if not self.caused_by_restart(container_id, container, at):
                if at is not None and restart_made(at, asked, self._started.get(container)):
                    return False  # heard again (replayed), its restart's verdict long in
                self._person_stops.stopped(container_id)
                return True
            p = self._verifying(container_id)
            seen = self._start_seen.get(container)
            if p is not None and at is not None and (seen is None or seen[0] != p.action_id):
                self._doubted[container] = (p.action_id, self._mono(at))
            return False

    def restart_seen(self, p: PendingVerify, started_at: datetime) -> bool:
        """A look at the container of verification `p` shows the restart's start, stamped
        `started_at` by the engine (its start event may never be heard: the stream cut and the
        engine's ring rolled over, or an earlier run made the restart). A stop heard while its
        start was not known, stamped after it (not with it: caused_by_restart), was a person's:
        held now (True)."""
        with self._lock:
            if self._verifying(p.container_id) is not p:
                return False
            start = self._mono(started_at)
            self._start_seen[p.container] = (p.action_id, start)
            doubted = self._doubted.pop(p.container, None)
            if doubted is None or doubted[0] != p.action_id or doubted[1] <= start + SAME_STAMP:
                return False
            self._person_stops.stopped(p.container_id)
            return True

    def send(self, claim: Claim, container_id: str) -> bool:
        """`claim`'s call goes to the engine now (its worker asks, just before the call),
        unless a person stopped, killed or removed the container since it was decided, or the
        claim ended: then it must not be sent (False). A start heard before now is not the
        call's: its own stop and kill come after it."""
        with self._lock:
            if claim.ended or self._person_stops.holds(container_id):
                return False
            claim.sent = True
            self._start_heard.pop(claim.container, None)
            return True

    def keep_only(self, keep: set[str]) -> None:
        """Forget the containers not in `keep` (call under the restart lock)."""
        self._start_heard = only_present(self._start_heard, keep)
        self._start_seen = only_present(self._start_seen, keep)
        self._doubted = only_present(self._doubted, keep)
        self._started = only_present(self._started, keep)

    def _mono(self, stamp: datetime) -> float:
        """An engine stamp in Guardian's frame as read now, as a moment of the monotonic clock."""
        return Reading(self._clock.now(), self._clock.monotonic()).mono_of(stamp)

    def _verifying(self, container_id: str) -> PendingVerify | None:
        return next(
            (p for p in self._verifications.pending() if p.container_id == container_id), None
        )
