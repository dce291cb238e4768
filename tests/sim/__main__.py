"""Replay or explore seeds of the simulator from the repository's root:

    python -m tests.sim --seed 1234 --hours 1             # one seed: its trace, its verdict
    python -m tests.sim --seeds 500 --base 7000 --jobs 2   # many: a summary (bench/sim_soak.sh)

Exits 1 when a promise was broken by a bug not yet known (tests/sim/known.py), each
failing seed printed with the command that replays it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from tests.sim.driver import Report, simulate
from tests.sim.known import KNOWN


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, help="replay this seed, its trace printed")
    p.add_argument("--seeds", type=int, default=0, help="run this many seeds from --base")
    p.add_argument("--base", type=int, default=0, help="the first of --seeds")
    p.add_argument("--hours", type=float, default=1.0, help="simulated hours per seed")
    p.add_argument("--plant", default="", help="a planted bug (tests/sim/plants.py)")
    p.add_argument("--jobs", type=int, default=1, help="processes running seeds at once")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    return p.parse_args(argv)


def _one(seed: int, hours: float, plant: str) -> int:
    report = simulate(seed, hours, plant)
    print("\n".join(report.trace))
    print(json.dumps(report.counts, indent=1, sort_keys=True))
    print(f"{report.checked} checks over {report.simulated / 3600:.2f} simulated hours")
    if report.ok:
        print(f"seed {seed}: every promise kept")
        return 0
    print(report.explain(tail=0))
    return 1 if report.failed else 0


def _many(run: tuple[int, float, str]) -> Report:
    report = simulate(*run)
    report.trace = report.trace[-200:]  # what explain() shows; less to send between processes
    return report


def summary(reports: list[Report], seconds: float) -> dict[str, object]:
    """The figures of a run of many seeds: seeds, simulated hours, steps, faults of each kind,
    checks made, the seeds that broke a promise (with their replay commands)."""
    counts: Counter[str] = Counter()
    for r in reports:
        counts.update(r.counts)
    return {
        "seeds": len(reports),
        "simulated_hours": round(sum(r.simulated for r in reports) / 3600, 1),
        "steps": counts.pop("steps", 0),
        "invariants_checked": sum(r.checked for r in reports),
        "faults_and_steps": dict(sorted(counts.items())),
        "known_bugs_hit": dict(sorted(Counter(k for r in reports for k in r.known).items())),
        "known_bug_seeds": {k: [r.seed for r in reports if k in r.known] for k in sorted({*KNOWN})},
        "failed": [f"seed {r.seed}: {r.failed[0]} -- {r.replay}" for r in reports if r.failed],
        "wall_seconds": round(seconds, 1),
    }


def main(argv: list[str]) -> int:
    args = _args(argv)
    if args.seed is not None:
        return _one(args.seed, args.hours, args.plant)
    began = time.monotonic()
    runs = [(s, args.hours, args.plant) for s in range(args.base, args.base + args.seeds)]
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        reports = list(pool.map(_many, runs, chunksize=4))
    figures = summary(reports, time.monotonic() - began)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            if key == "known_bug_seeds":
                assert isinstance(value, dict)
                value = {k: " ".join(map(str, seeds)) for k, seeds in value.items() if seeds}
            shown = json.dumps(value, indent=2) if isinstance(value, dict | list) else value
            print(f"{key}: {shown}")
    return 1 if figures["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
