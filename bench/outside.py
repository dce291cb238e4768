"""Idle as a user measures it: `guardian run` at the shipped defaults (config.yaml as it ships,
only the engine's address, the store's path and a free port changed), over containers with a
health check at Docker's default interval (30 s; at 1,000 containers no more than 5 checks a
second, as bench/idle.py), on an engine that also runs containers Guardian does not watch,
beside docker-autoheal's loop as it runs (bench/autoheal.sh: sh, curl and jq every 5 s) and the
bare listener (bench/listener.py: restarts on the unhealthy event, decides nothing), all three
started together. The window opens 15 s after they start and lasts 120 s, so it holds the
first minutes of a run and the resyncs of `watch.resync` (bench/idle.py's window opens only
once the container cache has filled, and is shorter).

CPU of each whole process: Guardian's and the listener's from every thread's schedstat
(nanoseconds), the shell's with the children it waited for (curl, jq, sleep). Runs on a
private dockerd (bench/engine.py) unless --engine-url names one (then every container it makes
is scoped to this run, and Guardian watches only those).

    python -m bench.outside --runs 3 --sizes 100,1000          # the figures, median of runs
    python -m bench.outside --sizes 100 --long                 # minutes 1-3 against 30-33
    python -m bench.outside --sizes 1000 --trace 300           # Guardian's CPU every 5 s
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import yaml

from bench.engine import IMAGE, REPO, Fleet, PrivateEngine
from bench.idle import MAX_CHECKS_PER_SECOND, shell_cpu, thread_cpu
from bench.probes import rss_mb, stop_process, wait_for

HEALTH_INTERVAL = 30.0  # Docker's default
START = 15.0  # seconds after the start of all three before the window opens
WINDOW = 120.0
OTHERS = 20  # containers on the engine that Guardian does not watch (health checked too)
RATIO_GOAL = 0.05  # Guardian's CPU at most this share of docker-autoheal's
GROWTH_GOAL = 2.0  # CPU at 1,000 containers at most this many times the figure at 100
RSS_GROWTH_GOAL = 1.3
TRACE_STEP = 5.0  # seconds between two readings of --trace


@dataclass
class Run:
    containers: int
    seconds: float
    guardian: float  # CPU s/min
    autoheal: float
    listener: float
    rss_mb: float
    listener_rss_mb: float

    @property
    def ratio(self) -> float:
        return self.guardian / max(self.autoheal, 1e-9)


@dataclass
class Fleets:
    url: str
    fleet: Fleet
    scoped: bool  # a shared engine: Guardian and the baselines see only this run's containers

    @property
    def selector(self) -> str:
        return self.fleet.scope if self.scoped else "guardian.enable=true"


@contextmanager
def engine(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    private = PrivateEngine().start()
    try:
        yield private.url
    finally:
        private.stop()


def populate(fleet: Fleet, size: int, scoped: bool) -> Fleets:
    """`size` watched containers with a health check, and OTHERS that are not watched."""
    url = fleet.url
    interval = max(HEALTH_INTERVAL, size / MAX_CHECKS_PER_SECOND)
    fleet.create(size, "watched", health=True, health_interval=interval, workers=8)
    api = docker.APIClient(base_url=url, version="auto", timeout=120)
    for n in range(OTHERS):
        c = api.create_container(
            IMAGE,
            command=["sleep", "86400"],
            name=f"{fleet.prefix}other-{n}",
            labels={"guardian.bench": fleet.run_id},  # no guardian.enable: not watched
            healthcheck={"test": ["CMD-SHELL", "true"], "interval": int(HEALTH_INTERVAL * 1e9)},
            host_config=api.create_host_config(network_mode="none"),
            stop_signal="SIGKILL",
        )
        api.start(c["Id"])
    api.close()
    wait_for(lambda: fleet.healthy("watched") == size, interval * 2 + 60 + size / 2, "healthy", 2)
    return Fleets(url, fleet, scoped)


def shipped_config(tmp: Path, fleets: Fleets) -> Path:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["docker"]["url"] = fleets.url
    config.setdefault("store", {})["path"] = str(tmp / "guardian.db")
    config.setdefault("http", {})["listen"] = "127.0.0.1:0"
    if fleets.scoped:
        config["watch"]["scope"] = fleets.fleet.scope
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def three(tmp: Path, fleets: Fleets) -> Iterator[tuple[int, int, int]]:
    """Guardian, docker-autoheal's loop and the bare listener, started together: their pids."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDIAN_")}
    config = shipped_config(tmp, fleets)
    with open(tmp / "guardian.log", "wb") as log:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "guardian.entrypoints.cli", "run", "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            ),
            subprocess.Popen(
                ["sh", str(REPO / "bench" / "autoheal.sh"), fleets.url, fleets.selector, "5"],
                cwd=REPO,
            ),
            subprocess.Popen(
                [sys.executable, "-m", "bench.listener", fleets.url, fleets.selector, "/dev/null"],
                cwd=REPO,
            ),
        ]
    try:
        yield procs[0].pid, procs[1].pid, procs[2].pid
        for name, proc in zip(("guardian", "autoheal.sh", "listener"), procs, strict=True):
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited early: {proc.returncode}")
    finally:
        for proc in procs:
            stop_process(proc)


def cpu(pids: tuple[int, int, int]) -> tuple[float, float, float]:
    guardian, autoheal, listener = pids
    return thread_cpu(guardian), shell_cpu(autoheal), thread_cpu(listener)


def window(pids: tuple[int, int, int], size: int, seconds: float) -> Run:
    before, t0 = cpu(pids), time.monotonic()
    time.sleep(seconds)
    after, t1 = cpu(pids), time.monotonic()
    per_min = 60 / (t1 - t0)
    g, a, b = ((y - x) * per_min for x, y in zip(before, after, strict=True))
    return Run(size, t1 - t0, g, a, b, rss_mb(pids[0]), rss_mb(pids[2]))


@contextmanager
def running(url: str, size: int, scoped: bool) -> Iterator[tuple[int, int, int]]:
    """The three started over `size` containers of a fleet of this run's own: their pids. The
    fleet and the run's directory are removed after, an interrupted set-up's too (a private
    engine's stop leaves its containers)."""
    fleet = Fleet(url)
    tmp = Path(tempfile.mkdtemp(prefix=f"gbench-{fleet.run_id}-outside-"))
    try:
        fleets = populate(fleet, size, scoped)
        with three(tmp, fleets) as pids:
            yield pids
    finally:
        fleet.remove()
        fleet.close()
        shutil.rmtree(tmp, ignore_errors=True)


def measure(url: str, size: int, scoped: bool, windows: list[tuple[float, float]]) -> list[Run]:
    """One run of the three over `size` containers: a Run for each (start, length) window."""
    with running(url, size, scoped) as pids:
        began, out = time.monotonic(), []
        for start, length in windows:
            time.sleep(max(0.0, began + start - time.monotonic()))
            out.append(window(pids, size, length))
        return out


def trace(url: str, size: int, scoped: bool, seconds: float) -> list[tuple[float, float]]:
    """One run of the three over `size` containers: Guardian's CPU seconds in each TRACE_STEP
    from their start over `seconds`, as (seconds since the start, CPU s in the step); where a
    window's CPU goes (the start-up's fill, each whole list of `watch.resync`)."""
    with running(url, size, scoped) as pids:
        began, out = time.monotonic(), []
        last = thread_cpu(pids[0])
        for step in range(1, int(seconds / TRACE_STEP) + 1):
            time.sleep(max(0.0, began + step * TRACE_STEP - time.monotonic()))
            now = thread_cpu(pids[0])
            out.append((time.monotonic() - began, now - last))
            last = now
        return out


def render(runs: dict[int, list[Run]]) -> list[str]:
    out = [
        "| containers | run | Guardian CPU s/min | docker-autoheal loop | ratio | bare listener "
        "| RSS: Guardian / listener |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    medians: dict[int, tuple[float, float, float]] = {}
    for size, rs in sorted(runs.items()):
        for i, r in enumerate(rs, 1):
            out.append(
                f"| {size} | {i} | {r.guardian:.4f} | {r.autoheal:.3f} | {r.ratio:.3f} | "
                f"{r.listener:.4f} | {r.rss_mb:.0f} / {r.listener_rss_mb:.0f} MB |"
            )
        medians[size] = (
            statistics.median(r.guardian for r in rs),
            statistics.median(r.ratio for r in rs),
            statistics.median(r.rss_mb for r in rs),
        )
        g, ratio, rss = medians[size]
        verdict = "met" if ratio <= RATIO_GOAL else "**missed**"
        out.append(
            f"| {size} | median | {g:.4f} | | {ratio:.3f} (goal ≤ {RATIO_GOAL:g}: {verdict}) "
            f"| | {rss:.0f} MB |"
        )
    if 100 in medians and 1000 in medians:
        cpu_x = medians[1000][0] / max(medians[100][0], 1e-9)
        rss_x = medians[1000][2] / max(medians[100][2], 1e-9)
        ok = cpu_x <= GROWTH_GOAL and rss_x <= RSS_GROWTH_GOAL
        out += [
            "",
            f"From 100 to 1,000 containers: CPU ×{cpu_x:.2f}, RSS ×{rss_x:.2f} (goal ≤ "
            f"×{GROWTH_GOAL:g} and ≤ ×{RSS_GROWTH_GOAL:g}: {'met' if ok else '**missed**'}).",
        ]
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.outside", description=__doc__)
    p.add_argument("--sizes", default="100", help="watched containers, e.g. 100,1000")
    p.add_argument("--runs", type=int, default=3, help="runs per size, sizes interleaved")
    p.add_argument("--long", action="store_true", help="one run: minutes 1-3 against 30-33")
    p.add_argument("--trace", type=float, default=0, help="one run: CPU every 5 s over this")
    p.add_argument("--engine-url", default=None, help="an existing engine (default: a private one)")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    scoped = args.engine_url is not None
    with engine(args.engine_url) as url:
        if args.trace:
            for size in sizes:
                steps = trace(url, size, scoped, args.trace)
                print(f"{size} containers: Guardian's CPU ms in each {TRACE_STEP:g} s")
                print("\n".join(f"{at:6.1f} s {cpu_s * 1000:8.1f}" for at, cpu_s in steps))
            return
        if args.long:
            for size in sizes:
                early, late = measure(url, size, scoped, [(60.0, 180.0), (1800.0, 180.0)])
                print(json.dumps({"early": asdict(early), "late": asdict(late)}))
                print(
                    f"{size} containers: minutes 1-3 {early.guardian:.4f}, minutes 30-33 "
                    f"{late.guardian:.4f} CPU s/min; RSS {early.rss_mb:.0f} → {late.rss_mb:.0f} MB"
                )
            return
        runs: dict[int, list[Run]] = {size: [] for size in sizes}
        for _ in range(args.runs):
            for size in sizes:
                (run,) = measure(url, size, scoped, [(START, WINDOW)])
                print(json.dumps(asdict(run)), file=sys.stderr)
                runs[size].append(run)
        print("\n".join(render(runs)))


if __name__ == "__main__":
    main()
