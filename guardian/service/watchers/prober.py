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


@dataclass(frozen=True)
class Verdict:
    """A target's verdict, replaced whole by the tick: a judge reads both fields of one."""

    failing: bool = False
    detail: str = ""


@dataclass
class _Target:
    """One container's probe. Who writes what (no lock: each field has one writer):
    - the probe tick (one job, one thread at a time): next_due, started, run, taken, the streaks
      and verdict;
    - the probe's thread: `done` only, once, at its end;
    - the sweep (update): `address`; and which targets exist, by swapping the dict whole."""

    spec: ProbeSpec
    container_id: str
    address: str
    next_due: float  # monotonic, as `started`
    failures: int = 0
    successes: int = 0
    verdict: Verdict = Verdict()
    started: float | None = None
    run: int = 0  # probes started so far
    taken: int = 0  # the last run whose answer was taken (or judged failed at its timeout)
    done: tuple[int, tuple[bool, str]] | None = None  # the last finished run and its answer

    @property
    def running(self) -> bool:
        """A probe thread runs (at most one per target): the last run started has not ended."""
        done = self.done
        return self.run > (done[0] if done is not None else 0)


class Prober:
    """Runs due probes (a daemon job ticks it) and judges containers from their probe state.

    Keeps no lock: the targets are one dict, built by the sweep (update: one sweep at a time)
    and swapped whole; the tick (the probe job: max_instances 1) alone writes a target's
    schedule, streaks and verdict; a probe's thread hands over its answer in one assignment
    (`done`, with the run it answers), which the tick takes once (`taken`). A judge reads one
    verdict, replaced whole."""

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
        self._targets: dict[str, _Target] = {}  # container name -> target; swapped whole
        self._warned: set[tuple[str, str]] = set()  # the sweep's alone

    def has_targets(self) -> bool:
        return bool(self._targets)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow these containers: running ones with a probe label are probed."""
        now = self.clock.monotonic()
        before, targets = self._targets, {}
        for snap in snapshots:
            spec, warnings = parse_probe(snap.labels, self.defaults)
            host, refused = None, ""
            if spec is not None and snap.state == "running":
                host, refused = probe_host(spec, snap.addresses, self.allow_hosts)
            self._warn(snap.name, [*warnings, refused] if refused else warnings)
            if spec is None or host is None:
                continue
            t = before.get(snap.name)
            if t is None or t.container_id != snap.id or t.spec != spec:
                t = _Target(spec, snap.id, host, now)
            else:
                t.address = host
            targets[snap.name] = t
        self._targets = targets

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        t = self._targets.get(snap.name)
        if t is None or t.container_id != snap.id:
            return result
        verdict = t.verdict
        if not verdict.failing or result.problem is not None or result.skipped is not None:
            return result
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, ProblemType.PROBE_FAILED, verdict.detail,
            source=result.source,
        )  # fmt: skip

    def _warn(self, container: str, problems: list[str]) -> None:
        for problem in problems:
            if (container, problem) not in self._warned:
                self._warned.add((container, problem))
                log.warning("bad label ignored", extra=kv(container=container, problem=problem))

    def in_flight(self) -> int:
        return sum(1 for t in list(self._targets.values()) if t.running)

    def tick(self) -> list[str]:
        """Record the probes that finished since the last tick and start the ones that are due;
        never waits for a probe. Returns the ids of the containers whose verdict flipped, for
        the healer to judge at once."""
        now = self.clock.monotonic()
        flips, starts = [], []
        targets = self._targets  # one dict: the sweep swaps another in, never changes this one
        running = sum(1 for t in targets.values() if t.running)
        for name, t in targets.items():
            answer = None
            done = t.done
            if t.taken < t.run and done is not None and done[0] == t.run:
                t.taken, answer = t.run, done[1]
            allowed = (t.spec.timeout + OVERDUE).total_seconds()
            late = t.started is not None and now - t.started > allowed
            if answer is None and t.taken < t.run and late:
                # Judged failed now; the thread's answer, when it comes, is dropped (taken).
                t.taken = t.run
                answer = (False, f"no answer within {t.spec.timeout.total_seconds():g}s")
            if answer is not None:
                if self._recorded(name, t, *answer):
                    flips.append(t.container_id)
            elif not t.running and t.next_due <= now and running < MAX_IN_FLIGHT:
                t.started = now
                t.next_due = now + t.spec.period.total_seconds()
                t.run += 1
                running += 1
                starts.append((t, t.run))
        for t, run in starts:
            threading.Thread(target=self._probe, args=(t, run), name="probe", daemon=True).start()
        return flips

    def _probe(self, t: _Target, run: int) -> None:
        """On the probe's own thread: run it and leave the answer for the next tick (one
        assignment: the tick sees the run over and its answer together)."""
        try:
            answer = self.runner.run(t.spec, t.address)
        except Exception as exc:  # noqa: BLE001 - a runner bug fails this probe, not the loop
            answer = (False, f"probe error: {type(exc).__name__}")
        t.done = (run, answer)

    def _recorded(self, name: str, t: _Target, passed: bool, seen: str) -> bool:
        """Take one answer into the target's streaks; True when the verdict flipped."""
        streak = t.failures
        flipped = self._record(t, passed, seen)
        verdict = t.verdict
        if passed and streak and not verdict.failing:
            log.debug(
                "probe passed again below threshold", extra=kv(container=name, failures=streak)
            )
        if not passed:
            log.debug("probe failed", extra=kv(container=name, failures=t.failures, detail=seen))
        if flipped:
            log.info(
                "probe failing" if verdict.failing else "probe passing again",
                extra=kv(container=name, detail=verdict.detail),
            )
        return flipped

    @staticmethod
    def _record(t: _Target, passed: bool, seen: str) -> bool:
        failing = t.verdict.failing
        if passed:
            t.failures, t.successes = 0, t.successes + 1
            if failing and t.successes >= t.spec.success_threshold:
                t.verdict = Verdict(False, seen)
                return True
            return False
        t.successes, t.failures = 0, t.failures + 1
        if not failing and t.failures >= t.spec.failure_threshold:
            t.verdict = Verdict(True, f"probe failed {t.failures} times in a row: {seen}")
            return True
        return False
