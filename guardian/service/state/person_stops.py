"""PersonStops: the containers a person stopped, killed or removed, never undone by Guardian
(docs/design.md rule 10), and what keeps a stop beyond the event stream of this run
(service.watchers.stop_records): the stops the store has not kept yet, the exits the engine's
record showed ended on their own, and the wall clock's steps forward in this run.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from datetime import datetime, timedelta


class PersonStops:
    """Containers a person stopped (`docker stop`/`kill` that no restart of Guardian's made),
    and the last MAX_REMOVED a person removed (`docker rm -f`: a kill, then the destroy).

    Invariant: held from the person's stop until the container starts again, and past its
    removal (an id is never used again; a reaction that read the container before may still
    be deciding on it); never undone by Guardian meanwhile. A stop the store refused to keep
    is kept to be written again until the container starts or is gone; of the exits the
    engine's record showed ended on their own, the last MAX_CRASHES.

    No lock: every access is one operation on a set or dict, atomic in CPython, and none reads
    then writes in two steps where two threads write. The event stream's thread alone writes
    the removed (an eviction after its own insert) and the scheduler's thread alone sums the
    steps; a stop is held by the events and by the judges on workers (set.add); waiting to be
    kept is set and dropped by the events, the judges and the sweep (`unkept` tells whether it
    was new with one setdefault); the crashes are written by judges on several workers, each
    write one insert at the end and an eviction that tolerates another's."""

    MAX_REMOVED = 4096
    MAX_CRASHES = 4096

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._removed: OrderedDict[str, None] = OrderedDict()
        self._unkept: dict[str, tuple[str, datetime]] = {}  # id -> (name, the stop's time)
        self._crashes: OrderedDict[str, datetime] = OrderedDict()  # id -> that exit's FinishedAt
        self._ahead = timedelta(0)

    def stopped(self, container_id: str) -> None:
        self._ids.add(container_id)

    def forget(self, container_id: str) -> None:
        """The container started again: no longer held as stopped by a person."""
        self._ids.discard(container_id)
        self._unkept.pop(container_id, None)

    def removed(self, container_id: str) -> None:
        """The container is gone: held among the last MAX_REMOVED removed (the event stream's
        thread alone writes them). Held as removed before it is let go as stopped: holds(),
        which reads the two in turn, never finds it in neither."""
        self._removed[container_id] = None
        self._ids.discard(container_id)
        self._unkept.pop(container_id, None)
        if len(self._removed) > self.MAX_REMOVED:
            self._removed.popitem(last=False)

    def holds(self, container_id: str) -> bool:
        return container_id in self._ids or container_id in self._removed

    # -- beyond the event stream (service.watchers.stop_records) --------------------------------

    def unkept(self, container_id: str, name: str, at: datetime) -> bool:
        """The store refused to keep the stop of `name` at `at`: kept here to be written again.
        True when it was not waiting already."""
        stop = (name, at)
        new = self._unkept.setdefault(container_id, stop) is stop
        if not new:
            self._unkept[container_id] = stop
        return new

    def kept(self, container_id: str) -> None:
        """The store keeps the container's stop."""
        self._unkept.pop(container_id, None)

    def to_keep(self) -> list[tuple[str, str, datetime]]:
        """(id, name, time) of each stop the store has not kept yet."""
        return [(cid, name, at) for cid, (name, at) in list(self._unkept.items())]

    def crashed(self, container_id: str, finished_at: datetime) -> None:
        """The engine's record showed the exit at `finished_at` ended on its own."""
        self._crashes.pop(container_id, None)
        self._crashes[container_id] = finished_at  # the newest, last
        if len(self._crashes) > self.MAX_CRASHES:
            with contextlib.suppress(KeyError):  # another judge's eviction took the oldest
                self._crashes.popitem(last=False)

    def read_as_crash(self, container_id: str, finished_at: datetime) -> bool:
        """Whether the engine's record showed this very exit ended on its own."""
        return self._crashes.get(container_id) == finished_at

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped by `step`: the container stamps seen before a step forward
        move with it (adapters.engine.engine_clock), a stop the store kept does not (the
        scheduler's thread alone follows steps)."""
        if step > timedelta(0):
            self._ahead += step

    @property
    def ahead(self) -> timedelta:
        """The wall clock's steps forward in this run, summed."""
        return self._ahead
