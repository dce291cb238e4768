"""Database: the one SQLite connection of Guardian's store, opened, checked and migrated.

It owns the connection and its lock and turns sqlite3 errors into StoreError; the store, the
outbox and retention receive it and go through `transaction()` and `query()`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from guardian.adapters.private_files import private_dirs, private_file
from guardian.adapters.sqlite.schema import MIGRATIONS
from guardian.ports import StoreError

_LEFT_ALONE = "; the file was left untouched for inspection (move it away to start afresh)"


def where(*conditions: tuple[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The conditions whose value is not None, joined by AND, with their parameters: how a
    query takes optional filters, e.g. `where(("host=?", host), ("container=?", None))`."""
    kept = [(sql, value) for sql, value in conditions if value is not None]
    return " AND ".join(sql for sql, _ in kept), tuple(value for _, value in kept)


class Database:
    """One SQLite file in WAL mode; safe to share between the daemon's threads."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = 10_000) -> None:
        """Open (creating it and its directory if need be), check and migrate the file at
        `path`. Raises StoreError, naming the file, when it cannot be used."""
        self.path = Path(path)
        self._lock = threading.RLock()
        self._outbox_listeners: list[Callable[[], object]] = []
        self._outbox_written = False  # by the transaction in progress (under the lock)
        try:
            # Incidents quote what containers print: nobody else on the host reads them.
            private_dirs(self.path.parent)
            if not os.access(self.path.parent, os.W_OK):
                # SQLite would only say "unable to open database file" (WAL needs the directory).
                raise StoreError(
                    f"store {self.path}: state directory {self.path.parent} is not writable"
                    " (read-only file system or missing permission)"
                )
            if str(path) != ":memory:":
                private_file(self.path)
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                check_same_thread=False,
                isolation_level=None,
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._check_intact()
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
            self._watch_outbox()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path}: {exc}{_LEFT_ALONE}") from None
        except OSError as exc:
            raise StoreError(
                f"store {self.path}: cannot create state directory {self.path.parent}: "
                f"{exc.strerror or exc}"
            ) from None

    def _check_intact(self) -> None:
        """Refuse a damaged file before writing anything to it; never replace it silently."""
        problems = [str(r[0]) for r in self._conn.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            self._conn.close()
            raise StoreError(
                f"store {self.path}: database is corrupt ({'; '.join(problems)[:200]}){_LEFT_ALONE}"
            )

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(
                f"store {self.path}: schema version {version} is newer than this Guardian "
                f"understands ({len(MIGRATIONS)}); upgrade Guardian"
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.transaction() as conn:
                for statement in _statements(script):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")

    def _watch_outbox(self) -> None:
        """Note every row added to the outbox, whichever statement adds it: a temporary trigger
        (this connection only, never stored in the file) calls back into Python."""

        def written() -> None:
            self._outbox_written = True

        self._conn.create_function("guardian_outbox_written", 0, written, deterministic=False)
        self._conn.execute(
            "CREATE TEMP TRIGGER IF NOT EXISTS outbox_written AFTER INSERT ON main.outbox"
            " BEGIN SELECT guardian_outbox_written(); END"
        )
        self._conn.execute(
            "CREATE TEMP TRIGGER IF NOT EXISTS outbox_released AFTER UPDATE OF dispatched"
            " ON main.outbox WHEN NEW.dispatched = 0 BEGIN SELECT guardian_outbox_written(); END"
        )

    def on_outbox_written(self, listener: Callable[[], object]) -> None:
        """Call `listener` after each transaction that added outbox rows or released held ones,
        once it committed (so whoever it wakes sees the rows). Rows another process writes are
        not seen here."""
        with self._lock:
            self._outbox_listeners.append(listener)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """sqlite3 errors at run time (disk full, locked, closed) become StoreError."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.path}: {exc}") from None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE) holding the lock: committed when the block
        ends, rolled back when it raises. sqlite3 errors leave it as StoreError."""
        with self._lock, self._translated():
            self._conn.execute("BEGIN IMMEDIATE")
            self._outbox_written = False
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
                if self._outbox_written:
                    for listener in self._outbox_listeners:
                        listener()
            finally:
                self._outbox_written = False

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction holding the lock: every statement in the block reads one snapshot
        of the file (the first statement takes it), and may write this connection's temporary
        tables. Ended when the block ends; sqlite3 errors leave it as StoreError."""
        with self._lock, self._translated():
            self._conn.execute("BEGIN DEFERRED")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """The rows of one statement, read outside any transaction; errors as StoreError."""
        with self._lock, self._translated():
            return list(self._conn.execute(sql, params))

    @property
    def schema_version(self) -> int:
        return int(self.query("PRAGMA user_version")[0][0])

    def trace(self, callback: Callable[[str], object] | None) -> None:
        """Call `callback` with every statement run from now on (None stops); for tests that
        count what a code path asks of the store."""
        with self._lock:
            self._conn.set_trace_callback(callback)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _statements(script: str) -> list[str]:
    """The statements of a migration, each whole: a trigger's body holds semicolons of its own."""
    statements: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip().strip(";").strip():
                statements.append(pending)
            pending = ""
    return statements
