"""The loop's own cost of one reaction, in process: `healer.react()` for N unhealthy containers
over a fake engine, a real SQLite store and restart calls made inline (no engine's pace, no
thread hand-off). Comparable across commits: run it from each worktree with the same .venv,
    PYTHONPATH=<worktree> .venv/bin/python -P -m bench.reaction 100 [--profile]
(-P: the worktree named, not the directory it is run from, is the code measured)
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
from pathlib import Path

from bench.timing import timed
from guardian.adapters.clock import SystemClock
from tests.app import make_app
from tests.fakes import FakeEngine

OPEN = {"max_per_minute": 10000, "max_concurrent": 1000, "verify_timeout": "600s"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("containers", type=int, nargs="?", default=100)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 35")
    args = parser.parse_args()
    # Each reaction's log lines are written (part of its cost), to nowhere.
    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))  # noqa: SIM115
    clock = SystemClock()
    engine = FakeEngine(clock)  # type: ignore[arg-type]
    tmp = Path(tempfile.mkdtemp(prefix="gbench-reaction-"))
    app = make_app(tmp, engine=engine, clock=clock, restart=OPEN, storm={"threshold": "100%"})
    names = [f"c{i}" for i in range(args.containers)]
    for name in names:
        engine.add(name)
    for name in names:
        engine.set(name, health="unhealthy")
    reactions = (
        lambda name=name: app.healer.react(engine.id_of(name), clock.now()) for name in names
    )
    times, profile = timed(reactions, args.profile)
    print(
        f"{args.containers} reactions: median {statistics.median(times):.2f} ms, "
        f"max {max(times):.2f} ms, total {sum(times):.0f} ms, restarts {len(engine.restarts)}"
    )
    profile.print_top(35)


if __name__ == "__main__":
    main()
