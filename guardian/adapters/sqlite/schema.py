"""The SQLite schema of Guardian's store (migrations), the mapping of its rows to values and
the one writer of transitions (the daemon's and a person's changes both go through it).

Append a new entry to MIGRATIONS for every schema change; never edit one that was released.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime

from guardian.core.model import (
    Approval,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    RecordedEvent,
    RemediationAction,
    RollbackRequest,
    Silence,
    Transition,
)

# The events feed's table, the cursor up to which retention forgot them (`through`, with the
# cut-off it used), and the time index the cursor of a time is found by.
_EVENTS_TABLE = """
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL,
        container TEXT NOT NULL, incident_id INTEGER, fields TEXT NOT NULL
    );
    CREATE INDEX events_at ON events(at);
    CREATE TABLE events_forgotten (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        through INTEGER NOT NULL, cutoff TEXT NOT NULL
    );
"""

# Each kind of event: its source table, the columns host, kind, at, container, incident_id,
# fields of the row `{n}`, and the condition on the row. A trigger reads NEW, the backfill each
# row held, so an event told at once and one the migration told read the same. A person's
# answer is an approval event, not also the action row that shows it in the timeline. No
# event can fail its write: every column it fills has a value whatever the row holds. These
# build migration 10: never edit them, append a new migration.
_KINDS: dict[str, tuple[str, str, str]] = {
    "transition": (
        "transitions",
        """COALESCE((SELECT host FROM incidents WHERE id = {n}.incident_id), ''),
        CASE WHEN {n}.from_state IS NULL THEN 'incident.opened' ELSE 'incident.changed' END,
        {n}.at, COALESCE((SELECT container FROM incidents WHERE id = {n}.incident_id), ''),
        {n}.incident_id,
        json_object('type', (SELECT type FROM incidents WHERE id = {n}.incident_id),
                    'from', {n}.from_state, 'to', {n}.to_state,
                    'actor', {n}.actor, 'reason', {n}.reason)""",
        "1",
    ),
    "requested": (
        "actions",
        """{n}.host, 'action.requested', {n}.requested_at, {n}.container, {n}.incident_id,
        json_object('action', {n}.id, 'kind', {n}.kind, 'attempt', {n}.attempt,
                    'reason', {n}.reason)""",
        "{n}.kind != 'approval'",
    ),
    "outcome": (
        "actions",
        """{n}.host, 'action.outcome', COALESCE({n}.finished_at, {n}.requested_at),
        {n}.container, {n}.incident_id,
        json_object('action', {n}.id, 'kind', {n}.kind, 'attempt', {n}.attempt,
                    'outcome', {n}.outcome, 'detail', {n}.detail)""",
        "{n}.outcome IS NOT NULL AND {n}.kind != 'approval'",
    ),
    "answered": (
        "approvals",
        """{n}.host, CASE WHEN {n}.approved THEN 'approval.given' ELSE 'approval.denied' END,
        {n}.created_at, {n}.container, {n}.incident_id,
        json_object('approval', {n}.id, 'by', {n}.by, 'reason', {n}.reason,
                    'expires_at', {n}.expires_at)""",
        "1",
    ),
    "used": (
        "approvals",
        """{n}.host, 'approval.used', {n}.used_at, {n}.container, {n}.incident_id,
        json_object('approval', {n}.id)""",
        "{n}.used_at IS NOT NULL",
    ),
    "lifted": (
        "silences",
        """{n}.host, 'silence.lifted', {n}.ended_at, {n}.container, NULL,
        json_object('silence', {n}.id, 'until', {n}.until, 'by', {n}.ended_by)""",
        "{n}.ended_at IS NOT NULL",
    ),
    "set": (
        "silences",
        """{n}.host, 'silence.set', {n}.created_at, {n}.container, NULL,
        json_object('silence', {n}.id, 'until', {n}.until, 'reason', {n}.reason,
                    'by', {n}.created_by)""",
        "1",
    ),
}
# One trigger per write, its kinds in the order they happened (one trigger, not two, for the
# two kinds of an action written whole: SQLite does not promise an order between triggers).
_TRIGGERS = (
    ("transition", "AFTER INSERT ON transitions", ("transition",)),
    ("action", "AFTER INSERT ON actions", ("requested", "outcome")),
    ("outcome", "AFTER UPDATE OF outcome, finished_at ON actions", ("outcome",)),
    ("answer", "AFTER INSERT ON approvals", ("answered",)),
    ("use", "AFTER UPDATE OF used_at ON approvals", ("used",)),
    ("silence", "AFTER INSERT ON silences", ("set",)),
    ("lift", "AFTER UPDATE OF ended_at ON silences", ("lifted",)),
)
_INTO = "INSERT INTO events (host, kind, at, container, incident_id, fields)"


def _triggers() -> str:
    def insert(kind: str) -> str:
        _, columns, condition = _KINDS[kind]
        return f"{_INTO} SELECT {columns.format(n='NEW')} WHERE {condition.format(n='NEW')};"

    return "".join(
        f"CREATE TRIGGER events_{name} {when} BEGIN {' '.join(map(insert, kinds))} END;"
        for name, when, kinds in _TRIGGERS
    )


def _backfill() -> str:
    """What the store held before migration 10, told in the order of its times (and, at one
    time, in the order of the kinds above: a request before its outcome, a silence replaced
    before its successor)."""
    held = " UNION ALL ".join(
        f"SELECT {columns.format(n='s')}, {rank}, s.id FROM {table} s"
        f" WHERE {condition.format(n='s')}"
        for rank, (table, columns, condition) in enumerate(_KINDS.values())
    )
    return (
        f"WITH held(host, kind, at, container, incident_id, fields, rank, source) AS ({held})"
        f" {_INTO} SELECT host, kind, at, container, incident_id, fields FROM held"
        " ORDER BY at, rank, source;"
    )


# Each entry moves the schema one version up; never edit a released entry, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE incidents (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL, container TEXT NOT NULL, container_id TEXT NOT NULL,
        type TEXT NOT NULL, state TEXT NOT NULL,
        opened_at TEXT NOT NULL, last_seen TEXT NOT NULL,
        occurrences INTEGER NOT NULL DEFAULT 1, detail TEXT NOT NULL DEFAULT '',
        escalated INTEGER NOT NULL DEFAULT 0,
        resolved_by TEXT, resolved_at TEXT, closed_at TEXT, close_reason TEXT
    );
    CREATE UNIQUE INDEX incidents_one_open ON incidents(host, container, type)
        WHERE state != 'closed';
    CREATE TABLE transitions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        incident_id INTEGER NOT NULL REFERENCES incidents(id),
        from_state TEXT, to_state TEXT NOT NULL,
        actor TEXT NOT NULL, at TEXT NOT NULL, reason TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX transitions_incident ON transitions(incident_id);
    CREATE TABLE actions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        incident_id INTEGER REFERENCES incidents(id),
        host TEXT NOT NULL, container TEXT NOT NULL, container_id TEXT NOT NULL,
        kind TEXT NOT NULL, requested_at TEXT NOT NULL, reason TEXT NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 0,
        outcome TEXT, detail TEXT NOT NULL DEFAULT '', finished_at TEXT,
        extra TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX actions_container ON actions(host, container, requested_at);
    CREATE INDEX actions_incident ON actions(incident_id);
    CREATE TABLE counter_resets (
        host TEXT NOT NULL, container TEXT NOT NULL, reset_at TEXT NOT NULL,
        PRIMARY KEY (host, container)
    );
    """,
    # 2: maintenance silences (guardian silence / unsilence, POST /api/v1/silences).
    """
    CREATE TABLE silences (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL, container TEXT NOT NULL,
        created_at TEXT NOT NULL, until TEXT NOT NULL,
        reason TEXT NOT NULL, created_by TEXT NOT NULL,
        ended_at TEXT, ended_by TEXT
    );
    CREATE INDEX silences_container ON silences(host, container, until);
    """,
    # 3: the notification outbox (written with the event that causes it), per-channel delivery
    # state, dead letters, and per-channel references (Slack thread ts, firing alerts).
    """
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        incident_id INTEGER REFERENCES incidents(id),
        kind TEXT NOT NULL, payload TEXT NOT NULL, created_at TEXT NOT NULL,
        dispatched INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX outbox_undispatched ON outbox(dispatched) WHERE dispatched = 0;
    CREATE INDEX outbox_incident ON outbox(incident_id, kind);
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        outbox_id INTEGER NOT NULL REFERENCES outbox(id),
        channel TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at TEXT NOT NULL,
        last_error TEXT NOT NULL DEFAULT '', finished_at TEXT,
        UNIQUE (outbox_id, channel)
    );
    CREATE INDEX deliveries_pending ON deliveries(channel, state);
    CREATE VIEW dead_letters AS
        SELECT d.id, d.channel, d.attempts, d.last_error, d.finished_at,
               o.id AS outbox_id, o.incident_id, o.kind, o.payload, o.created_at
        FROM deliveries d JOIN outbox o ON o.id = d.outbox_id WHERE d.state = 'dead';
    CREATE TABLE notify_refs (
        channel TEXT NOT NULL, incident_id INTEGER NOT NULL, ref TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (channel, incident_id)
    );
    """,
    # 4: a person's answers to restarts that wait for approval (guardian.action=ask).
    """
    CREATE TABLE approvals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        incident_id INTEGER NOT NULL REFERENCES incidents(id),
        host TEXT NOT NULL, container TEXT NOT NULL,
        approved INTEGER NOT NULL, by TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL, expires_at TEXT NOT NULL, used_at TEXT
    );
    CREATE INDEX approvals_incident ON approvals(incident_id);
    """,
    # 5: what is in force found without reading the history it is kept with (90 days by
    # default): the silences not lifted, by the time they end; the dead letters among every
    # delivery.
    """
    CREATE INDEX silences_in_force ON silences(host, until) WHERE ended_at IS NULL;
    CREATE INDEX deliveries_dead ON deliveries(id) WHERE state = 'dead';
    """,
    # 6: since when an incident's problem lasts (restart.act_after counts from it): the engine
    # keeps only its last five health probes, so the start is kept here; NULL for the rows
    # written before, whose opening stands in.
    """
    ALTER TABLE incidents ADD COLUMN problem_since TEXT;
    """,
    # 7: marks: how far the store's record reaches (the last sweep that could write it), the
    # last engine event handled (replayed from there at the next start).
    """
    CREATE TABLE marks (
        host TEXT NOT NULL, name TEXT NOT NULL, at TEXT NOT NULL,
        PRIMARY KEY (host, name)
    );
    """,
    # 8: the host's restarts of the last minute (its budget, read at every decision) found by
    # time, without reading every action the history keeps.
    """
    CREATE INDEX actions_host_kind ON actions(host, kind, requested_at);
    """,
    # 9: the escalation ladder's recreate (docs/design.md rule 20): the container's whole record
    # (its inspect, as JSON) written with the intent, before the removal, so a crash between the
    # removal and the create leaves what the next start creates it from; and the new
    # container's id with the outcome, so the recreated container keeps its budget.
    """
    ALTER TABLE actions ADD COLUMN record TEXT NOT NULL DEFAULT '';
    ALTER TABLE actions ADD COLUMN successor TEXT NOT NULL DEFAULT '';
    """,
    # 10: the events feed (GET /api/v1/events): one row per thing recorded, its `seq` the
    # cursor. Triggers write it in the transaction of the write they tell of, so a crash keeps
    # both or neither, and an outcome that updates its action's row is a new row here. What
    # was held before is told first, in the order of its times.
    _EVENTS_TABLE + _backfill() + _triggers(),
    # 11: maintenance windows' runs (the events feed's maintenance.started and .ended): one
    # row per run of a window, written when Guardian first sees it in force (one row however
    # often a restart sees it again), its end when Guardian sees it over. No backfill: the
    # store held no windows before.
    """
    CREATE TABLE maintenance (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL, name TEXT NOT NULL, containers TEXT NOT NULL,
        schedule TEXT NOT NULL, started_at TEXT NOT NULL, until TEXT NOT NULL, ended_at TEXT
    );
    CREATE UNIQUE INDEX maintenance_run ON maintenance(host, name, containers, schedule,
        started_at);
    CREATE INDEX maintenance_open ON maintenance(host) WHERE ended_at IS NULL;
    CREATE TRIGGER events_maintenance AFTER INSERT ON maintenance BEGIN
        INSERT INTO events (host, kind, at, container, incident_id, fields)
        SELECT NEW.host, 'maintenance.started', NEW.started_at, '', NULL,
        json_object('maintenance', NEW.id, 'window', NEW.name, 'containers', NEW.containers,
                    'schedule', NEW.schedule, 'until', NEW.until);
    END;
    CREATE TRIGGER events_maintenance_end AFTER UPDATE OF ended_at ON maintenance
        WHEN OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL BEGIN
        INSERT INTO events (host, kind, at, container, incident_id, fields)
        SELECT NEW.host, 'maintenance.ended', NEW.ended_at, '', NULL,
        json_object('maintenance', NEW.id, 'window', NEW.name, 'containers', NEW.containers,
                    'schedule', NEW.schedule, 'started_at', NEW.started_at);
    END;
    """,
    # 12: a container's silence in force found among its silences not lifted only: by
    # silences_container, setting or lifting one read every silence of the container that
    # ends later (each of the last hour's, for one toggled by a script).
    """
    CREATE INDEX silences_open ON silences(host, container, until) WHERE ended_at IS NULL;
    """,
    # 13: the ladder's rollback (docs/restarts.md): the records of a name that ran healthy, and
    # those a rollback left (failed_at), each the container's whole inspect (private as a
    # recreate's record) with its size, at most a few per name and a budget of bytes in all;
    # and a rollback's replaced record, written with its intent beside the record it creates.
    """
    ALTER TABLE actions ADD COLUMN replaced TEXT NOT NULL DEFAULT '';
    CREATE TABLE kept_records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL, name TEXT NOT NULL, digest TEXT NOT NULL,
        image_id TEXT NOT NULL, image_ref TEXT NOT NULL, container_id TEXT NOT NULL,
        project TEXT NOT NULL, service TEXT NOT NULL, created TEXT, seen_at TEXT NOT NULL,
        healthy_at TEXT, failed_at TEXT, record TEXT NOT NULL, size INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX kept_records_digest ON kept_records(host, name, digest);
    CREATE INDEX kept_records_seen ON kept_records(seen_at);
    """,
    # 14: a person's rollback (guardian rollback NAME, POST .../rollback): who asked, why, to
    # which record of the name (its digest), until when (restart.approval_ttl), used once by a
    # compare-and-set on used_at. The events feed tells each request (rollback.requested); the
    # rollback it makes is an action as the ladder's.
    """
    CREATE TABLE rollback_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL, container TEXT NOT NULL, container_id TEXT NOT NULL,
        digest TEXT NOT NULL, image_id TEXT NOT NULL, image_ref TEXT NOT NULL,
        by TEXT NOT NULL, reason TEXT NOT NULL, created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL, used_at TEXT
    );
    CREATE INDEX rollback_requests_open ON rollback_requests(host, expires_at)
        WHERE used_at IS NULL;
    CREATE TRIGGER events_rollback AFTER INSERT ON rollback_requests BEGIN
        INSERT INTO events (host, kind, at, container, incident_id, fields)
        SELECT NEW.host, 'rollback.requested', NEW.created_at, NEW.container, NULL,
        json_object('request', NEW.id, 'by', NEW.by, 'reason', NEW.reason,
                    'image', NEW.image_ref, 'image_id', NEW.image_id,
                    'expires_at', NEW.expires_at);
    END;
    """,
    # 15: a counter reset's place among the actions (the last action's id when it was
    # written): a restart written after it counts after it whatever its stamp says (the wall
    # clock may have stepped back in between). NULL for resets written before: their stamp only.
    """
    ALTER TABLE counter_resets ADD COLUMN after_action INTEGER;
    """,
)


def to_text(value: datetime | None) -> str | None:
    return value.isoformat(timespec="microseconds") if value is not None else None


def from_text(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def insert_transitions(
    conn: sqlite3.Connection, incident_id: int, transitions: Iterable[Transition]
) -> None:
    """Append `transitions` to the history of an incident, inside the caller's transaction."""
    for t in transitions:
        conn.execute(
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


def incident_row(row: sqlite3.Row) -> Incident:
    return Incident(
        id=row["id"],
        host=row["host"],
        container=row["container"],
        container_id=row["container_id"],
        type=ProblemType(row["type"]),
        state=IncidentState(row["state"]),
        opened_at=datetime.fromisoformat(row["opened_at"]),
        last_seen=datetime.fromisoformat(row["last_seen"]),
        occurrences=row["occurrences"],
        detail=row["detail"],
        escalated=bool(row["escalated"]),
        resolved_by=row["resolved_by"],
        resolved_at=from_text(row["resolved_at"]),
        closed_at=from_text(row["closed_at"]),
        close_reason=row["close_reason"],
        problem_since=from_text(row["problem_since"]),
    )


def action_row(row: sqlite3.Row) -> RemediationAction:
    return RemediationAction(
        id=row["id"],
        incident_id=row["incident_id"],
        host=row["host"],
        container=row["container"],
        container_id=row["container_id"],
        kind=row["kind"],
        requested_at=datetime.fromisoformat(row["requested_at"]),
        reason=row["reason"],
        outcome=Outcome(row["outcome"]) if row["outcome"] else None,
        detail=row["detail"],
        finished_at=from_text(row["finished_at"]),
        attempt=row["attempt"],
        extra=json.loads(row["extra"]),
        record=row["record"],
        successor=row["successor"],
        replaced=row["replaced"],
    )


def silence_row(row: sqlite3.Row) -> Silence:
    return Silence(
        id=row["id"],
        host=row["host"],
        container=row["container"],
        created_at=datetime.fromisoformat(row["created_at"]),
        until=datetime.fromisoformat(row["until"]),
        reason=row["reason"],
        created_by=row["created_by"],
        ended_at=from_text(row["ended_at"]),
        ended_by=row["ended_by"],
    )


def approval_row(row: sqlite3.Row) -> Approval:
    return Approval(
        id=row["id"],
        incident_id=row["incident_id"],
        host=row["host"],
        container=row["container"],
        approved=bool(row["approved"]),
        by=row["by"],
        reason=row["reason"],
        created_at=datetime.fromisoformat(row["created_at"]),
        expires_at=datetime.fromisoformat(row["expires_at"]),
        used_at=from_text(row["used_at"]),
    )


def event_row(row: sqlite3.Row) -> RecordedEvent:
    return RecordedEvent(
        cursor=row["seq"],
        kind=row["kind"],
        at=datetime.fromisoformat(row["at"]),
        container=row["container"],
        incident_id=row["incident_id"],
        fields=json.loads(row["fields"]),
    )


def rollback_request_row(row: sqlite3.Row) -> RollbackRequest:
    return RollbackRequest(
        id=row["id"],
        host=row["host"],
        container=row["container"],
        container_id=row["container_id"],
        digest=row["digest"],
        image_id=row["image_id"],
        image_ref=row["image_ref"],
        by=row["by"],
        reason=row["reason"],
        created_at=datetime.fromisoformat(row["created_at"]),
        expires_at=datetime.fromisoformat(row["expires_at"]),
        used_at=from_text(row["used_at"]),
    )
