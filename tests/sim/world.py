"""The simulated world of one seed: the dice, the clock, the engine and its host, Guardian under
simulation, the oracle, and what happened (the trace and the counts). Everything random is drawn
from the one `random.Random(seed)`, in an order that depends on nothing else (no set or dict of
hashed keys is iterated where order matters), so a seed replays exactly.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from tests.fakes import FakeClock
from tests.sim.engine import Request, SimEngine
from tests.sim.frame import Frame
from tests.sim.host import Host
from tests.sim.oracle import Oracle
from tests.sim.records import Records
from tests.sim.subject import Channel, Disk, Subject

# How long an engine event may wait for the events thread before time moves on: under
# IN_FLIGHT (5 s), the daemon's own assumption when it marks events handled.
LAG = 3.0


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
        self.host.on_person.append(self.oracle.person)
        self.subject = Subject(self.tmp, self.engine, self.clock, Disk(), Channel(self.rng))
        self.oracle.disk_full = lambda: self.subject.disk.full
        self.subject.on_heard.append(self.oracle.heard)

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

    def advance(self, seconds: int) -> None:
        """Time passes: the engine completes the restarts that timed out when they are due."""
        end = self.clock.monotonic() + seconds
        while (due := self.engine.next_due()) is not None and due <= end:
            self.clock.advance(max(due - self.clock.monotonic(), 0))
            self.oracle.look(self.host.containers())
            for name in self.engine.complete_due(due):
                self.counts["late restarts completed"] += 1
                self.trace.append(f"  the engine completed the restart of {name}")
        self.clock.advance(end - self.clock.monotonic())
        self.oracle.look(self.host.containers())
        if self.running and seconds > LAG:
            self.subject.verify()  # its tick after the time passed (a deadline may be past)

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
        stream, as its backoff does within 30 s), the reactions run, in any order, and the
        verify job ticks (every second while a restart awaits its verdict)."""
        s = self.subject
        if not self.running or s.stream is None:
            return
        if not s.stream.open:
            s.reconnect()
        while s.hear() is not None:
            pass
        while s.reactions:
            s.react(s.reactions.pop(self.rng.randrange(len(s.reactions))))
        s.verify()

    def after_step(self) -> None:
        """The promises about the record, read from the store."""
        if self.running:
            self.records.after_step(self.subject.sqlite, self.subject.app.host)
