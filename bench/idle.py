"""Idle cost: Guardian at its defaults (10 s sweep, events on) beside two polling baselines that
watch the same healthy containers over the same window, for several fleet sizes: docker-autoheal's
loop as it runs (bench/autoheal.sh: sh, curl and jq every 5 s) and a lean poller (bench/poller.py:
one Python process, one connection, the same filtered list every 5 s).

CPU: Guardian's and the lean poller's from /proc/<pid>/task/*/schedstat (nanoseconds on a CPU,
every thread); the shell's from /proc/<pid>/stat with the children it waited for (curl, jq, sleep:
the cost of polling that way). RSS from VmRSS. Wake-ups: the times the threads were scheduled
(schedstat's 3rd field), per thread named by `py-spy dump` (when py-spy is installed) so a
periodic wake-up shows whose it is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.engine import REPO, Fleet
from bench.probes import GuardianRun, rss_mb, wait_for
from guardian.service.healing.healer import RESYNC_READS

RATIO_FLOOR = 0.12  # Guardian's CPU at most this share of the baseline's at 100 containers
# From 100 to 1,000 containers, Guardian's idle CPU and RSS grow by less than this.
GROWTH_FLOOR = 3.0
HEALTH_INTERVAL = 30.0  # Docker's default health check interval
MAX_CHECKS_PER_SECOND = 5.0


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
    poller: Side  # the lean Python poller
    poll_interval: float
    threads: dict[str, float] = field(default_factory=dict)  # Guardian's wake-ups/min by thread
    sweeps: float = 0.0  # Guardian's sweeps in the window
    autoheal: Side | None = None  # docker-autoheal's shell loop
    health_interval: float = HEALTH_INTERVAL

    @property
    def ratio(self) -> float:
        """Guardian's CPU over docker-autoheal's (the issue's polling baseline)."""
        base = self.autoheal or self.poller
        return self.guardian.cpu_per_minute / max(base.cpu_per_minute, 1e-9)

    @property
    def ratio_lean(self) -> float:
        return self.guardian.cpu_per_minute / max(self.poller.cpu_per_minute, 1e-9)


def schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of `pid`: nanoseconds on a CPU and times put on one, so far. A thread that
    ended meanwhile is left out."""
    out = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            ns, _, runs = stat.read_text().split()[:3]
            out[int(stat.parent.name)] = (int(ns), int(runs))
        except (OSError, ValueError):
            continue
    return out


def wakeups(pid: int) -> int:
    """How many times the threads of `pid` were put on a CPU so far (all threads)."""
    return sum(runs for _, runs in schedstat(pid).values())


def thread_cpu(pid: int) -> float:
    """Seconds on a CPU of every thread of `pid` (schedstat: nanoseconds, not 10 ms ticks)."""
    return sum(ns for ns, _ in schedstat(pid).values()) / 1e9


def shell_cpu(pid: int) -> float:
    """utime + stime of a shell and of the children it waited for (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _sample(pid: int, cpu: Callable[[int], float] = thread_cpu) -> tuple[float, int]:
    return cpu(pid), wakeups(pid)


def thread_runs(pid: int) -> dict[int, int]:
    """Per thread id: how many times it was put on a CPU so far."""
    return {tid: runs for tid, (_, runs) in schedstat(pid).items()}


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
        # At most MAX_CHECKS_PER_SECOND health checks a second in the fleet: each is a `docker
        # exec`, and 1,000 containers checked every 30 s (33 a second) keep 2 cores busy with
        # the engine alone. Nothing idle depends on the interval: no check changes a status.
        interval = max(health_interval, size / MAX_CHECKS_PER_SECOND)
        fleet.create(size, tag, health=True, health_interval=interval, workers=8)
        try:
            wait_for(
                lambda tag=tag, size=size: fleet.healthy(tag) == size,
                interval * 2 + 60 + size / 2,
                "fleet healthy",
                every=2,
            )
            result = _window(fleet, tmp / tag, size, seconds, poll_interval)
            result.health_interval = interval
            results.append(result)
        finally:
            fleet.remove(tag)
    return results


def _window(fleet: Fleet, tmp: Path, size: int, seconds: float, poll_interval: float) -> IdleResult:
    args = [fleet.url, fleet.scope, str(poll_interval)]
    poller = subprocess.Popen([sys.executable, "-m", "bench.poller", *args], cwd=REPO)
    autoheal = subprocess.Popen(["sh", str(REPO / "bench" / "autoheal.sh"), *args], cwd=REPO)
    try:
        with GuardianRun(tmp, fleet.url, fleet.scope) as g:
            time.sleep(min(5.0, seconds))  # start-up (imports, first sweep) is not idle time
            # Nor are the sweeps that fill the container cache (at most RESYNC_READS inspects
            # each): the idle state is the one they leave.
            filling = -(-size // RESYNC_READS) + 1
            wait_for(lambda: sweeps_done(g) >= filling, 30 + 15 * filling, "the cache filled")
            s0, threads0 = sweeps_done(g), thread_runs(g.pid)
            g0, p0, a0 = _sample(g.pid), _sample(poller.pid), _sample(autoheal.pid, shell_cpu)
            t0 = time.monotonic()
            time.sleep(seconds)
            g1, p1, a1 = _sample(g.pid), _sample(poller.pid), _sample(autoheal.pid, shell_cpu)
            t1 = time.monotonic()
            threads1 = thread_runs(g.pid)
            s1 = sweeps_done(g)
            per_min = 60 / (t1 - t0)

            def side(pid: int, a: tuple[float, int], b: tuple[float, int]) -> Side:
                return Side((b[0] - a[0]) * per_min, rss_mb(pid), (b[1] - a[1]) * per_min)

            return IdleResult(
                size,
                t1 - t0,
                side(g.pid, g0, g1),
                side(poller.pid, p0, p1),
                poll_interval,
                by_thread(g.pid, threads0, threads1, (t1 - t0) / 60),
                s1 - s0,
                side(autoheal.pid, a0, a1),
            )
    finally:
        for proc in (poller, autoheal):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def render(results: list[IdleResult]) -> list[str]:
    if not results:
        return []
    interval = f"{results[0].poll_interval:g} s"
    out = [
        "## Idle: Guardian beside two polling baselines",
        "",
        "Guardian at its defaults (10 s sweep, events on) and two polling baselines run at the "
        "same time over the same healthy containers (health check every "
        + ", ".join(f"{r.health_interval:g} s at {r.containers}" for r in results)
        + f": at most {MAX_CHECKS_PER_SECOND:g} checks a second), measured over the same "
        "window after start-up: "
        f"docker-autoheal's loop as it runs (`bench/autoheal.sh`: every {interval}, `curl` on "
        "the engine's socket for the unhealthy labelled containers, `jq` for their ids, in "
        "`sh`), and a lean poller (`bench/poller.py`: one Python process keeping one "
        f"connection, the same filtered list every {interval}). CPU per minute: Guardian's and "
        "the lean poller's from every thread's schedstat (ns), the shell's with the children "
        "it waited for. Wake-ups: times the process's threads were scheduled.",
        "",
        f"| containers | window | Guardian CPU s/min | docker-autoheal loop | ratio (floor ≤ "
        f"{RATIO_FLOOR:g} at 100) | lean poller | ratio | RSS: Guardian / lean poller | "
        "wake-ups/min: Guardian / lean poller |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        floor = (
            (" " + ("met" if r.ratio <= RATIO_FLOOR else "**missed**"))
            if r.containers == 100 and r.autoheal is not None
            else ""
        )
        shell = f"{r.autoheal.cpu_per_minute:.3f}" if r.autoheal is not None else "–"
        out.append(
            f"| {r.containers} | {r.seconds:.0f} s | {r.guardian.cpu_per_minute:.3f} | {shell} | "
            f"{r.ratio:.2f}{floor} | {r.poller.cpu_per_minute:.3f} | {r.ratio_lean:.2f} | "
            f"{r.guardian.rss_mb:.0f} / {r.poller.rss_mb:.0f} MB | "
            f"{r.guardian.wakeups_per_minute:.0f} / {r.poller.wakeups_per_minute:.0f} |"
        )
    out += _threads(results)
    if len(results) > 1:
        small, large = results[0], results[-1]
        growth = large.guardian.cpu_per_minute / max(small.guardian.cpu_per_minute, 1e-9)
        rss = large.guardian.rss_mb / max(small.guardian.rss_mb, 1e-9)
        scale = large.containers / small.containers
        verdict = "at most linear" if growth <= scale else "**faster than linear**"
        out += [
            "",
            f"Guardian's idle CPU from {small.containers} to {large.containers} containers: "
            f"×{growth:.1f} for ×{scale:g} the containers ({verdict}); RSS ×{rss:.2f}.",
        ]
        if scale >= 10:
            ok = growth < GROWTH_FLOOR and rss < GROWTH_FLOOR
            out.append(
                f"Floor, for ×10 the containers: CPU and RSS grow by less than "
                f"×{GROWTH_FLOOR:g}: {'met' if ok else '**missed**'}."
            )
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
