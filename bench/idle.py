"""Idle cost: Guardian at its defaults (10 s sweep, events on) and the polling baseline
(bench/poller.py, 5 s like docker-autoheal) watch the same healthy containers over the same
window, for several fleet sizes. CPU from /proc/<pid>/stat, RSS from VmRSS, and wake-ups: the
times the process's threads were scheduled (/proc/<pid>/task/*/schedstat, 3rd field), per thread
named by `py-spy dump` (when py-spy is installed) so a periodic wake-up shows whose it is."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.engine import REPO, Fleet
from bench.probes import GuardianRun, cpu_seconds, rss_mb, wait_for

RATIO_FLOOR = 0.25  # Guardian's CPU at most this share of the baseline's at 100 containers
HEALTH_INTERVAL = 30.0  # Docker's default health check interval


@dataclass
class Side:
    cpu_per_minute: float
    rss_mb: float
    wakeups_per_minute: float


@dataclass
class IdleResult:
    containers: int
    seconds: float
    guardian: Side
    poller: Side
    poll_interval: float
    threads: dict[str, float] = field(default_factory=dict)  # Guardian's wake-ups/min by thread
    sweeps: float = 0.0  # Guardian's sweeps in the window

    @property
    def ratio(self) -> float:
        return self.guardian.cpu_per_minute / max(self.poller.cpu_per_minute, 1e-9)


def wakeups(pid: int) -> int:
    """How many times the threads of `pid` were put on a CPU so far (all threads)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[2])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total


def _sample(pid: int) -> tuple[float, int]:
    return cpu_seconds(pid), wakeups(pid)


def thread_runs(pid: int) -> dict[int, int]:
    """Per thread id: how many times it was put on a CPU so far."""
    runs = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            runs[int(stat.parent.name)] = int(stat.read_text().split()[2])
        except (OSError, IndexError, ValueError):
            continue
    return runs


POOL = re.compile(r"ThreadPoolExecutor-\d+_\d+")


def thread_names(pid: int) -> dict[int, str]:
    """Thread id -> Python thread name, from `py-spy dump` (empty without py-spy). The job
    pool's threads are one name: which of them runs a job is the pool's choice."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        out = subprocess.run(
            [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', out, re.MULTILINE):
        names[int(tid)] = POOL.sub("job pool", name)
    return names


def by_thread(
    pid: int, before: dict[int, int], after: dict[int, int], minutes: float
) -> dict[str, float]:
    names = thread_names(pid)
    out: dict[str, float] = {}
    for tid, runs in after.items():
        name = names.get(tid, f"thread {tid}")
        out[name] = out.get(name, 0.0) + (runs - before.get(tid, 0)) / minutes
    return out


def sweeps_done(g: GuardianRun) -> float:
    """Sweeps so far, from /metrics; then a moment for the scrape's own wake-ups to end."""
    count = g.metric("guardian_sweep_duration_seconds_count")
    time.sleep(0.5)
    return count


def measure(
    fleet: Fleet,
    tmp: Path,
    sizes: list[int],
    seconds: float,
    poll_interval: float = 5.0,
    health_interval: float = HEALTH_INTERVAL,
) -> list[IdleResult]:
    results = []
    for size in sizes:
        tag = f"idle{size}"
        fleet.create(size, tag, health=True, health_interval=health_interval, workers=8)
        try:
            wait_for(
                lambda tag=tag, size=size: fleet.healthy(tag) == size,
                health_interval * 4 + 60 + size / 5,
                "fleet healthy",
                every=2,
            )
            results.append(_window(fleet, tmp / tag, size, seconds, poll_interval))
        finally:
            fleet.remove(tag)
    return results


def _window(fleet: Fleet, tmp: Path, size: int, seconds: float, poll_interval: float) -> IdleResult:
    poller = subprocess.Popen(
        [sys.executable, "-m", "bench.poller", fleet.url, fleet.scope, str(poll_interval)],
        cwd=REPO,
    )
    try:
        with GuardianRun(tmp, fleet.url, fleet.scope) as g:
            time.sleep(min(5.0, seconds))  # start-up (imports, first sweep) is not idle time
            s0, threads0 = sweeps_done(g), thread_runs(g.pid)
            g0, p0, t0 = _sample(g.pid), _sample(poller.pid), time.monotonic()
            time.sleep(seconds)
            g1, p1, t1 = _sample(g.pid), _sample(poller.pid), time.monotonic()
            threads1 = thread_runs(g.pid)
            s1 = sweeps_done(g)
            per_min = 60 / (t1 - t0)
            return IdleResult(
                size,
                t1 - t0,
                Side((g1[0] - g0[0]) * per_min, rss_mb(g.pid), (g1[1] - g0[1]) * per_min),
                Side((p1[0] - p0[0]) * per_min, rss_mb(poller.pid), (p1[1] - p0[1]) * per_min),
                poll_interval,
                by_thread(g.pid, threads0, threads1, (t1 - t0) / 60),
                s1 - s0,
            )
    finally:
        poller.terminate()
        poller.wait(30)


def render(results: list[IdleResult]) -> list[str]:
    if not results:
        return []
    out = [
        "## Idle: Guardian beside a polling baseline",
        "",
        "Guardian at its defaults (10 s sweep, events on) and the polling baseline "
        f"(`bench/poller.py`: list unhealthy containers every {results[0].poll_interval:g} s, "
        "as docker-autoheal does) run at the same time over the same healthy containers "
        f"(health check every {HEALTH_INTERVAL:g} s), measured over the same window after "
        "start-up. Wake-ups: times the process's threads were scheduled "
        "(`/proc/<pid>/task/*/schedstat`).",
        "",
        "| containers | window | Guardian CPU s/min | baseline CPU s/min | ratio (floor ≤ 0.25 "
        "at 100) | Guardian RSS | baseline RSS | Guardian wake-ups/min | baseline wake-ups/min |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        floor = (
            (" " + ("met" if r.ratio <= RATIO_FLOOR else "**missed**"))
            if r.containers == 100
            else ""
        )
        out.append(
            f"| {r.containers} | {r.seconds:.0f} s | {r.guardian.cpu_per_minute:.3f} | "
            f"{r.poller.cpu_per_minute:.3f} | {r.ratio:.2f}{floor} | {r.guardian.rss_mb:.0f} MB | "
            f"{r.poller.rss_mb:.0f} MB | {r.guardian.wakeups_per_minute:.0f} | "
            f"{r.poller.wakeups_per_minute:.0f} |"
        )
    out += _threads(results)
    if len(results) > 1:
        small, large = results[0], results[-1]
        growth = large.guardian.cpu_per_minute / max(small.guardian.cpu_per_minute, 1e-9)
        scale = large.containers / small.containers
        verdict = "at most linear" if growth <= scale else "**faster than linear**"
        out += [
            "",
            f"Guardian's idle CPU from {small.containers} to {large.containers} containers: "
            f"×{growth:.1f} for ×{scale:g} the containers ({verdict}).",
        ]
    return [*out, ""]


def _threads(results: list[IdleResult]) -> list[str]:
    """Wake-ups per minute of each of Guardian's threads: a thread that wakes on a timer of its
    own shows here whatever the fleet size; only the sweep's should grow with it."""
    names = sorted({n for r in results for n in r.threads})
    if not names:
        return []
    head = " | ".join(f"{r.containers} containers" for r in results)
    out = [
        "",
        "Guardian's wake-ups per minute by thread (named by `py-spy dump`), and its sweeps in "
        "the window:",
        "",
        f"| thread | {head} |",
        "|---|" + "---|" * len(results),
    ]
    for name in names:
        cells = " | ".join(f"{r.threads.get(name, 0.0):.0f}" for r in results)
        out.append(f"| {name} | {cells} |")
    sweeps = " | ".join(f"{r.sweeps:.0f} in {r.seconds:.0f} s" for r in results)
    out.append(f"| (sweeps) | {sweeps} |")
    return out
