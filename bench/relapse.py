"""The loop's cost of one reaction as the run's history grows, in process: one container judged
from the cache (an unhealthy event on a fresh entry) relapses N times, ten minutes apart on a
fake clock (three attempts an hour: each relapse is restarted), over a fake engine, a real
SQLite store and restart calls made inline. Prints the time from `healer.react()` to the
engine's restart call, median of the first 50 relapses and of the last 50: a reaction that
walks the whole run's history grows from one to the other.
    PYTHONPATH=<worktree> .venv/bin/python -P -m bench.relapse 400 [--profile]
(-P: the worktree named, not the directory it is run from, is the code measured)
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench.timing import Profile
from guardian.core.model import ActionOutcome
from tests.app import make_app
from tests.unit.test_container_cache import event, turns_unhealthy, warm

APART = timedelta(minutes=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("relapses", type=int, nargs="?", default=400)
    parser.add_argument("--profile", action="store_true", help="the last 50, cProfile's top 35")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))  # noqa: SIM115
    tmp = Path(tempfile.mkdtemp(prefix="gbench-relapse-"))
    w = make_app(tmp, restart={"cooldown": "2s", "max_attempts": 3, "window": "1h"})
    w.following()
    w.engine.add("app")
    asked: list[float] = []
    restart = w.engine.restart

    def timed_restart(*call: object) -> ActionOutcome:
        asked.append(time.perf_counter())
        return restart(*call)  # type: ignore[arg-type]

    w.engine.restart = timed_restart  # type: ignore[method-assign]
    profiler, unprofiled = Profile(cProfile.Profile() if args.profile else None), Profile(None)
    took = []
    for i in range(args.relapses):
        warm(w)  # the cache filled; events after it are ordered against it
        unhealthy = turns_unhealthy(w, "app")
        with profiler if i >= args.relapses - 50 else unprofiled:
            start = time.perf_counter()
            w.healer.react(unhealthy.container_id, w.healer.reported_at(unhealthy))
        assert len(asked) == i + 1, "every relapse is restarted"
        took.append((asked[-1] - start) * 1000)
        for action in ("kill", "die", "start", "restart"):
            w.healer.on_event(event(w, action, "app"))
        w.clock.advance(2)
        w.verify()  # healthy again: the incident resolved
        w.clock.advance(APART.total_seconds())
    first, last = statistics.median(took[:50]), statistics.median(took[-50:])
    print(
        f"{args.relapses} relapses, react() to the restart call: first 50 median {first:.2f} ms,"
        f" last 50 median {last:.2f} ms (x{last / first:.2f})"
    )
    profiler.print_top(35)


if __name__ == "__main__":
    main()
