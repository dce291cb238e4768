"""Probes run by Guardian (core.probes specs): which containers have one, when each is due, and
the failure/success streaks that turn a container `probe_failed` and healthy again.

A probe verdict is a judge of the loop: a failing probe turns the container's result into
`probe_failed`, which takes the healer's usual incident and decision path.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.core.probes import ProbeSpec, parse_probe
from guardian.logs import kv
from guardian.ports import Clock, ProbeRunner

log = logging.getLogger("guardian.probes")

MAX_PARALLEL = 8  # probes running at once


@dataclass
class _Target:
    spec: ProbeSpec
    container_id: str
    address: str
    next_due: datetime
    failures: int = 0
    successes: int = 0
    failing: bool = False
    detail: str = ""


class Prober:
    """Runs due probes (a daemon job ticks it) and judges containers from their probe state."""

    def __init__(self, clock: Clock, runner: ProbeRunner, defaults: ProbeSpec) -> None:
        self.clock = clock
        self.runner = runner
        self.defaults = defaults
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}  # container name -> target
        self._warned: set[tuple[str, str]] = set()

    def has_targets(self) -> bool:
        with self._lock:
            return bool(self._targets)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow the containers of the last sweep: running ones with a probe label are probed."""
        now = self.clock.now()
        seen = set()
        for snap in snapshots:
            spec, warnings = parse_probe(snap.labels, self.defaults)
            for w in warnings:
                if (snap.name, w) not in self._warned:
                    self._warned.add((snap.name, w))
                    log.warning("bad label ignored", extra=kv(container=snap.name, problem=w))
            if spec is None or snap.state != "running":
                continue
            seen.add(snap.name)
            with self._lock:
                t = self._targets.get(snap.name)
                if t is None or t.container_id != snap.id or t.spec != spec:
                    self._targets[snap.name] = _Target(spec, snap.id, snap.ip_address, now)
                else:
                    t.address = snap.ip_address or t.address
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

    def tick(self) -> list[str]:
        """Run every probe that is due, in parallel; returns the ids of the containers whose
        verdict flipped, for the healer to judge at once."""
        now = self.clock.now()
        with self._lock:
            due = [(n, t) for n, t in self._targets.items() if t.next_due <= now]
        if not due:
            return []
        # One slow target (up to its timeout) must not delay the others' periods.
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(due))) as pool:
            results = list(
                pool.map(lambda item: self.runner.run(item[1].spec, item[1].address), due)
            )
        flips = []
        for (name, t), (passed, seen) in zip(due, results, strict=True):
            with self._lock:
                t.next_due = now + t.spec.period
                streak = t.failures
                flipped = self._record(t, passed, seen)
            if passed and streak and not t.failing:
                log.debug(
                    "probe passed again below threshold", extra=kv(container=name, failures=streak)
                )
            if not passed:
                log.debug(
                    "probe failed",
                    extra=kv(container=name, failures=t.failures, detail=seen),
                )
            if flipped:
                log.info(
                    "probe failing" if t.failing else "probe passing again",
                    extra=kv(container=name, detail=t.detail),
                )
                flips.append(t.container_id)
        return flips

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
