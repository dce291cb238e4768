"""Helpers shared by the notification integration tests."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.integration.conftest import RUN_ID

# Other test runs share the engine: these tests watch only their own run's containers.
WATCH = f"gdt.notify.{RUN_ID}"


def run(containers: Any, short: str, **kw: Any) -> str:
    return str(containers.run(short, labels={WATCH: "true"}, **kw))


def rows(db: Any, sql: str, *params: Any) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, params)]
    finally:
        con.close()
