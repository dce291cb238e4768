"""Storm: a fleet turns unhealthy at once (one flag file, bind-mounted into every container);
time until every container was restarted and is healthy again under the default host budget."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench.engine import Fleet
from bench.probes import EventLog, GuardianRun, wait_for
from guardian.config import SCHEMA

# Unhealthy while /flag/sick exists, until the container has been restarted: the marker in the
# writable layer survives a restart, /run (a tmpfs) does not, so the first start leaves
# /run/restarted absent and every later start creates it.
COMMAND = ["sh", "-c", "[ -f /started ] && touch /run/restarted; touch /started; exec sleep 86400"]
HEALTH = "test ! -f /flag/sick || test -f /run/restarted"
HEALTH_INTERVAL = 5.0  # 1 s probes of 100 containers would load a 2-core machine by themselves


@dataclass
class StormResult:
    containers: int
    budget: str
    all_healthy_s: float | None
    restarts: int
    outcomes: dict[str, int]
    notifications: str


def budget() -> str:
    r = SCHEMA["restart"]
    return (
        f"max_per_minute={r['max_per_minute'].default}, "
        f"max_concurrent={r['max_concurrent'].default}, watch.interval=10s"
    )


def measure(fleet: Fleet, tmp: Path, containers: int, timeout: float | None = None) -> StormResult:
    flag = tmp / "storm-flag"
    flag.mkdir(parents=True, exist_ok=True)
    names = fleet.create(
        containers,
        "storm",
        health=True,
        command=COMMAND,
        binds=[f"{flag}:/flag:ro"],
        health_cmd=HEALTH,
        health_interval=HEALTH_INTERVAL,
    )
    log = EventLog(fleet.url, fleet.scope)
    per_minute = SCHEMA["restart"]["max_per_minute"].default
    limit = timeout or 120 + 90 * containers / per_minute
    try:
        wait_for(lambda: _all(fleet, "(healthy)", len(names)), 60, "storm fleet healthy", 1)
        with GuardianRun(tmp / "storm", fleet.url, fleet.scope) as g:
            t0 = time.time()
            (flag / "sick").touch()
            healed = _wait_healed(log, names, t0, limit)
            samples = g.scrape()
            outcomes: dict[str, int] = {}
            for k, v in samples.items():
                if k.startswith("guardian_restarts_total{") and v:
                    outcome = k.split('outcome="')[1].split('"')[0]
                    outcomes[outcome] = outcomes.get(outcome, 0) + int(v)
            return StormResult(
                containers=containers,
                budget=budget(),
                all_healthy_s=None if healed is None else healed - t0,
                restarts=sum(outcomes.values()),
                outcomes=outcomes,
                notifications=_notifications(samples),
            )
    finally:
        log.close()
        fleet.remove("storm")
        (flag / "sick").unlink(missing_ok=True)


def _all(fleet: Fleet, status: str, count: int) -> bool:
    items = fleet.ours("storm")
    return len(items) == count and all(status in i.get("Status", "") for i in items)


def _wait_healed(log: EventLog, names: list[str], t0: float, limit: float) -> float | None:
    """The time the last container turned healthy after its restart (None: not in `limit`)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        times = [_healed_at(log, n, t0) for n in names]
        if all(t is not None for t in times):
            return max(t for t in times if t is not None)
        time.sleep(1)
    return None


def _healed_at(log: EventLog, name: str, t0: float) -> float | None:
    started = log.first(name, ("start",), t0)
    if started is None:
        return None
    return log.first(name, ("health_status: healthy",), started)


def _notifications(samples: dict[str, float]) -> str:
    """Delivered notifications, from guardian_notifications_total once notifications exist."""
    series = {k: v for k, v in samples.items() if k.startswith("guardian_notifications_total{")}
    if not series:
        return "n/a (notifications not built)"
    delivered = sum(v for k, v in series.items() if 'outcome="delivered"' in k)
    return str(int(delivered))
