"""What a person's CLI write costs the daemon: `python -m bench.elsewhere [containers ...]`.

Over a fake engine (a tenth of the containers unhealthy, their incidents open), with the status
page read once: another process (a store connection of its own, as `guardian silence` and
`guardian incidents ack` use) writes, then the daemon looks and the page reads what changed.
Two ways, each run in turn on the same Guardian:
- before (the per-sweep data_version check, up to a sweep interval late): the write is
  StoreWrittenElsewhere, and the page reads everything again;
- now (the store watch, at once): the look reads the change feed after its cursor and
  publishes what the rows name; the page reads that.
Printed: the look's and the page read's CPU (median ms) and the engine's list calls a read made.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

RUNS = 30


def world(tmp: Path, containers: int) -> tuple[Any, Any, Any]:
    """(test app, page reader, the CLI's operator) with the page read once."""
    from guardian.bootstrap import build_operator
    from guardian.readside.page import PageReader
    from tests.app import HOST, make_app

    g = make_app(
        tmp,
        daemon=True,
        restart={"dry_run": True},
        storm={"min_containers": 10_000},
    )
    for n in range(containers):
        g.engine.add(f"app-{n:04d}", health="unhealthy" if n % 10 == 0 else "healthy")
    g.healer.sweep()
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    page.read(True)
    return g, page, build_operator(g.settings, clock=g.clock, host=HOST)


def cpu_ms(action: Any) -> float:
    started = time.process_time()
    action()
    return (time.process_time() - started) * 1000


def measure(containers: int, runs: int, write: str) -> dict[str, float]:
    """Medians over `runs` writes of `write` (silence: a silence set; ack: an incident
    acknowledged, at most one per open incident)."""
    from guardian.core.facts import StoreWrittenElsewhere

    with tempfile.TemporaryDirectory() as tmp:
        g, page, cli = world(Path(tmp), containers)
        incidents = [i.id for i in g.store.open_incidents(g.host)]
        if write == "ack":
            runs = min(runs, len(incidents) // 2)
        if not runs:
            g.store.close()
            return {"runs": 0}
        looks, reads, whole, lists = [], [], [], {"now": 0, "before": 0}
        for n in range(runs):
            name = f"app-{n % containers:04d}"
            before_lists = g.engine.list_calls
            if write == "ack":
                cli.change(incidents[2 * n], "ack", "bench")
            else:
                cli.silence(name, timedelta(minutes=5), "bench", "bench")
            looks.append(cpu_ms(g.app.elsewhere.look))
            reads.append(cpu_ms(lambda: page.read(True)))
            lists["now"] += g.engine.list_calls - before_lists
            # The same kind of write, told as every write elsewhere was told before.
            if write == "ack":
                cli.change(incidents[2 * n + 1], "ack", "bench")
            else:
                cli.unsilence(name, "bench")
            g.app.elsewhere.look()
            page.read(True)  # not measured: the same write told the new way, then...
            before_lists = g.engine.list_calls
            g.app.facts.publish(StoreWrittenElsewhere())  # ...what a look published before
            whole.append(cpu_ms(lambda: page.read(True)))
            lists["before"] += g.engine.list_calls - before_lists
        g.store.close()
    return {
        "runs": float(runs),
        "look": statistics.median(looks),
        "now": statistics.median(reads),
        "before": statistics.median(whole),
        "lists_now": lists["now"] / runs,
        "lists_before": lists["before"] / runs,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("containers", nargs="*", type=int, default=[10, 100, 500])
    p.add_argument("--runs", type=int, default=RUNS)
    args = p.parse_args(argv)
    print("| write | containers | runs | the look | page read now | before | lists now/before |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for write in ("silence", "ack"):
        for n in args.containers:
            m = measure(n, args.runs, write)
            if not m["runs"]:
                continue
            print(
                f"| {write} | {n} | {m['runs']:.0f} | {m['look']:.2f} ms | {m['now']:.2f} ms"
                f" | {m['before']:.2f} ms | {m['lists_now']:.0f} / {m['lists_before']:.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
