"""The simulated world of one seed: the dice, the clock, the engine and its host, Guardian under
simulation, the oracle, and what happened (the trace and the counts). Everything random is drawn
from the one `random.Random(seed)`, in an order that depends on nothing else (no set or dict of
hashed keys is iterated where order matters), so a seed replays exactly. The scheduler of the
daemon's work queue is here too: which container's worker runs next (`work`), the looks a
decision asked for run when due (`advance`), and the queue drained before time moves on
(`catch_up`).
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from tests.fakes import FakeClock
from tests.sim.edges import Channel, Disk
from tests.sim.engine import Request, SimEngine
from tests.sim.frame import Frame
from tests.sim.host import Host
from tests.sim.oracle import Oracle, Promise
from tests.sim.records import Records
from tests.sim.subject import Subject

# How long an engine event may wait for the events thread before time moves on: under
# IN_FLIGHT (5 s), the daemon's own assumption when it marks events handled.
LAG = 3.0
DUE_AT_MOST = 1000  # looks and completions due within one passing of time: more is a loop


@dataclass(repr=False)
class World:
    seed: int
    tmp: Path
    rng: random.Random = field(init=False)
    clock: FakeClock = field(init=False)
    engine: SimEngine = field(init=False)
    host: Host = field(init=False)
    frame: Frame = field(init=False)
    oracle: Oracle = field(init=False)
    records: Records = field(init=False)
    subject: Subject = field(init=False)
    trace: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)  # steps and faults, by kind
    taken: int = 0  # steps taken so far
    depth: int = 0  # restart calls in flight that steps now run beside (driver.in_flight)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.clock = FakeClock()
        self.engine = SimEngine(self.clock, rng=self.rng)
        self.engine.kept_from = self.clock.now() - timedelta(hours=2)  # the engine's own start
        self.host = Host(self.engine)
        self.frame = Frame(self.clock)
        self.oracle = Oracle(self.frame)
        self.records = Records(self.oracle)
        self.engine.on_request.append(self.oracle.request)
        self.engine.on_request.append(self._received)
        self.engine.on_change.append(self.oracle.changed)
        self.engine.on_handed.append(self.oracle.handed)
        self.engine.on_history.append(self.oracle.read)
        self.oracle.emitted = lambda: self.engine.emitted
        self.oracle.restart_stops = lambda: self.engine.restart_stops
        self.oracle.person_acts = lambda: self.engine.person_acts
        self.oracle.last_act = lambda: self.engine.last_act
        self.oracle.runs = lambda: self.engine.runs
        self.host.on_person.append(self.oracle.person)
        self.subject = Subject(self.tmp, self.engine, self.clock, Disk(), Channel(self.rng))
        self.oracle.disk_full = lambda: self.subject.disk.full
        self.subject.on_heard.append(self.oracle.heard)
        self.subject.on_raised.append(
            lambda exc: self.oracle.violated(Promise.NO_RAISE, raised_at(exc))
        )

    def _received(self, request: Request) -> None:
        self.counts[f"engine received: {request.verb}"] += 1
        self.trace.append(f"  the engine received: {request.verb} {request.name}")

    @property
    def running(self) -> bool:
        """Whether Guardian runs (not crashed and not yet started again)."""
        return self.subject.t is not None

    def start(self) -> None:
        self.frame.started()
        self.subject.start()
        queue = self.subject.queue
        assert queue is not None
        queue.stamp = self.frame.now  # when a call was queued: the oracle counts it from then
        self.engine.asked = lambda: queue.asked[-1] if queue.asked else None

    def advance(self, seconds: int) -> None:
        """Time passes: the engine completes the restarts that timed out when they are due, and
        the looks Guardian asked for at a time (a recheck, a freed slot) run then. A restart
        call never waits for the clock: the workers take every one queued before it moves."""
        self._calls_first()
        end = self.clock.monotonic() + seconds
        for _ in range(DUE_AT_MOST):
            due = self._next_due()
            if due is None or due > end:
                break
            self.clock.advance(max(due - self.clock.monotonic(), 0))
            self.oracle.look(self.host.containers())
            for name in self.engine.complete_due(due):
                self.counts["late restarts completed"] += 1
                self.trace.append(f"  the engine completed the restart of {name}")
            self._when_due(due)
        else:
            raise RuntimeError(f"more than {DUE_AT_MOST} looks and completions due in {seconds}s")
        self.clock.advance(end - self.clock.monotonic())
        self.oracle.look(self.host.containers())
        if self.running and seconds > LAG:
            self.subject.verify()  # its tick after the time passed (a deadline may be past)
            self.subject.look_for_approvals()

    def _calls_first(self) -> None:
        while calls := self.with_calls():
            self._run(calls[self.rng.randrange(len(calls))])

    def _next_due(self) -> float | None:
        """When the engine completes a restart or Guardian's next look or timer is due."""
        queue = self.subject.queue if self.running else None
        due = [self.engine.next_due(), queue.next_due() if queue is not None else None]
        return min((d for d in due if d is not None), default=None)

    def _when_due(self, by: float | None = None) -> None:
        """The delayed looks and timers due by `by` (default: now): each look on its key's
        worker at once (the daemon's workers take a due key within milliseconds)."""
        queue = self.subject.queue if self.running else None
        if queue is None:
            return
        for key in queue.fire_due(self.clock.monotonic() if by is None else by):
            if key in queue.ready:
                self.counts["looks when due"] += 1
                self._run(key)

    def work(self, calls: bool = False) -> str:
        """One worker takes a container's key, whichever the threads pick (`calls`: one with a
        restart call waiting), and runs its work (the restart calls decided for it, then a
        look): what it ran, or that none waits."""
        queue = self.subject.queue
        assert queue is not None
        self._when_due()
        keys = self.with_calls() if calls else queue.ready
        if not keys:
            return "no work waiting"
        return self._run(keys[self.rng.randrange(len(keys))])

    def with_calls(self) -> list[str]:
        """The keys waiting for a worker with a restart call among their work."""
        queue = self.subject.queue if self.running else None
        if queue is None or queue.dead:
            return []
        return [k for k in queue.ready if queue.waiting[k].calls]

    def _run(self, key: str) -> str:
        """`key`'s worker runs what waits for it: what that was, for the trace."""
        queue = self.subject.queue
        assert queue is not None
        name = self.engine.containers[key].name if key in self.engine.containers else key[:12]
        work = queue.run(key)
        self.counts["worker turns"] += 1
        self.counts["restart calls queued and run"] += len(work.calls)
        n = len(work.calls)
        said = [f"{n} restart call" + ("s" if n > 1 else "")] if n else []
        return f"a worker takes {name}: " + ", ".join([*said, "a look"] if work.look else said)

    def step_clock(self, seconds: int) -> None:
        """The wall clock steps; the engine presents the stamps Guardian saw moved with it, and
        the daemon's step watch notices it at its next look."""
        self.clock.step(seconds)
        self.oracle.look(self.host.containers())
        self.engine.clock_stepped(timedelta(seconds=seconds))
        self.frame.stepped(seconds)
        if self.running:
            self.subject.look_at_clock()

    def catch_up(self) -> None:
        """Before time moves on: the events thread reads what is waiting (reconnecting a cut
        stream, as its backoff does within 30 s), the workers take every key waiting, in any
        order, and the verify job ticks (every second while a restart awaits its verdict)."""
        s = self.subject
        if not self.running or s.stream is None:
            return
        if not s.stream.open:
            s.reconnect()
        while s.hear() is not None:
            pass
        while self.running and s.queue is not None and s.queue.ready:
            self.work()
        if self.running:
            s.verify()

    def after_step(self) -> None:
        """The promises about the record, read from the store."""
        if self.running:
            self.records.after_step(self.subject.sqlite, self.subject.app.host)


def raised_at(exc: BaseException) -> str:
    """What raised where, for a NO_RAISE report."""
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
