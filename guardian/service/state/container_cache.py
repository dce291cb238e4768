"""ContainerCache: the containers as the engine's events keep them between inspects
(docs/design.md rule 18), so that on Docker an unhealthy event for a container whose entry is
fresh is acted on without an inspect (Healer.react; a decision that does not act inspects, for
the probe's output).
Entries come from the loop's inspects only; the event stream keeps them (the rules of one
entry: core.cache_entry); the sweep resyncs them against its list.

Invariant: an entry is used only while it is fresh and the stream is open, and a fresh entry has
seen every event about its container since its inspect was asked: the stream was open or
replays from before then (`covered`), no event about it came while it was asked, none since made
it doubtful. A cut stream, a step of the wall clock, an event during its inspect, an event an
entry cannot follow: doubtful, and the loop inspects as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.core.cache_entry import (
    ORDER_MARGIN,
    CacheEntry,
    applied,
    entry_of,
    same_listing,
)
from guardian.core.model import ContainerSnapshot
from guardian.ports import EngineEvent
from guardian.service.state.present import only_present

MAX_ENTRIES = 10_000  # beyond, new containers are not kept (inspected as before)
# Why entries are doubtful, for the reasons that are not an event.
CUT = "event stream cut"
UNCOVERED = "asked while no stream covered its events"
DURING = "an event came while it was inspected"
LISTED_OTHERWISE = "the list shows it otherwise"


@dataclass(frozen=True)
class Ask:
    """An inspect under way: its container, the events seen when it was asked, and when."""

    container_id: str
    seen: int
    at: datetime


class ContainerCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, CacheEntry] = {}
        self._seen = 0  # events seen so far
        self._asked: dict[str, int] = {}  # container id -> its inspects under way
        self._touched: dict[str, int] = {}  # of those: the number of the last event about it
        # Events stamped from then on reach the cache (a stream is open, or the one about to
        # open replays from before then); None: events may be lost, so no entry is filled fresh.
        self._covered: datetime | None = None
        self._following: datetime | None = None  # when the loop began to follow events
        self._open = False
        self._streams = 0  # streams opened or cut so far: the same number, the same stream
        # Writes to the entries or to what the stream covers so far: the same number, the same
        # cache; and the lists of the last resync that wanted no inspect, with the number then.
        self._writes = 0
        self._resynced: tuple[Sequence[ContainerSnapshot], Sequence[ContainerSnapshot], int] | None
        self._resynced = None

    # -- the event stream -----------------------------------------------------------------------

    def follow(self, now: datetime) -> None:
        """The loop follows the engine's events from `now`: entries may fill before the stream
        opens, as it replays from then (opening())."""
        with self._lock:
            self._following = self._covered = now
            self._writes += 1

    def opening(self, since: datetime | None, now: datetime) -> datetime:
        """A stream opens that the engine replays from `since` (None: from when the loop began
        to follow, else from now); returns where it must replay from. Entries asked before what
        it covers (the engine's clock is known to ORDER_MARGIN) are doubtful."""
        with self._lock:
            start = since if since is not None else (self._following or now) - ORDER_MARGIN
            self._covered = start + ORDER_MARGIN
            self._open = True
            self._writes += 1
            self._streams += 1
            for cid, entry in self._entries.items():
                if entry.asked_at < self._covered:
                    self._entries[cid] = entry.doubted(UNCOVERED)
            return start

    def lost(self) -> None:
        """The stream is cut: every entry is doubtful, and stays so until inspected again once
        a stream is open."""
        with self._lock:
            self._open = False
            self._covered = None
            self._writes += 1
            self._streams += 1
            self._doubt_all(CUT)

    def saw(self, event: EngineEvent) -> None:
        """An event of the stream, in the stream's order."""
        cid = event.container_id
        with self._lock:
            self._seen += 1
            if cid in self._asked:
                self._touched[cid] = self._seen
            entry = self._entries.get(cid)
            if entry is None:
                return
            self._writes += 1
            after = applied(entry, event.action, event.container_name, event.at, event.attributes)
            if after is None:
                del self._entries[cid]
            else:
                self._entries[cid] = after

    def doubt_all(self, why: str) -> None:
        with self._lock:
            self._doubt_all(why)

    def _doubt_all(self, why: str) -> None:
        self._entries = {cid: e.doubted(why) for cid, e in self._entries.items()}
        self._writes += 1

    def stream(self) -> int | None:
        """Which stream is open (the same number: no cut or new stream since); None: none."""
        with self._lock:
            return self._streams if self._open else None

    # -- inspects --------------------------------------------------------------------------

    def asking(self, container_id: str, now: datetime) -> Ask:
        """An inspect of `container_id` is asked now; answered() or unanswered() follows."""
        with self._lock:
            self._asked[container_id] = self._asked.get(container_id, 0) + 1
            return Ask(container_id, self._seen, now)

    def answered(
        self,
        ask: Ask,
        snap: ContainerSnapshot | None,
        now: datetime,
        margin: timedelta = ORDER_MARGIN,
    ) -> None:
        """The inspect's answer (None: the container is gone) becomes the entry, ordered
        against events within `margin` (core.cache_entry.order_margin)."""
        cid = ask.container_id
        with self._lock:
            self._writes += 1
            touched = self._release(ask)
            if snap is None or snap.id != cid:
                self._entries.pop(cid, None)
                return
            entry = entry_of(snap, ask.at, now, margin)
            if self._covered is None or ask.at < self._covered:
                entry = entry.doubted(UNCOVERED)
            if touched > ask.seen:
                entry = entry.doubted(DURING)
            if cid in self._entries or len(self._entries) < MAX_ENTRIES:
                self._entries[cid] = entry

    def unanswered(self, ask: Ask) -> None:
        """The inspect failed: the entry stays as it was."""
        with self._lock:
            self._release(ask)

    def _release(self, ask: Ask) -> int:
        """The ask is over: the number of the last event about its container while it ran."""
        cid = ask.container_id
        touched = self._touched.get(cid, 0)
        left = self._asked.get(cid, 1) - 1
        if left > 0:
            self._asked[cid] = left
        else:
            self._asked.pop(cid, None)
            self._touched.pop(cid, None)
        return touched

    # -- reads -------------------------------------------------------------------------------

    def fresh(self, container_id: str) -> ContainerSnapshot | None:
        """The container as its fresh entry holds it while the stream is open; else None
        (inspect it)."""
        with self._lock:
            entry = self._entries.get(container_id)
            if not self._open or entry is None or not entry.fresh:
                return None
            return entry.snapshot

    def doubt_of(self, container_id: str) -> str | None:
        """Why the entry of `container_id` is doubtful ("": it is fresh; None: there is none)."""
        with self._lock:
            entry = self._entries.get(container_id)
            return None if entry is None else entry.doubt

    def resync(
        self, watched: Sequence[ContainerSnapshot], listed: Sequence[ContainerSnapshot]
    ) -> list[str]:
        """A sweep's list (`listed`, of which `watched`): forget the containers not listed,
        doubt the entries the list shows otherwise, and return the ids of the `watched` whose
        entry is missing or doubtful, to inspect (none while no stream covers what an inspect
        would fill; none an inspect could not make fresh: labels beyond the bounds, no room for
        another entry). The very lists of the last resync that wanted none, with no write to
        the cache since, want none again, without a walk over them (an idle sweep's)."""
        with self._lock:
            last = self._resynced
            unchanged = last is not None and last[0] is watched and last[1] is listed
            if unchanged and last is not None and last[2] == self._writes:
                return []
            wanted = self._resync(watched, listed)
            self._resynced = (watched, listed, self._writes) if not wanted else None
            return wanted

    def _resync(
        self, watched: Sequence[ContainerSnapshot], listed: Sequence[ContainerSnapshot]
    ) -> list[str]:
        present = {s.id for s in listed}
        kept = only_present(self._entries, present)
        if kept is not self._entries:
            self._entries = kept
            self._writes += 1
        room = len(self._entries) < MAX_ENTRIES
        wanted = []
        for snap in watched:
            entry = self._entries.get(snap.id)
            if entry is not None and entry.fresh and not same_listing(entry.snapshot, snap):
                entry = self._entries[snap.id] = entry.doubted(LISTED_OTHERWISE)
                self._writes += 1
            if entry is None:
                if room:
                    wanted.append(snap.id)
            elif not entry.fresh and entry.worth_reading:
                wanted.append(snap.id)
        return wanted if self._covered is not None else []

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
