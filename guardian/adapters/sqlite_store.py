"""SqliteStore: incidents, their transitions and remediation actions in SQLite (WAL).

Survives kill -9: every write is one transaction, intent rows are written before acting, and a
partial unique index makes "one open incident per (host, container, type)" a database fact.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from guardian.adapters.sqlite_operator import OperatorQueries
from guardian.adapters.sqlite_outbox import insert_notifications, withdraw_unsent
from guardian.adapters.sqlite_retention import Pruned, prune
from guardian.adapters.sqlite_schema import (
    MIGRATIONS,
    action_row,
    incident_row,
    to_text,
)
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    RemediationAction,
    Transition,
)
from guardian.core.notifications import Notification, with_incident
from guardian.ports import StoreError

_LEFT_ALONE = "; the file was left untouched for inspection (move it away to start afresh)"


class SqliteStore(OperatorQueries):
    """The Store port over one SQLite file; safe to share between the daemon's threads."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not os.access(self.path.parent, os.W_OK):
                # SQLite would only say "unable to open database file" (WAL needs the directory).
                raise StoreError(
                    f"store {self.path}: state directory {self.path.parent} is not writable"
                    " (read-only file system or missing permission)"
                )
            self._db = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                check_same_thread=False,
                isolation_level=None,
            )
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._check_intact()
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path}: {exc}{_LEFT_ALONE}") from None
        except OSError as exc:
            raise StoreError(
                f"store {self.path}: cannot create state directory {self.path.parent}: "
                f"{exc.strerror or exc}"
            ) from None

    def _check_intact(self) -> None:
        """Refuse a damaged file before writing anything to it; never replace it silently."""
        problems = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            self._db.close()
            raise StoreError(
                f"store {self.path}: database is corrupt ({'; '.join(problems)[:200]}){_LEFT_ALONE}"
            )

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """sqlite3 errors at run time (disk full, locked, closed) become StoreError."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.path}: {exc}") from None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translated():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock, self._translated():
            return list(self._db.execute(sql, params))

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(
                f"store {self.path}: schema version {version} is newer than this Guardian "
                f"understands ({len(MIGRATIONS)}); upgrade Guardian"
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            with self._tx() as db:
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    @property
    def schema_version(self) -> int:
        return int(self._query("PRAGMA user_version")[0][0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def withdraw_unsent(self, host: str) -> int:
        with self._tx() as db:
            return withdraw_unsent(db, host)

    def prune(self, before: datetime) -> Pruned:
        """Forget incidents that ended before `before`, with their history (sqlite_retention)."""
        return prune(self, before)

    # -- incidents --------------------------------------------------------------------------

    def current_incident(self, host: str, container: str, kind: ProblemType) -> Incident | None:
        rows = self._query(
            "SELECT * FROM incidents WHERE host=? AND container=? AND type=? AND state!='closed'",
            (host, container, str(kind)),
        )
        return incident_row(rows[0]) if rows else None

    def open_incidents(self, host: str, container: str | None = None) -> list[Incident]:
        sql = "SELECT * FROM incidents WHERE host=? AND state!='closed'"
        params: tuple[Any, ...] = (host,)
        if container is not None:
            sql, params = sql + " AND container=?", (host, container)
        return [incident_row(r) for r in self._query(sql + " ORDER BY id", params)]

    def get_incident(self, incident_id: int) -> Incident | None:
        rows = self._query("SELECT * FROM incidents WHERE id=?", (incident_id,))
        return incident_row(rows[0]) if rows else None

    def save_incident(
        self, change: IncidentChange, notifications: Sequence[Notification] = ()
    ) -> Incident:
        """Write the incident, its transitions and the notifications it causes in ONE
        transaction; the notifications get the incident's id."""
        i = change.incident
        fields = (
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
        )
        with self._tx() as db:
            if i.id is None:
                cur = db.execute(
                    "INSERT INTO incidents (host, container, container_id, type, state, opened_at,"
                    " last_seen, occurrences, detail, escalated, resolved_by, resolved_at,"
                    " closed_at, close_reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    fields,
                )
                incident_id = int(cur.lastrowid or 0)
            elif not change.transitions:
                # A detection update (occurrences, last_seen, escalation) never touches the state:
                # a person may have acknowledged or resolved the incident since it was read.
                incident_id = i.id
                db.execute(
                    "UPDATE incidents SET container_id=?, last_seen=?, occurrences=?, detail=?,"
                    " escalated=? WHERE id=?",
                    (
                        i.container_id,
                        to_text(i.last_seen),
                        i.occurrences,
                        i.detail,
                        int(i.escalated),
                        i.id,
                    ),
                )
            else:
                incident_id = i.id
                db.execute(
                    "UPDATE incidents SET host=?, container=?, container_id=?, type=?, state=?,"
                    " opened_at=?, last_seen=?, occurrences=?, detail=?, escalated=?,"
                    " resolved_by=?, resolved_at=?, closed_at=?, close_reason=? WHERE id=?",
                    (*fields, incident_id),
                )
            for t in change.transitions:
                db.execute(
                    "INSERT INTO transitions (incident_id, from_state, to_state, actor, at, reason)"
                    " VALUES (?,?,?,?,?,?)",
                    (
                        incident_id,
                        t.from_state and str(t.from_state),
                        str(t.to_state),
                        t.actor,
                        to_text(t.at),
                        t.reason,
                    ),
                )
            saved = incident_row(
                db.execute("SELECT * FROM incidents WHERE id=?", (incident_id,)).fetchone()
            )
            insert_notifications(db, [with_incident(n, saved) for n in notifications])
        return saved

    def transitions(self, incident_id: int) -> list[Transition]:
        rows = self._query(
            "SELECT * FROM transitions WHERE incident_id=? ORDER BY id", (incident_id,)
        )
        return [
            Transition(
                IncidentState(r["from_state"]) if r["from_state"] else None,
                IncidentState(r["to_state"]),
                r["actor"],
                datetime.fromisoformat(r["at"]),
                r["reason"],
            )
            for r in rows
        ]

    # -- actions ----------------------------------------------------------------------------

    def record_intent(
        self, action: RemediationAction, notifications: Sequence[Notification] = ()
    ) -> int:
        with self._tx() as db:
            insert_notifications(db, notifications)
            cur = db.execute(
                "INSERT INTO actions (incident_id, host, container, container_id, kind,"
                " requested_at, reason, attempt, outcome, detail, finished_at, extra)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
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
    ) -> None:
        with self._tx() as db:
            insert_notifications(db, notifications)
            db.execute(
                "UPDATE actions SET outcome=?, detail=?, finished_at=? WHERE id=?",
                (str(outcome), detail, to_text(finished_at), action_id),
            )

    def actions(
        self, host: str, container: str | None = None, since: datetime | None = None
    ) -> list[RemediationAction]:
        sql, params = "SELECT * FROM actions WHERE host=?", [host]
        if container is not None:
            sql += " AND container=?"
            params.append(container)
        if since is not None:
            sql += " AND requested_at>=?"
            params.append(to_text(since) or "")
        return [action_row(r) for r in self._query(sql + " ORDER BY id", tuple(params))]

    def last_action(self, incident_id: int) -> RemediationAction | None:
        rows = self._query(
            "SELECT * FROM actions WHERE incident_id=? ORDER BY id DESC LIMIT 1", (incident_id,)
        )
        return action_row(rows[0]) if rows else None

    def unfinished_actions(self, host: str) -> list[RemediationAction]:
        rows = self._query(
            "SELECT * FROM actions WHERE host=? AND (outcome IS NULL OR outcome='restarted')"
            " ORDER BY id",
            (host,),
        )
        return [action_row(r) for r in rows]

    def restart_times(
        self, host: str, since: datetime, container: str | None = None
    ) -> tuple[datetime, ...]:
        sql = "SELECT requested_at FROM actions WHERE host=? AND kind='restart' AND requested_at>?"
        params: tuple[Any, ...] = (host, to_text(since))
        if container is not None:
            sql, params = sql + " AND container=?", (*params, container)
        return tuple(datetime.fromisoformat(r[0]) for r in self._query(sql, params))

    def last_reset(self, host: str, container: str) -> datetime | None:
        rows = self._query(
            "SELECT reset_at FROM counter_resets WHERE host=? AND container=?", (host, container)
        )
        return datetime.fromisoformat(rows[0][0]) if rows else None

    def record_reset(self, host: str, container: str, at: datetime) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO counter_resets (host, container, reset_at) VALUES (?,?,?)"
                " ON CONFLICT(host, container) DO UPDATE SET reset_at=excluded.reset_at",
                (host, container, to_text(at)),
            )
