"""Retention: the store keeps what is open and what is recent, and forgets the rest.

An incident closed (or, for a host-level incident, resolved) before the cut-off is deleted with
everything that hangs off it: its transitions, remediation actions, queued notifications and
their delivery rows, and channel references (Slack threads, firing alerts). Silences that ended
or ran out before the cut-off go too, maintenance windows' runs that ended before it,
actions of no incident requested before it, and the records kept for the rollback rung that
were not seen since it (a name gone that long is forgotten). Open incidents are never
deleted, whatever their age, nor anything of theirs. Each batch of incidents is one
transaction: a crash mid-way leaves whole incidents behind, never part of one.
The events feed forgets the events before the first one recorded since the cut-off (of open
incidents too: the feed tells what happened, the incident stays) and keeps the cursor up to
which it forgot, so a client asking from before it learns it missed some (410).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime

from guardian.adapters.sqlite import kept
from guardian.adapters.sqlite.db import Database
from guardian.adapters.sqlite.schema import to_text
from guardian.core.history import RUN_MARK
from guardian.core.model import HOST_SUBJECT

BATCH = 500  # incidents per transaction: short write locks while the daemon runs

# (table, the rows of the incidents `ids`), in the order they must go (references first).
_DEPENDENTS = (
    ("deliveries", "outbox_id IN (SELECT id FROM outbox WHERE incident_id IN ({ids}))"),
    ("outbox", "incident_id IN ({ids})"),
    ("notify_refs", "incident_id IN ({ids})"),
    ("transitions", "incident_id IN ({ids})"),
    ("actions", "incident_id IN ({ids})"),
    ("incidents", "id IN ({ids})"),
)


@dataclass(frozen=True)
class Pruned:
    incidents: int = 0
    silences: int = 0
    events: int = 0

    def __bool__(self) -> bool:
        return bool(self.incidents or self.silences or self.events)


def prune(db: Database, before: datetime, batch: int = BATCH) -> Pruned:
    """Delete what ended before `before` (see the module's docstring); returns the counts."""
    cutoff = to_text(before)
    incidents = 0
    while True:
        with db.transaction() as conn:
            done = _prune_batch(conn, cutoff, batch)
        incidents += done
        if done < batch:
            break
    with db.transaction() as conn:
        conn.execute(
            "DELETE FROM actions WHERE incident_id IS NULL AND requested_at < ?", (cutoff,)
        )
        conn.execute(  # Guardian's runs (core.history): kept as long as what they explain
            "DELETE FROM marks WHERE name>=? AND name<? AND at<?",
            (RUN_MARK, RUN_MARK[:-1] + ";", cutoff),
        )
        silences = conn.execute(
            "DELETE FROM silences WHERE COALESCE(ended_at, until) < ?", (cutoff,)
        ).rowcount
        conn.execute("DELETE FROM maintenance WHERE ended_at < ?", (cutoff,))
        kept.forget(conn, cutoff)  # the rollback's records of names not seen since
        events = _forget_events(conn, cutoff)
    return Pruned(incidents, silences, events)


def _forget_events(conn: sqlite3.Connection, cutoff: str | None) -> int:
    """Forget a prefix of the events feed, so a cursor never skips an event still held: those
    before the first recorded at or after the cut-off (all, when none is)."""
    first = conn.execute("SELECT MIN(seq) FROM events WHERE at>=?", (cutoff,)).fetchone()[0]
    if first is None:
        through = conn.execute("SELECT MAX(seq) FROM events").fetchone()[0] or 0
    else:
        through = int(first) - 1
    forgotten = conn.execute("DELETE FROM events WHERE seq<=?", (through,)).rowcount
    if forgotten:
        conn.execute(
            "INSERT INTO events_forgotten (one, through, cutoff) VALUES (1,?,?)"
            " ON CONFLICT(one) DO UPDATE SET through=excluded.through, cutoff=excluded.cutoff",
            (through, cutoff),
        )
    return int(forgotten)


def _prune_batch(conn: sqlite3.Connection, cutoff: str | None, batch: int) -> int:
    rows = conn.execute(
        "SELECT id FROM incidents WHERE (state = 'closed' AND closed_at < ?)"
        " OR (container = ? AND state = 'resolved' AND resolved_at < ?) ORDER BY id LIMIT ?",
        (cutoff, HOST_SUBJECT, cutoff, batch),
    )
    ids = [int(r[0]) for r in rows]
    if ids:
        marks = ",".join("?" * len(ids))
        for table, where in _DEPENDENTS:
            conn.execute(f"DELETE FROM {table} WHERE {where.format(ids=marks)}", ids)
    return len(ids)
