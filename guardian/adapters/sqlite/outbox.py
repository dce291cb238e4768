"""The notification outbox in the store's SQLite file: queued events, per-channel delivery state,
dead letters and per-channel references (Slack thread roots, firing alerts).

Events are inserted by SqliteStore in the transaction of the change that causes them; the
delivery worker fans each one out to the configured channels and records every outcome here,
through a SqliteOutbox over the store's Database.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from guardian.adapters.sqlite.db import Database
from guardian.adapters.sqlite.schema import from_text, incident_row, to_text
from guardian.core.model import HOST_SUBJECT, Incident
from guardian.core.outbound.delivery import Next, Pending, RowState
from guardian.core.outbound.notifications import (
    FIRST_NEWS,
    Kind,
    Notification,
    from_dict,
    to_dict,
    told_output,
)
from guardian.ports import QueuedDelivery

# outbox.dispatched: 0 to fan out, 1 fanned out, HELD until released (release_held).
HELD = 2


def insert_notifications(conn: sqlite3.Connection, notifications: Sequence[Notification]) -> None:
    """Queue notifications inside the caller's transaction.

    Later news of an incident (an attempt, its resolution, an acknowledgement) is queued only
    when people were told of the incident (its opening or an escalation is in the outbox): a
    container muted by guardian.notify=false, or one a storm incident spoke for, never was, and
    nobody should hear of a recovery they were not told of.
    """
    for n in notifications:
        if n.kind not in FIRST_NEWS and n.incident_id is not None:
            told = conn.execute(
                "SELECT 1 FROM outbox WHERE incident_id=? LIMIT 1", (n.incident_id,)
            )
            if told.fetchone() is None:
                continue
        if n.receivers is None and n.incident_id is not None:
            n = replace(n, receivers=_receivers_told(conn, n.incident_id))
        conn.execute(
            "INSERT INTO outbox (incident_id, kind, payload, created_at, dispatched)"
            " VALUES (?,?,?,?,?)",
            (n.incident_id, str(n.kind), json.dumps(to_dict(n)), to_text(n.at), HELD * n.held),
        )


def release_held(conn: sqlite3.Connection, incident_id: int | None, output: str) -> int:
    """Queue the held notifications of one incident (None: of every incident, at a start: what
    a stop left held) for their channels, each told `output` ("" keeps its detail); returns
    how many."""
    rows = conn.execute(
        "SELECT id, payload FROM outbox WHERE dispatched=? AND (? IS NULL OR incident_id=?)",
        (HELD, incident_id, incident_id),
    ).fetchall()
    for row_id, payload in rows:
        told = told_output(from_dict(json.loads(payload)), output)
        conn.execute(
            "UPDATE outbox SET payload=?, dispatched=0 WHERE id=?",
            (json.dumps(to_dict(told)), row_id),
        )
    return len(rows)


def _receivers_told(conn: sqlite3.Connection, incident_id: int) -> tuple[str, ...] | None:
    """The container receivers of an incident's latest news (a reminder or an acknowledgement
    goes where the incident's opening went)."""
    row = conn.execute(
        "SELECT payload FROM outbox WHERE incident_id=? ORDER BY id DESC LIMIT 1", (incident_id,)
    ).fetchone()
    found = json.loads(row[0]).get("receivers") if row is not None else None
    return tuple(found) if isinstance(found, list) else None


def withdraw_unsent(conn: sqlite3.Connection, host: str) -> int:
    """Delete the outbox rows (and delivery rows) of open container incidents of which no
    channel has tried to send anything and that hold no escalation; returns how many incidents.

    A delivery the worker picked just before this runs is sent all the same (its outcome then
    updates no row): the receiver hears of that incident's opening, not of its later news.
    """
    rows = conn.execute(
        "SELECT i.id FROM incidents i WHERE i.host=? AND i.container!=? AND i.state!='closed'"
        " AND EXISTS (SELECT 1 FROM outbox o WHERE o.incident_id=i.id)"
        " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.incident_id=i.id AND o.kind IN (?,?))"
        " AND NOT EXISTS (SELECT 1 FROM outbox o JOIN deliveries d ON d.outbox_id=o.id"
        "  WHERE o.incident_id=i.id AND (d.attempts>0 OR d.state!='pending'))",
        (host, HOST_SUBJECT, str(Kind.GAVE_UP), str(Kind.REMINDER)),
    )
    ids = [int(r[0]) for r in rows]
    if ids:
        marks = ",".join("?" * len(ids))
        conn.execute(
            f"DELETE FROM deliveries WHERE outbox_id IN"
            f" (SELECT id FROM outbox WHERE incident_id IN ({marks}))",
            ids,
        )
        conn.execute(f"DELETE FROM outbox WHERE incident_id IN ({marks})", ids)
    return len(ids)


# Per escalated open incident of a host: when its last give-up or reminder message was queued.
# Reminders fall due a repeat_interval after it (reminders_due, next_reminder_at).
_LAST_ESCALATION = (
    "SELECT i.id, MAX(o.created_at) AS last FROM incidents i"
    " JOIN outbox o ON o.incident_id = i.id AND o.kind IN (?, ?)"
    " WHERE i.host=? AND i.escalated=1 AND i.state IN"
    " ('active', 'acknowledged', 'in_progress') GROUP BY i.id"
)
_ESCALATION_KINDS = (str(Kind.GAVE_UP), str(Kind.REMINDER))


# Outbox rows a wait still counts from: queued ones (not yet fanned out or held, or with a
# delivery still pending: group_wait), and the give-ups and reminders of escalated incidents
# still open (repeat_interval, _LAST_ESCALATION).
_WAITED_ON = (
    "(dispatched != 1 OR id IN (SELECT outbox_id FROM deliveries WHERE state='pending')"
    f" OR (kind IN ('{Kind.GAVE_UP}', '{Kind.REMINDER}') AND incident_id IN (SELECT id FROM"
    " incidents WHERE escalated=1 AND state IN ('active', 'acknowledged', 'in_progress'))))"
)
# Pending deliveries due later than the clock allows (parameters: now, the latest a retry may
# fall due): a first attempt is due when its notification was queued, a retry at most the
# longest wait from now (RetryPolicy.longest).
_DUE_AHEAD = "state='pending' AND ((attempts=0 AND next_attempt_at > ?) OR next_attempt_at > ?)"


class SqliteOutbox:
    """The worker's view of the outbox, over the store's Database (same connection and lock)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def enqueue(self, notifications: Sequence[Notification]) -> None:
        with self.db.transaction() as conn:
            insert_notifications(conn, notifications)

    def fan_out(
        self,
        channels: Sequence[str],
        select: Callable[[Notification], Sequence[str]] | None = None,
    ) -> int:
        """One delivery row per channel for every event not yet dispatched (per the channels
        `select` chooses for it, when given); returns how many events were dispatched."""
        if not self.db.query("SELECT 1 FROM outbox WHERE dispatched=0 LIMIT 1"):
            return 0  # the common case: no write transaction every poll
        with self.db.transaction() as conn:
            rows = list(
                conn.execute("SELECT id, created_at, payload FROM outbox WHERE dispatched=0")
            )
            for row in rows:
                chosen = channels
                if select is not None:
                    wanted = set(select(from_dict(json.loads(row["payload"]))))
                    chosen = [c for c in channels if c in wanted]
                for channel in chosen:
                    conn.execute(
                        "INSERT OR IGNORE INTO deliveries (outbox_id, channel, next_attempt_at)"
                        " VALUES (?,?,?)",
                        (row["id"], channel, row["created_at"]),
                    )
                conn.execute("UPDATE outbox SET dispatched=1 WHERE id=?", (row["id"],))
        return len(rows)

    def pending(self, channel: str) -> list[QueuedDelivery]:
        rows = self.db.query(
            "SELECT d.id, d.attempts, d.next_attempt_at, o.incident_id, o.created_at, o.id AS oid,"
            " o.payload FROM deliveries d JOIN outbox o ON o.id = d.outbox_id"
            " WHERE d.channel=? AND d.state='pending' ORDER BY d.id",
            (channel,),
        )
        out = []
        for r in rows:
            n = from_dict(json.loads(r["payload"]))
            n = replace(n, id=r["oid"])
            p = Pending(
                r["id"],
                r["incident_id"],
                datetime.fromisoformat(r["created_at"]),
                datetime.fromisoformat(r["next_attempt_at"]),
            )
            out.append(QueuedDelivery(p, n, r["attempts"]))
        return out

    def record(self, row_ids: Sequence[int], nxt: Next, reason: str, now: datetime) -> None:
        """Store the outcome of one send for every row it carried."""
        with self.db.transaction() as conn:
            for row_id in row_ids:
                conn.execute(
                    "UPDATE deliveries SET attempts=attempts+1, state=?, last_error=?,"
                    " next_attempt_at=COALESCE(?, next_attempt_at), finished_at=? WHERE id=?",
                    (
                        str(nxt.state),
                        reason,
                        to_text(nxt.at),
                        None if nxt.state is RowState.PENDING else to_text(now),
                        row_id,
                    ),
                )

    def queue_depth(self) -> int:
        rows = self.db.query(
            "SELECT (SELECT COUNT(*) FROM deliveries WHERE state='pending')"
            " + (SELECT COUNT(*) FROM outbox WHERE dispatched=0)"
        )
        return int(rows[0][0])

    def dead_letters(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Deliveries given up on (permanent failure or retries exhausted), oldest first; with
        `limit`, only the newest `limit` of them (the store may hold any number)."""
        if limit is None:
            return [dict(r) for r in self.db.query("SELECT * FROM dead_letters ORDER BY id")]
        rows = self.db.query("SELECT * FROM dead_letters ORDER BY id DESC LIMIT ?", (limit,))
        return [dict(r) for r in reversed(rows)]

    def incident(self, incident_id: int) -> Incident | None:
        """The incident as stored now (a channel asks whether it is still open)."""
        rows = self.db.query("SELECT * FROM incidents WHERE id=?", (incident_id,))
        return incident_row(rows[0]) if rows else None

    # -- per-channel references -------------------------------------------------------------

    def ref(self, channel: str, incident_id: int) -> tuple[str, str] | None:
        rows = self.db.query(
            "SELECT ref, data FROM notify_refs WHERE channel=? AND incident_id=?",
            (channel, incident_id),
        )
        return (rows[0]["ref"], rows[0]["data"]) if rows else None

    def set_ref(self, channel: str, incident_id: int, ref: str, data: str = "") -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO notify_refs (channel, incident_id, ref, data) VALUES (?,?,?,?)"
                " ON CONFLICT(channel, incident_id) DO UPDATE SET ref=excluded.ref,"
                " data=excluded.data",
                (channel, incident_id, ref, data),
            )

    def drop_ref(self, channel: str, incident_id: int) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "DELETE FROM notify_refs WHERE channel=? AND incident_id=?", (channel, incident_id)
            )

    def refs(self, channel: str) -> list[tuple[int, str, str]]:
        rows = self.db.query(
            "SELECT incident_id, ref, data FROM notify_refs WHERE channel=? ORDER BY incident_id",
            (channel,),
        )
        return [(r["incident_id"], r["ref"], r["data"]) for r in rows]

    # -- reminders --------------------------------------------------------------------------

    def next_reminder_at(self, host: str, repeat_interval: timedelta) -> datetime | None:
        """When the soonest reminder falls due (see reminders_due); None: no incident needs one."""
        rows = self.db.query(
            f"SELECT MIN(last) FROM ({_LAST_ESCALATION})", (*_ESCALATION_KINDS, host)
        )
        last = from_text(rows[0][0]) if rows else None
        return last + repeat_interval if last is not None else None

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped: the stamps the outbox's waits count from move with it, a
        queued notification's queueing time (group_wait), its deliveries' retry times (a
        backoff, a Retry-After) and an escalated incident's last reminder (repeat_interval), so
        each wait keeps its length (a step back no longer stops them, nor a step forward ends
        them early)."""
        with self.db.transaction() as conn:
            queued = conn.execute(
                f"SELECT id, created_at FROM outbox WHERE {_WAITED_ON}"
            ).fetchall()
            for row_id, at in queued:
                conn.execute(
                    "UPDATE outbox SET created_at=? WHERE id=?",
                    (to_text(datetime.fromisoformat(at) + step), row_id),
                )
            rows = conn.execute(
                "SELECT id, next_attempt_at FROM deliveries WHERE state='pending'"
            ).fetchall()
            for row_id, at in rows:
                conn.execute(
                    "UPDATE deliveries SET next_attempt_at=? WHERE id=?",
                    (to_text(datetime.fromisoformat(at) + step), row_id),
                )

    def catch_up(self, now: datetime, longest_retry: timedelta) -> int:
        """The outbox's stamps that lie ahead of the clock (it stepped back while no run of
        Guardian followed it) are brought back, once, and written: a queueing time, a first
        attempt and a last reminder count as `now`, a retry falls due at most `longest_retry`
        from now. So no wait lasts longer than its own length from the moment it is seen
        (docs/design.md rule 12); returns how many stamps moved. Reads the whole outbox: for
        the start of a run and after a step, not every tick."""
        at, latest = to_text(now), to_text(now + longest_retry)
        if not self.db.query(
            f"SELECT 1 FROM outbox WHERE {_WAITED_ON} AND created_at > ?"
            f" UNION ALL SELECT 1 FROM deliveries WHERE {_DUE_AHEAD} LIMIT 1",
            (at, at, latest),
        ):
            return 0  # the common case: no write transaction
        with self.db.transaction() as conn:
            moved = conn.execute(
                f"UPDATE outbox SET created_at=? WHERE {_WAITED_ON} AND created_at > ?", (at, at)
            ).rowcount
            moved += conn.execute(
                "UPDATE deliveries SET next_attempt_at=CASE WHEN attempts=0 THEN ?"
                f" ELSE MIN(next_attempt_at, ?) END WHERE {_DUE_AHEAD}",
                (at, latest, at, latest),
            ).rowcount
        return int(moved)

    def reminders_due(
        self, host: str, repeat_interval: timedelta, now: datetime
    ) -> list[tuple[Incident, datetime]]:
        """Escalated incidents still open whose last give-up or reminder message is older than
        `repeat_interval`, with when they were opened. Muted containers never had a give-up
        message, so they get no reminder either."""
        cutoff = to_text(now - repeat_interval)
        rows = self.db.query(
            f"{_LAST_ESCALATION} HAVING last <= ?", (*_ESCALATION_KINDS, host, cutoff)
        )
        out = []
        for r in rows:
            incident = self.incident(r["id"])
            if incident is not None:
                out.append((incident, incident.opened_at))
        return out
