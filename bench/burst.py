"""Bursts: N containers turn unhealthy at once, with a budget allowing N concurrent restarts and
the storm breaker off. Per container: its `health_status: unhealthy` event to the engine's `kill`
event of Guardian's restart. The figure is the max: the last container of a burst waits for
whatever the path from event to restart request handles one at a time."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench.engine import REPO, Fleet
from bench.latency import NO_STORM_BREAKER, OPEN_BUDGET
from bench.probes import EventLog, GuardianRun, median, wait_for

MAX_FLOOR_20 = 0.3  # seconds: the floor for the max at 20
LISTENERS = {"bare listener": "listener", "listener, inspect first": "listener-inspect"}
SWEEP_ONLY = "2s"  # Guardian with events off: its sweep finds the burst
SWEEP_ONLY_UP_TO = 20  # burst sizes also healed that way


@dataclass
class BurstRun:
    """One healer's run of one burst, per container: from its unhealthy event to the restart
    request (Guardian: the intent it records just before the call) and to the engine's kill."""

    requests: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    spread: float = 0.0  # first to last unhealthy event: how "at once" the burst was


GUARDIAN = "Guardian"
SWEEP_HEALER = f"Guardian, events off (sweep every {SWEEP_ONLY})"
DEFAULT_RUNS = 3  # each healer's runs of a burst, interleaved: one run's max is one sample


@dataclass
class BurstResult:
    """Every healer's runs of one burst size, by the healer's name in the table: GUARDIAN,
    SWEEP_HEALER (up to SWEEP_ONLY_UP_TO containers) and the listeners (LISTENERS)."""

    size: int
    runs: dict[str, list[BurstRun]] = field(default_factory=dict)

    @property
    def guardian(self) -> list[BurstRun]:
        return self.runs[GUARDIAN]

    def typical_max(self, clock: str, healer: str = GUARDIAN) -> float:
        """The median over the runs of each run's max, to the request or to the engine's kill:
        a single run's max is one container's bad luck with the engine."""
        return median([max(getattr(run, clock)) for run in self.runs[healer]])


def burst_interval(size: int) -> float:
    """Seconds between health checks for a burst of `size`: 1 s up to 20 containers, then 20
    checks a second in all."""
    return max(1.0, size / 20)


def measure(
    fleet: Fleet, tmp: Path, size: int, floor: bool = True, runs: int = DEFAULT_RUNS
) -> BurstResult:
    """The burst healed `runs` times by Guardian and (with `floor`) by the bare listener,
    without and with an inspect before each restart, interleaved so that the engine's good and
    bad moments fall on all of them alike; each run on a fleet of its own."""
    healers = {GUARDIAN: "guardian"}
    if size <= SWEEP_ONLY_UP_TO:
        healers[SWEEP_HEALER] = "guardian-sweep"
    if floor:
        healers.update(LISTENERS)
    result = BurstResult(size, {name: [] for name in healers})
    for n in range(max(1, runs)):
        for name, healer in healers.items():
            result.runs[name].append(_run(fleet, tmp, size, healer, n))
    return result


def _run(fleet: Fleet, tmp: Path, size: int, healer: str, n: int = 0) -> BurstRun:
    tag = f"burst{size}{healer}{n}"
    # Every container's health check runs `docker exec`: at 1 s each, 100 of them are 100 execs
    # a second, more than 2 cores can start. Beyond 20 the interval grows with the burst (the
    # unhealthy events then spread over one interval: `spread` in the table).
    names = fleet.create(size, tag, health=True, health_interval=burst_interval(size), workers=8)
    log = EventLog(fleet.url, fleet.scope)
    requested: dict[str, float] = {}
    try:
        wait_for(lambda: fleet.healthy(tag) == size, 60 + 2 * size, "fleet healthy", every=1)
        with _healer(healer, fleet, tmp / tag, size) as read_requests:
            since = time.time() - 0.05
            fleet.exec_all(names, ["touch", "/run/sick"], workers=16)
            unhealthy = {
                n: wait_for(lambda n=n: log.first(n, ("health_status: unhealthy",), since), 60, n)
                for n in names
            }
            kills = {
                n: wait_for(
                    lambda n=n: log.first(n, ("kill", "die", "restart"), unhealthy[n]),
                    120,
                    f"{n} restart",
                )
                for n in names
            }
            requested = read_requests()
    finally:
        log.close()
        fleet.remove(tag)
    return BurstRun(
        [requested[n] - unhealthy[n] for n in names if n in requested],
        [kills[n] - unhealthy[n] for n in names],
        max(unhealthy.values()) - min(unhealthy.values()),
    )


@contextlib.contextmanager
def _healer(
    healer: str, fleet: Fleet, tmp: Path, size: int
) -> Iterator[Callable[[], dict[str, float]]]:
    """Run Guardian (budget for the whole burst, storm breaker off) or the bare listener; yield
    a function giving, per container, when its first restart was requested (unix time)."""
    tmp.mkdir(parents=True, exist_ok=True)
    if healer in ("guardian", "guardian-sweep"):
        budget = {**OPEN_BUDGET, "max_concurrent": size}
        watch = {"events": False, "interval": SWEEP_ONLY} if healer == "guardian-sweep" else {}
        with GuardianRun(
            tmp, fleet.url, fleet.scope, restart=budget, storm=NO_STORM_BREAKER, watch=watch
        ) as g:
            yield lambda: _intents(Path(g.config["store"]["path"]))
        return
    out = tmp / "requests.txt"
    args = [sys.executable, "-m", "bench.listener", fleet.url, fleet.scope, str(out)]
    if healer == "listener-inspect":
        args.append("--inspect")
    proc = subprocess.Popen(args, cwd=REPO)
    try:
        wait_for(lambda: out.exists() and out.read_text(), 30, "the listener to subscribe")
        yield lambda: _listener_requests(out)
    finally:
        proc.terminate()
        proc.wait(30)


def _intents(store: Path) -> dict[str, float]:
    """Each container's first restart intent, from Guardian's store (read-only)."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT container, MIN(requested_at) FROM actions WHERE kind='restart' GROUP BY 1"
        ).fetchall()
    finally:
        db.close()
    return {name: datetime.fromisoformat(at).timestamp() for name, at in rows}


def _listener_requests(out: Path) -> dict[str, float]:
    first: dict[str, float] = {}
    for line in out.read_text().splitlines()[1:]:  # after "listening"
        at, _, name = line.partition(" ")
        first.setdefault(name, float(at))
    return first


def render(bursts: list[BurstResult]) -> list[str]:
    if not bursts:
        return []
    runs = len(bursts[0].guardian)
    out = [
        "## Bursts: many containers unhealthy at once",
        "",
        "N containers turn unhealthy together (one flag file each, touched at once; health "
        "check every 1 s up to 20 containers, then every N/20 s so that the engine starts 20 "
        "checks a second, retries 1), a budget allowing N concurrent restarts, the storm "
        "breaker off. Per container, from its `health_status: unhealthy` event: to the restart "
        "request (Guardian: the intent it records just before the call) and to the engine's "
        "`kill` event of that restart (the engine's pace included). The same burst is then "
        "healed by a bare listener (`bench/listener.py`: each restart in its own thread the "
        "moment the event arrives, no decision, no store), the floor on this machine, and by the "
        "same listener inspecting each container before its restart, as Guardian does (the "
        "floor for a healer that checks before it acts). Up to 20 containers, Guardian with "
        f"events off (a sweep every {SWEEP_ONLY}) heals the burst too: its sweep finds it and "
        "must not wait for one container's restart before it requests the next. `spread`: "
        "first to last unhealthy event.",
        "",
        f"Each healer heals each burst {runs} times, interleaved; p50: the median of the runs' "
        "medians; max: the median of the runs' maxima, with their range (one run's max is one "
        "container's luck with the engine). The floor is judged on Guardian's typical max, to "
        "the request and to the engine's kill.",
        "",
        "| burst | healer | spread | → request p50 / max (range) | → engine's kill p50 / max "
        "(range) | floor: max at 20 ≤ 0.3 s, linear growth |",
        "|---|---|---|---|---|---|",
    ]
    base = next((b for b in bursts if b.size == 20), None)
    for b in bursts:
        out.append(_row(b.size, GUARDIAN, b.guardian, _floor(b, base)))
        for name, healer_runs in b.runs.items():
            if name != GUARDIAN:
                out.append(_row(b.size, name, healer_runs, ""))
    return [*out, ""]


def _floor(b: BurstResult, base: BurstResult | None) -> str:
    """The issue's floor on Guardian's typical max: ≤ 0.3 s at 20, then linear growth."""
    clocks = {"request": "requests", "kill": "samples"}
    if b.size == 20:
        return ", ".join(
            f"{name} {'met' if b.typical_max(clock) <= MAX_FLOOR_20 else '**missed**'}"
            for name, clock in clocks.items()
        )
    if base is None:
        return "–"
    out = []
    for name, clock in clocks.items():
        ratio = b.typical_max(clock) / max(base.typical_max(clock), 1e-9)
        linear = "linear" if ratio <= b.size / base.size else "**worse than linear**"
        out.append(f"{name} ×{ratio:.1f}: {linear}")
    return f"for ×{b.size / base.size:g} the containers: " + ", ".join(out)


def _row(size: int, healer: str, runs: list[BurstRun], floor: str) -> str:
    def ms(clock: str) -> str:
        per_run = [getattr(run, clock) for run in runs if getattr(run, clock)]
        if not per_run:
            return "–"
        maxima = [max(v) * 1000 for v in per_run]
        p50 = median([median(v) for v in per_run]) * 1000
        spread = f" ({min(maxima):.0f}-{max(maxima):.0f})" if len(maxima) > 1 else ""
        return f"{p50:.0f} / {median(maxima):.0f} ms{spread}"

    spread = median([run.spread for run in runs]) * 1000
    return f"| {size} | {healer} | {spread:.0f} ms | {ms('requests')} | {ms('samples')} | {floor} |"
