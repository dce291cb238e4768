"""The store's reads of what is in force against the history kept with it: `python -m
bench.history` prints, for a store holding thousands of lifted silences and of sent deliveries
(what `store.retention`, 90 days by default, keeps on a busy host), how long the silences in
force (the status page after each silence, `guardian status`), the newest 20 dead letters and
the host's restarts of the last minute (its budget, read at every decision; as many restarts
as silences) take to read, with the schema's indexes and with them dropped (the schema before
version 5; version 8 for the restarts).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import timeit
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.schema import to_text
from guardian.adapters.sqlite.store import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
INDEXES = {
    "silences": "silences_in_force",
    "dead letters": "deliveries_dead",
    "restarts": "actions_host_kind",
}


def filled(path: Path, silences: int, deliveries: int, dead_every: int = 5000) -> SqliteStore:
    """A store (host "h") with `silences` silences of an hour lifted at once (40 containers,
    one a minute from T0) and then one in force ("db", until T0 + 400 days), and `deliveries`
    deliveries of which one in `dead_every` is a dead letter (the first among them), the others
    sent."""
    store = SqliteStore(path)
    with store.db.transaction() as conn:
        for n in range(silences):
            at = to_text(T0 + timedelta(minutes=n))
            conn.execute(
                "INSERT INTO silences (host, container, created_at, until, reason, created_by,"
                " ended_at, ended_by) VALUES ('h', ?, ?, ?, 'deploy', 'ci', ?, 'ci')",
                (f"app-{n % 40}", at, to_text(T0 + timedelta(minutes=n + 60)), at),
            )
        conn.execute(
            "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
            " VALUES ('h', 'db', ?, ?, 'maintenance', 'me')",
            (to_text(T0), to_text(T0 + timedelta(days=400))),
        )
        for n in range(deliveries):
            conn.execute(
                "INSERT INTO outbox (kind, payload, created_at, dispatched)"
                " VALUES ('opened', '{}', ?, 1)",
                (to_text(T0),),
            )
            conn.execute(
                "INSERT INTO deliveries (outbox_id, channel, state, next_attempt_at)"
                " VALUES (?, 'slack', ?, ?)",
                (n + 1, "dead" if n % dead_every == 0 else "sent", to_text(T0)),
            )
        for n in range(silences):  # as many restarts, one every 6 minutes
            conn.execute(
                "INSERT INTO actions (host, container, container_id, kind, requested_at, reason)"
                " VALUES ('h', ?, ?, 'restart', ?, 'unhealthy')",
                (f"app-{n % 40}", f"id-{n % 40}", to_text(T0 + timedelta(minutes=6 * n))),
            )
    return store


def ms(read: Callable[[], Any]) -> float:
    """The best of 5 repeats, ms per read."""
    number = 20
    return min(timeit.repeat(read, number=number, repeat=5)) / number * 1000


def rows(sizes: list[tuple[int, int]]) -> list[tuple[int, int, str, float, float]]:
    """(silences, deliveries, read, ms with the index, ms without)."""
    out = []
    for silences, deliveries in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store = filled(Path(tmp) / "g.db", silences, deliveries)
            outbox = SqliteOutbox(store.db)
            now = T0 + timedelta(days=100)
            reads = {
                "silences": lambda s=store, t=now: s.silences("h", t),
                "dead letters": lambda o=outbox: o.dead_letters(20),
                "restarts": lambda s=store, t=now: s.restart_times("h", t - timedelta(minutes=1)),
            }
            indexed = {what: ms(read) for what, read in reads.items()}
            with store.db.transaction() as conn:
                for index in INDEXES.values():
                    conn.execute(f"DROP INDEX {index}")
            for what, read in reads.items():
                out.append((silences, deliveries, what, indexed[what], ms(read)))
            store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__)
    p.add_argument("--sizes", default="0:0,1000:10000,20000:100000", help="silences:deliveries")
    args = p.parse_args(argv)
    sizes = [(int(a), int(b)) for a, b in (pair.split(":") for pair in args.sizes.split(","))]
    print("| lifted silences | deliveries | read | with the index | without |")
    print("|---:|---:|---|---:|---:|")
    for silences, deliveries, what, with_index, without in rows(sizes):
        read = {
            "silences": "silences in force",
            "dead letters": "newest 20 dead letters",
            "restarts": "the host's restarts of the last minute (as many restarts as silences)",
        }[what]
        print(f"| {silences} | {deliveries} | {read} | {with_index:.3f} ms | {without:.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
