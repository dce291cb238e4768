"""SqliteStore: incidents, their transitions and remediation actions in SQLite (WAL).

Survives kill -9: every write is one transaction, intent rows are written before acting, and a
partial unique index makes "one open incident per (host, container, type)" a database fact.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from guardian.adapters.sqlite import kept
from guardian.adapters.sqlite.db import Database, where
from guardian.adapters.sqlite.history import read_history
from guardian.adapters.sqlite.maintenance import end_period, open_periods, start_period
from guardian.adapters.sqlite.operator import OperatorQueries
from guardian.adapters.sqlite.outbox import insert_notifications, release_held, withdraw_unsent
from guardian.adapters.sqlite.retention import Pruned, prune
from guardian.adapters.sqlite.schema import (
    action_row,
    from_text,
    incident_row,
    insert_transitions,
    to_text,
)
from guardian.core.detection.windows import MaintenancePeriod
from guardian.core.escalation.rollback import Kept
from guardian.core.history import History
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    ActionKind,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    RemediationAction,
    Transition,
)
from guardian.core.outbound.notifications import Notification, with_incident
from guardian.core.verification import UNCONFIRMED


class SqliteStore(OperatorQueries):
    """The Store port over one SQLite Database; safe to share between the daemon's threads."""

    def __init__(self, db: Database | str | Path, busy_timeout_ms: int = 10_000) -> None:
        """Over `db`, or over the Database opened at that path (raises StoreError)."""
        super().__init__(db if isinstance(db, Database) else Database(db, busy_timeout_ms))

    @property
    def path(self) -> Path:
        return self.db.path

    def close(self) -> None:
        self.db.close()

    # ports.MaintenanceRecords: the runs of maintenance windows (adapters/sqlite/maintenance).

    def open_periods(self, host: str) -> list[MaintenancePeriod]:
        return open_periods(self.db, host)

    def start_period(self, host: str, period: MaintenancePeriod) -> MaintenancePeriod:
        return start_period(self.db, host, period)

    def end_period(self, period_id: int, at: datetime) -> None:
        end_period(self.db, period_id, at)

    def withdraw_unsent(self, host: str) -> int:
        with self.db.transaction() as conn:
            return withdraw_unsent(conn, host)

    def release_held(self, incident_id: int | None, output: str = "") -> int:
        with self.db.transaction() as conn:
            return release_held(conn, incident_id, output)

    def prune(self, before: datetime) -> Pruned:
        """Forget incidents that ended before `before`, with their history (retention.py)."""
        return prune(self.db, before)

    # -- incidents --------------------------------------------------------------------------

    def current_incident(self, host: str, container: str, kind: ProblemType) -> Incident | None:
        rows = self.db.query(
            "SELECT * FROM incidents WHERE host=? AND container=? AND type=? AND state!='closed'",
            (host, container, str(kind)),
        )
        return incident_row(rows[0]) if rows else None

    def open_incidents(self, host: str, container: str | None = None) -> list[Incident]:
        clause, params = where(("host=?", host), ("container=?", container))
        rows = self.db.query(
            f"SELECT * FROM incidents WHERE {clause} AND state!='closed' ORDER BY id", params
        )
        return [incident_row(r) for r in rows]

    def save_incident(
        self, change: IncidentChange, notifications: Sequence[Notification] = ()
    ) -> Incident:
        """Write the incident, its transitions and the notifications it causes in ONE
        transaction; the notifications get the incident's id."""
        fields = _incident_fields(change.incident)
        with self.db.transaction() as conn:
            incident_id = _write_incident(conn, change, fields)
            insert_transitions(conn, incident_id, change.transitions)
            saved = incident_row(
                conn.execute("SELECT * FROM incidents WHERE id=?", (incident_id,)).fetchone()
            )
            insert_notifications(conn, [with_incident(n, saved) for n in notifications])
        return saved

    def move_problem_starts(self, host: str, step: timedelta) -> None:
        """Each problem start (its opening where none was kept) moved by `step`, in one
        transaction; only where it is still what was read (a detection may write meanwhile)."""
        with self.db.transaction() as conn:
            rows = conn.execute(
                "SELECT id, opened_at, problem_since FROM incidents"
                " WHERE host=? AND state!='closed'",
                (host,),
            ).fetchall()
            for row in rows:
                began = from_text(row["problem_since"] or row["opened_at"])
                assert began is not None
                conn.execute(
                    "UPDATE incidents SET problem_since=? WHERE id=? AND problem_since IS ?",
                    (to_text(began + step), row["id"], row["problem_since"]),
                )

    def transitions(
        self, incident_id: int, limit: int | None = None, after: int | None = None
    ) -> list[Transition]:
        clause, params = "incident_id=?", (incident_id, -1 if after is None else after)
        if limit is None:
            rows = self.db.query(
                f"SELECT * FROM transitions WHERE {clause} AND id>? ORDER BY id", params
            )
        else:  # the newest `limit`, still oldest first
            rows = self.db.query(
                f"SELECT * FROM transitions WHERE {clause} AND id>? ORDER BY id DESC LIMIT ?",
                (*params, limit),
            )[::-1]
        return [
            Transition(
                IncidentState(r["from_state"]) if r["from_state"] else None,
                IncidentState(r["to_state"]),
                r["actor"],
                datetime.fromisoformat(r["at"]),
                r["reason"],
                r["id"],
            )
            for r in rows
        ]

    # -- actions ----------------------------------------------------------------------------

    def record_intent(
        self, action: RemediationAction, notifications: Sequence[Notification] = ()
    ) -> int:
        with self.db.transaction() as conn:
            insert_notifications(conn, notifications)
            cur = conn.execute(
                "INSERT INTO actions (incident_id, host, container, container_id, kind,"
                " requested_at, reason, attempt, outcome, detail, finished_at, extra, record,"
                " successor, replaced) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    action.incident_id,
                    action.host,
                    action.container,
                    action.container_id,
                    action.kind,
                    to_text(action.requested_at),
                    action.reason,
                    action.attempt,
                    action.outcome and str(action.outcome),
                    action.detail,
                    to_text(action.finished_at),
                    json.dumps(action.extra),
                    action.record,
                    action.successor,
                    action.replaced,
                ),
            )
            return int(cur.lastrowid or 0)

    def record_outcome(
        self,
        action_id: int,
        outcome: Outcome,
        detail: str,
        finished_at: datetime,
        notifications: Sequence[Notification] = (),
        successor: str = "",
    ) -> None:
        with self.db.transaction() as conn:
            insert_notifications(conn, notifications)
            conn.execute(
                "UPDATE actions SET outcome=?, detail=?, finished_at=?,"
                " successor=CASE WHEN ?='' THEN successor ELSE ? END WHERE id=?",
                (str(outcome), detail, to_text(finished_at), successor, successor, action_id),
            )

    def actions(
        self,
        host: str,
        container: str | None = None,
        since: datetime | None = None,
        *,
        incident: int | None = None,
        limit: int | None = None,
    ) -> list[RemediationAction]:
        clause, params = where(
            ("host=?", host),
            ("container=?", container),
            ("requested_at>=?", to_text(since)),
            ("incident_id=?", incident),
        )
        if limit is None:
            rows = self.db.query(f"SELECT * FROM actions WHERE {clause} ORDER BY id", params)
        else:  # the newest `limit`, still oldest first
            rows = self.db.query(
                f"SELECT * FROM actions WHERE {clause} ORDER BY id DESC LIMIT ?", (*params, limit)
            )[::-1]
        return [action_row(r) for r in rows]

    def last_action(self, incident_id: int) -> RemediationAction | None:
        rows = self.db.query(
            "SELECT * FROM actions WHERE incident_id=? ORDER BY id DESC LIMIT 1", (incident_id,)
        )
        return action_row(rows[0]) if rows else None

    def unfinished_actions(self, host: str) -> list[RemediationAction]:
        rows = self.db.query(
            "SELECT * FROM actions WHERE host=? AND (outcome IS NULL OR outcome='restarted')"
            " ORDER BY id",
            (host,),
        )
        return [action_row(r) for r in rows]

    def unanswered_restarts(self, host: str) -> list[RemediationAction]:
        # An `unknown` verdict (seen healthy, the restart unconfirmed) is reached: not asked.
        rows = self.db.query(
            "SELECT * FROM actions WHERE outcome=? AND detail!=? AND id IN (SELECT MAX(id)"
            " FROM actions WHERE host=? AND kind=? GROUP BY container_id) ORDER BY id",
            (str(Outcome.UNKNOWN), UNCONFIRMED, host, str(ActionKind.RESTART)),
        )
        return [action_row(r) for r in rows]

    def restart_times(
        self,
        host: str,
        since: datetime,
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        clause, params = where(
            ("host=?", host),
            ("requested_at>?", to_text(since)),
            ("container=?", container),
            ("container_id=?", container_id),
        )
        rows = self.db.query(
            f"SELECT requested_at FROM actions WHERE {clause} AND kind=?"
            " AND (outcome IS NULL OR outcome!=?)",
            (*params, str(ActionKind.RESTART), str(Outcome.WITHDRAWN)),
        )
        return tuple(datetime.fromisoformat(r[0]) for r in rows)

    def last_reset(self, host: str, container: str) -> datetime | None:
        rows = self.db.query(
            "SELECT reset_at FROM counter_resets WHERE host=? AND container=?", (host, container)
        )
        return datetime.fromisoformat(rows[0][0]) if rows else None

    def first_restart_after_reset(self, host: str, container: str) -> datetime | None:
        # (+a.kind: the container's own actions by its index, not every restart of the host.)
        rows = self.db.query(
            "SELECT MIN(a.requested_at) FROM counter_resets r JOIN actions a"
            " ON a.id > r.after_action AND a.host=r.host AND a.container=r.container"
            " WHERE r.host=? AND r.container=? AND +a.kind=?",
            (host, container, str(ActionKind.RESTART)),
        )
        return from_text(rows[0][0]) if rows else None

    def record_reset(self, host: str, container: str, at: datetime) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO counter_resets (host, container, reset_at, after_action)"
                " VALUES (?,?,?,(SELECT COALESCE(MAX(id), 0) FROM actions))"
                " ON CONFLICT(host, container) DO UPDATE SET reset_at=excluded.reset_at,"
                " after_action=excluded.after_action",
                (host, container, to_text(at)),
            )

    def history(
        self, host: str, since: datetime, containers: Collection[str] | None = None
    ) -> History:
        return read_history(self.db, host, since, containers)

    # -- records kept for the rollback rung (adapters/sqlite/kept.py) -----------------------

    def kept_records(self, host: str, name: str) -> list[Kept]:
        return kept.of_name(self.db, host, name)

    def keep_record(self, host: str, record: Kept) -> None:
        kept.keep(self.db, host, record)

    def touch_kept(self, host: str, name: str, container_id: str, at: datetime) -> bool:
        return kept.touch(self.db, host, name, container_id, at)

    def remembered(self, host: str, mark: str) -> datetime | None:
        rows = self.db.query("SELECT at FROM marks WHERE host=? AND name=?", (host, mark))
        return datetime.fromisoformat(rows[0][0]) if rows else None

    def remember(self, host: str, mark: str, at: datetime) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO marks (host, name, at) VALUES (?,?,?)"
                " ON CONFLICT(host, name) DO UPDATE SET at=excluded.at",
                (host, mark, to_text(at)),
            )


def _incident_fields(i: Incident) -> tuple[object, ...]:
    """The incident's columns as written, in the order of the INSERT's column list."""
    return (
        i.host,
        i.container,
        i.container_id,
        str(i.type),
        str(i.state),
        to_text(i.opened_at),
        to_text(i.last_seen),
        i.occurrences,
        i.detail,
        int(i.escalated),
        i.resolved_by,
        to_text(i.resolved_at),
        to_text(i.closed_at),
        i.close_reason,
        to_text(i.problem_since),
    )


def _write_incident(
    conn: sqlite3.Connection, change: IncidentChange, fields: tuple[object, ...]
) -> int:
    """Insert the incident, or update it (only its detection columns when no transition comes
    with the change); its id."""
    i = change.incident
    if i.id is None:
        cur = conn.execute(
            "INSERT INTO incidents (host, container, container_id, type, state, opened_at,"
            " last_seen, occurrences, detail, escalated, resolved_by, resolved_at,"
            " closed_at, close_reason, problem_since)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            fields,
        )
        incident_id = int(cur.lastrowid or 0)
    elif not change.transitions:
        # A detection update (occurrences, last_seen, escalation, the problem's start)
        # never touches the state: a person may have acknowledged or resolved the
        # incident since it was read.
        incident_id = i.id
        conn.execute(
            "UPDATE incidents SET container_id=?, last_seen=?, occurrences=?, detail=?,"
            " escalated=?, problem_since=? WHERE id=?",
            (
                i.container_id,
                to_text(i.last_seen),
                i.occurrences,
                i.detail,
                int(i.escalated),
                to_text(i.problem_since),
                i.id,
            ),
        )
    else:
        incident_id = i.id
        conn.execute(
            "UPDATE incidents SET host=?, container=?, container_id=?, type=?, state=?,"
            " opened_at=?, last_seen=?, occurrences=?, detail=?, escalated=?,"
            " resolved_by=?, resolved_at=?, closed_at=?, close_reason=?, problem_since=?"
            " WHERE id=?",
            (*fields, incident_id),
        )
    return incident_id
