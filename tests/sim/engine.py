"""The simulated engine: tests/fakes.py's FakeEngine, doing what a Docker engine does that the
simulator needs. Every change it makes emits its events (kept in a bounded ring, as Docker keeps
256); a fault may be armed for its next request; a restart may time out after it was sent (and
complete later); and it keeps its own record of every request that changed a container, which
the oracle counts restarts by (never Guardian's store).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from guardian.core.escalation.recreate import RecreateSpec
from guardian.core.model import ActionOutcome, ContainerSnapshot, Outcome
from guardian.ports import EngineEvent, EngineHistory, EngineStep, EngineUnavailable
from tests.fakes import FakeEngine
from tests.sim.workers import Killed

RING = 256  # events the engine keeps (Docker 20.10's ring)
SIGTERM, SIGKILL = 143, 137  # exit codes of a stop and a kill
# A container's stamps, which DockerEngine moves with a step of the wall clock within a run.
STAMPS = ("started_at", "finished_at", "health_log_at", "unhealthy_since", "unhealthy_by")


class Fault(StrEnum):
    """What the engine's next request that changes a container comes to."""

    REFUSED = "refused"  # connection refused before the request was sent: transient
    TIMEOUT = "timeout"  # sent, no answer: an unknown outcome (done now or a little later)
    DENIED = "denied"  # a socket proxy's 403: policy-denied


@dataclass(frozen=True)
class Request:
    """A request that reached the engine and changes a container: the engine's own record."""

    verb: str  # restart | stop | remove | create
    container_id: str
    name: str
    labels: dict[str, str]
    mono: float  # when it was received, on the monotonic clock (true time)
    wall: datetime  # and on the wall clock
    under_way: bool = False  # a restart of it the engine has not completed, or not answered
    at_once: int = 0  # Guardian's restart calls the engine had not answered yet (others')
    asked: object = None  # when Guardian decided it, if it waited in its work queue since
    unsignalled: bool = False  # under way, and no kill of it in the engine's record (not running)


@dataclass
class SimEngine(FakeEngine):
    """FakeEngine whose changes emit events and are recorded as the engine received them.

    Contract: every request that reaches the engine and changes a container is appended to
    `received` (and told to `on_request`) before it takes effect; every state change is told to
    `on_change`; every snapshot handed to Guardian (list, inspect) is told to `on_handed`, every
    event of its record Guardian read (history) to `on_history`."""

    rng: random.Random = field(default_factory=lambda: random.Random(0))
    armed: Fault | None = None  # the next changing request's fault
    outage: int = 0  # how many of the next calls find the engine unreachable
    received: list[Request] = field(default_factory=list)
    emitted: list[EngineEvent] = field(default_factory=list)  # every event, in order
    deferred: dict[str, float] = field(default_factory=dict)  # id -> mono it completes at
    signalled: set[str] = field(default_factory=set)  # deferred ones whose kill was emitted
    faults: Counter[str] = field(default_factory=Counter)  # faults taken, by kind
    on_request: list[Callable[[Request], None]] = field(default_factory=list)
    on_change: list[Callable[[str, ContainerSnapshot | None], None]] = field(default_factory=list)
    on_handed: list[Callable[[ContainerSnapshot], None]] = field(default_factory=list)
    on_history: list[Callable[[tuple[EngineEvent, ...]], None]] = field(default_factory=list)
    generations: Counter[str] = field(default_factory=Counter)  # `docker run` again, by name
    gone: dict[str, ContainerSnapshot] = field(default_factory=dict)  # name -> as removed
    # The wall clock's steps, summed: in all, when this run of Guardian began, and when each
    # container's stamps were last written (`containers` keeps the engine's own stamps).
    stepped: float = 0.0
    run_began: float = 0.0
    written_at: dict[str, float] = field(default_factory=dict)
    # Guardian's restart calls not answered yet, by container id (the engine at them), and
    # what happens meanwhile (tests/sim/driver.py: other steps, beside the call's worker),
    # told the container and whether the engine has carried the restart out yet.
    calling: list[str] = field(default_factory=list)
    meanwhile: Callable[[str, bool], None] | None = None
    asked: Callable[[], object] = lambda: None  # when the call under way now was decided
    guardian_dead: bool = False  # kill -9: a request from the dying run's frames unwinds them
    runs: int = 0  # Guardian's starts so far
    # A restart under way: the run of Guardian that asked, and len(emitted) then, by id.
    asked_in: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The stamps of the kills and stops Guardian's restarts made, by container name, with the
    # run of Guardian that asked (runs then) and len(emitted) when it asked; the stamps of a
    # person's acts (docker stop, kill, rm -f, start, run) by container name, and len(emitted)
    # at the last. The oracle: a person's stop the store keeps is one (Oracle.kept).
    restart_stops: dict[tuple[str, datetime], tuple[int, int]] = field(default_factory=dict)
    person_acts: set[tuple[str, datetime]] = field(default_factory=set)
    last_act: dict[str, int] = field(default_factory=dict)

    # -- reads: an outage, and what Guardian was shown ---------------------------------------

    def _check(self) -> None:
        if self.outage > 0:
            self.outage -= 1
            self.faults["outage call"] += 1
            raise EngineUnavailable("simulated engine: connection refused")

    def _hand(self, snaps: list[ContainerSnapshot]) -> list[ContainerSnapshot]:
        for snap in snaps:
            for told in self.on_handed:
                told(snap)
        return snaps

    def list_containers(
        self, label: str, scope: str = "", names: Collection[str] = (), ids: Collection[str] = ()
    ) -> list[ContainerSnapshot]:
        return self._hand(super().list_containers(label, scope, names, ids))

    def list_unwell(self, label: str, scope: str = "") -> list[ContainerSnapshot]:
        return self._hand(super().list_unwell(label, scope))

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        snap = super().inspect(container_id)
        return None if snap is None else self._hand([self._presented(snap)])[0]

    def history(self, since: datetime, until: datetime) -> EngineHistory:
        record = super().history(since, until)
        for told in self.on_history:
            told(record.events)
        return record

    # -- the wall clock's steps, as DockerEngine presents stamps (adapters/engine/engine_clock.py)

    def clock_stepped(self, step: timedelta) -> None:
        """The wall clock stepped: a stamp Guardian was shown moves with it, for this run."""
        self.stepped += step.total_seconds()

    def guardian_started(self) -> None:
        """A new run of Guardian (a new EngineClock) sees every stamp as the engine keeps it."""
        self.run_began = self.stepped
        self.runs += 1

    def _presented(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        """`snap` with its stamps moved by the steps of this run since they were written."""
        shift = self.stepped - max(self.written_at.get(snap.id, 0.0), self.run_began)
        if not shift:
            return snap
        moved = {
            k: getattr(snap, k) + timedelta(seconds=shift)
            for k in STAMPS
            if getattr(snap, k) is not None
        }
        return replace(snap, **moved)

    # -- requests that change a container ----------------------------------------------------

    def _receive(self, verb: str, snap: ContainerSnapshot) -> None:
        if self.guardian_dead:
            raise Killed(f"{verb} of {snap.name} from a run of Guardian that was killed")
        request = Request(
            verb,
            snap.id,
            snap.name,
            dict(snap.labels),
            self.clock.monotonic(),
            self.clock.now(),
            snap.id in self.deferred or snap.id in self.calling,
            len(self.calling) if verb == "restart" else 0,
            self.asked() if verb == "restart" else None,
            snap.id in self.deferred and snap.id not in self.signalled,
        )
        self.received.append(request)
        for told in self.on_request:
            told(request)

    def _unsent(self) -> Fault | None:
        """The armed fault, taken; a REFUSED one (or an outage) stands for a request never sent."""
        fault, self.armed = self.armed, None
        if fault is not None:
            self.faults[str(fault)] += 1
        if self.outage > 0:
            self.outage -= 1
            self.faults["outage call"] += 1
            return Fault.REFUSED
        return fault

    def restart(
        self, container_id: str, stop_timeout: timedelta, previous_started_at: datetime | None
    ) -> ActionOutcome:
        if self.guardian_dead:
            raise Killed("a restart from a run of Guardian that was killed")
        self.restarts.append(container_id)
        fault = self._unsent()
        if fault is Fault.REFUSED:
            return ActionOutcome(Outcome.TRANSIENT_FAILURE, "connection refused (simulated)", True)
        if fault is Fault.DENIED:
            return ActionOutcome(Outcome.POLICY_DENIED, "403 Forbidden: the socket proxy refused")
        snap = self.containers.get(container_id)
        if snap is None:
            return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists (404)")
        self.steps.append(("restart", snap.name))
        self._receive("restart", snap)
        self.calling.append(container_id)
        try:
            if fault is Fault.TIMEOUT:
                return self._timed_out(snap, stop_timeout, previous_started_at)
            # Under way until the engine has stopped and started it: a request about the
            # container meanwhile waits for it (settle), as Docker's container lock makes it.
            self.deferred[container_id] = self.clock.monotonic() + stop_timeout.total_seconds()
            self.asked_in[container_id] = (self.runs, len(self.emitted))
            self._meanwhile(container_id, False)
            self.settle(container_id)
            self._meanwhile(container_id, True)  # carried out; the answer on its way
            return ActionOutcome(Outcome.RESTARTED, "restart request completed")
        finally:
            self.calling.remove(container_id)

    def _meanwhile(self, container_id: str, done: bool) -> None:
        if self.meanwhile is not None:
            self.meanwhile(container_id, done)

    def _timed_out(
        self, snap: ContainerSnapshot, stop_timeout: timedelta, previous: datetime | None
    ) -> ActionOutcome:
        """Sent, no answer: the engine restarted it already, or does within the stop timeout.
        Settled as DockerEngine settles it: State.StartedAt tells whether it restarted."""
        if self.rng.random() < 0.5:
            self._restart_now(snap.id)
        else:
            self.deferred[snap.id] = self.clock.monotonic() + stop_timeout.total_seconds()
            self.asked_in[snap.id] = (self.runs, len(self.emitted))
            if snap.state == "running":  # Docker signals at once; the process exits later
                kill = self.emit("kill", snap, signal="15")
                self.restart_stops[(snap.name, kill.at)] = self.asked_in[snap.id]
                self.signalled.add(snap.id)
        self._meanwhile(snap.id, snap.id not in self.deferred)  # until the call times out
        try:
            after = self.inspect(snap.id)
        except EngineUnavailable:
            return ActionOutcome(Outcome.UNKNOWN, "timed out after sending")
        if after is None:
            return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists")
        if previous is not None and after.started_at is not None and after.started_at > previous:
            return ActionOutcome(
                Outcome.RESTARTED, "timed out after sending; State.StartedAt shows it restarted"
            )
        return ActionOutcome(Outcome.UNKNOWN, "timed out after sending; State.StartedAt unchanged")

    def stop(self, container_id: str, stop_timeout: timedelta) -> ActionOutcome:
        if container_id in self.containers and self._unsent() is None:
            self._receive("stop", self.containers[container_id])
        return super().stop(container_id, stop_timeout)

    def remove_container(self, container_id: str, stop_timeout: timedelta) -> EngineStep:
        if container_id in self.containers:
            self._receive("remove", self.containers[container_id])
        return super().remove_container(container_id, stop_timeout)

    def create_container(self, spec: RecreateSpec) -> EngineStep:
        self._receive(
            "create", ContainerSnapshot(id="", name=spec.name, labels={}, state="", health=None)
        )
        return super().create_container(spec)

    # -- what the engine does ----------------------------------------------------------------

    def next_due(self) -> float | None:
        """When the earliest restart that timed out completes (monotonic), if any."""
        return min(self.deferred.values(), default=None)

    def complete_due(self, by: float) -> list[str]:
        """Complete the timed-out restarts due by `by` (monotonic; the clock is there, to the
        microsecond it keeps): their names."""
        due = sorted(cid for cid, at in self.deferred.items() if at <= by)
        for cid in due:
            self._restart_now(cid)
        return [self.containers[cid].name for cid in due if cid in self.containers]

    def settle(self, container_id: str) -> None:
        """A request about the container waits for its restart under way to complete."""
        if container_id in self.deferred:
            self._restart_now(container_id)

    def _restart_now(self, container_id: str) -> None:
        self.deferred.pop(container_id, None)
        self.signalled.discard(container_id)  # its kill emitted as the request came (_timed_out)
        asked = self.asked_in.pop(container_id, (self.runs, len(self.emitted)))
        snap = self.containers.get(container_id)
        if snap is None:
            return
        now = self.clock.now()
        if snap.state == "running":
            if container_id not in self.signalled:
                self.emit("kill", snap, signal="15")
            self.emit("die", snap, exitCode=str(SIGTERM))
            self.emit("stop", snap)
            self.restart_stops[(snap.name, now)] = asked
        health = (
            None if snap.health is None else self.rng.choice(("healthy", "healthy", "starting"))
        )
        self.put(
            replace(
                snap,
                state="running",
                health=health,
                started_at=now,
                finished_at=now if snap.state == "running" else snap.finished_at,
                exit_code=0,
                oom_killed=False,
                unhealthy_since=None,
                unhealthy_by=None,
                health_output="",
                health_log_at=now,
            )
        )
        self.emit("start", self.containers[container_id])
        self.emit("restart", self.containers[container_id])

    def put(self, snap: ContainerSnapshot) -> None:
        """The container is now `snap`, its stamps the engine's own (told to `on_change`)."""
        self.containers[snap.id] = snap
        self.written_at[snap.id] = self.stepped
        for told in self.on_change:
            told(snap.id, snap)

    def emit(self, action: str, snap: ContainerSnapshot, **attributes: str) -> EngineEvent:
        """An event as Docker sends it: the container's labels, name and image among the
        attributes; kept in the ring the engine replays from."""
        attrs = {**snap.labels, "name": snap.name, "image": "app:1", **attributes}
        event = EngineEvent(action, snap.id, snap.name, self.clock.now(), attrs)
        self.emitted.append(event)
        self.kept.append(event)
        if len(self.kept) > RING:
            del self.kept[0]
            self.kept_from = self.kept[0].at
        return event
