"""Maintenance windows' runs in the store: a run's start written once (a second write of the
same run is nothing: the store's unique key), its end once; the events feed tells both
(schema migration 11's triggers)."""

from __future__ import annotations

from datetime import datetime

from guardian.adapters.sqlite.db import Database
from guardian.adapters.sqlite.schema import to_text
from guardian.core.detection.windows import MaintenancePeriod


def open_periods(db: Database, host: str) -> list[MaintenancePeriod]:
    """The runs of `host` whose end is not written, oldest first."""
    return [
        MaintenancePeriod(
            row["name"],
            row["containers"],
            row["schedule"],
            datetime.fromisoformat(row["started_at"]),
            datetime.fromisoformat(row["until"]),
            row["id"],
        )
        for row in db.query(
            "SELECT * FROM maintenance WHERE host=? AND ended_at IS NULL ORDER BY id", (host,)
        )
    ]


def start_period(db: Database, host: str, period: MaintenancePeriod) -> MaintenancePeriod:
    """`period` written (its start told in the feed), with its id; the run already written
    (another sweep, another run of Guardian) is kept as it was."""
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO maintenance (host, name, containers, schedule, started_at, until)"
            " VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            (
                host,
                period.name,
                period.containers,
                period.schedule,
                to_text(period.started_at),
                to_text(period.until),
            ),
        )
        row = conn.execute(
            "SELECT id FROM maintenance WHERE host=? AND name=? AND containers=? AND schedule=?"
            " AND started_at=?",
            (host, period.name, period.containers, period.schedule, to_text(period.started_at)),
        ).fetchone()
    return MaintenancePeriod(
        period.name, period.containers, period.schedule, period.started_at, period.until, row[0]
    )


def end_period(db: Database, period_id: int, at: datetime) -> None:
    """The run's end at `at` (told in the feed once: an end already written stays)."""
    with db.transaction() as conn:
        conn.execute(
            "UPDATE maintenance SET ended_at=? WHERE id=? AND ended_at IS NULL",
            (to_text(at), period_id),
        )
