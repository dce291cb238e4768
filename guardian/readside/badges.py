"""What a container's badge says (GET /badge/<name>.svg): one word for its condition, read from
the same answer as `guardian status` (status_of), for the containers `page.badges` names only.

A badge costs one listing of the watched containers per change (or per MAX_AGE, for what the
clock alone moves) and one judgement of the container asked about, whatever number of readers
or names ask: a name nobody lists costs no request of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from fnmatch import fnmatchcase

from guardian.core.model import ContainerSnapshot
from guardian.ports import EngineUnavailable
from guardian.readside.changes import Changes
from guardian.readside.queries import Judgements, Records
from guardian.readside.status import ContainerStatus, status_of

HEALTHY = "healthy"
UNHEALTHY = "unhealthy"
RESTARTING = "restarting"
STARTING = "starting"
STOPPED = "stopped"
MAINTENANCE = "in maintenance"
HELD_BACK = "held back"
UNKNOWN = "unknown"
STATES = (HEALTHY, UNHEALTHY, RESTARTING, STARTING, STOPPED, MAINTENANCE, HELD_BACK, UNKNOWN)
MAX_AGE = 5.0  # seconds an answer stands while nothing changes (as the page's reads)
MAX_JUDGED = 256  # badges kept judged per listing: beyond, the oldest is judged again


def condition(c: ContainerStatus, now: datetime) -> str:
    """The one word a badge shows. A person's silence or a maintenance window in force comes
    first (the container is being worked on), then what the engine says of it, then what
    Guardian's judgement adds: a problem it will act on, or one decide() holds back."""
    silenced = c.silence is not None and c.silence.active(now)
    if silenced or any(w.active_at(now) is not None for w in c.maintenance):
        return MAINTENANCE
    if c.state == "restarting" or c.held_back == "skipped: restart_in_flight":
        return RESTARTING
    if c.state != "running":
        return STOPPED
    if c.decision is not None:
        return UNHEALTHY if c.decision.acts else HELD_BACK
    if c.health == UNHEALTHY or any(i.is_open for i in c.incidents):
        return UNHEALTHY
    return STARTING if c.health == STARTING else HEALTHY


class Badges:
    """The badges' answers, kept per change of the record (Changes.version). Safe from any
    thread; one read at a time reaches the engine."""

    def __init__(
        self,
        judgements: Judgements,
        records: Records,
        changes: Changes,
        globs: Iterable[str],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.judgements = judgements
        self.records = records
        self.changes = changes
        self.globs = tuple(globs)
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._read_at: tuple[int, float] | None = None  # (version, monotonic) of the listing
        self._listing: dict[str, ContainerSnapshot] | None = None  # None: engine unreachable
        self._said: dict[str, str] = {}

    def listed(self, name: str) -> bool:
        """Whether `page.badges` names the container (case counts, as in Docker's names)."""
        return any(fnmatchcase(name, glob) for glob in self.globs)

    def state(self, name: str) -> str | None:
        """The badge's word for `name`; None when there is no badge to show (not listed, not a
        watched container): both are the same to the caller. While the engine does not answer,
        a listed name is UNKNOWN, whether or not the container exists."""
        if not self.listed(name):
            return None
        with self._lock:
            self._fresh()
            if self._listing is None:
                return UNKNOWN
            said = self._said.get(name)
            if said is None:
                snap = self._listing.get(name)
                if snap is None:
                    return None
                said = self._judge(snap)
            return said

    def _fresh(self) -> None:
        version, now = self.changes.version, self.monotonic()
        if self._read_at is not None:
            at_version, read_at = self._read_at
            if at_version == version and now - read_at < MAX_AGE:
                return
        self._said.clear()
        try:
            _, watched = self.judgements.watched()
            self._listing = {s.name: s for s in watched}
        except EngineUnavailable:
            self._listing = None
        self._read_at = (version, now)

    def _judge(self, snap: ContainerSnapshot) -> str:
        try:
            status = status_of(self.judgements, self.records, snap)
        except EngineUnavailable:
            return UNKNOWN  # not kept: the next read asks again
        said = condition(status, self.records.clock.now())
        if len(self._said) >= MAX_JUDGED:
            self._said.pop(next(iter(self._said)))
        self._said[snap.name] = said
        return said
