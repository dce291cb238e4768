"""The records the rollback rung goes back to (core.escalation.rollback): per name, those seen
healthy and those a rollback left (failed), at most MAX_KEPT, the least recently seen going
first; retention forgets those not seen since its cut-off (retention.py)."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from guardian.adapters.sqlite.db import Database
from guardian.adapters.sqlite.schema import from_text, to_text
from guardian.core.escalation.rollback import MAX_KEPT, MAX_KEPT_BYTES, Kept


def of_name(db: Database, host: str, name: str) -> list[Kept]:
    """The records kept of `name`, the most recently seen first."""
    rows = db.query(
        "SELECT * FROM kept_records WHERE host=? AND name=? ORDER BY seen_at DESC, id DESC",
        (host, name),
    )
    return [_kept(r) for r in rows]


def keep(db: Database, host: str, k: Kept) -> None:
    """Keep `k`: a record seen healthy (`healthy_at`; a failed mark it had is lifted: it runs
    healthy) or left by a rollback (`failed_at`). One row per record of a name."""
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO kept_records (host, name, digest, image_id, image_ref, container_id,"
            " project, service, created, seen_at, healthy_at, failed_at, record, size)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(host, name, digest) DO UPDATE SET seen_at=excluded.seen_at,"
            " container_id=excluded.container_id, record=excluded.record, size=excluded.size,"
            " healthy_at=COALESCE(healthy_at, excluded.healthy_at),"
            " failed_at=CASE WHEN excluded.healthy_at IS NOT NULL THEN NULL"
            " ELSE COALESCE(excluded.failed_at, failed_at) END",
            (
                host,
                k.name,
                k.digest,
                k.image_id,
                k.image_ref,
                k.container_id,
                k.project,
                k.service,
                to_text(k.created),
                to_text(k.seen_at),
                to_text(k.healthy_at),
                to_text(k.failed_at),
                k.record,
                len(k.record.encode()),
            ),
        )
        _trim(conn, host, k.name)
        _within_budget(conn, k)


def touch(db: Database, host: str, name: str, container_id: str, at: datetime) -> bool:
    """Whether the record container `container_id` of `name` runs on is kept as healthy; if it
    is, it is seen now (retention counts from there)."""
    with db.transaction() as conn:
        cur = conn.execute(
            "UPDATE kept_records SET seen_at=? WHERE host=? AND name=? AND container_id=?"
            " AND healthy_at IS NOT NULL",
            (to_text(at), host, name, container_id),
        )
        return cur.rowcount > 0


def forget(conn: sqlite3.Connection, cutoff: str | None) -> int:
    """Retention: the records not seen since `cutoff` go."""
    cur = conn.execute("DELETE FROM kept_records WHERE seen_at < ?", (cutoff,))
    return cur.rowcount


def _trim(conn: sqlite3.Connection, host: str, name: str) -> None:
    conn.execute(
        "DELETE FROM kept_records WHERE host=? AND name=? AND id NOT IN (SELECT id FROM"
        " kept_records WHERE host=? AND name=? ORDER BY seen_at DESC, id DESC LIMIT ?)",
        (host, name, host, name, MAX_KEPT),
    )


def _within_budget(conn: sqlite3.Connection, k: Kept) -> None:
    """All names' records together within MAX_KEPT_BYTES: the least recently seen go first,
    never the one just kept."""
    (total,) = conn.execute("SELECT COALESCE(SUM(size), 0) FROM kept_records").fetchone()
    while total > MAX_KEPT_BYTES:
        oldest = conn.execute(
            "SELECT id, size FROM kept_records WHERE NOT (name=? AND digest=?)"
            " ORDER BY seen_at, id LIMIT 1",
            (k.name, k.digest),
        ).fetchone()
        if oldest is None:
            return
        conn.execute("DELETE FROM kept_records WHERE id=?", (oldest["id"],))
        total -= oldest["size"]


def _kept(row: sqlite3.Row) -> Kept:
    return Kept(
        id=row["id"],
        name=row["name"],
        digest=row["digest"],
        image_id=row["image_id"],
        image_ref=row["image_ref"],
        container_id=row["container_id"],
        project=row["project"],
        service=row["service"],
        created=from_text(row["created"]),
        seen_at=datetime.fromisoformat(row["seen_at"]),
        healthy_at=from_text(row["healthy_at"]),
        failed_at=from_text(row["failed_at"]),
        record=row["record"],
    )
