"""Store retention: what ended before the cut-off goes with all its rows; nothing open goes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.retention import Pruned, prune
from guardian.adapters.sqlite.store import SqliteStore
from guardian.config import ConfigError, load_settings
from guardian.core import incidents
from guardian.core.model import (
    HOST_SUBJECT,
    HealthCheckResult,
    Incident,
    IncidentState,
    ProblemType,
    RemediationAction,
    Silence,
)
from guardian.core.outbound import notifications
from guardian.entrypoints.daemon import Daemon
from guardian.logs import FIELDS
from tests.app import make_app

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)
DAY = timedelta(days=1)
TABLES = ("incidents", "transitions", "actions", "outbox", "deliveries", "notify_refs")


def opened(store: SqliteStore, container: str, at: datetime, kind=ProblemType.UNHEALTHY):
    result = HealthCheckResult(f"{container}-id", container, at, kind, "health check failing")
    change = incidents.record_detection(None, "h", result, at)
    incident = store.save_incident(change, (notifications.opened(change.incident, None, at),))
    store.record_intent(
        RemediationAction(None, incident.id, "h", container, f"{container}-id", "restart", at, "x")
    )
    return incident


def resolved(store: SqliteStore, incident: Incident, at: datetime) -> Incident:
    change = incidents.record_recovery(incident, "observed healthy", at)
    return store.save_incident(change, (notifications.resolved(change.incident, "ok", at),))


def closed(store: SqliteStore, incident: Incident, at: datetime) -> Incident:
    done, t = incidents.transition(incident, IncidentState.CLOSED, "guardian", "healthy", at)
    return store.save_incident(incidents.IncidentChange(done, (t,)))


def rows_of(store: SqliteStore, incident_id: int) -> dict[str, int]:
    q = {
        "incidents": "SELECT COUNT(*) FROM incidents WHERE id=?",
        "transitions": "SELECT COUNT(*) FROM transitions WHERE incident_id=?",
        "actions": "SELECT COUNT(*) FROM actions WHERE incident_id=?",
        "outbox": "SELECT COUNT(*) FROM outbox WHERE incident_id=?",
        "deliveries": "SELECT COUNT(*) FROM deliveries d JOIN outbox o ON o.id=d.outbox_id"
        " WHERE o.incident_id=?",
        "notify_refs": "SELECT COUNT(*) FROM notify_refs WHERE incident_id=?",
    }
    return {t: int(store.db.query(q[t], (incident_id,))[0][0]) for t in TABLES}


@pytest.mark.parametrize("batch", [1, 500])
def test_incidents_that_ended_before_the_cutoff_go_with_every_row_of_theirs(
    tmp_path: Path, batch: int
) -> None:
    store = SqliteStore(tmp_path / "guardian.db")
    outbox = SqliteOutbox(store.db)
    old = closed(store, resolved(store, opened(store, "old", T0), T0 + MIN), T0 + 2 * MIN)
    old_storm = resolved(store, opened(store, HOST_SUBJECT, T0, ProblemType.STORM), T0 + MIN)
    still_open = opened(store, "stuck", T0)  # opened long ago and never resolved
    recent = closed(
        store, resolved(store, opened(store, "recent", T0 + DAY), T0 + 2 * DAY), T0 + 2 * DAY
    )
    outbox.fan_out(["webhook"])
    for incident in (old, still_open, recent):
        outbox.set_ref("slack", incident.id or 0, "1700000000.000100")
    store.add_silence(Silence(None, "h", "old", T0, T0 + 60 * MIN, "m", "bob"))
    store.add_silence(Silence(None, "h", "later", T0, T0 + 120 * DAY, "m", "bob"))
    kept_before = {i.id: rows_of(store, i.id or 0) for i in (still_open, recent)}
    assert all(n > 0 for n in rows_of(store, old.id or 0).values())

    pruned = prune(store.db, T0 + DAY, batch)  # e.g. now = T0 + 91 days, retention 90 days

    # The events feed forgets its prefix before the first event since the cut-off (`recent`'s
    # opening): the 9 events of `old`, `old_storm` and `stuck`; the silences written after it stay.
    assert pruned == Pruned(incidents=2, silences=1, events=9)
    for gone in (old, old_storm):
        assert set(rows_of(store, gone.id or 0).values()) == {0}
    assert {i.id: rows_of(store, i.id or 0) for i in (still_open, recent)} == kept_before
    assert [s.container for s in store.silences("h", T0)] == ["later"]
    assert not prune(store.db, T0 + DAY, batch)  # nothing left to forget


def test_the_daemon_job_prunes_with_store_retention_and_logs_it(tmp_path, caplog) -> None:
    t = make_app(tmp_path, daemon=True, store={"retention": "30d"})
    clock, store = t.clock, t.store
    now = clock.now()
    old = closed(store, resolved(store, opened(store, "a", now - 40 * DAY), now - 40 * DAY), now)
    clock.advance(31 * DAY.total_seconds())
    newer = opened(store, "b", clock.now() - DAY)
    daemon = Daemon(t.app)
    caplog.set_level(logging.INFO)

    daemon.prune()

    assert [i.id for i in store.list_incidents("h")] == [newer.id]
    assert set(rows_of(store, old.id or 0).values()) == {0}
    [line] = [r for r in caplog.records if r.getMessage() == "store pruned"]
    fields = getattr(line, FIELDS)
    assert (fields["incidents"], fields["silences"]) == (1, 0)
    store.close()


def test_store_retention_is_at_least_a_day(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"store\.retention"):
        load_settings(None, env={"GUARDIAN_STORE_RETENTION": "1h"})
