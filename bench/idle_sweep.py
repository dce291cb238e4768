"""The loop's own cost of an idle sweep, in process: `healer.sweep()` over N healthy containers
on a fake engine with a warm container cache (no engine's list to read or decode: that is
`bench/idle.py`'s part). Comparable across commits: run it from each worktree with the same .venv,
    PYTHONPATH=<worktree> .venv/bin/python -P -m bench.idle_sweep 1000 [--profile]
(-P: the worktree named, not the directory it is run from, is the code measured)
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.timing import timed
from tests.app import make_app

WARM_SWEEPS = 6  # the cache fills at the first sweep up to 1,024 containers (RESYNC_READS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("containers", type=int, nargs="?", default=1000)
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 30")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gbench-idle-sweep-") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, tmp: Path) -> None:
    app = make_app(tmp).following()
    for i in range(args.containers):
        app.engine.add(f"ok{i}")
    for _ in range(WARM_SWEEPS):
        app.healer.sweep()
        app.clock.advance(10)

    def sweeps() -> Iterator[Callable[[], object]]:
        for _ in range(args.sweeps):
            yield app.healer.sweep
            app.clock.advance(10)

    took, profile = timed(sweeps(), args.profile)
    took.sort()
    print(
        f"{args.containers} healthy containers: an idle sweep {took[len(took) // 2]:.1f} ms"
        f" (median of {args.sweeps}; fastest {took[0]:.1f} ms)"
    )
    profile.print_top(30)


if __name__ == "__main__":
    main()
