"""Probes run by Guardian (core.detection.probes specs): which containers have one, when each is
due, and the failure/success streaks that turn a container `probe_failed` and healthy again.

A probe verdict is a judge of the loop: a failing probe turns the container's result into
`probe_failed`, which takes the healer's usual incident and decision path. Each probe runs on a
thread of its own, at most one per container: a target that never answers costs its own probe
(failed at its timeout), never another's, never the tick, never a stop. Periods and timeouts
run on the monotonic clock (docs/design.md rule 12).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from guardian.core.detection.probes import ProbeSpec, parse_probe, probe_host
from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.logs import kv
from guardian.ports import Clock, ProbeRunner

log = logging.getLogger("guardian.probes")

MAX_IN_FLIGHT = 256  # probe threads at once; beyond, due probes wait for a free one
# A runner that overstays its timeout (it should not) is judged failed this much later.
OVERDUE = timedelta(seconds=2)


@dataclass
class _Target:
    spec: ProbeSpec
    container_id: str
    address: str
    next_due: float  # monotonic, as `started`
    failures: int = 0
    successes: int = 0
    failing: bool = False
    detail: str = ""
    running: bool = False  # a probe thread runs (at most one per target)
    started: float | None = None
    overdue: bool = False  # judged failed at its timeout; the thread's answer is dropped
    answer: tuple[bool, str] | None = None  # a finished probe's, until the next tick


class Prober:
    """Runs due probes (a daemon job ticks it) and judges containers from their probe state."""

    def __init__(
        self,
        clock: Clock,
        runner: ProbeRunner,
        defaults: ProbeSpec,
        allow_hosts: Sequence[str] = (),
    ) -> None:
        self.clock = clock
        self.runner = runner
        self.defaults = defaults
        self.allow_hosts = tuple(allow_hosts)
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}  # container name -> target
        self._warned: set[tuple[str, str]] = set()

    def has_targets(self) -> bool:
        with self._lock:
            return bool(self._targets)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow these containers: running ones with a probe label are probed."""
        now = self.clock.monotonic()
        seen = set()
        for snap in snapshots:
            spec, warnings = parse_probe(snap.labels, self.defaults)
            host, refused = None, ""
            if spec is not None and snap.state == "running":
                host, refused = probe_host(spec, snap.addresses, self.allow_hosts)
            self._warn(snap.name, [*warnings, refused] if refused else warnings)
            if spec is None or host is None:
                continue
            seen.add(snap.name)
            with self._lock:
                t = self._targets.get(snap.name)
                if t is None or t.container_id != snap.id or t.spec != spec:
                    self._targets[snap.name] = _Target(spec, snap.id, host, now)
                else:
                    t.address = host
        with self._lock:
            for name in set(self._targets) - seen:
                del self._targets[name]

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        with self._lock:
            t = self._targets.get(snap.name)
            failing = t is not None and t.failing and t.container_id == snap.id
            detail = t.detail if t is not None else ""
        if not failing or result.problem is not None or result.skipped is not None:
            return result
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, ProblemType.PROBE_FAILED, detail,
            source=result.source,
        )  # fmt: skip

    def _warn(self, container: str, problems: list[str]) -> None:
        for problem in problems:
            if (container, problem) not in self._warned:
                self._warned.add((container, problem))
                log.warning("bad label ignored", extra=kv(container=container, problem=problem))

    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for t in self._targets.values() if t.running)

    def tick(self) -> list[str]:
        """Record the probes that finished since the last tick and start the ones that are due;
        never waits for a probe. Returns the ids of the containers whose verdict flipped, for
        the healer to judge at once."""
        now = self.clock.monotonic()
        flips, starts = [], []
        with self._lock:
            running = sum(1 for t in self._targets.values() if t.running)
            for name, t in self._targets.items():
                answer, t.answer = t.answer, None
                allowed = (t.spec.timeout + OVERDUE).total_seconds()
                late = t.started is not None and now - t.started > allowed
                if answer is None and t.running and not t.overdue and late:
                    t.overdue = True
                    answer = (False, f"no answer within {t.spec.timeout.total_seconds():g}s")
                if answer is not None:
                    if self._recorded(name, t, *answer):
                        flips.append(t.container_id)
                elif not t.running and t.next_due <= now and running < MAX_IN_FLIGHT:
                    t.running, t.started = True, now
                    t.next_due = now + t.spec.period.total_seconds()
                    running += 1
                    starts.append(t)
        for t in starts:
            threading.Thread(target=self._probe, args=(t,), name="probe", daemon=True).start()
        return flips

    def _probe(self, t: _Target) -> None:
        """On the probe's own thread: run it and leave the answer for the next tick."""
        try:
            answer = self.runner.run(t.spec, t.address)
        except Exception as exc:  # noqa: BLE001 - a runner bug fails this probe, not the loop
            answer = (False, f"probe error: {type(exc).__name__}")
        with self._lock:
            if not t.overdue:
                t.answer = answer
            t.running = t.overdue = False

    def _recorded(self, name: str, t: _Target, passed: bool, seen: str) -> bool:
        """Take one answer into the target's streaks; True when the verdict flipped."""
        streak = t.failures
        flipped = self._record(t, passed, seen)
        if passed and streak and not t.failing:
            log.debug(
                "probe passed again below threshold", extra=kv(container=name, failures=streak)
            )
        if not passed:
            log.debug("probe failed", extra=kv(container=name, failures=t.failures, detail=seen))
        if flipped:
            log.info(
                "probe failing" if t.failing else "probe passing again",
                extra=kv(container=name, detail=t.detail),
            )
        return flipped

    @staticmethod
    def _record(t: _Target, passed: bool, seen: str) -> bool:
        if passed:
            t.failures, t.successes = 0, t.successes + 1
            if t.failing and t.successes >= t.spec.success_threshold:
                t.failing, t.detail = False, seen
                return True
            return False
        t.successes, t.failures = 0, t.failures + 1
        if not t.failing and t.failures >= t.spec.failure_threshold:
            t.failing = True
            t.detail = f"probe failed {t.failures} times in a row: {seen}"
            return True
        return False
