"""Helpers for the issue-7 integration tests: an isolated watch label and store queries.

The engine is shared with other test runs: these tests watch only containers carrying a label
of their own, so another run's containers never count towards a storm or get probed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import RUN_ID

WATCH = f"gdt.watch.{RUN_ID}"
HEALTH = "test ! -f /run/sick"


def watched(**labels: str) -> dict[str, str]:
    return {WATCH: "true", **labels}


def rows(db: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, params)]
    finally:
        con.close()


def incidents(db: Path, container: str | None = None, kind: str | None = None) -> list[dict]:
    sql, params = "SELECT * FROM incidents WHERE 1=1", []
    if container is not None:
        sql, params = sql + " AND container=?", [*params, container]
    if kind is not None:
        sql, params = sql + " AND type=?", [*params, kind]
    return rows(db, sql + " ORDER BY id", *params)


def actions(db: Path, container: str | None = None) -> list[dict]:
    if container is None:
        return rows(db, "SELECT * FROM actions ORDER BY id")
    return rows(db, "SELECT * FROM actions WHERE container=? ORDER BY id", container)


def exec_in(containers: Any, name: str, *cmd: str) -> None:
    api = containers.api
    api.exec_start(api.exec_create(name, list(cmd)))


def gave_up(db: Path, timeout: float = 60) -> None:
    """Wait until Guardian gave up on a container (retry_exhausted recorded)."""
    wait_until(
        lambda: rows(db, "SELECT * FROM actions WHERE outcome='retry_exhausted'"),
        timeout,
        0.2,
        "retry_exhausted",
    )
