"""The engine's own record of each container's starts, read at start-up and again after the
store recovers from failed writes, so the attempt budget holds over what the store could not
remember (docs/design.md rule 16; core.engine_record says what counts).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.engine_record import (
    EARLY,
    LATE,
    EngineLog,
    Witness,
    explained,
    restarting,
    signalled,
    unrecorded_attempts,
)
from guardian.core.facts import Fact, StoreRecovered
from guardian.core.model import ContainerSnapshot
from guardian.core.stamps import JITTER
from guardian.logs import kv
from guardian.ports import Clock, Engine, EngineHistory, Store

log = logging.getLogger("guardian.engine_memory")

# The store's marks (Store.remembered): how far its record reaches, and the last engine event
# handled (the event listener replays from there).
RECORDED_THROUGH = "recorded_through"
EVENTS_THROUGH = "events_through"


def _watches_all(_attributes: dict[str, str]) -> bool:
    return True


@dataclass(frozen=True)
class RecordQuery:
    """What one read of the engine's record asks: of `engine`, the starts over the restart
    `window`, and of `store`, how far its record reaches on `host`. `allowance`: how long after
    its intent a restart's start may come (the operator's stop timeout). `watches`: whether an
    event's container (by its attributes, the labels among them) is one this Guardian watches."""

    engine: Engine
    store: Store
    host: str
    window: timedelta
    allowance: timedelta
    watches: Callable[[dict[str, str]], bool] = _watches_all


class EngineMemory:
    """The engine's log as last read, and per container the attempts the store could not
    remember, counted once, at its first decision after the read (what the engine shows of it
    then), and kept: later decisions see its later starts in the store, not as new evidence.
    Until a container is decided, the host's budget counts the restarts the log shows of it
    that the store has no record of (`recent`), whichever container is decided first.

    What it holds is kept on the wall clock of the reading and moved by the steps of the wall
    clock since (the monotonic clock places it, docs/design.md rule 12): a step shortens
    neither a cooldown nor a window nor the host's minute counted from the engine's record.

    Invariant: after a read, a container's unrecorded attempts are computed at most once.

    No lock of its own: what it holds is host state decide() reads (the host's minute, a
    container's attempts), so it lives under the host lock (`lock`, docs/design.md rule 21).
    That lock is never held across the read itself (an engine request and store reads): a
    decision of another container never waits for a slow engine. A caller that finds the
    record due reads it itself, and one read is installed, whole, per request for one
    (`_asked`): a caller never judges on a record half read, and a second reader at the same
    moment (the sweep and the event listener at start-up) leaves the first one's in place."""

    def __init__(self, clock: Clock, lock: threading.RLock) -> None:
        self._clock = clock
        self._lock = lock
        self._log: EngineLog | None = None
        self._offset = 0.0  # the wall clock less the monotonic clock at the reading
        # By container id, in the reading's frame: the attempts counted at its first decision,
        # and before it the restarts the log shows that the store has no record of.
        self._counted: dict[str, tuple[datetime, ...]] = {}
        self._unexplained: dict[str, tuple[datetime, ...]] = {}
        # Reads asked for (start-up, then each recovery of the store) and the last one a read
        # was installed for: due while the first is ahead. Only ever grow.
        self._asked = 1
        self._read_for = 0

    @property
    def due(self) -> bool:
        """Whether the engine's log should be read (again) before the next judgement."""
        return self._asked > self._read_for

    def on_fact(self, fact: Fact) -> None:
        """A subscriber of the facts: the store wrote what it held in memory; read again (a
        read under way when it comes does not answer it: it may have begun before the store's
        writes)."""
        if isinstance(fact, StoreRecovered):
            self._asked += 1  # one writer (the store's recovery); a lost race still asks

    def read_if_due(self, query: RecordQuery) -> EngineHistory | None:
        """When due, read the engine's starts of the last `query.window` and how far the
        store's record reaches (raises EngineUnavailable: still due); what was read, None when
        it was not due, or another caller installed its read of the same request meanwhile."""
        with self._lock:
            if not self.due:
                return None
            asked = self._asked
        offset, now = self._offset_now()
        history, found, unexplained = self._read(query, now)
        with self._lock:
            if self._read_for >= asked:
                return None  # another caller's read of this request is in place
            self._log, self._offset, self._counted, self._unexplained = (
                found,
                offset,
                {},
                unexplained,
            )
            self._read_for = asked
        log.info(
            "engine's record read",
            extra=kv(
                starts=sum(len(v) for v in found.starts.values()),
                unrecorded=sum(len(v) for v in unexplained.values()),
                covered_from=history.oldest,
                recorded_through=found.recorded_through,
            ),
        )
        return history

    def _read(
        self, query: RecordQuery, now: datetime
    ) -> tuple[EngineHistory, EngineLog, dict[str, tuple[datetime, ...]]]:
        """The engine's record over the window up to `now`, as read and as an EngineLog, and
        the restarts it shows that the store may have lost (_lost). Outside the host lock."""
        since = now - query.window
        history = query.engine.history(since, now)
        events: dict[str, list[tuple[str, datetime]]] = defaultdict(list)
        names: dict[str, str] = {}
        for event in history.events:
            events[event.container_id].append((event.action, event.at))
            names[event.container_id] = event.container_name or names.get(event.container_id, "")
        starts = {k: tuple(at for a, at in v if a == "start") for k, v in events.items()}
        kills = {k: at for k, v in events.items() if (at := signalled(v)) is not None}
        through = query.store.remembered(query.host, RECORDED_THROUGH)
        found = EngineLog(
            since,
            now,
            {k: v for k, v in starts.items() if v},
            history.oldest,
            through,
            kills,
        )
        ours = {e.container_id for e in history.events if query.watches(dict(e.attributes))}
        kept = {k: v for k, v in events.items() if k in ours and "destroy" not in _actions(v)}
        lost = {k: v for k, v in kept.items() if "restart" in _actions(v)}
        under_way = {
            k: kill for k in kept if (kill := found.under_way(k, query.allowance)) is not None
        }
        unexplained = _lost(query.store, query.host, found, lost, under_way, names, query.allowance)
        return history, found, unexplained

    def _offset_now(self) -> tuple[float, datetime]:
        """The wall clock less the monotonic clock, and the wall clock, read now."""
        now = self._clock.now()
        return now.timestamp() - self._clock.monotonic(), now

    def _stepped(self) -> timedelta:
        """How far the wall clock stepped since the reading (forward: positive); zero for the
        jitter of reading two clocks."""
        moved = self._offset_now()[0] - self._offset
        return timedelta(seconds=moved) if abs(moved) >= JITTER else timedelta(0)

    def unrecorded(
        self,
        snap: ContainerSnapshot,
        stored: tuple[datetime, ...],
        policy: RestartPolicy,
        stop_timeout: timedelta,
        now: datetime,
    ) -> tuple[datetime, ...]:
        """The attempts of `snap` the store has no record of (`stored`: those it has), as the
        engine's record shows them; () until the record was read, or for a snapshot from the
        list call (its start is unknown: nothing is counted, nor kept)."""
        with self._lock:
            found, step = self._log, self._stepped()
            if found is None:
                return ()
            counted = self._counted.get(snap.id)
            if counted is not None:
                return tuple(t + step for t in counted)
            if not snap.inspected:
                return ()
            counted = unrecorded_attempts(
                found.moved(step),
                Witness(snap.id, snap.created, snap.started_at),
                stored,
                now=now,
                cooldown=policy.cooldown,
                max_attempts=policy.max_attempts,
                allowance=stop_timeout,
            )
            self._counted[snap.id] = tuple(t - step for t in counted)
        if counted:
            log.warning(
                "attempts counted from the engine's record",
                extra=kv(container=snap.name, count=len(counted), since=min(counted)),
            )
        return counted

    def under_way(self, snap: ContainerSnapshot, stop_timeout: timedelta) -> bool:
        """Whether a restart (or a stop) of `snap` the engine was still carrying out when its
        record was read may be under way yet: its kill, no start after it in the record nor
        in `snap`'s State.StartedAt, and its stop timeout not over."""
        with self._lock:
            found, step = self._log, self._stepped()
            if found is None:
                return False
            kill = found.under_way(snap.id, stop_timeout)
            if kill is None:
                return False
            kill += step
            started = snap.started_at
            if started is not None and started >= kill - EARLY:
                return False  # it started since: carried out
            return self._clock.now() <= kill + stop_timeout + LATE

    def recent(self, since: datetime) -> tuple[datetime, ...]:
        """Every container's unrecorded attempts after `since`: the host's budget counts them,
        those of a container not decided since the read as the engine's record showed them."""
        with self._lock:
            step = self._stepped()
            kept = {**self._unexplained, **self._counted}
            return tuple(t + step for ts in kept.values() for t in ts if t + step > since)


def _actions(events: list[tuple[str, datetime]]) -> set[str]:
    return {action for action, _ in events}


def _lost(
    store: Store,
    host: str,
    found: EngineLog,
    events: dict[str, list[tuple[str, datetime]]],
    under_way: dict[str, datetime],
    names: dict[str, str],
    allowance: timedelta,
) -> dict[str, tuple[datetime, ...]]:
    """The restarts the store may have lost, by container id, that the host's minute counts:
    of the containers whose `events` are given (those this Guardian watches, restarted through
    the engine's API, and still there: another Guardian's container, or one its restart policy
    restarts, never spends this budget), and of those whose stop signal `under_way` shows with
    no start yet (a restart the engine was still carrying out at the read, its `restart` event
    to come, counted at its kill; or a person's stop, counted all the same: the safe side),
    after the mark through which the store holds every attempt it made, that the store's own
    restarts do not explain."""
    through = found.recorded_through
    vouched = through if through is not None and through <= found.read_at else None
    lost: dict[str, tuple[datetime, ...]] = {}
    for cid in events.keys() | under_way.keys():
        seen = restarting(events.get(cid, []), found.covered_from)
        kill = under_way.get(cid)
        restarts = [
            at for at in [*seen, *([kill] if kill else [])] if vouched is None or at > vouched
        ]
        if not restarts:
            continue
        stored = store.restart_times(host, found.since, names[cid] or None, cid)
        left = explained(restarts, stored, allowance)
        if left:
            lost[cid] = tuple(left)
    return lost
