"""Bursts: N containers turn unhealthy at once, with a budget allowing N concurrent restarts and
the storm breaker off. Per container: its `health_status: unhealthy` event to the engine's `kill`
event of Guardian's restart. The figure is the max: the last container of a burst waits for
whatever the path from event to restart request handles one at a time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.engine import Fleet
from bench.latency import NO_STORM_BREAKER, OPEN_BUDGET
from bench.probes import EventLog, GuardianRun, median, wait_for

MAX_FLOOR_20 = 0.3  # seconds: the floor for the max at 20


@dataclass
class BurstResult:
    size: int
    samples: list[float] = field(default_factory=list)
    spread: float = 0.0  # first to last unhealthy event: how "at once" the burst was

    @property
    def p50(self) -> float:
        return median(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)


def burst_interval(size: int) -> float:
    """Seconds between health checks for a burst of `size`: 1 s up to 20 containers, then 20
    checks a second in all."""
    return max(1.0, size / 20)


def measure(fleet: Fleet, tmp: Path, size: int) -> BurstResult:
    tag = f"burst{size}"
    # Every container's health check runs `docker exec`: at 1 s each, 100 of them are 100 execs
    # a second, more than 2 cores can start. Beyond 20 the interval grows with the burst (the
    # unhealthy events then spread over one interval: `spread` in the table).
    names = fleet.create(size, tag, health=True, health_interval=burst_interval(size), workers=8)
    log = EventLog(fleet.url, fleet.scope)
    try:
        wait_for(lambda: fleet.healthy(tag) == size, 60 + 2 * size, "fleet healthy", every=1)
        budget = {**OPEN_BUDGET, "max_concurrent": size}
        with GuardianRun(tmp / tag, fleet.url, fleet.scope, restart=budget, storm=NO_STORM_BREAKER):
            since = time.time() - 0.05
            fleet.exec_all(names, ["touch", "/run/sick"], workers=16)
            unhealthy = {
                n: wait_for(lambda n=n: log.first(n, ("health_status: unhealthy",), since), 60, n)
                for n in names
            }
            restarts = {
                n: wait_for(
                    lambda n=n: log.first(n, ("kill", "die", "restart"), unhealthy[n]),
                    120,
                    f"{n} restart",
                )
                for n in names
            }
    finally:
        log.close()
        fleet.remove(tag)
    result = BurstResult(size, [restarts[n] - unhealthy[n] for n in names])
    result.spread = max(unhealthy.values()) - min(unhealthy.values())
    return result


def render(bursts: list[BurstResult]) -> list[str]:
    if not bursts:
        return []
    out = [
        "## Bursts: many containers unhealthy at once",
        "",
        "N containers turn unhealthy together (one flag file each, touched at once; health "
        "check every 1 s up to 20 containers, then every N/20 s so that the engine starts 20 "
        "checks a second, retries 1), a budget "
        "allowing N concurrent restarts, the storm breaker off. Per container: its "
        "`health_status: unhealthy` event to the engine's `kill` event of Guardian's restart. "
        "`spread` is the time from the first to the last unhealthy event of the burst.",
        "",
        "| burst | p50 | max | spread | floor: max at 20 ≤ 0.3 s, linear growth |",
        "|---|---|---|---|---|",
    ]
    base = next((b for b in bursts if b.size == 20), None)
    for b in bursts:
        if b.size == 20:
            floor = "met" if b.max <= MAX_FLOOR_20 else "**missed**"
        elif base is not None:
            ratio = b.max / base.max if base.max else float("inf")
            linear = ratio <= b.size / base.size
            floor = f"×{ratio:.1f} the max at 20 for ×{b.size / 20:g} the containers: " + (
                "linear or better" if linear else "**worse than linear**"
            )
        else:
            floor = "–"
        out.append(
            f"| {b.size} | {b.p50 * 1000:.0f} ms | {b.max * 1000:.0f} ms | "
            f"{b.spread * 1000:.0f} ms | {floor} |"
        )
    return [*out, ""]
