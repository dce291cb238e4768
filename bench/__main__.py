"""`python -m bench`: run the benchmark and write bench/RESULTS.md.

Runs against DOCKER_HOST (or the default socket) unless --private-engine starts a dockerd of its
own. Every container it creates is labelled guardian.bench=<run id>; they are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from bench import burst, flood, graph, idle, imports, latency, overhead, storm, sweep
from bench.engine import IMAGE, Fleet, PrivateEngine, engine_versions
from bench.podman import PodmanService
from bench.report import Results, render

PHASES = (
    "latency",
    "podman",
    "sweep",
    "overhead",
    "idle",
    "burst",
    "imports",
    "storm",
    "graph",
    "flood",
)
# Not run by default: the single restarts beside the bare listener alone (`latency` runs them
# too), for as many flips as a steady p95 needs (`--only floor --trials 200`).
EXTRA_PHASES = ("floor",)
ALL_PHASES = PHASES + EXTRA_PHASES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--trials", type=int, default=20, help="latency flips per mode (default 20)")
    p.add_argument(
        "--sweep-trials", type=int, default=None, help="timed sweeps per size (default: --trials)"
    )
    p.add_argument("--sizes", default="10,100,500", help="sweep fleet sizes (default 10,100,500)")
    p.add_argument("--idle-containers", type=int, default=100)
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument(
        "--idle-sizes", default="10,100,500", help="fleets watched beside the polling baseline"
    )
    p.add_argument(
        "--idle-health-interval", type=float, default=idle.HEALTH_INTERVAL, help="seconds"
    )
    p.add_argument("--bursts", default="20,100", help="burst sizes (default 20,100)")
    p.add_argument(
        "--burst-runs",
        type=int,
        default=burst.DEFAULT_RUNS,
        help=f"runs of each burst per healer, interleaved (default {burst.DEFAULT_RUNS})",
    )
    p.add_argument("--storm-containers", type=int, default=100)
    p.add_argument(
        "--storm-hold",
        type=float,
        default=storm.HOLD,
        help=f"seconds the storm breaker holds before the acknowledgement (default {storm.HOLD:g})",
    )
    p.add_argument(
        "--flood-seconds", type=float, default=30.0, help="/healthz asked calm, then flooded (s)"
    )
    p.add_argument("--poll-interval", type=float, default=5.0, help="polling baseline sweep (s)")
    p.add_argument("--only", default=",".join(PHASES), help=f"phases to run, of {ALL_PHASES}")
    p.add_argument("--private-engine", action="store_true", help="start a dockerd of its own")
    p.add_argument("--engine-url", default=None, help="default: DOCKER_HOST or the local socket")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "RESULTS.md")
    return p.parse_args(argv)


def podman_latency(tmp: Path, trials: int) -> latency.LatencyResult:
    """The events-on latency against a private `podman system service` (bench/podman.py)."""
    service = PodmanService(Path(tempfile.mkdtemp(prefix="gbench-podman-", dir="/tmp")), IMAGE)
    fleet = Fleet(service.url, checks=service.healthchecks)
    try:
        return latency.measure(fleet, tmp, trials, True, 10.0)
    finally:
        fleet.remove()
        fleet.close()
        service.close()
        shutil.rmtree(service.dir, ignore_errors=True)


def run(args: argparse.Namespace, command: str) -> Results:
    phases = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(phases) - set(ALL_PHASES)
    if unknown:
        raise SystemExit(f"bench: unknown phase(s) {sorted(unknown)}; allowed: {ALL_PHASES}")
    engine = PrivateEngine().start() if args.private_engine else None
    url = (
        engine.url
        if engine
        else (args.engine_url or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
    )
    fleet = Fleet(url)
    tmp = Path(tempfile.mkdtemp(prefix=f"gbench-{fleet.run_id}-"))
    kind = "a private dockerd started by the benchmark" if engine else f"the engine at {url}"
    results = Results(command, engine_versions(url), kind, args.trials, fleet.run_id)
    try:
        if "latency" in phases or "floor" in phases:
            _say("latency: events on, beside the bare listener (alternating rounds)")
            results.latency.extend(latency.measure_beside_floor(fleet, tmp, args.trials))
        if "latency" in phases:
            _say(f"latency: events off, {args.poll_interval:g} s sweep")
            results.latency.append(
                latency.measure(fleet, tmp, args.trials, False, args.poll_interval)
            )
        if "podman" in phases:
            _say("latency on Podman: events on")
            results.latency.append(podman_latency(tmp, args.trials))
        if "sweep" in phases:
            sizes = sorted(int(s) for s in args.sizes.split(","))
            _say(f"sweep cost at {sizes}")
            results.sweeps = sweep.measure(fleet, tmp, sizes, args.sweep_trials or args.trials)
        if "overhead" in phases:
            _say(f"idle overhead, {args.idle_containers} containers, {args.idle_seconds:g} s")
            results.overhead = overhead.measure(fleet, tmp, args.idle_containers, args.idle_seconds)
        if "idle" in phases:
            sizes = sorted(int(s) for s in args.idle_sizes.split(","))
            _say(f"idle beside a polling baseline at {sizes}, {args.idle_seconds:g} s each")
            results.idle = idle.measure(
                fleet, tmp, sizes, args.idle_seconds, args.poll_interval, args.idle_health_interval
            )
        if "burst" in phases:
            for size in sorted(int(s) for s in args.bursts.split(",")):
                _say(f"burst of {size}")
                results.bursts.append(burst.measure(fleet, tmp, size, runs=args.burst_runs))
        if "imports" in phases:
            _say("CLI start-up imports")
            results.imports = imports.measure()
        if "storm" in phases:
            _say(f"storm of {args.storm_containers}")
            results.storm = storm.measure(fleet, tmp, args.storm_containers, args.storm_hold)
        if "graph" in phases:
            _say("dependency graph build time")
            results.graph = graph.measure(args.trials)
        if "flood" in phases:
            _say(f"connection flood, {args.flood_seconds:g} s calm then flooded")
            results.flood = flood.measure(fleet, tmp, args.flood_seconds)
    except BaseException:
        _say(f"failed; logs of the Guardian runs are kept in {tmp}")
        raise
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        fleet.remove()
        fleet.close()
        if engine is not None:
            engine.stop()
    return results


def _say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> Results:
    """Run, write the results file, and return the results (for the CI smoke test)."""
    args = parse_args(argv)
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    results = run(args, os.environ.get("BENCH_COMMAND", command.strip()))
    args.out.write_text(render(results))
    _say(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
