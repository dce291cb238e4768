"""The seeded driver: one seed, one world, steps drawn until the simulated time is up, the
promises checked after every step. While one of Guardian's restart calls is in flight at the
engine (sent, not yet carried out; or carried out, not yet answered), other steps may run beside
its worker (`in_flight`): up to MAX_IN_FLIGHT calls at once. A run stops at the first promise
broken by a bug not yet known (a known one, tests/sim/known.py, is noted and the run goes on,
so it blinds no seed to the rest) and says how to replay it: one command (`replay_command`).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.sim.oracle import Promise, Violation
from tests.sim.steps import STEPS, Step, start
from tests.sim.workers import Killed
from tests.sim.world import World, raised_at

TICK = 0.001  # seconds each step takes
DRAIN_TICKS = 400  # delivery ticks, 15 s apart at most, for the outbox to drain at the end
# Restart calls in flight at once that steps run beside: one more than restart.max_concurrent
# (2 under simulation), so a budget of calls at once that Guardian overran would show.
MAX_IN_FLIGHT = 3
IN_FLIGHT_CHANCE = 0.2  # at each of a call's two moments (sent; carried out), that steps run
# That another worker takes a restart call waiting meanwhile (the sweep's calls for several
# containers run at once, each on its container's worker).
BESIDE_CALLS = 0.5
IN_FLIGHT_STEPS = 3  # at most, each moment: seconds at most, well within the stop timeout
# What may happen while a call is in flight: anything but minutes passing (the engine answers a
# restart within the container's stop timeout, 10 s under simulation).
BESIDE = tuple(s for s in STEPS if s.name not in ("minutes", "long wait"))
ANOTHER_CALL = Step("worker", 0, lambda w: w.work(calls=True))


def replay_command(seed: int, hours: float, plant: str = "") -> str:
    """The one command that replays a seed exactly, its trace printed."""
    planted = f" --plant {plant}" if plant else ""
    return f"python -m tests.sim --seed {seed} --hours {hours:g}{planted}"


@dataclass
class Report:
    """What one seed did: its trace, the steps and faults of each kind, the checks made, the
    promises broken (with the command that replays them)."""

    seed: int
    hours: float
    plant: str = ""
    trace: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    checked: int = 0
    simulated: float = 0.0  # seconds of true time
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No promise broken, by a bug known or not."""
        return not self.violations

    @property
    def failed(self) -> list[Violation]:
        """The promises broken by no known bug: what the simulator found."""
        return [v for v in self.violations if not v.known]

    @property
    def known(self) -> set[str]:
        """The known bugs this seed ran into."""
        return {v.known for v in self.violations if v.known}

    @property
    def replay(self) -> str:
        return replay_command(self.seed, self.hours, self.plant)

    def broken(self) -> set[Promise]:
        return {v.promise for v in self.violations}

    def explain(self, tail: int = 40) -> str:
        """The promises broken (the first not known, else every known one), the steps that led
        to it, and the command that replays it."""
        shown = self.failed[:1] or self.violations
        lines = [f"seed {self.seed}: {v}" for v in shown]
        if tail:
            step = shown[0].step if shown else len(self.trace)
            before = [t for t in self.trace if _step_of(t) <= step]
            lines += ["--- the steps before it ---", *before[-tail:]]
        lines.append(f"replay: {self.replay}")
        return "\n".join(lines)


def _step_of(line: str) -> int:
    head = line.split(" ", 1)[0]
    return int(head) if head.isdigit() else -1


@contextmanager
def quiet_guardian() -> Iterator[None]:
    """Guardian's log lines cost time and say nothing the trace does not: off while it runs."""
    logger = logging.getLogger("guardian")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def simulate(seed: int, hours: float = 1.0, plant: str = "", tmp: Path | None = None) -> Report:
    """Run one seed for `hours` of simulated time (`plant`: a planted bug, tests/sim/plants.py),
    its store in a directory under `tmp` (default: the system's)."""
    from tests.sim.plants import planted

    report = Report(seed, hours, plant)
    with tempfile.TemporaryDirectory(prefix="guardian-sim-", dir=tmp) as d, planted(plant):
        with quiet_guardian():
            world = World(seed, Path(d))
            _run(world, hours * 3600.0, report)
        if world.running:
            world.subject.crash()  # closes the store before its directory goes
    world.counts["jobs a store error ended"] = world.subject.store_errors
    world.counts["events lost (left the ring)"] = world.subject.events_lost
    report.trace, report.counts = world.trace, dict(sorted(world.counts.items()))
    report.checked, report.violations = world.oracle.checked, world.oracle.violations
    return report


def _run(world: World, seconds: float, report: Report) -> None:
    world.start()
    world.engine.meanwhile = lambda container_id, done: in_flight(world, container_id, done)
    began = world.clock.monotonic()
    weights = [s.weight for s in STEPS]
    while world.clock.monotonic() - began < seconds and not _found(world):
        _take(world, world.rng.choices(STEPS, weights)[0])
    report.simulated = world.clock.monotonic() - began
    world.counts["steps"] = world.taken
    world.engine.meanwhile = None
    if not _found(world):
        _finish(world, world.taken + 1)


def in_flight(world: World, container_id: str, done: bool) -> None:
    """A restart call of Guardian's is in flight (`done`: the engine carried it out and its
    answer is on its way): now and then a few steps run beside the worker waiting on it, among
    them other workers, sweeps, events, a person's acts and kill -9 (Killed unwinds the call)."""
    if world.depth >= MAX_IN_FLIGHT:
        return
    another = bool(world.with_calls()) and world.rng.random() < BESIDE_CALLS
    if not another and world.rng.random() >= IN_FLIGHT_CHANCE:
        return
    n = 1 if another else world.rng.randint(1, IN_FLIGHT_STEPS)
    snap = world.engine.containers.get(container_id)  # a person may have removed it meanwhile
    name = snap.name if snap is not None else container_id[:12]
    moment = "carried out, its answer on its way" if done else "under way"
    world.trace.append(f"  meanwhile, the restart of {name} is {moment}:")
    world.counts["steps beside a call in flight"] += n
    weights = [s.weight for s in BESIDE]
    step, world.depth = world.oracle.step, world.depth + 1
    try:
        for _ in range(n):
            if _found(world):
                return
            _take(world, ANOTHER_CALL if another else world.rng.choices(BESIDE, weights)[0])
    finally:
        world.depth -= 1
        world.oracle.step = step


def _found(world: World) -> bool:
    """A promise broken by a bug not known: the run stops there."""
    return any(not v.known for v in world.oracle.violations)


def _take(world: World, chosen: Step) -> None:
    """One step, the promises checked after it; a step that raises breaks NO_RAISE. Each step
    takes a millisecond: two steps never share a stamp (a reset and a restart a step apart are
    in order on the clock, as on a real host). Guardian killed beside a call in flight (Killed)
    ends the step, and every step the call ran beside, here at the top."""
    world.taken += 1
    step = world.taken
    world.clock.advance(TICK)
    world.oracle.begin(step, world.host.containers())
    world.counts[chosen.name] += 1
    run = chosen.run
    if chosen.needs_guardian and not world.running:
        run = start if world.rng.random() < 0.5 else (lambda w: "Guardian is down")
    at, mark = world.clock.now(), len(world.trace)
    killed = None
    try:
        said = run(world)
    except Killed as exc:
        killed = exc
        said = str(exc) if chosen.name == "crash" else "cut short: Guardian killed beside it"
    except Exception as exc:  # noqa: BLE001 - a raise is what the oracle reports, not stops on
        world.oracle.violated(Promise.NO_RAISE, raised_at(exc))
        said = f"raised {type(exc).__name__}"
    # The step's line before what the engine said while it ran.
    indent = "» " * world.depth
    world.trace.insert(mark, f"{step} [{at:%d %H:%M:%S}] {indent}{chosen.name}: {said}")
    world.after_step()
    if killed is not None and world.depth > 0:
        raise killed


def _finish(world: World, step: int) -> None:
    """The end: faults cleared, Guardian running and caught up, then delivery drains (time
    passing between ticks) until nothing is queued; the outbox must be empty."""
    world.clock.advance(TICK)
    world.oracle.begin(step, world.host.containers())
    world.subject.disk.full = False
    world.subject.channel.down = 0
    world.engine.armed, world.engine.outage = None, 0
    if not world.running:
        world.start()
    world.catch_up()
    world.subject.sweep()
    world.catch_up()  # the calls the sweep queued
    world.after_step()
    for _ in range(DRAIN_TICKS):
        world.subject.deliver()
        if not world.records.queued(world.subject.sqlite):
            break
        world.advance(15)
    world.trace.append(f"{step} [{world.clock.now():%d %H:%M:%S}] finish: delivery drained")
    world.records.drained(world.subject.sqlite)
