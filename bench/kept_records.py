"""What the rollback rung's kept records cost the loop, in process: `healer.sweep()` over N healthy
containers on a fake engine, without the rung (`restart.escalate: []`) and with it
(`[rollback, stop]`). Three sweeps each: the first (every record is new: one inspect and one
write each), an idle one, and the first of a new run of Guardian over the same store (rows only
touched, none read). Comparable across commits: run it from each worktree with the same .venv,
    PYTHONPATH=<worktree> .venv/bin/python -P -m bench.kept_records 1000
(-P: the worktree named, not the directory it is run from, is the code measured)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.app import make_app

LADDERS: dict[str, list[str]] = {"without the rung": [], "with the rung": ["rollback", "stop"]}


def ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure(containers: int, escalate: list[str], tmp: Path) -> str:
    app = make_app(tmp, restart={"escalate": escalate})
    for i in range(containers):
        app.engine.add(f"c{i:04d}")
    first = ms(app.healer.sweep)
    app.clock.advance(10)
    idle = ms(app.healer.sweep)
    rows, size = app.store.db.query("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM kept_records")[0]
    again = app.restart_guardian()
    inspects = again.engine.inspect_calls
    new_run = ms(again.healer.sweep)
    inspected = again.engine.inspect_calls - inspects
    return (
        f"first sweep {first:.0f} ms, idle sweep {idle:.1f} ms, first sweep of a new run"
        f" {new_run:.0f} ms ({inspected} inspects); kept {rows} records, {size / 1e6:.2f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("containers", type=int, nargs="?", default=1000)
    args = parser.parse_args()
    for label, escalate in LADDERS.items():
        with tempfile.TemporaryDirectory(prefix="gbench-kept-") as tmp:
            print(f"{args.containers} healthy containers, {label}:", end=" ", flush=True)
            print(measure(args.containers, escalate, Path(tmp)))


if __name__ == "__main__":
    main()
