"""Resource rules in the loop (core.detection.resources): which containers have a limit, their
samples at each tick, and the judge that turns a breach held for its whole `for` into `memory_high`
or `cpu_high`, which takes the healer's usual incident and decision path.

Only running containers with a limit are read: from their cgroup files (ResourceReader), else
one non-streaming stats call each per tick. With no limit anywhere nothing is read and the
daemon keeps the tick paused. Durations are measured on the monotonic clock, so a step of the
wall clock neither shortens nor lengthens a breach. A start of the container (a restart, by
Guardian or anyone) begins every breach from zero.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from guardian.core.detection.resources import CPU, Limit
from guardian.core.detection.usage import Sampled, Usage, breached, detail, observe
from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.logs import kv
from guardian.ports import Clock, Engine, EngineEvent, EngineUnavailable, ResourceReader

log = logging.getLogger("guardian.resources")

RESETS = frozenset({"start", "die", "kill", "destroy"})  # the container's cgroup begins anew


# Every reset of a target's breaches gets a number of its own: next() of one count is one C
# call, so two threads resetting at once never get the same number.
_RESETS = itertools.count(1)


@dataclass(frozen=True)
class _Verdict:
    """What the tick last made of a target's samples, replaced whole: the incident's detail
    while a limit is breached for its whole `for` (""), its kind, and the reset it counts from."""

    breach: str = ""
    kind: ProblemType | None = None
    reset: int = 0


@dataclass
class _Target:
    """One container's limits and samples. Who writes what (no lock: each field has one
    writer): the tick (one job, one thread at a time) `sampled`, `sampled_from` and `verdict`;
    a reset (an event, a restart's end: any thread) `reset`, in one assignment; which targets
    exist, the sweep, by swapping the dict whole."""

    container_id: str
    limits: tuple[Limit, ...]
    sampled: Sampled = field(default_factory=Sampled)
    sampled_from: int = 0  # the reset `sampled` counts from
    verdict: _Verdict = _Verdict()
    reset: int = 0  # the latest reset: a verdict or samples from before it count no more

    def breached(self) -> _Verdict | None:
        """The verdict while a limit is breached since the latest reset; else None."""
        verdict = self.verdict  # read before `reset`: a reset in between is seen
        return verdict if verdict.kind is not None and verdict.reset == self.reset else None


class ResourceWatch:
    """Samples the containers with a limit (a daemon job ticks it) and judges them.

    Keeps no lock: the targets are one dict, built by the sweep (one at a time) and swapped
    whole; the resources job (max_instances 1) alone samples and judges a target, writing its
    verdict whole; a reset (the events thread, a worker's restart end) is one assignment of a
    new number, which makes the verdict before it void at once and the next tick sample anew."""

    def __init__(
        self,
        clock: Clock,
        reader: ResourceReader,
        engine: Engine,
        limits_of: Callable[[ContainerSnapshot], tuple[Limit, ...]],
    ) -> None:
        self.clock = clock
        self.reader = reader
        self.engine = engine
        self.limits_of = limits_of  # the container's limits, from its labels and resources.rules
        self._targets: dict[str, _Target] = {}  # container name -> target; swapped whole

    def has_targets(self) -> bool:
        return bool(self._targets)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow these containers: running ones with a limit are read."""
        before, targets = self._targets, {}
        for snap in snapshots:
            if snap.state != "running":
                continue
            limits = self.limits_of(snap)
            if not limits:
                continue
            t = before.get(snap.name)
            if t is None or t.container_id != snap.id or t.limits != limits:
                t = _Target(snap.id, limits)
            targets[snap.name] = t
        self._targets = targets

    def on_event(self, event: EngineEvent) -> None:
        """The container started or stopped: its breaches begin from zero."""
        if event.action in RESETS:
            for t in self._targets.values():  # one dict, never changed: the sweep swaps another
                if t.container_id == event.container_id:
                    t.reset = next(_RESETS)

    def restart_ended(self, container: str, _outcome: str) -> None:
        """Guardian's restart of it is over (also without events): breaches from zero."""
        t = self._targets.get(container)
        if t is not None:
            t.reset = next(_RESETS)

    def tick(self) -> list[str]:
        """Read each container with a limit once and judge its samples. Returns the ids of the
        containers whose verdict flipped (breached, or no longer), for the healer to judge."""
        flips = []
        for name, t in list(self._targets.items()):
            reset = t.reset
            if t.sampled_from != reset:
                t.sampled, t.sampled_from = Sampled(), reset
            before = t.verdict if t.verdict.reset == reset else _Verdict()
            usage = self._read(name, t.container_id)
            at = self.clock.monotonic()
            observe(t.sampled, t.limits, usage, at)
            index = breached(t.sampled, t.limits, at)
            if index is None:
                t.verdict = _Verdict(reset=reset)
            else:
                limit, since = t.limits[index], t.sampled.since[index]
                value = t.sampled.figures[index]
                assert since is not None and value is not None  # breached() says so
                kind = ProblemType.CPU_HIGH if limit.kind == CPU else ProblemType.MEMORY_HIGH
                t.verdict = _Verdict(detail(limit, value, at - since), kind, reset)
            if self._targets.get(name) is not t:
                continue  # replaced or gone meanwhile
            breach = t.verdict.breach
            if bool(before.breach) != bool(breach):
                flips.append(t.container_id)
                log.info(
                    "resource limit breached" if breach else "resource limit no longer breached",
                    extra=kv(container=name, detail=breach or None),
                )
        return flips

    def _read(self, name: str, container_id: str) -> Usage | None:
        """The container's cgroup files, else one stats call; None when neither tells."""
        usage = self.reader.read(container_id)
        if usage is None:
            try:
                usage = self.engine.stats(container_id)
            except EngineUnavailable:
                usage = None
        log.debug(
            "resources read",
            extra=kv(
                container=name,
                source=usage.source if usage is not None else "none",
                memory=usage.memory if usage is not None else None,
                cpu_usec=usage.cpu_usec if usage is not None else None,
            ),
        )
        return usage

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """A container that is otherwise fine and breaches a limit: `memory_high`/`cpu_high`."""
        t = self._targets.get(snap.name)
        verdict = t.breached() if t is not None and t.container_id == snap.id else None
        if verdict is None or verdict.kind is None:
            return result
        if result.problem is not None or result.skipped is not None:
            return result
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, verdict.kind, verdict.breach,
            source=result.source,
        )  # fmt: skip
