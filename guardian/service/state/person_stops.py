"""PersonStops: the containers a person stopped, killed or removed, never undone by Guardian
(docs/design.md rule 10), and what keeps a stop beyond the event stream of this run
(service.watchers.stop_records): the stops the store has not kept yet, the exits the engine's
record showed ended on their own, and the wall clock's steps forward in this run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime, timedelta


class PersonStops:
    """Containers a person stopped (`docker stop`/`kill` that no restart of Guardian's made),
    and the last MAX_REMOVED a person removed (`docker rm -f`: a kill, then the destroy).

    Invariant: held from the person's stop until the container starts again, and past its
    removal (an id is never used again; a reaction that read the container before may still
    be deciding on it); never undone by Guardian meanwhile. A stop the store refused to keep
    is kept to be written again until the container starts or is gone; of the exits the
    engine's record showed ended on their own, the last MAX_CRASHES."""

    MAX_REMOVED = 4096
    MAX_CRASHES = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[str] = set()
        self._removed: OrderedDict[str, None] = OrderedDict()
        self._unkept: dict[str, tuple[str, datetime]] = {}  # id -> (name, the stop's time)
        self._crashes: OrderedDict[str, datetime] = OrderedDict()  # id -> that exit's FinishedAt
        self._ahead = timedelta(0)

    def stopped(self, container_id: str) -> None:
        with self._lock:
            self._ids.add(container_id)

    def forget(self, container_id: str) -> None:
        """The container started again: no longer held as stopped by a person."""
        with self._lock:
            self._ids.discard(container_id)
            self._unkept.pop(container_id, None)

    def removed(self, container_id: str) -> None:
        """The container is gone: held among the last MAX_REMOVED removed."""
        with self._lock:
            self._ids.discard(container_id)
            self._unkept.pop(container_id, None)
            self._removed[container_id] = None
            if len(self._removed) > self.MAX_REMOVED:
                self._removed.popitem(last=False)

    def holds(self, container_id: str) -> bool:
        with self._lock:
            return container_id in self._ids or container_id in self._removed

    # -- beyond the event stream (service.watchers.stop_records) --------------------------------

    def unkept(self, container_id: str, name: str, at: datetime) -> bool:
        """The store refused to keep the stop of `name` at `at`: kept here to be written again.
        True when it was not waiting already."""
        with self._lock:
            new = container_id not in self._unkept
            self._unkept[container_id] = (name, at)
            return new

    def kept(self, container_id: str) -> None:
        """The store keeps the container's stop."""
        with self._lock:
            self._unkept.pop(container_id, None)

    def to_keep(self) -> list[tuple[str, str, datetime]]:
        """(id, name, time) of each stop the store has not kept yet."""
        with self._lock:
            return [(cid, name, at) for cid, (name, at) in self._unkept.items()]

    def crashed(self, container_id: str, finished_at: datetime) -> None:
        """The engine's record showed the exit at `finished_at` ended on its own."""
        with self._lock:
            self._crashes[container_id] = finished_at
            self._crashes.move_to_end(container_id)
            if len(self._crashes) > self.MAX_CRASHES:
                self._crashes.popitem(last=False)

    def read_as_crash(self, container_id: str, finished_at: datetime) -> bool:
        """Whether the engine's record showed this very exit ended on its own."""
        with self._lock:
            return self._crashes.get(container_id) == finished_at

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped by `step`: the container stamps seen before a step forward
        move with it (adapters.engine.engine_clock), a stop the store kept does not."""
        if step > timedelta(0):
            with self._lock:
                self._ahead += step

    @property
    def ahead(self) -> timedelta:
        """The wall clock's steps forward in this run, summed."""
        with self._lock:
            return self._ahead
