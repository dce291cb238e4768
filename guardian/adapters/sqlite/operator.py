"""The SQLite store's operator half: listing incidents, a person's state changes, silences.

The base class of SqliteStore, over the Database it receives; split out so the daemon's write
path and what the CLI and HTTP API ask for read apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from guardian.adapters.sqlite.db import Database, where
from guardian.adapters.sqlite.outbox import insert_notifications
from guardian.adapters.sqlite.schema import incident_row, insert_transitions, silence_row, to_text
from guardian.core.incidents import IncidentChange
from guardian.core.model import Incident, IncidentState, Silence
from guardian.core.notifications import Notification


class OperatorQueries:
    """What people ask of the store (CLI, HTTP API), over `db`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get_incident(self, incident_id: int) -> Incident | None:
        rows = self.db.query("SELECT * FROM incidents WHERE id=?", (incident_id,))
        return incident_row(rows[0]) if rows else None

    def list_incidents(
        self, host: str, state: IncidentState | None = None, container: str | None = None
    ) -> list[Incident]:
        clause, params = where(
            ("host=?", host),
            ("state=?", None if state is None else str(state)),
            ("container=?", container),
        )
        rows = self.db.query(f"SELECT * FROM incidents WHERE {clause} ORDER BY id", params)
        return [incident_row(r) for r in rows]

    def save_state_change(
        self,
        change: IncidentChange,
        expected: IncidentState,
        notifications: Sequence[Notification] = (),
    ) -> Incident | None:
        """Write a person's transition only if the incident is still in `expected` state.

        Only the state columns are written, so a concurrent detection update by the daemon
        (occurrences, last_seen) is not lost. Returns None when the state moved meanwhile.
        `notifications` are queued in the same transaction (see insert_notifications: only
        for an incident people were told about).
        """
        i = change.incident
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE incidents SET state=?, resolved_by=?, resolved_at=?, closed_at=?,"
                " close_reason=? WHERE id=? AND state=?",
                (
                    str(i.state),
                    i.resolved_by,
                    to_text(i.resolved_at),
                    to_text(i.closed_at),
                    i.close_reason,
                    i.id,
                    str(expected),
                ),
            )
            if cur.rowcount != 1:
                return None
            insert_transitions(conn, i.id or 0, change.transitions)
            insert_notifications(conn, notifications)
        return self.get_incident(i.id or 0)

    def add_silence(self, silence: Silence) -> Silence:
        """Store a silence; it replaces any silence of that container still in force."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE silences SET ended_at=?, ended_by=? WHERE host=? AND container=?"
                " AND ended_at IS NULL AND until>?",
                (
                    to_text(silence.created_at),
                    silence.created_by,
                    silence.host,
                    silence.container,
                    to_text(silence.created_at),
                ),
            )
            cur = conn.execute(
                "INSERT INTO silences (host, container, created_at, until, reason, created_by)"
                " VALUES (?,?,?,?,?,?)",
                (
                    silence.host,
                    silence.container,
                    to_text(silence.created_at),
                    to_text(silence.until),
                    silence.reason,
                    silence.created_by,
                ),
            )
            silence_id = int(cur.lastrowid or 0)
        return silence_row(self.db.query("SELECT * FROM silences WHERE id=?", (silence_id,))[0])

    def end_silence(self, host: str, container: str, by: str, at: datetime) -> Silence | None:
        """Lift the silence of `container` in force at `at`; None when there is none."""
        current = self.active_silence(host, container, at)
        if current is None:
            return None
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE silences SET ended_at=?, ended_by=? WHERE id=?",
                (to_text(at), by, current.id),
            )
        return silence_row(self.db.query("SELECT * FROM silences WHERE id=?", (current.id,))[0])

    def active_silence(self, host: str, container: str, now: datetime) -> Silence | None:
        rows = self.db.query(
            "SELECT * FROM silences WHERE host=? AND container=? AND ended_at IS NULL"
            " AND created_at<=? AND until>? ORDER BY until DESC LIMIT 1",
            (host, container, to_text(now), to_text(now)),
        )
        return silence_row(rows[0]) if rows else None

    def silences(self, host: str, now: datetime, include_ended: bool = False) -> list[Silence]:
        """Silences in force at `now`, or every silence ever set with `include_ended`."""
        if include_ended:
            rows = self.db.query("SELECT * FROM silences WHERE host=? ORDER BY id", (host,))
        else:
            rows = self.db.query(
                "SELECT * FROM silences WHERE host=? AND ended_at IS NULL AND created_at<=?"
                " AND until>? ORDER BY id",
                (host, to_text(now), to_text(now)),
            )
        return [silence_row(r) for r in rows]
