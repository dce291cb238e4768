"""The engine's own record of each container's starts, read at start-up and again after the
store recovers from failed writes, so the attempt budget holds over what the store could not
remember (docs/design.md rule 16; core.engine_record says what counts).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from datetime import datetime, timedelta

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.engine_record import EngineLog, Witness, unrecorded_attempts
from guardian.core.facts import Fact, StoreRecovered
from guardian.core.model import ContainerSnapshot
from guardian.logs import kv
from guardian.ports import Clock, Engine, EngineHistory, Store

log = logging.getLogger("guardian.engine_memory")

# The store's marks (Store.remembered): how far its record reaches, and the last engine event
# handled (the event listener replays from there).
RECORDED_THROUGH = "recorded_through"
EVENTS_THROUGH = "events_through"


class EngineMemory:
    """The engine's log as last read, and per container the attempts the store could not
    remember, counted once, at its first decision after the read (what the engine shows of it
    then), and kept: later decisions see its later starts in the store, not as new evidence.

    Invariant: after a read, a container's unrecorded attempts are computed at most once."""

    def __init__(self) -> None:
        # Held through a read too: a decision that comes meanwhile waits for the record.
        self._lock = threading.RLock()
        self._log: EngineLog | None = None
        self._counted: dict[str, tuple[datetime, ...]] = {}
        self._due = True  # read at start-up

    @property
    def due(self) -> bool:
        """Whether the engine's log should be read (again) before the next judgement."""
        return self._due

    def on_fact(self, fact: Fact) -> None:
        """A subscriber of the facts: the store wrote what it held in memory; read again."""
        if isinstance(fact, StoreRecovered):
            self._due = True

    def read_if_due(
        self, engine: Engine, store: Store, host: str, window: timedelta, clock: Clock
    ) -> EngineHistory | None:
        """When due, read the engine's starts of the last `window` and how far the store's
        record reaches (raises EngineUnavailable: still due); what was read, None when it was
        not due. A caller that comes while another reads waits for that read: nothing is judged
        on a record half read."""
        with self._lock:
            if not self._due:
                return None
            return self._read(engine, store, host, window, clock.now())

    def _read(
        self, engine: Engine, store: Store, host: str, window: timedelta, now: datetime
    ) -> EngineHistory:
        since = now - window
        history = engine.history(since, now)
        starts: dict[str, list[datetime]] = defaultdict(list)
        for event in history.events:
            if event.action == "start":
                starts[event.container_id].append(event.at)
        through = store.remembered(host, RECORDED_THROUGH)
        found = EngineLog(
            since, now, {k: tuple(v) for k, v in starts.items()}, history.oldest, through
        )
        self._log, self._counted, self._due = found, {}, False
        log.info(
            "engine's record read",
            extra=kv(
                starts=sum(len(v) for v in starts.values()),
                covered_from=history.oldest,
                recorded_through=through,
            ),
        )
        return history

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
            found, counted = self._log, self._counted.get(snap.id)
            if found is None:
                return ()
            if counted is not None:
                return counted
            if not snap.inspected:
                return ()
            counted = unrecorded_attempts(
                found,
                Witness(snap.id, snap.created, snap.started_at),
                stored,
                now=now,
                cooldown=policy.cooldown,
                max_attempts=policy.max_attempts,
                allowance=stop_timeout,
            )
            self._counted[snap.id] = counted
        if counted:
            log.warning(
                "attempts counted from the engine's record",
                extra=kv(container=snap.name, count=len(counted), since=min(counted)),
            )
        return counted

    def recent(self, since: datetime) -> tuple[datetime, ...]:
        """Every container's unrecorded attempts after `since`: the host's budget counts them."""
        with self._lock:
            return tuple(t for ts in self._counted.values() for t in ts if t > since)
