"""A person's stops beyond what this run of Guardian heard: each one heard is kept in the store,
so a restart of Guardian does not forget it, and an exit the event stream has not told of (still
on its way, the stream cut, before this run began) is looked up in the engine's record before
anything is done about it (core.detection.stops). Never undone (docs/design.md rule 10).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from guardian.core.detection.checks import skip
from guardian.core.detection.stops import KILL_BOUND, Seen, stop_requested
from guardian.core.engine_record import LATE
from guardian.core.model import ActionKind, ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.logs import kv
from guardian.ports import (
    Clock,
    Engine,
    EngineEvent,
    EngineHistory,
    EngineUnavailable,
    Store,
    StoreError,
)
from guardian.service.state.state import LoopState

log = logging.getLogger("guardian.stop_records")

# The store's mark of a person's stop: `person_stop:<container name>`, kept at the stop's time.
# It holds for the container of that name created and last started before it: by name, so the
# marks are as many as the names ever stopped, not as the containers (a new container under the
# name is another: docs/design.md rule 10).
MARK = "person_stop:"
# How far back from an exit the engine's record is read: the kill that ended the run, and the
# start that began it when that was recent.
LOOKBACK = KILL_BOUND + LATE
# After its exit, how soon the engine has logged every event of it (the `stop` comes last):
# a record read later that shows no stop is an answer kept for that exit.
SETTLE = timedelta(seconds=5)


class StopRecords:
    """A judge of the loop and a follower of its events, over LoopState.person_stops (which
    holds what it learns). Contract: an exit a person asked for, as the store or the engine
    recorded it, is held as a person's stop once judged; an exit the engine's record showed
    ended on its own is read once."""

    def __init__(
        self,
        engine: Engine,
        store: Store,
        state: LoopState,
        clock: Clock,
        host: str,
        watches: Callable[[dict[str, str]], bool],
    ) -> None:
        self.engine = engine
        self.store = store
        self.state = state
        self.clock = clock
        self.host = host
        self.watches = watches
        self.stops = state.person_stops

    # -- the events ---------------------------------------------------------------------------

    def on_event(self, event: EngineEvent) -> None:
        """After the healer's book-keeping: the exit of a watched container it holds as a
        person's stop is written to the store, at its `die` and its `stop` (a `kill` that
        ended nothing, a SIGHUP to reload, is not)."""
        cid, action = event.container_id, event.action
        if action not in ("die", "stop") or not self.stops.holds(cid):
            return
        if self.watches(event.attributes):
            self._keep(cid, event.container_name, event.at)

    def retry(self, _watched: list[ContainerSnapshot]) -> None:
        """At each sweep: write again the stops the store refused to keep."""
        for cid, name, at in self.stops.to_keep():
            self._keep(cid, name, at)

    def _keep(self, container_id: str, name: str, at: datetime) -> None:
        """Write the stop to the store, and read it back: the store that a full disk does not
        stop (adapters.resilient_store) drops a mark it cannot write without a word."""
        mark = MARK + name
        try:
            self.store.remember(self.host, mark, at)
            kept = self.store.remembered(self.host, mark) == at
        except StoreError:
            kept = False
        if kept:
            self.stops.kept(container_id)
        elif self.stops.unkept(container_id, name, at):
            # Held in memory for this run all the same.
            log.warning("a person's stop not kept yet", extra=kv(container=name, at=at))

    # -- the engine's record -----------------------------------------------------------------

    def learn(self, record: EngineHistory, judged: str = "") -> None:
        """Every person's stop of a watched container a read of the engine's record shows (at
        start-up, after the store recovered, before an exit is remediated): held from now on,
        and kept. `judged`: the container the read was made for, judged on its own."""
        runs: dict[str, list[EngineEvent]] = {}
        for event in record.events:
            if event.container_id and event.container_id != judged:
                runs.setdefault(event.container_id, []).append(event)
        for cid, events in runs.items():
            last = events[-1]
            if last.action == "destroy" or self.stops.holds(cid):
                continue  # gone, or held already
            if not self.watches(last.attributes):
                continue
            at = self._asked(cid, last.container_name, [seen(e) for e in events], None)
            if at is not None:
                self._held(cid, last.container_name, at)

    def _asked(
        self, container_id: str, name: str, events: list[Seen], exit_code: int | None
    ) -> datetime | None:
        """When a person asked for the container's last exit, as `events` show it."""
        if self.state.caused_by_restart(container_id, name):
            return None  # its own stop and kill: the restart's verdict judges them
        at = stop_requested(events, exit_code, ())
        if at is None:
            return None
        return stop_requested(events, exit_code, self._own(container_id, name, at - LOOKBACK))

    def _own(self, container_id: str, name: str, since: datetime) -> tuple[datetime, ...]:
        """When Guardian asked the engine to restart or stop this container since `since`."""
        try:
            actions = self.store.actions(self.host, name, since)
        except StoreError:
            return ()
        return tuple(
            a.requested_at
            for a in actions
            if a.container_id == container_id and a.kind in (ActionKind.RESTART, ActionKind.STOP)
        )

    def _held(self, container_id: str, name: str, at: datetime) -> None:
        self.stops.stopped(container_id)
        self._keep(container_id, name, at)
        log.info(
            "a person's stop found in the engine's record: left alone",
            extra=kv(container=name, stopped_at=at),
        )

    # -- the judgements -------------------------------------------------------------------------

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """An exit about to be remediated that a person asked for (the store kept their stop,
        or the engine's record shows it) is not judged: held as a person's stop from now on."""
        if not self._exit(snap, result) or self.state.caused_by_restart(snap.id, snap.name):
            return result
        kept = self._kept(snap)
        if kept is not None:
            self.stops.stopped(snap.id)
            log.info(
                "a person's stop kept by an earlier run: left alone",
                extra=kv(container=snap.name, stopped_at=kept),
            )
        elif self._recorded(snap) is None:
            return result
        return skip(snap, result.observed_at, "stopped_by_person", result.source)

    def look(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """What judge() says from what the store kept, changing nothing and asking the engine
        nothing: for `guardian status` and the API (another process than the loop's)."""
        if not self._exit(snap, result) or self._kept(snap) is None:
            return result
        return skip(snap, result.observed_at, "stopped_by_person", result.source)

    @staticmethod
    def _exit(snap: ContainerSnapshot, result: HealthCheckResult) -> bool:
        """Whether `result` is an exit a stop may have made: not an OOM kill the engine flagged
        (State.OOMKilled), but one read from an earlier `oom` event (watchers.oom) may be a
        person's kill of the run after it, before its start was heard."""
        if not snap.inspected:
            return False
        if result.problem is ProblemType.EXITED:
            return True
        return result.problem is ProblemType.OOM_KILLED and not snap.oom_killed

    def _kept(self, snap: ContainerSnapshot) -> datetime | None:
        """The stop the store kept of this container, when it was created and last started
        before it (or, its stamps out of order, when its exit is the one the stop ended)."""
        try:
            at = self.store.remembered(self.host, MARK + snap.name)
        except StoreError:
            return None
        if at is None:
            return None
        latest, made = at + self.stops.ahead, (snap.created, snap.started_at)
        if not any(t is not None and t > latest for t in made):
            return at
        # The engine stamped its creation or start after its exit: a step back of the wall
        # clock came between them, by how much no run can tell, so those stamps say nothing of
        # the stop; its exit does, when it is the one the stop ended.
        finished = snap.finished_at
        if (
            finished is not None
            and any(t is not None and t > finished for t in made)
            and at - KILL_BOUND <= finished <= latest + KILL_BOUND
        ):
            return at
        return None  # started since, or another container under the name

    def _recorded(self, snap: ContainerSnapshot) -> datetime | None:
        """When a person asked for this exit, as the engine's record shows it (None: it shows
        none, or the engine cannot say); what the read shows of other containers is learnt."""
        finished = snap.finished_at
        if finished is not None and self.stops.read_as_crash(snap.id, finished):
            return None
        now = self.clock.now()
        since = min(finished or now, now) - LOOKBACK
        try:
            record = self.engine.history(since, now)
        except EngineUnavailable:
            return None
        events = [seen(e) for e in record.events if e.container_id == snap.id]
        at = self._asked(snap.id, snap.name, events, snap.exit_code)
        if at is not None:
            self._held(snap.id, snap.name, at)
        elif finished is not None and now - finished >= SETTLE:
            self.stops.crashed(snap.id, finished)
        self.learn(record, judged=snap.id)
        return at


def seen(event: EngineEvent) -> Seen:
    """An engine event as core.detection.stops reads it: a die's exit code when it says one."""
    code = event.attributes.get("exitCode", "") if event.action == "die" else ""
    digits = code[1:] if code.startswith("-") else code
    number = int(code) if digits.isascii() and digits.isdigit() and len(code) <= 10 else None
    return Seen(event.action, event.at, number)
