"""The steps the driver draws from, with their weights: what Guardian's jobs do, what happens on
the host, what a person does, and the faults. Each step takes the world and returns what it did,
one line for the trace. A step that needs Guardian while it is down starts it, now and then
(systemd restarts it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from guardian.core.incidents import InvalidTransition
from guardian.core.model import ContainerSnapshot, IncidentState
from guardian.ports import StoreError
from guardian.service.operator import BadRequest, NotFound, Refused
from tests.sim.engine import SIGTERM, Fault
from tests.sim.host import CAST, ROLES
from tests.sim.oracle import Silenced
from tests.sim.workers import Killed
from tests.sim.world import LAG, World

PERSON = "sim-person"
ASKER = next(r.name for r in CAST if r.asks)


@dataclass(frozen=True)
class Step:
    name: str
    weight: float
    run: Callable[[World], str]
    needs_guardian: bool = False


# -- time and the clock -------------------------------------------------------------------


def _pass(w: World, low: int, high: int) -> str:
    seconds = w.rng.randint(low, high)
    if seconds > LAG:
        w.catch_up()
    w.advance(seconds)
    return f"{seconds}s pass"


def clock_step(w: World) -> str:
    """The wall clock steps (NTP, a person), forward or back; the step watch notices it."""
    seconds = w.rng.choice((-7200, -3600, -600, -60, 60, 600, 3600, 7200))
    w.catch_up()
    w.step_clock(seconds)
    w.counts["clock steps"] += 1
    return f"the wall clock steps {seconds:+d}s"


# -- Guardian's jobs ----------------------------------------------------------------------


def sweep(w: World) -> str:
    return w.subject.sweep()


def verify(w: World) -> str:
    w.subject.verify()
    return "verify tick"


def deliver(w: World) -> str:
    return f"{w.subject.deliver()} sent"


def hear(w: World) -> str:
    """The events thread reads a few events."""
    read = [w.subject.hear() for _ in range(w.rng.randint(1, 4))]
    return ", ".join(r for r in read if r is not None) or "nothing to read"


def work(w: World) -> str:
    """A worker of the daemon's work queue takes one container's work, whichever the threads
    pick (tests/sim/workers.py)."""
    return w.work()


def cut(w: World) -> str:
    stream = w.subject.stream
    if stream is None or not stream.open:
        w.subject.reconnect()
        return "the event stream reconnects"
    w.counts["event stream cuts"] += 1
    unread = stream.pending()
    w.subject.cut()
    if w.rng.random() < 0.3:
        # A busy host: the engine's ring rolls over before the listener is back (what it
        # missed is lost, and the engine's record of starts reaches back less far).
        w.engine.kept[:] = []
        w.engine.kept_from = w.clock.now()
        w.counts["event rings rolled over"] += 1
        return f"the event stream is cut ({unread} unread) and the engine's ring rolls over"
    return f"the event stream is cut ({unread} unread)"


def crash(w: World) -> str:
    """kill -9: what waits in the work queue is lost; beside a restart call in flight, the call
    ends there too (Killed), left to the engine."""
    if w.rng.random() < 0.5 and not w.depth:
        w.catch_up()
    dropped = w.subject.crash()
    w.counts["crashes"] += 1
    said = f"Guardian is killed (kill -9), the work of {dropped} containers lost"
    if w.depth:
        w.counts["crashes beside a call in flight"] += 1
        raise Killed(said)
    return said


# -- the host -----------------------------------------------------------------------------


def _pick(w: World, wanted: Callable[[ContainerSnapshot], bool]) -> ContainerSnapshot | None:
    found = [c for c in w.host.containers() if wanted(c)]
    return w.rng.choice(found) if found else None


def sicken(w: World) -> str:
    c = _pick(w, lambda c: c.state == "running" and c.health in ("healthy", "starting"))
    if c is None:
        return "nothing to fall ill"
    w.host.sicken(c, w.rng.choice(("GET /health: 503", "connection refused", "timeout")))
    return f"{c.name} turns unhealthy"


def recover(w: World) -> str:
    c = _pick(w, lambda c: c.state == "running" and c.health in ("unhealthy", "starting"))
    if c is None:
        return "nothing to recover"
    w.host.recover(c)
    return f"{c.name} turns healthy"


def exit_(w: World) -> str:
    c = _pick(w, lambda c: c.state == "running")
    if c is None:
        return "nothing running"
    oom = w.rng.random() < 0.25
    code = 137 if oom else w.rng.choice((1, 2, 0))
    w.host.exit(c, code, oom=oom)
    return f"{c.name} exits with {code}" + (" (OOM killed)" if oom else "")


def person(w: World) -> str:
    """A person stops, kills, removes, starts or runs again a container (any: in scope or not);
    starting and running again twice as often, so the host does not drift empty."""
    what = w.rng.choices(("stop", "kill", "remove", "start", "run"), (1, 1, 1, 2, 2))[0]
    w.counts[f"a person's {what}"] += 1
    if what == "run":
        gone = sorted(w.engine.gone)
        if not gone:
            return "nothing removed to run again"
        return f"a person runs {w.host.run(w.rng.choice(gone)).name} again (a new id)"
    if what == "start":
        c = _pick(w, lambda c: c.state == "exited")
        if c is None:
            return "nothing stopped to start"
        w.host.start(c)
        return f"a person starts {c.name}"
    c = _pick(w, lambda c: c.state == "running" or what == "remove")
    if c is None:
        return f"nothing to {what}"
    if what == "stop":
        # A process may answer SIGTERM with an exit code of its own (0, or 1 from a handler).
        code = w.rng.choice((SIGTERM, 0, 1))
        w.host.stop(c, code)
        return f"a person runs docker stop {c.name} (it exits with {code})"
    (w.host.kill if what == "kill" else w.host.remove)(c)
    return f"a person runs docker {'rm -f' if what == 'remove' else what} {c.name}"


# -- faults -------------------------------------------------------------------------------


def engine_fault(w: World) -> str:
    """The engine's next changing request fails (before or after it was sent, or a proxy's
    403), or the engine stops answering for a few calls."""
    kind = w.rng.choice(("refused", "timeout", "denied", "outage"))
    w.counts[f"engine fault: {kind}"] += 1
    if kind == "outage":
        w.engine.outage = w.rng.randint(1, 6)
        return f"the engine fails its next {w.engine.outage} calls"
    w.engine.armed = Fault(kind)
    return f"the engine's next change request: {kind}"


def disk(w: World) -> str:
    """The store's disk fills up, or is freed."""
    d = w.subject.disk
    d.full = not d.full
    w.counts["disk filled" if d.full else "disk freed"] += 1
    return "the disk is full" if d.full else "the disk has room again"


def channel_down(w: World) -> str:
    n = w.rng.randint(1, 8)
    w.subject.channel.down = n
    w.counts["channel outages"] += 1
    return f"the notification channel fails its next {n} sends"


# -- a person at the CLI ------------------------------------------------------------------


def operator(w: World) -> str:
    """A person acknowledges an incident, approves a restart (guardian.action=ask), or silences
    a container or lifts a silence."""
    what = w.rng.choice(("ack", "approve", "silence", "unsilence"))
    w.counts[f"a person's {what}"] += 1
    op, now = w.subject.app.app.operator, w.clock.now()
    try:
        if what == "silence":
            name = w.rng.choice(sorted(ROLES))
            s = op.silence(name, timedelta(minutes=w.rng.randint(5, 30)), "maintenance", PERSON)
            for earlier in w.oracle.silences:  # a silence replaces the one in force
                if earlier.name == name and earlier.lifted is None and earlier.until > now:
                    earlier.lifted = now
            w.oracle.silences.append(Silenced(name, s.created_at, s.until, set_at=w.frame.now()))
            return f"a person silences {name} until {s.until.isoformat()}"
        if what == "unsilence":
            held = sorted({s.name for s in w.oracle.silences if s.holds(now)})
            if not held:
                return "no silence to lift"
            name = w.rng.choice(held)
            op.unsilence(name, PERSON)
            for s in w.oracle.silences:
                if s.name == name and s.holds(now):
                    s.lifted = now
            return f"a person lifts the silence of {name}"
        return _answer(w, what)
    except (BadRequest, NotFound, Refused, InvalidTransition, StoreError) as exc:
        return f"a person's {what} refused: {type(exc).__name__}"


def _answer(w: World, what: str) -> str:
    op = w.subject.app.app.operator
    incidents = sorted(op.open_incidents(), key=lambda i: i.id or 0)
    if what == "ack":
        active = [i for i in incidents if i.state is IncidentState.ACTIVE and i.id is not None]
        if not active:
            return "nothing to acknowledge"
        incident = w.rng.choice(active)
        op.change(incident.id or 0, "ack", PERSON)
        return f"a person acknowledges incident {incident.id} ({incident.container})"
    asked = [i for i in incidents if i.container == ASKER and op.awaiting_approval(i)]
    if not asked:
        return "nothing awaits approval"
    incident = w.rng.choice(asked)
    approval = op.answer(incident.id or 0, True, PERSON)
    w.oracle.approvals[incident.container].append(approval.expires_at)
    return f"a person approves a restart of {incident.container}"


def start(w: World) -> str:
    w.start()
    return "Guardian starts"


STEPS: tuple[Step, ...] = (
    Step("few seconds", 14, lambda w: _pass(w, 1, 3)),
    Step("minutes", 10, lambda w: _pass(w, 10, 180)),
    Step("long wait", 2, lambda w: _pass(w, 180, 1200)),
    Step("clock step", 1, clock_step),
    Step("sweep", 14, sweep, needs_guardian=True),
    Step("verify", 6, verify, needs_guardian=True),
    Step("deliver", 4, deliver, needs_guardian=True),
    Step("events", 12, hear, needs_guardian=True),
    Step("worker", 10, work, needs_guardian=True),
    Step("stream", 2, cut, needs_guardian=True),
    Step("crash", 0.5, crash, needs_guardian=True),
    Step("operator", 2, operator, needs_guardian=True),
    Step("sicken", 8, sicken),
    Step("recover", 6, recover),
    Step("exit", 3, exit_),
    Step("person", 4, person),
    Step("engine fault", 3, engine_fault),
    Step("disk", 1, disk),
    Step("channel", 0.5, channel_down),
)
