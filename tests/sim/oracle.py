"""The oracle: Guardian's promises, checked against what the simulated engine recorded (every
restart as the engine received it, never as Guardian's store tells it) and against the store's
own rows where the promise is about the record. Restart promises are checked as each request
reaches the engine; the record's after every step (`after_step`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from guardian.core.model import ContainerSnapshot
from guardian.ports import EngineEvent
from tests.sim.engine import SIGKILL, SIGTERM, Request
from tests.sim.frame import Frame, Moment, Unwell
from tests.sim.host import ROLES, Role
from tests.sim.known import KNOWN

MINUTE = 60.0
# How many events the engine emits at most for a person's act, with the restart it completes
# before it (kill, die, stop, start, restart; then kill, die, stop).
ACT_EVENTS = 16


class Promise(Enum):
    """What Guardian promises (docs/design.md rules 2 to 6, 10 and 14), as the oracle checks it."""

    ONE_IN_FLIGHT = "never a second restart of a container while the engine still does the first"
    MAX_ATTEMPTS = "at most max_attempts restarts of a container within the window"
    COOLDOWN = "never two restarts of a container within its cooldown (with its backoff)"
    HOST_BUDGET = "never more restarts on the host than restart.max_per_minute in any minute"
    AT_ONCE = "never more restart calls under way on the host than restart.max_concurrent"
    PERSON_STOP = "never a restart of a container a person stopped or removed"
    OWN_STOP = "never a stop of Guardian's own restart kept as a person's (its crashes unhealed)"
    SCOPE = "nothing outside scope touched (opted out, not opted in, an orchestrator's)"
    SILENCE = "never a restart of a container while a person's silence holds it"
    APPROVAL = "never a restart of a guardian.action=ask container without an approval"
    HEALED = "never reported healed unless the engine showed it well at that time"
    ONE_INCIDENT = "never two open incidents for one (container, problem)"
    ONE_OPENING = "one 'opened' notification per incident and recurrence"
    DRAINED = "every queued notification delivered or dead-lettered once delivery drains"
    NO_RAISE = "no job of the loop raises (the daemon would log it and carry on)"


@dataclass(frozen=True)
class Violation:
    promise: Promise
    step: int
    detail: str
    known: str = ""  # the bug of KNOWN it matches, if any

    def __str__(self) -> str:
        said = f"step {self.step}: {self.promise.name} ({self.promise.value}): {self.detail}"
        return f"{said} [known bug {self.known}: {KNOWN[self.known]}]" if self.known else said


@dataclass(frozen=True)
class Attempt:
    """A restart as the engine received it: when, and whether the store could not write it."""

    at: Moment
    unwritten: bool = False


def unwell(snap: ContainerSnapshot) -> bool:
    """Whether Guardian, shown `snap`, must judge a problem: running unhealthy, or (inspected)
    exited by itself with a code Guardian does not ignore, or killed by the OOM killer."""
    if snap.state == "running":
        return snap.health == "unhealthy"
    if not snap.inspected or snap.state not in ("exited", "dead"):
        return False
    return snap.oom_killed or snap.exit_code not in (None, 0, SIGTERM, SIGKILL)


def well(snap: ContainerSnapshot | None) -> bool:
    return snap is not None and snap.state == "running" and snap.health in (None, "healthy")


def in_scope(role: Role, labels: dict[str, str]) -> bool:
    """The oracle's own reading of scope: opted in with guardian.enable=true, no orchestrator."""
    owned = any(k.startswith("com.docker.swarm.") for k in labels)
    return role.in_scope and labels.get("guardian.enable") == "true" and not owned


@dataclass
class Silenced:
    """A person's silence of one container, as the simulator set it (wall clock)."""

    name: str
    since: datetime
    until: datetime
    lifted: datetime | None = None
    set_at: Moment | None = None  # when the person set it, in the order of what happened

    def holds(self, now: datetime) -> bool:
        """In force at wall time `now`, asked after everything so far: a silence lifted is
        over, whatever the wall clock says since (it may have stepped back before its lift)."""
        return self.since <= now < self.until and self.lifted is None


@dataclass(repr=False)
class Oracle:
    """Guardian's promises over one simulation. `step` is the step being taken (for reports)."""

    frame: Frame
    step: int = 0
    violations: list[Violation] = field(default_factory=list)
    checked: int = 0  # invariant checks made
    attempts: dict[str, list[Attempt]] = field(default_factory=lambda: defaultdict(list))
    host_attempts: list[Attempt] = field(default_factory=list)
    sightings: dict[str, Unwell] = field(default_factory=dict)
    held: dict[str, Moment] = field(default_factory=dict)  # stopped, killed, removed by a person
    # Where each held act's events begin among those the engine emitted (its kill, stop or
    # destroy), and when a run of Guardian first learnt of them, by container id: heard from
    # the stream or read in the engine's record, in which run, and whether the store's writes
    # failed then (the run could not keep it).
    acted_from: dict[str, int] = field(default_factory=dict)
    learnt: dict[str, tuple[int, bool]] = field(default_factory=dict)
    disk_full: Callable[[], bool] = lambda: False  # whether the store's writes fail now
    emitted: Callable[[], list[EngineEvent]] = list  # every event the engine emitted, in order
    # The engine's stamps of the stops and kills Guardian's restarts made (with the run of
    # Guardian that asked), and of a person's acts, by container name; Guardian's runs so far.
    restart_stops: Callable[[], dict[tuple[str, datetime], tuple[int, int]]] = dict
    person_acts: Callable[[], set[tuple[str, datetime]]] = set
    last_act: Callable[[], dict[str, int]] = dict
    runs: Callable[[], int] = lambda: 0
    silences: list[Silenced] = field(default_factory=list)
    approvals: dict[str, list[datetime]] = field(default_factory=lambda: defaultdict(list))
    well_at: dict[datetime, set[str]] = field(default_factory=lambda: defaultdict(set))
    well_now: set[str] = field(default_factory=set)  # well at some moment of this step

    def violated(self, promise: Promise, detail: str, known: str = "") -> None:
        self.violations.append(Violation(promise, self.step, detail, known))

    def _check(self, promise: Promise, holds: bool, detail: str, known: str = "") -> None:
        self.checked += 1
        if not holds:
            self.violated(promise, detail, known)

    def _unwell(self, container_id: str, name: str) -> Unwell:
        if container_id not in self.sightings:
            reset_after = ROLES[name].policy.reset_after.total_seconds()
            self.sightings[container_id] = Unwell(reset_after)
        return self.sightings[container_id]

    # -- told by the engine and the host -----------------------------------------------------

    def handed(self, snap: ContainerSnapshot) -> None:
        """The engine showed Guardian `snap` (a container a person stopped is not unwell: it is
        left alone)."""
        if unwell(snap) and snap.id not in self.held:
            self._unwell(snap.id, snap.name).saw(self.frame.now())

    def begin(self, step: int, containers: list[ContainerSnapshot]) -> None:
        """A step begins: the containers well now."""
        self.step, self.well_now = step, set()
        self.look(containers)

    def look(self, containers: list[ContainerSnapshot]) -> None:
        """The clock moved: the containers well at this wall time."""
        for snap in containers:
            self.changed(snap.id, snap)

    def changed(self, container_id: str, snap: ContainerSnapshot | None) -> None:
        """The container changed: note whether it is well, in this step and at this wall time."""
        if well(snap):
            self.well_now.add(container_id)
            self.well_at[self.frame.clock.now()].add(container_id)

    def was_well(self, container_id: str, at: datetime) -> bool:
        """Whether the engine showed the container well at wall time `at`: within this step
        when `at` is now, else within any step at that wall time (a record written late; a wall
        time the clock had passed before it stepped back, come round again)."""
        if at == self.frame.clock.now() and container_id in self.well_now:
            return True
        return container_id in self.well_at.get(at, set())

    def heard(self, action: str, container_id: str) -> None:
        """Guardian's event stream handed it an event (on_event): a held act's is learnt,
        whatever Guardian made of it."""
        if action in ("kill", "stop", "destroy"):
            self._learnt(container_id)

    def read(self, events: tuple[EngineEvent, ...]) -> None:
        """Guardian read the engine's record (history): a held act among what it returned is
        learnt."""
        returned = {id(e) for e in events}
        emitted = self.emitted()
        for container_id, start in list(self.acted_from.items()):
            # The act's own events, right after it (after a restart the engine completed first).
            own = [e for e in emitted[start : start + ACT_EVENTS] if e.container_id == container_id]
            starts = [i for i, e in enumerate(own) if e.action in ("start", "restart")]
            acts = own[starts[-1] + 1 :] if starts else own
            if any(id(e) in returned and e.action in ("kill", "stop", "destroy") for e in acts):
                self._learnt(container_id)

    def _learnt(self, container_id: str) -> None:
        if container_id in self.held and container_id not in self.learnt:
            run = self.frame.run_index(self.frame.now())
            self.learnt[container_id] = (run, self.disk_full())
            self.acted_from.pop(container_id, None)

    def kept(self, name: str, at: datetime, judged: bool) -> None:
        """Guardian's store keeps a person's stop of `name` stamped `at` (its mark, which holds
        the container's next exit as left alone): a person made it, not Guardian's restart.
        `judged`: the store holds the restart that made it, its verdict written."""
        made = self.restart_stops().get((name, at))
        own = made is not None and (name, at) not in self.person_acts()
        asked_in, place = made if made is not None else (None, 0)
        acted = self.last_act().get(name, -1) >= place
        self._check(
            Promise.OWN_STOP,
            not own,
            f"a person's stop of {name} kept at {at.isoformat()}, the stop of Guardian's restart",
            self._own_known(asked_in, judged, acted),
        )

    def _own_known(self, asked_in: int | None, judged: bool, acted: bool) -> str:
        """The known bug a stop of Guardian's own restart kept as a person's comes from: F18
        unless a later run than the one that asked for the restart kept it while the store held
        the restart with its verdict in, no person acted on the container since it was asked
        and the wall clock never stepped back ("": fixed, F17, seed 1307: a restart's stop
        replayed from the engine's ring to a later run, its verdict long in)."""
        later = asked_in is not None and asked_in < self.runs()
        back = any(seconds < 0 for _, seconds in self.frame.steps)
        return "" if later and judged and not acted and not back else "F18"

    def person(self, what: str, container_id: str) -> None:
        self.learnt.pop(container_id, None)
        if what in ("stop", "kill", "remove"):
            self.held[container_id] = self.frame.now()
            if what != "remove":  # a removed container is never asked about again
                self.acted_from[container_id] = len(self.emitted())
        else:
            self.held.pop(container_id, None)
            self.acted_from.pop(container_id, None)

    def request(self, req: Request) -> None:
        """A request that changes a container reached the engine."""
        role = ROLES[req.name]
        self._check(Promise.SCOPE, in_scope(role, req.labels), f"{req.verb} of {req.name}")
        now = self.frame.now()
        held = self.held.get(req.container_id)
        self._check(
            Promise.PERSON_STOP,
            held is None,
            f"{req.verb} of {req.name} after a person stopped, killed or removed it",
            self._explained(req.container_id, held),
        )
        if held is not None and req.verb in ("restart", "create"):
            del self.held[req.container_id]  # it runs again now: told once
            self.acted_from.pop(req.container_id, None)
            self.learnt.pop(req.container_id, None)
        if req.verb != "restart":
            return
        self._check(
            Promise.ONE_IN_FLIGHT,
            not req.under_way,
            f"restart of {req.name} while the engine still restarts it",
            self._in_flight_known(req, self.attempts[req.container_id][-1:], now),
        )
        silenced = [s for s in self.silences if s.name == req.name and s.holds(req.wall)]
        self._check(Promise.SILENCE, not silenced, f"restart of {req.name} while silenced")
        if role.asks:
            self._approved(req)
        self._budget(req, role, now)
        # Counted from Guardian's decision when the call waited in its work queue since: the
        # budget is Guardian's to keep from when it decided, not from when a worker got to it.
        attempt = Attempt(req.asked if isinstance(req.asked, Moment) else now, self.disk_full())
        self.attempts[req.container_id].append(attempt)
        self.host_attempts.append(attempt)
        self._unwell(req.container_id, req.name).saw(now)

    def _explained(self, container_id: str, held: Moment | None) -> str:
        """The known bug a restart after a person's stop at `held` comes from: F10 when no run
        of Guardian could keep the stop (none heard it or read it in the engine's record before
        the engine's ring dropped it, or only runs whose store refused writes then); ""
        otherwise (fixed: F3, a stop not heard as an event; F4, F12 and F14, a stop taken for
        Guardian's own restart's: after its start was heard, before its call was sent, after a
        start never heard; F9, a stop forgotten for a stale start replayed after a step back)."""
        if held is None:
            return ""
        learnt = self.learnt.get(container_id)
        if learnt is None:
            return "F10"
        run, unwritable = learnt
        if run < self.frame.run_index(self.frame.now()) and unwritable:
            return "F10"
        return ""

    def _approved(self, req: Request) -> None:
        """Each restart of an `ask` container uses one approval given before it, unexpired."""
        given = self.approvals[req.name]
        usable = [at for at in given if at > req.wall]
        self._check(Promise.APPROVAL, bool(usable), f"restart of {req.name} without an approval")
        if usable:
            given.remove(usable[0])

    def _budget(self, req: Request, role: Role, now: Moment) -> None:
        """max_attempts, cooldown (with its backoff) and the host's budget, in credited time."""
        p, credited = role.policy, self.frame.credited
        prior = self.attempts[req.container_id]
        since = self._unwell(req.container_id, req.name).reset_point(now)
        window = p.window.total_seconds()
        inside = set(self.frame.within([a.at for a in prior], now, window))
        counted = [a for a in prior if a.at >= since and a.at in inside]
        lost = self._lost(counted, now)  # a known bug, if any
        self._check(
            Promise.MAX_ATTEMPTS,
            len(counted) < p.max_attempts,
            f"restart of {req.name}: {len(counted)} restarts already within the window "
            f"(max_attempts {p.max_attempts})",
            lost,
        )
        if prior:
            gap, need = credited(prior[-1].at, now), p.cooldown_after(max(len(counted), 1))
            self._check(
                Promise.COOLDOWN,
                gap >= need,
                f"restart of {req.name} {gap:.3f}s after the last (cooldown {need:.0f}s)",
                self._lost([*counted, prior[-1]], now),
            )
        self._check(
            Promise.AT_ONCE,
            req.at_once < p.max_concurrent,
            f"restart of {req.name}: {req.at_once} restart calls already under way "
            f"(max_concurrent {p.max_concurrent})",
        )
        minute = set(self.frame.within([a.at for a in self.host_attempts], now, MINUTE))
        recent = [a for a in self.host_attempts if a.at in minute]
        self._check(
            Promise.HOST_BUDGET,
            len(recent) < p.max_per_minute,
            f"restart of {req.name}: {len(recent)} restarts on the host within the last minute "
            f"(max_per_minute {p.max_per_minute})",
        )

    def _in_flight_known(self, req: Request, last: list[Attempt], now: Moment) -> str:
        """The known bug a second restart while the engine still does the first comes from: F7
        when the store lost the first (made while its writes failed, in an earlier run) and the
        container was not running when it was asked (no kill in the engine's record tells it);
        "" otherwise (fixed: F11, and F7 for a running container, whose kill the next run reads)."""
        return "F7" if req.unsignalled and self._unwritten_before(last, now) else ""

    def _lost(self, attempts: list[Attempt], now: Moment) -> str:
        """The known bug that forgot or misplaced one of `attempts` the store lost (made while
        its writes failed, in an earlier run): F6 when no step forward of the wall clock came
        in this run (another run came between); "" otherwise (fixed: F5, a lost restart counted
        from the engine's record unmoved by a step forward in this run)."""
        if not self._unwritten_before(attempts, now):
            return ""
        began = self.frame.run_start(now)
        return "" if any(s > 0 and at > began for at, s in self.frame.steps) else "F6"

    def _unwritten_before(self, attempts: list[Attempt], now: Moment) -> bool:
        """Whether one of `attempts` was made while the store's writes failed, in an earlier
        run of Guardian than `now` (its intent, held in memory, died with that run)."""
        runs = self.frame.run_index
        return any(a.unwritten and runs(a.at) < runs(now) for a in attempts)
