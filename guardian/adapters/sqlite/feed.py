"""SqliteFeed: the store's change feed followed by cursor for what other processes wrote (a
`guardian` command's acknowledgement, silence or approval): the Feed port, the daemon's.

The feed is the `events` table (migration 10), one row per thing recorded, written by triggers
in the transaction of the write it tells of. A temporary trigger (this connection's alone, never
stored in the file) notes every row this connection writes there, in the writing transaction,
so a rollback forgets it with the row: every other row after the cursor is another process's.
SQLite's data_version says whether another connection committed anything at all; it is read in
the same snapshot as the feed, so a commit is either wholly before a look or wholly after it.
"""

from __future__ import annotations

import math
import sqlite3

from guardian.adapters.sqlite.db import Database
from guardian.ports import FEED_NAME, FeedRow, StoreError, WrittenElsewhere

_OWN = (
    "CREATE TEMP TABLE IF NOT EXISTS own_events (seq INTEGER PRIMARY KEY)",
    # Unqualified in the body (SQLite's rule for a trigger's statements): the temp table.
    "CREATE TEMP TRIGGER IF NOT EXISTS own_events_noted AFTER INSERT ON main.events"
    " BEGIN INSERT OR IGNORE INTO own_events (seq) VALUES (NEW.seq); END",
)
# Another process's rows of `host` after a cursor, oldest first; what each names is cut to what
# a reader may take (a longer container name is FEED_NAME + 1 long and named nowhere).
_FOREIGN = (
    "SELECT seq, substr(kind, 1, 64) AS kind,"
    f" substr(container, 1, {FEED_NAME + 1}) AS container, incident_id FROM main.events"
    " WHERE seq > ? AND host = ? AND seq NOT IN (SELECT seq FROM own_events)"
    " ORDER BY seq LIMIT ?"
)


class SqliteFeed:
    """The Feed port over one Database: the cursor and the data_version last seen, kept here,
    from the feed's end when built."""

    def __init__(self, db: Database) -> None:
        """Raises StoreError."""
        self.db = db
        self._lost = False  # a look failed after it moved the cursor: the next one says so
        with db.reading() as conn:
            for statement in _OWN:
                conn.execute(statement)
            self._version, self._cursor = _data_version(conn), _newest(conn)

    def written_elsewhere(self, host: str, limit: int) -> WrittenElsewhere:
        try:
            return self._look(host, limit)
        except StoreError:
            self._lost = True  # what it read is not told: the next look tells it as anything
            raise

    def _look(self, host: str, limit: int) -> WrittenElsewhere:
        with self.db.reading() as conn:
            version = _data_version(conn)  # takes the snapshot every statement below reads
            newest = _newest(conn)
            after, changed = self._cursor, version != self._version or self._lost
            rows: list[sqlite3.Row] = []
            whole = not self._lost
            if changed and whole and newest != after:
                # A feed that went back (a store put in its place) or forgot rows after the
                # cursor (retention) may have lost what was written.
                whole = newest > after and _forgotten_through(conn) <= after
                if whole:
                    rows = conn.execute(_FOREIGN, (after, host, limit + 1)).fetchall()
                    whole = len(rows) <= limit
            self._version, self._cursor = version, newest
            conn.execute("DELETE FROM own_events WHERE seq <= ?", (newest,))
        self._lost = False
        found = tuple(map(_row, rows)) if whole else ()
        return WrittenElsewhere(changed, found, whole)


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _newest(conn: sqlite3.Connection) -> int:
    """The last cursor handed out (retention never lowers it: AUTOINCREMENT)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='events'").fetchone()
    return int(row[0]) if row is not None and isinstance(row[0], int) else 0


def _forgotten_through(conn: sqlite3.Connection) -> float:
    """The cursor up to which retention forgot the feed (0: none; infinite: unreadable)."""
    row = conn.execute("SELECT through FROM events_forgotten").fetchone()
    if row is None:
        return 0
    return row[0] if isinstance(row[0], int) else math.inf


def _row(r: sqlite3.Row) -> FeedRow:
    """A row as typed values: a value of the wrong type makes its kind "" (not attributed)."""
    kind, container, incident = r["kind"], r["container"], r["incident_id"]
    typed = (
        isinstance(kind, str)
        and isinstance(container, str)
        and (incident is None or isinstance(incident, int))
    )
    if not typed:
        return FeedRow(int(r["seq"]), "", "", None)
    return FeedRow(int(r["seq"]), kind, container, incident)
