"""Storm: a fleet turns unhealthy at once (one flag file, bind-mounted into every container),
under the default configuration, notifications going to a webhook receiver on 127.0.0.1.

With defaults the storm breaker trips: one host incident, every restart held. The benchmark
lets it hold for `hold` seconds (counting the restarts that still went through), then
acknowledges the storm as an operator would (POST /api/v1/incidents/<id>/ack) and measures the
time until every container, restarted under the default host budget, reports healthy again.
A small fleet whose containers turn unhealthy one by one may never trip the breaker; then
nothing is acknowledged and the time is that of the budget alone.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.engine import Fleet
from bench.probes import EventLog, GuardianRun, wait_for
from guardian.config import SCHEMA
from tests.receiver import receiver

# Unhealthy while /flag/sick exists, until the container has been restarted: the marker in the
# writable layer survives a restart, /run (a tmpfs) does not, so the first start leaves
# /run/restarted absent and every later start creates it.
COMMAND = ["sh", "-c", "[ -f /started ] && touch /run/restarted; touch /started; exec sleep 86400"]
HEALTH = "test ! -f /flag/sick || test -f /run/restarted"
HEALTH_INTERVAL = 5.0  # 1 s probes of 100 containers would load a 2-core machine by themselves
HOLD = 30.0  # how long the breaker holds before the benchmark acknowledges (three sweeps)
OPEN = ("active", "acknowledged", "in_progress")


@dataclass
class StormResult:
    containers: int
    budget: str
    all_healthy_s: float | None  # flip -> the last container healthy after its restart
    restarts: int  # by Guardian, by the end
    outcomes: dict[str, int]
    notifications: dict[str, int] = field(default_factory=dict)  # received, by kind
    storm_opened_s: float | None = None  # flip -> storm incident (None: the breaker held off)
    restarts_before_storm: int = 0  # restarts Guardian decided on before the storm opened
    held_restarts: int = 0  # restarts Guardian decided on while the storm held (before the ack)
    acked_s: float | None = None  # flip -> acknowledgement


def budget() -> str:
    r = SCHEMA["restart"]
    s = SCHEMA["storm"]
    return (
        f"max_per_minute={r['max_per_minute'].default}, "
        f"max_concurrent={r['max_concurrent'].default}, watch.interval=10s, "
        f"storm.threshold={s['threshold'].default:g}%, "
        f"storm.min_containers={s['min_containers'].default}"
    )


class _Operator:
    """Watches for the storm incident and acknowledges it once it has held for `hold` s."""

    def __init__(self, g: GuardianRun, token: str, hold: float) -> None:
        self.g, self.token, self.hold = g, token, hold
        self.opened: float | None = None
        self.acked: float | None = None

    def step(self) -> None:
        if self.acked is not None:
            return
        storm = next(
            (
                i
                for i in self.g.api("GET", "/incidents", token=self.token)["incidents"]
                if i["type"] == "storm" and i["state"] in OPEN
            ),
            None,
        )
        if storm is None:
            return
        if self.opened is None:
            self.opened = self._opened_at(storm["id"])
        if time.time() - self.opened >= self.hold:
            self.g.api("POST", f"/incidents/{storm['id']}/ack", {"by": "bench"}, self.token)
            self.acked = time.time()

    def _opened_at(self, incident_id: int) -> float:
        [(at,)] = _query(self.g, "SELECT opened_at FROM incidents WHERE id=?", incident_id)
        return datetime.fromisoformat(at).timestamp()


def _query(g: GuardianRun, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows from the run's store, read-only (the API shows whole seconds; the store has more)."""
    db = sqlite3.connect(f"file:{g.config['store']['path']}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def measure(
    fleet: Fleet, tmp: Path, containers: int, hold: float = HOLD, timeout: float | None = None
) -> StormResult:
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
    limit = timeout or 120 + hold + 90 * containers / per_minute
    token = uuid.uuid4().hex
    try:
        wait_for(lambda: _all(fleet, "(healthy)", len(names)), 60, "storm fleet healthy", 1)
        with (
            receiver() as hook,
            GuardianRun(
                tmp / "storm",
                fleet.url,
                fleet.scope,
                env={"GBENCH_WEBHOOK_URL": hook.url("/hook"), "GBENCH_API_TOKEN": token},
                notify={"webhook_url_env": "GBENCH_WEBHOOK_URL"},
                api={"token_env": "GBENCH_API_TOKEN"},
            ) as g,
        ):
            t0 = time.time()
            (flag / "sick").touch()
            operator = _Operator(g, token, hold)
            healed = _wait_healed(log, names, t0, limit, operator.step)
            _wait_notified(g, token)
            samples = g.scrape()
            opened = operator.opened
            held = operator.acked or time.time()
            decided = [
                datetime.fromisoformat(at).timestamp()
                for (at,) in _query(g, "SELECT requested_at FROM actions WHERE kind='restart'")
            ]
            outcomes: dict[str, int] = {}
            for k, v in samples.items():
                if k.startswith("guardian_restarts_total{") and v:
                    outcome = k.split('outcome="')[1].split('"')[0]
                    outcomes[outcome] = outcomes.get(outcome, 0) + int(v)
            kinds: dict[str, int] = {}
            for r in hook.answered(200):
                for n in r.json["notifications"]:
                    kinds[n["kind"]] = kinds.get(n["kind"], 0) + 1
            return StormResult(
                containers=containers,
                budget=budget(),
                all_healthy_s=None if healed is None else healed - t0,
                restarts=sum(outcomes.values()),
                outcomes=outcomes,
                notifications=kinds,
                storm_opened_s=None if opened is None else opened - t0,
                restarts_before_storm=sum(1 for t in decided if opened is None or t < opened),
                held_restarts=sum(1 for t in decided if opened is not None and opened <= t < held),
                acked_s=None if operator.acked is None else operator.acked - t0,
            )
    finally:
        log.close()
        fleet.remove("storm")
        (flag / "sick").unlink(missing_ok=True)


def _all(fleet: Fleet, status: str, count: int) -> bool:
    items = fleet.ours("storm")
    return len(items) == count and all(status in i.get("Status", "") for i in items)


def _wait_healed(
    log: EventLog, names: list[str], t0: float, limit: float, step: Any
) -> float | None:
    """The time the last container turned healthy after its restart (None: not in `limit`)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        step()
        times = [_healed_at(log, n, t0) for n in names]
        if all(t is not None for t in times):
            return max(t for t in times if t is not None)
        time.sleep(1)
    return None


def _wait_notified(g: GuardianRun, token: str, timeout: float = 120) -> None:
    """Until no incident is open and the outbox stayed empty for three ticks in a row."""
    deadline = time.monotonic() + timeout
    empty = 0
    while time.monotonic() < deadline and empty < 3:
        incidents = g.api("GET", "/incidents", token=token)["incidents"]
        settled = not any(i["state"] in OPEN for i in incidents)
        empty = empty + 1 if settled and g.metric("guardian_notification_queue_depth") == 0 else 0
        time.sleep(1)


def _healed_at(log: EventLog, name: str, t0: float) -> float | None:
    started = log.first(name, ("start",), t0)
    if started is None:
        return None
    return log.first(name, ("health_status: healthy",), started)
