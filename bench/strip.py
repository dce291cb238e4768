"""The status page with a day of history: `python -m bench.strip` prints, for 200 containers
each with 24 hours of history in the store (incidents opened and resolved, restarts, a silence,
Guardian's runs with an hour it was not running), the server time of GET / signed in: after a
write that names nothing (every row, its strip and the store's lists read and made again),
after one container's restart is written (its row alone), and with nothing changed. The floor:
50 ms for the whole page.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.page import fake_page

FLOOR_MS = 50.0
CONTAINERS = 200
PER_DAY = 6  # incidents (each resolved after 10 minutes, a restart among them) per container


def fill(g: Any, containers: int) -> None:
    """A day of history for each container, written straight into the store's tables."""
    from guardian.adapters.sqlite.schema import to_text

    now, db, host = g.clock.now(), g.store.db, g.host
    with db.transaction() as conn:
        for n in range(containers):
            name = f"app-{n:04d}"
            for k in range(PER_DAY):
                opened = now - timedelta(hours=23) + k * timedelta(hours=24 / PER_DAY)
                resolved = opened + timedelta(minutes=10)
                incident = conn.execute(
                    "INSERT INTO incidents (host, container, container_id, type, state,"
                    " opened_at, last_seen, resolved_by, resolved_at, closed_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        host,
                        name,
                        f"id-{n}",
                        "unhealthy",
                        "closed",
                        to_text(opened),
                        to_text(resolved),
                        "guardian",
                        to_text(resolved),
                        to_text(resolved),
                    ),
                ).lastrowid
                conn.execute(
                    "INSERT INTO actions (incident_id, host, container, container_id, kind,"
                    " requested_at, reason, attempt, outcome, finished_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        incident,
                        host,
                        name,
                        f"id-{n}",
                        "restart",
                        to_text(opened + timedelta(minutes=1)),
                        "unhealthy",
                        1,
                        "succeeded",
                        to_text(opened + timedelta(minutes=2)),
                    ),
                )
            conn.execute(
                "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
                " VALUES (?,?,?,?,?,?)",
                (
                    host,
                    name,
                    to_text(now - timedelta(hours=5)),
                    to_text(now - timedelta(hours=4)),
                    "deploy",
                    "bench",
                ),
            )
        for first, last in (
            (now - timedelta(days=2), now - timedelta(hours=12)),
            (now - timedelta(hours=11), now),
        ):
            conn.execute(
                "INSERT INTO marks (host, name, at) VALUES (?,?,?)",
                (host, "run:" + to_text(first), to_text(last)),
            )


def timings(containers: int, runs: int) -> dict[str, tuple[float, float, int]]:
    """(median ms, max ms, bytes) of GET / by what changed before it."""
    from guardian.core.facts import AttemptWritten
    from guardian.entrypoints.http_server import Request

    out: dict[str, tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        g, page, cookie = fake_page(Path(tmp), containers)
        fill(g, containers)
        request = Request("GET", "/", {}, {"cookie": cookie, "host": "bench"}, b"", "")
        g.app.changes.wrote()
        page.index(request)  # templates compiled
        cases = {
            "a write naming nothing (every row made again)": g.app.changes.wrote,
            "one container's restart written": lambda: g.app.changes.on_fact(
                AttemptWritten("app-0007", None, True)
            ),
            "nothing changed": lambda: None,
        }
        for what, change in cases.items():
            took, body = [], b""
            for _ in range(runs):
                change()
                started = time.perf_counter()
                body = page.index(request).body
                took.append((time.perf_counter() - started) * 1000)
            out[what] = (statistics.median(took), max(took), len(body))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.strip")
    p.add_argument("--containers", type=int, default=CONTAINERS)
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)
    print(f"| {args.containers} containers, a day of history each | median | max | size |")
    print("|---|---:|---:|---:|")
    worst = 0.0
    for what, (med, top, size) in timings(args.containers, args.runs).items():
        worst = max(worst, med)
        print(f"| {what} | {med:.1f} ms | {top:.1f} ms | {size / 1024:.0f} KB |")
    print(f"\nfloor {FLOOR_MS:.0f} ms: {'met' if worst < FLOOR_MS else 'NOT met'}")
    return 0 if worst < FLOOR_MS else 1


if __name__ == "__main__":
    sys.exit(main())
