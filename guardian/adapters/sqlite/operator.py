"""The SQLite store's operator half: listing incidents, a person's state changes, silences.

The base class of SqliteStore, over the Database it receives; split out so the daemon's write
path and what the CLI and HTTP API ask for read apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from guardian.adapters.sqlite.db import Database, where
from guardian.adapters.sqlite.outbox import insert_notifications
from guardian.adapters.sqlite.schema import (
    approval_row,
    event_row,
    from_text,
    incident_row,
    insert_transitions,
    rollback_request_row,
    silence_row,
    to_text,
)
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    OPEN_STATES,
    Approval,
    EventHorizon,
    Incident,
    IncidentState,
    RecordedEvent,
    RollbackRequest,
    Silence,
)
from guardian.core.outbound.notifications import Notification

# A container's silence in force at a time: the one that ends last (by silences_open).
_ACTIVE_SILENCE = (
    "SELECT * FROM silences WHERE host=? AND container=? AND ended_at IS NULL"
    " AND created_at<=? AND until>? ORDER BY until DESC LIMIT 1"
)


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
        # The row as written (a time's text reads back as the very datetime): no read after.
        return replace(silence, id=int(cur.lastrowid or 0))

    def end_silence(self, host: str, container: str, by: str, at: datetime) -> Silence | None:
        """Lift the silence of `container` in force at `at`; None when there is none."""
        with self.db.transaction() as conn:
            rows = conn.execute(_ACTIVE_SILENCE, (host, container, to_text(at), to_text(at)))
            row = rows.fetchone()
            if row is None:
                return None
            current = silence_row(row)
            conn.execute(
                "UPDATE silences SET ended_at=?, ended_by=? WHERE id=?",
                (to_text(at), by, current.id),
            )
        return replace(current, ended_at=at, ended_by=by)

    def active_silence(self, host: str, container: str, now: datetime) -> Silence | None:
        rows = self.db.query(_ACTIVE_SILENCE, (host, container, to_text(now), to_text(now)))
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

    # -- approvals (guardian.action=ask) ----------------------------------------------------

    def add_approval(
        self, approval: Approval, notifications: Sequence[Notification] = ()
    ) -> Approval:
        """Store a person's answer for an incident, with its timeline row (an action of kind
        `approval`) and its notifications, in one transaction."""
        verb = "approved" if approval.approved else "denied"
        detail = f"{verb} by {approval.by}" + (f": {approval.reason}" if approval.reason else "")
        with self.db.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO approvals (incident_id, host, container, approved, by, reason,"
                " created_at, expires_at) VALUES (?,?,?,?,?,?,?,?)",
                (
                    approval.incident_id,
                    approval.host,
                    approval.container,
                    int(approval.approved),
                    approval.by,
                    approval.reason,
                    to_text(approval.created_at),
                    to_text(approval.expires_at),
                ),
            )
            approval_id = int(cur.lastrowid or 0)
            conn.execute(
                "INSERT INTO actions (incident_id, host, container, container_id, kind,"
                " requested_at, reason, outcome, detail, finished_at, extra)"
                " SELECT id, host, container, container_id, 'approval', ?, ?, NULL, ?, ?, ?"
                " FROM incidents WHERE id=?",
                (
                    to_text(approval.created_at),
                    verb,
                    detail,
                    to_text(approval.created_at),
                    json.dumps({"approval": str(approval_id), "by": approval.by}),
                    approval.incident_id,
                ),
            )
            insert_notifications(conn, notifications)
        return self._approval(approval_id)

    def _approval(self, approval_id: int) -> Approval:
        return approval_row(self.db.query("SELECT * FROM approvals WHERE id=?", (approval_id,))[0])

    def approvals(self, incident_id: int) -> list[Approval]:
        rows = self.db.query(
            "SELECT * FROM approvals WHERE incident_id=? ORDER BY id", (incident_id,)
        )
        return [approval_row(r) for r in rows]

    def approval_for(self, host: str, container: str) -> Approval | None:
        """The latest answer for an open incident of `container` (never another incident's)."""
        states = tuple(str(s) for s in OPEN_STATES)
        rows = self.db.query(
            "SELECT a.* FROM approvals a JOIN incidents i ON i.id = a.incident_id"
            " WHERE i.host=? AND i.container=? AND i.state IN (?,?,?)"
            " ORDER BY a.id DESC LIMIT 1",
            (host, container, *states),
        )
        return approval_row(rows[0]) if rows else None

    def use_approval(self, approval_id: int, at: datetime) -> bool:
        """Mark an approval used (compare-and-set): False when it was used already."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE approvals SET used_at=? WHERE id=? AND used_at IS NULL AND approved=1",
                (to_text(at), approval_id),
            )
            return cur.rowcount == 1

    def unused_approvals(self, host: str, now: datetime) -> list[Approval]:
        """Approvals not used yet and not expired: restarts a person allowed."""
        rows = self.db.query(
            "SELECT * FROM approvals WHERE host=? AND approved=1 AND used_at IS NULL"
            " AND expires_at>? ORDER BY id",
            (host, to_text(now)),
        )
        return [approval_row(r) for r in rows]

    # -- a person's rollback (schema migration 14) ------------------------------------------

    def add_rollback_request(self, request: RollbackRequest) -> RollbackRequest:
        """Store a person's rollback request; returns it with its id."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO rollback_requests (host, container, container_id, digest, image_id,"
                " image_ref, by, reason, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    request.host,
                    request.container,
                    request.container_id,
                    request.digest,
                    request.image_id,
                    request.image_ref,
                    request.by,
                    request.reason,
                    to_text(request.created_at),
                    to_text(request.expires_at),
                ),
            )
        return replace(request, id=int(cur.lastrowid or 0))

    def rollback_requests(self, host: str, now: datetime) -> list[RollbackRequest]:
        """The rollback requests not used yet and not expired, oldest first."""
        rows = self.db.query(
            "SELECT * FROM rollback_requests WHERE host=? AND used_at IS NULL AND expires_at>?"
            " ORDER BY id",
            (host, to_text(now)),
        )
        return [rollback_request_row(r) for r in rows]

    def use_rollback_request(self, request_id: int, at: datetime) -> bool:
        """Mark a rollback request used (compare-and-set): False when it was used already."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE rollback_requests SET used_at=? WHERE id=? AND used_at IS NULL",
                (to_text(at), request_id),
            )
            return cur.rowcount == 1

    # -- the events feed (schema migration 10: triggers write it with each write) -----------

    def events_after(self, host: str, cursor: int, limit: int) -> list[RecordedEvent]:
        """The first `limit` events of `host` recorded after `cursor`, oldest first."""
        rows = self.db.query(
            "SELECT * FROM events WHERE seq>? AND host=? ORDER BY seq LIMIT ?",
            (cursor, host, limit),
        )
        return [event_row(r) for r in rows]

    def event_cursor_at(self, host: str, at: datetime) -> int:
        """The cursor after which the events of `host` recorded at or after `at` come; the
        newest cursor when there are none."""
        # The store writes UTC times, compared as text: a time with another offset is moved.
        utc = to_text(at.astimezone(UTC))
        rows = self.db.query("SELECT MIN(seq) FROM events WHERE at>=? AND host=?", (utc, host))
        first = rows[0][0]
        return int(first) - 1 if first is not None else self.event_horizon().newest

    def event_horizon(self) -> EventHorizon:
        forgotten = self.db.query("SELECT through, cutoff FROM events_forgotten")
        newest = self.db.query("SELECT seq FROM sqlite_sequence WHERE name='events'")
        return EventHorizon(
            forgotten[0]["through"] if forgotten else 0,
            from_text(forgotten[0]["cutoff"]) if forgotten else None,
            newest[0]["seq"] if newest else 0,
        )
