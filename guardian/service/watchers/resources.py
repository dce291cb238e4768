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

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from guardian.core.detection.resources import CPU, Limit
from guardian.core.detection.usage import Sampled, Usage, breached, detail, observe
from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.logs import kv
from guardian.ports import Clock, Engine, EngineEvent, EngineUnavailable, ResourceReader

log = logging.getLogger("guardian.resources")

RESETS = frozenset({"start", "die", "kill", "destroy"})  # the container's cgroup begins anew


@dataclass
class _Target:
    container_id: str
    limits: tuple[Limit, ...]
    sampled: Sampled = field(default_factory=Sampled)
    breach: str = ""  # the incident's detail while a limit is breached for its whole `for`
    kind: ProblemType | None = None


class ResourceWatch:
    """Samples the containers with a limit (a daemon job ticks it) and judges them."""

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
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}  # container name -> target

    def has_targets(self) -> bool:
        with self._lock:
            return bool(self._targets)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow these containers: running ones with a limit are read."""
        wanted: dict[str, tuple[str, tuple[Limit, ...]]] = {}
        for snap in snapshots:
            if snap.state != "running":
                continue
            limits = self.limits_of(snap)
            if limits:
                wanted[snap.name] = (snap.id, limits)
        with self._lock:
            for name, (cid, limits) in wanted.items():
                t = self._targets.get(name)
                if t is None or t.container_id != cid or t.limits != limits:
                    self._targets[name] = _Target(cid, limits)
            for name in set(self._targets) - set(wanted):
                del self._targets[name]

    def on_event(self, event: EngineEvent) -> None:
        """The container started or stopped: its breaches begin from zero."""
        if event.action in RESETS:
            self._reset(lambda _name, t: t.container_id == event.container_id)

    def restart_ended(self, container: str, _outcome: str) -> None:
        """Guardian's restart of it is over (also without events): breaches from zero."""
        self._reset(lambda name, _t: name == container)

    def _reset(self, which: Callable[[str, _Target], bool]) -> None:
        with self._lock:
            for name, t in self._targets.items():
                if which(name, t):
                    t.sampled, t.breach, t.kind = Sampled(), "", None

    def tick(self) -> list[str]:
        """Read each container with a limit once and judge its samples. Returns the ids of the
        containers whose verdict flipped (breached, or no longer), for the healer to judge."""
        with self._lock:
            targets = list(self._targets.items())
        flips = []
        for name, t in targets:
            usage = self._read(name, t.container_id)
            at = self.clock.monotonic()
            with self._lock:
                if self._targets.get(name) is not t:
                    continue  # replaced or gone meanwhile
                before = t.breach
                observe(t.sampled, t.limits, usage, at)
                index = breached(t.sampled, t.limits, at)
                if index is None:
                    t.breach, t.kind = "", None
                else:
                    limit, since = t.limits[index], t.sampled.since[index]
                    value = t.sampled.figures[index]
                    assert since is not None and value is not None  # breached() says so
                    t.breach = detail(limit, value, at - since)
                    t.kind = ProblemType.CPU_HIGH if limit.kind == CPU else ProblemType.MEMORY_HIGH
                flipped = bool(before) != bool(t.breach)
            if flipped:
                flips.append(t.container_id)
                log.info(
                    "resource limit breached" if t.breach else "resource limit no longer breached",
                    extra=kv(container=name, detail=t.breach or None),
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
        with self._lock:
            t = self._targets.get(snap.name)
            breach = t is not None and t.container_id == snap.id and t.kind is not None
            kind, text = (t.kind, t.breach) if t is not None else (None, "")
        if not breach or kind is None or result.problem is not None or result.skipped is not None:
            return result
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, kind, text, source=result.source
        )
