"""What `guardian status` and `GET /api/v1/containers` show: the watched containers, their
open incidents and what decide() says right now; and the same answer kept current for the
status page (Statuses).

The containers are the sweep's own (Judgements.watched: the one "watched" predicate), and the
next allowed restart comes from the real decision point, never from a copy of its rules. A read:
nothing here changes the loop's state (Judgements.look).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from guardian.core.detection.windows import MaintenanceWindow
from guardian.core.model import ContainerSnapshot, Decision, Incident, IncidentState, Silence
from guardian.ports import Record
from guardian.readside.changes import Changes, Since
from guardian.readside.queries import Judgements, Records


@dataclass(frozen=True)
class ContainerStatus:
    name: str
    state: str
    health: str | None
    incidents: tuple[Incident, ...]
    restart_now: bool
    retry_at: datetime | None
    held_back: str | None  # the reason decide() holds a restart back
    silence: Silence | None
    decision: Decision | None = None  # what decide() said (attempts used of max_attempts)
    # The maintenance windows that hold it (core.detection.windows): the operator's and its label's.
    maintenance: tuple[MaintenanceWindow, ...] = ()
    # When the next of those windows starts, as seen when the decision was made: the clock
    # alone then changes the decision (a hold begins). Not part of the answer itself.
    window_at: datetime | None = field(default=None, compare=False)
    # What a reader should know that the judgement does not say (a log rule not followed).
    notes: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        """No decision and no hold: nothing but news about this container changes it."""
        return self.decision is None and self.held_back is None

    def may_have_moved(self, shared_write: bool, now: datetime) -> bool:
        """Whether the answer may have changed with no news about this container itself: a
        decision after a write that may change others' (the host's budget, a dependency's
        incident, a storm) or once its time came; a check that skipped it (a start grace, a
        restart in flight) whenever asked. A silence's end is news: the silences are read
        again then."""
        if self.decision is not None:
            came = [t for t in (self.retry_at, self.window_at) if t is not None and t <= now]
            return shared_write or bool(came)
        return not self.settled


def _next_window(windows: Iterable[MaintenanceWindow], now: datetime) -> datetime | None:
    starts = [t for t in (w.next_start(now) for w in windows) if t is not None]
    return min(starts, default=None)


def container_status(judgements: Judgements, records: Records) -> list[ContainerStatus]:
    """Raises EngineUnavailable when the engine does not answer."""
    return _Read(judgements, records).whole().statuses()


def status_of(judgements: Judgements, records: Records, snap: ContainerSnapshot) -> ContainerStatus:
    """One watched container's row of container_status(), from its listing `snap`: judged
    alone (one look, the store's open incidents and silences), the others untouched."""
    r = _Read(judgements, records)
    r.listed = {snap.name: snap}
    r.read_store()
    r.judge((snap.name,))
    return r.rows[snap.name]


class _Read:
    """One answer: each watched container's listing, its judged status and the inspect that
    judging made (kept for the next read, see Statuses)."""

    def __init__(self, judgements: Judgements, records: Records) -> None:
        self.judgements = judgements
        self.records = records
        self.listed: dict[str, ContainerSnapshot] = {}
        self.inspected: dict[str, ContainerSnapshot] = {}
        self.rows: dict[str, ContainerStatus] = {}
        self.unsettled: set[str] = set()  # the rows not settled (see may_have_moved)
        self.open_incidents: list[Incident] = []
        self.incidents: dict[str, tuple[Incident, ...]] = {}
        self.silences: dict[str, Silence] = {}
        self.silences_in_force: list[Silence] = []
        self.touched: set[str] = set()  # rows set or gone since the reader last took them
        # The rows sorted by name and each one's place there (None: a row came or went, sort
        # again); a row judged again takes its place.
        self._sorted: list[ContainerStatus] | None = None
        self._place: dict[str, int] = {}

    def whole(self) -> _Read:
        _, watched = self.judgements.watched()
        self.listed = {s.name: s for s in watched}
        self.read_store()
        self.judge(self.listed)
        return self

    def read_store(self) -> None:
        self.read_incidents()
        self.read_silences()

    def read_incidents(
        self, written: Mapping[str, Mapping[int, Incident] | None] | None = None
    ) -> None:
        """The open incidents (not closed) of the host. With `written` (Since.incidents_written)
        the incidents the writes told replace what was read of them, a closed one leaving;
        when a write told nothing (a person's transition), all are read again."""
        told = [t for t in (written or {}).values() if t is not None]
        if written is None or len(told) < len(written):
            self.open_incidents = self.records.open_incidents()
        else:
            merged = {i.id: i for i in self.open_incidents}
            merged.update((i.id, i) for incidents in told for i in incidents.values())
            self.open_incidents = sorted(
                (i for i in merged.values() if i.state is not IncidentState.CLOSED),
                key=lambda i: i.id or 0,
            )
        by_name: dict[str, list[Incident]] = {}
        for i in self.open_incidents:
            by_name.setdefault(i.container, []).append(i)
        self.incidents = {name: tuple(found) for name, found in by_name.items()}

    def read_silences(self, written: Mapping[str, Silence] | None = None) -> None:
        """The silences in force. With `written` (Since.silences_written) those the writes told
        replace what was read of their containers' (a container has one in force at most: a
        silence set ends the one before); None: read them all."""
        now = self.records.clock.now()
        if written is None:
            # One query for every silence in force, not one per container.
            self.silences_in_force = self.records.silences_in_force(now)
        else:
            kept = [s for s in self.silences_in_force if s.container not in written]
            kept += [s for s in written.values() if s.active(now)]
            self.silences_in_force = sorted(kept, key=lambda s: s.id or 0)  # as the store's
        self.silences = {s.container: s for s in self.silences_in_force}

    def judge(self, names: Iterable[str]) -> None:
        names = list(names)
        notes = self.judgements.notes([self.listed[name] for name in names])
        for name in names:
            snap = self.listed[name]
            # Judged as the sweep judges it, changing nothing: a healthy or skipped container
            # has no next restart; a held-back one says why (report-only, verifying, cooldown).
            a = self.judgements.look(snap, self.inspected.get(name))
            if a.snapshot.inspected and not snap.inspected:
                self.inspected[name] = a.snapshot
            decision = a.decision
            held_back = None
            if a.result.skipped is not None:
                held_back = f"skipped: {a.result.skipped}"
            elif decision is not None and not decision.acts:
                held_back = str(decision.reason)
            self.touched.add(name)
            row = ContainerStatus(
                snap.name,
                snap.state,
                snap.health,
                self.incidents.get(name, ()),
                decision is not None and decision.acts,  # a restart, or a stop or recreate
                decision.retry_at if decision is not None else None,
                held_back,
                self.silences.get(name),
                decision,
                a.rules.maintenance,
                _next_window(a.rules.maintenance, self.records.clock.now())
                if decision is not None
                else None,
                notes.get(name, ()),
            )
            if name not in self.rows:
                self._sorted = None
            elif self._sorted is not None:
                self._sorted[self._place[name]] = row
            self.rows[name] = row
            if row.settled:
                self.unsettled.discard(name)
            else:
                self.unsettled.add(name)

    def relist(self, names: Collection[str]) -> None:
        """These containers' listings again (one request): gone or no longer watched ones
        leave, new ones come; the inspects made of their last listings no longer hold."""
        _, watched = self.judgements.watched(names) if names else ([], [])
        self._forget(names)
        self.listed.update((s.name, s) for s in watched)

    def seen(self, inspects: Mapping[str, ContainerSnapshot]) -> None:
        """These containers as the loop's own inspects found them, where a relist would ask
        the engine again: the listing is what the list call shows of an inspect, and those
        the sweep does not watch leave."""
        self._forget(inspects)
        for name, snap in inspects.items():
            listing = self.judgements.listing(snap)
            if listing is not None:
                self.listed[name], self.inspected[name] = listing, snap

    def _forget(self, names: Iterable[str]) -> None:
        for name in names:
            self.listed.pop(name, None)
            self.inspected.pop(name, None)
            if self.rows.pop(name, None) is not None:
                self._sorted = None
                self.touched.add(name)
            self.unsettled.discard(name)

    def statuses(self) -> list[ContainerStatus]:
        """The rows sorted by name (a list of the caller's own)."""
        if self._sorted is None:
            order = sorted(self.rows)
            self._sorted = [self.rows[name] for name in order]
            self._place = {name: n for n, name in enumerate(order)}
        return list(self._sorted)


class Statuses:
    """container_status() kept current for a reader that asks after every change (the status
    page). A change costs one filtered list of the containers it names, minus those the loop
    inspected since (Since.observed). Judged again are those, the ones the store wrote about,
    and the ones whose answer may move without news (ContainerStatus.may_have_moved).

    The first read, and a change that names nothing (the engine back, a reload, another
    process's write), read everything, as container_status() does. One caller at a time: no
    lock of its own, as its one reader, PageReader, asks it only under PageReader's lock."""

    def __init__(self, judgements: Judgements, records: Records, changes: Changes) -> None:
        self.judgements = judgements
        self.records = records
        self.changes = changes
        self._read: _Read | None = None
        self._version = 0
        self.whole_reads = 0  # how many reads were whole (the others brought one up to date)

    def store_read(self) -> tuple[int, list[Incident], list[Silence]] | None:
        """(the version of Changes they are as fresh as, the store's open incidents, the
        silences in force) as the last read read them; None: no read stands."""
        r = self._read
        if r is None:
            return None
        return self._version, r.open_incidents, r.silences_in_force

    def read(self) -> list[ContainerStatus]:
        """The answer as of now. Raises EngineUnavailable (the next read is whole)."""
        return self.read_changed()[0]

    def read_changed(self) -> tuple[list[ContainerStatus], frozenset[str] | None]:
        """The answer as of now, and the containers whose status may differ from the answer
        of the read before (judged again, gone or new); None: any (a whole read). Raises
        EngineUnavailable (the next read is whole)."""
        version, since = self.changes.since(self._version)
        last = self._read
        self._read = None  # until this read completes: a failed one is not kept
        touched: frozenset[str] | None
        if last is None or since.everything:
            last = _Read(self.judgements, self.records).whole()
            self.whole_reads += 1
            touched = None
        else:
            self._bring_up_to_date(last, since)
            touched = frozenset(last.touched)
        last.touched.clear()
        self._read, self._version = last, version
        return last.statuses(), touched

    @staticmethod
    def _bring_up_to_date(r: _Read, since: Since) -> None:
        assert since.engine is not None and since.store is not None
        if since.engine:
            r.seen(since.observed)
            r.relist(since.engine - since.observed.keys())
        kept_incidents, kept_silences = r.incidents, r.silences
        now = r.records.clock.now()
        again = {n for n in since.engine | since.store if n in r.listed}  # relisted: no row
        again |= {n for n in r.unsettled if r.rows[n].may_have_moved(since.wrote_shared, now)}
        incidents = Record.INCIDENTS in since.wrote
        expired = not all(s.active(now) for s in kept_silences.values())
        silences = Record.SILENCES in since.wrote or expired
        read_again: list[tuple[Mapping[str, object], Mapping[str, object]]] = []
        if incidents:
            # Of the containers written about (every incident's write names its container).
            r.read_incidents(since.incidents_written)
            read_again.append((kept_incidents, r.incidents))
        if silences:
            r.read_silences(None if expired else since.silences_written)
            read_again.append((kept_silences, r.silences))
        for kept, fresh in read_again:  # judged again: those whose list read again differs
            names = kept.keys() | fresh.keys()
            again |= {n for n in names if n in r.listed and kept.get(n) != fresh.get(n)}
        r.judge(again)
