"""Detection -> restart request: Docker's `health_status: unhealthy` event to the engine's `kill`
event of Guardian's restart, with events on, and with events off and a 5 s sweep (polling); and
with events on against Podman (the first health event after the container turned sick)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.engine import REPO, Fleet
from bench.probes import EventLog, GuardianRun, histogram, median, percentile, wait_for

# A restart budget that never holds a trial back: latency is measured, not the policy.
OPEN_BUDGET = {
    "cooldown": "0s",
    "max_attempts": 1000,
    "max_per_minute": 10000,
    "max_concurrent": 10,
    "stop_timeout": "1s",
    "verify_timeout": "30s",
}
# Four containers flipped about once a second, each taking ~1.3 s to restart and turn healthy,
# often have three of four unhealthy at once: a storm by the breaker's defaults, which would
# hold the restart and measure the breaker, not the detection path.
NO_STORM_BREAKER = {"threshold": "100%"}


@dataclass
class LatencyResult:
    mode: str
    interval: float
    samples: list[float] = field(default_factory=list)
    guardian_hist: dict[str, Any] = field(default_factory=dict)

    def p(self, q: float) -> float:
        return percentile(self.samples, q)

    @property
    def p50(self) -> float:
        return median(self.samples)

    @property
    def p95(self) -> float:
        return self.p(0.95)

    @property
    def max(self) -> float:
        return max(self.samples)


def measure(
    fleet: Fleet, tmp: Path, trials: int, events: bool, interval: float, parallel: int = 4
) -> LatencyResult:
    """`trials` unhealthy flips, one at a time, over a few containers taking turns."""
    mode = ("events" if events else "polling") + ("" if fleet.checks is None else " (podman)")
    tag = "lat-" + mode.replace(" (podman)", "-podman")
    names = fleet.create(min(parallel, trials), tag, health=True)
    log = EventLog(fleet.url, fleet.scope)
    result = LatencyResult(mode, interval)
    try:
        for n in names:
            wait_for(lambda n=n: fleet.health(n) == "healthy", 30, f"{n} healthy")
        watch = {"events": events, "interval": f"{interval}s"}
        with GuardianRun(
            tmp / tag,
            fleet.url,
            fleet.scope,
            watch=watch,
            restart=OPEN_BUDGET,
            storm=NO_STORM_BREAKER,
        ) as g:
            for i in range(trials):
                name = names[i % len(names)]
                result.samples.append(_trial(fleet, g, log, name, i // len(names)))
            result.guardian_hist = histogram(g.scrape(), "guardian_detection_to_restart_seconds")
    finally:
        log.close()
        fleet.remove(tag)
    return result


def measure_beside_floor(
    fleet: Fleet, tmp: Path, trials: int, rounds: int | None = None, parallel: int = 4
) -> tuple[LatencyResult, LatencyResult]:
    """Events on, Guardian and the bare listener (`bench/listener.py`, no inspect: the floor on
    this machine) in alternating rounds over the same containers, `trials` flips each: what
    the engine does meanwhile falls on both alike. Rounds of 20 flips by default (at least two;
    the p95 of 40 flips moved by up to 7 ms between runs of the same code: `--trials 200` for a
    steadier one). Returns (Guardian, listener)."""
    names = fleet.create(min(parallel, trials), "lat-floor", health=True)
    log = EventLog(fleet.url, fleet.scope)
    ours, floor = LatencyResult("events", 10.0), LatencyResult("bare listener", 10.0)
    rounds = max(1, min(max(2, trials // 20) if rounds is None else rounds, trials))
    per_round = max(1, trials // rounds)
    hist = "guardian_detection_to_restart_seconds"
    scraped: dict[str, float] = {}  # Guardian's histogram, summed over the rounds
    try:
        for n in names:
            wait_for(lambda n=n: fleet.health(n) == "healthy", 30, f"{n} healthy")
        for r in range(rounds):
            with GuardianRun(
                tmp / f"lat-floor-{r}",
                fleet.url,
                fleet.scope,
                watch={"events": True, "interval": "10s"},
                restart=OPEN_BUDGET,
                storm=NO_STORM_BREAKER,
            ) as g:
                for i in range(per_round):
                    name = names[i % len(names)]
                    ours.samples.append(_trial(fleet, g, log, name, i // len(names)))
                for key, value in g.scrape().items():
                    if key.startswith(hist):
                        scraped[key] = scraped.get(key, 0.0) + value
            with _listening(fleet, tmp / f"lat-listener-{r}"):
                for i in range(per_round):
                    floor.samples.append(_floor_trial(fleet, log, names[i % len(names)]))
        ours.guardian_hist = histogram(scraped, hist)
    finally:
        log.close()
        fleet.remove("lat-floor")
    return ours, floor


@contextlib.contextmanager
def _listening(fleet: Fleet, tmp: Path) -> Iterator[None]:
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "requests.txt"
    args = [sys.executable, "-m", "bench.listener", fleet.url, fleet.scope, str(out)]
    proc = subprocess.Popen(args, cwd=REPO)
    try:
        wait_for(lambda: out.exists() and out.read_text(), 30, "the listener to subscribe")
        yield
    finally:
        proc.terminate()
        proc.wait(30)


def _floor_trial(fleet: Fleet, log: EventLog, name: str) -> float:
    # The listener verifies nothing: the container is healthy again before the next flip.
    wait_for(lambda: fleet.health(name) == "healthy", 30, f"{name} healthy", every=0.25)
    return _flip(fleet, log, name)


def _succeeded(g: GuardianRun, name: str) -> float:
    key = f'guardian_restarts_total{{container="{name}",outcome="succeeded"}}'
    return g.scrape().get(key, 0.0)


def _trial(fleet: Fleet, g: GuardianRun, log: EventLog, name: str, done_before: int) -> float:
    # The previous restart of this container must be verified first, or Guardian would judge
    # the new flip as a failed verification rather than a fresh detection.
    wait_for(lambda: _succeeded(g, name) >= done_before, 60, f"{name} verified", every=0.25)
    wait_for(lambda: fleet.health(name) == "healthy", 30, f"{name} healthy", every=0.25)
    return _flip(fleet, log, name)


def _flip(fleet: Fleet, log: EventLog, name: str) -> float:
    """Turn `name` unhealthy; seconds from the engine's unhealthy event to its restart's kill."""
    since = time.time() - 0.05
    fleet.exec_all([name], ["touch", "/run/sick"])
    if fleet.checks is not None:
        # Podman: its checks were held during the change, so the first health event after it
        # is the failing check's (it carries the status before that check: "healthy").
        since = time.time()
    unhealthy = wait_for(
        lambda: _health_event(log, name, "unhealthy", since), 30, f"{name} unhealthy event"
    )
    restart = wait_for(
        lambda: log.first(name, ("kill", "die", "restart"), unhealthy), 60, f"{name} restart"
    )
    return float(restart - unhealthy)


def _health_event(log: EventLog, name: str, status: str, since: float) -> float | None:
    """Docker's "health_status: unhealthy", or Podman's first "health_status" after `since`."""
    return log.first(name, (f"health_status: {status}", "health_status"), since)
