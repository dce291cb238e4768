"""Overhead: CPU seconds per minute and peak RSS of an idle `guardian run` (10 s sweep, events on)
watching a fleet of `sleep` containers, read from /proc/<pid>/stat and VmHWM."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench.engine import Fleet
from bench.probes import GuardianRun, cpu_seconds, peak_rss_mb


@dataclass
class OverheadResult:
    containers: int
    interval: float
    seconds: float
    cpu_per_minute: float
    peak_rss_mb: float
    sweeps: int


def measure(
    fleet: Fleet, tmp: Path, containers: int, seconds: float, interval: float = 10.0
) -> OverheadResult:
    fleet.create(containers, "idle")
    try:
        watch = {"events": True, "interval": f"{interval}s"}
        with GuardianRun(tmp / "idle", fleet.url, fleet.scope, watch=watch) as g:
            # Start-up (imports, first sweep) is not idle time; its memory peak still counts.
            time.sleep(min(5.0, seconds))
            sweeps0 = g.metric("guardian_sweep_duration_seconds_count")
            cpu0, t0 = cpu_seconds(g.pid), time.monotonic()
            time.sleep(seconds)
            cpu1, t1 = cpu_seconds(g.pid), time.monotonic()
            sweeps = g.metric("guardian_sweep_duration_seconds_count") - sweeps0
            return OverheadResult(
                containers=containers,
                interval=interval,
                seconds=t1 - t0,
                cpu_per_minute=(cpu1 - cpu0) / (t1 - t0) * 60,
                peak_rss_mb=peak_rss_mb(g.pid),
                sweeps=int(sweeps),
            )
    finally:
        fleet.remove("idle")
