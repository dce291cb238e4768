"""Changes: a version that goes up whenever something a person would see changed (an incident,
an action, a silence, a container's state, the engine's reachability, a maintenance window's
start or end), and a condition to wait on it. The status page's live stream waits here; nobody
waiting costs nothing.

Each change names what it concerns when it can (the container an engine event is about, the
container and incident a store write is about), so a reader brings up to date only that
(`since`); a change that names nothing means "read everything again".
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from guardian.core.facts import (
    FEED_WRITES,
    ApprovalGiven,
    ApprovalUsed,
    AttemptWritten,
    ClockStepped,
    ContainerInspected,
    ContainersListed,
    DeliveryGivenUp,
    EngineEventSeen,
    EngineReachability,
    Fact,
    IncidentChangedByPerson,
    IncidentWritten,
    InspectAsked,
    NotificationsWithdrawn,
    ProblemStartsMoved,
    RecordWrittenElsewhere,
    ResetWritten,
    SettingsReloaded,
    SilenceLifted,
    SilenceSet,
    StoreRecovered,
    StoreWrittenElsewhere,
)
from guardian.core.model import ContainerSnapshot, Incident, Silence, same_snapshots
from guardian.ports import Record

# The engine events that change what a container's row shows (state or health, or its
# presence). A missed one is caught by the next sweep (listed).
_SHOWN = frozenset(
    {"health_status", "die", "start", "stop", "kill", "oom", "pause", "unpause", "destroy"}
)
ANY_KIND = frozenset(Record)  # a write that may have written anything
LOG = 512  # changes remembered for since(); a reader further behind reads everything
OBSERVED = 4096  # the loop's inspects kept for since(); beyond, they are forgotten


@dataclass(frozen=True)
class Since:
    """What changed after a version. None where anything may have changed (read it all)."""

    engine: frozenset[str] | None  # containers whose state or health the engine changed
    store: frozenset[str] | None  # containers whose records changed (incident, action, silence)
    incidents: frozenset[int] | None  # incidents whose timeline changed
    wrote: frozenset[Record]  # what kinds of record were written (empty: nothing)
    wrote_shared: bool  # a write that may change other containers' decisions (see wrote())
    # Of the `engine` containers, the inspect the loop made of each after its last change: as
    # fresh as asking the engine again (see core.facts.InspectAsked).
    observed: Mapping[str, ContainerSnapshot] = field(default_factory=dict)
    # The containers incidents were written about: the incidents as the writes left them in
    # the store, by id (the latest write of each); None where a write did not tell (read
    # that container's incidents again).
    incidents_written: Mapping[str, Mapping[int, Incident] | None] = field(default_factory=dict)
    # The containers silences were set or lifted for: the latest silence each write left in the
    # store (lifted: its ended_at set); None where a write about silences did not tell (read
    # the silences in force again).
    silences_written: Mapping[str, Silence] | None = field(default_factory=dict)
    # Of those, the containers more than one write was about (the one written is the latest).
    silences_rewritten: frozenset[str] = frozenset()

    @property
    def everything(self) -> bool:
        return self.engine is None or self.store is None


NOTHING = Since(frozenset(), frozenset(), frozenset(), frozenset(), False)
EVERYTHING = Since(None, None, None, ANY_KIND, True)


@dataclass(frozen=True)
class _Change:
    version: int
    engine: frozenset[str] | None
    store: frozenset[str] | None
    incident: int | None
    wrote: frozenset[Record]
    shared: bool
    written: Incident | Silence | None = None


class Changes:
    """A version counter and a condition; changes from any thread, `wait()` from readers."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._cond = threading.Condition()
        self._monotonic = monotonic
        self.version = 0
        self._changed_at = 0.0  # monotonic: when the latest change came
        self._closed = threading.Event()  # Guardian stops: a settling reader's wait ends too
        self._log: deque[_Change] = deque(maxlen=LOG)
        self._seen: dict[str, tuple[str, str, str]] = {}
        self._listed: Sequence[ContainerSnapshot] = ()  # the last sweep's, as told
        self._engine_up: bool | None = None
        # name -> (the version before the inspect was asked, the inspect)
        self._observed: dict[str, tuple[int, ContainerSnapshot]] = {}
        # An inspect's ticket (core.facts.InspectAsked) -> the version before it was asked.
        self._asked: dict[int, int] = {}
        self._due: float | None = None  # monotonic: when the clock alone changes what is shown

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def changed(self, containers: Iterable[str] | None = None) -> None:
        """Something a person sees changed outside the store: these containers' state or
        health (None: anything, e.g. the engine came back)."""
        names = None if containers is None else frozenset(containers)
        self._add(names, frozenset(), None, wrote=frozenset(), shared=False)

    def due(self, seconds: float | None) -> None:
        """What is shown changes by the clock alone in `seconds` (a maintenance window starts
        or ends; None: at no known time): a change naming no container comes then, once, when
        a reader waits or a sweep lists (the reader knows which of its rows the clock moved).
        Replaces the time told before."""
        with self._cond:
            self._due = None if seconds is None else self._monotonic() + seconds
            self._cond.notify_all()  # a waiter shortens its wait to it

    def _fire_due(self) -> None:
        if self._due is not None and self._monotonic() >= self._due:
            self._due = None
            self.changed(())

    def wrote(
        self,
        container: str | None = None,
        incident: int | None = None,
        others: bool = True,
        kind: Record | None = None,
        written: Incident | Silence | None = None,
    ) -> None:
        """A write landed in the store: about `container` (and the timeline of `incident`, if
        any); None: about anything. `others`: it may change what is decided for other
        containers too (an incident, a restart: dependencies, the host's budget); a silence,
        an approval or a reset changes its own container's only. `kind`: what it wrote;
        None: maybe any kind. `written`: the incident or silence as the write left it in the
        store, told in the order of the writes (a reader takes it for reading it)."""
        store = None if container is None else frozenset((container,))
        kinds = ANY_KIND if kind is None else frozenset((kind,))
        self._add(frozenset(), store, incident, wrote=kinds, shared=others, written=written)

    def delivery_ended(self) -> None:
        """A notification's delivery was given up (a dead letter): about no container."""
        self._add(
            frozenset(), frozenset(), None, wrote=frozenset((Record.DELIVERIES,)), shared=False
        )

    def _add(
        self,
        engine: frozenset[str] | None,
        store: frozenset[str] | None,
        incident: int | None,
        wrote: frozenset[Record],
        shared: bool,
        written: Incident | Silence | None = None,
    ) -> None:
        with self._cond:
            self.version += 1
            self._changed_at = self._monotonic()
            change = _Change(self.version, engine, store, incident, wrote, shared, written)
            self._log.append(change)
            if engine is None:
                self._observed.clear()
            for name in engine or ():
                self._observed.pop(name, None)  # older than this change
            self._cond.notify_all()

    def _observe(self, asked_at: int, snap: ContainerSnapshot) -> None:
        with self._cond:
            if len(self._observed) >= OBSERVED:
                self._observed.clear()
            self._observed[snap.name] = (asked_at, snap)

    def since(self, version: int) -> tuple[int, Since]:
        """(the version now, what changed after `version`): EVERYTHING when the log no longer
        reaches back."""
        with self._cond:
            return self.version, self._since(version)

    def _since(self, version: int) -> Since:
        if version >= self.version:
            return NOTHING
        if not self._log or self._log[0].version > version + 1:
            return EVERYTHING
        engine: dict[str, int] = {}  # name -> the version of its last change
        store: set[str] = set()
        incidents: set[int] = set()
        wrote: frozenset[Record] = frozenset()
        shared = False
        written: dict[str, dict[int, Incident] | None] = {}
        silences: dict[str, Silence] | None = {}
        rewritten: set[str] = set()
        for c in reversed(self._log):  # newest first
            if c.version <= version:
                break
            if c.engine is None or c.store is None:
                return EVERYTHING
            for name in c.engine:
                engine.setdefault(name, c.version)
            store |= c.store
            wrote |= c.wrote
            shared = shared or c.shared
            if c.incident is not None:
                incidents.add(c.incident)
            if Record.INCIDENTS in c.wrote:
                for name in c.store:
                    told = written.setdefault(name, {})
                    incident = c.written if isinstance(c.written, Incident) else None
                    if told is None or incident is None or incident.container != name:
                        written[name] = None
                    else:
                        assert incident.id is not None
                        told.setdefault(incident.id, incident)
            if Record.SILENCES in c.wrote and silences is not None:
                silence = c.written if isinstance(c.written, Silence) else None
                if silence is not None and c.store == {silence.container}:
                    if silences.setdefault(silence.container, silence) is not silence:
                        rewritten.add(silence.container)
                else:
                    silences = None
        observed = {
            name: seen[1]
            for name, last in engine.items()
            if (seen := self._observed.get(name)) is not None and seen[0] >= last
        }
        return Since(
            frozenset(engine),
            frozenset(store),
            frozenset(incidents),
            wrote,
            shared,
            observed,
            written,
            silences,
            frozenset(rewritten),
        )

    def wait(self, after: int, timeout: float) -> int:
        """The version once it passes `after`, or when `timeout` seconds or close() came first."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                self._fire_due()
                left = end - time.monotonic()
                if self.version > after or self.closed or left <= 0:
                    return self.version
                if self._due is not None:  # told meanwhile too (due() wakes the wait)
                    left = min(left, self._due - self._monotonic())
                self._cond.wait(left)

    def settle(self, quiet: float, rounds: int) -> int:
        """The version once the latest change is at least `quiet`/2 seconds old, after at most
        `rounds` waits of `quiet` seconds (only close() cuts one short). A change's fellows (the
        incident and decision written about an event) follow at once: read once for them all."""
        with self._cond:
            if self._monotonic() - self._changed_at >= quiet:
                return self.version  # quiet for a whole wait already
        for _ in range(rounds):
            if self._closed.wait(quiet):
                break
            with self._cond:
                if self._monotonic() - self._changed_at >= quiet / 2:
                    break
        return self.version

    def close(self) -> None:
        """Wake every reader for good (Guardian stops)."""
        with self._cond:
            self._closed.set()
            self._cond.notify_all()

    # -- the stream of facts (core.facts): Changes subscribes to it ------------------------

    def on_fact(self, fact: Fact) -> None:
        """What happened, as the service publishes it: a change for what the page shows."""
        match fact:
            case EngineEventSeen(container, action):
                if action.split(":")[0] in _SHOWN:
                    self.changed((container,) if container else None)
            case ContainersListed(containers):
                self.listed(containers)
            case EngineReachability(up):
                self.engine_state(up)
            case InspectAsked(ticket):
                # The answer stands for its container only until a change names it again; one
                # that came while it was asked makes it too old (the reader asks again).
                with self._cond:
                    if len(self._asked) >= OBSERVED:
                        self._asked.clear()  # their answers are not taken: read again
                    self._asked[ticket] = self.version
            case ContainerInspected(ticket, snapshot):
                with self._cond:
                    asked_at = self._asked.pop(ticket, None)
                if asked_at is not None:
                    self._observe(asked_at, snapshot)
            case ClockStepped():
                self.changed()  # every time the page shows moved with it
            case DeliveryGivenUp():
                self.delivery_ended()
            case IncidentChangedByPerson(container, incident):
                self.wrote(container, incident, True, Record.INCIDENTS)
            case SilenceSet(silence):
                self.wrote(silence.container, None, False, Record.SILENCES, silence)
            case SilenceLifted(container, silence):
                self.wrote(container, None, False, Record.SILENCES, silence)
            case ApprovalGiven(container, incident):
                self.wrote(container, incident, False, Record.APPROVALS)
            case ApprovalUsed():
                self.wrote(None, None, True, Record.APPROVALS)
            case IncidentWritten(container, incident_id, incident):
                self.wrote(container, incident_id, True, Record.INCIDENTS, incident)
            case AttemptWritten(container, incident_id, counts):
                self.wrote(container, incident_id, counts, Record.ACTIONS)
            case ResetWritten(container):
                self.wrote(container, None, False, Record.RESETS)
            case ProblemStartsMoved():
                self.wrote(None, None, False, Record.INCIDENTS)
            case RecordWrittenElsewhere(container, incident, kind):
                self.written_elsewhere(container, incident, kind)
            case NotificationsWithdrawn() | StoreRecovered() | StoreWrittenElsewhere():
                self.wrote()
            case SettingsReloaded():
                self.changed()

    def written_elsewhere(self, container: str, incident: int | None, kind: str) -> None:
        """Another process wrote a record of `kind` (the change feed's) about `container`: a
        write of that record, which tells nothing of it (the reader reads it again); a kind
        that names no record is a write of anything."""
        told = FEED_WRITES.get(kind.split(".", 1)[0])
        if told is None:
            self.wrote()
            return
        record, others = told
        self.wrote(container, incident, others, Record(record))

    def listed(self, watched: Sequence[ContainerSnapshot]) -> None:
        """A sweep's containers: a change naming those whose id, state or health differs from
        the last sweep, or that came or went."""
        with self._cond:
            self._fire_due()  # also without a reader waiting: /parts and reloads see it
        if same_snapshots(self._listed, watched):
            return  # the very snapshots of the last sweep: nothing differs
        self._listed = watched
        seen = {c.name: (c.id, c.state, c.health or "") for c in watched}
        differ = [n for n in seen.keys() | self._seen.keys() if seen.get(n) != self._seen.get(n)]
        self._seen = seen
        if differ:
            self.changed(differ)

    def engine_state(self, up: bool) -> None:
        if up != self._engine_up:
            self._engine_up = up
            self.changed()
