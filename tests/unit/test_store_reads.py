"""The store's bounded reads: what the status page and an incident's timeline ask for is read
by the query, never by reading a whole history and slicing it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType, RemediationAction
from tests.fakes import T0


def action(n: int, container: str, incident: int | None) -> RemediationAction:
    at = T0 + timedelta(seconds=n)
    return RemediationAction(None, incident, "h", container, "id", "restart", at, "allowed")


def open_incident(store: SqliteStore, container: str) -> int:
    result = HealthCheckResult("id", container, T0, ProblemType.UNHEALTHY, "probe failed")
    return store.save_incident(incidents.record_detection(None, "h", result, T0)).id or 0


def test_actions_of_one_incident_are_read_by_its_id_a_followers_among_them(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "g.db")
    for n in range(300):
        store.record_intent(action(n, "noisy", None))
    vpn, db = open_incident(store, "vpn"), open_incident(store, "db")
    store.record_intent(action(400, "vpn", vpn))
    store.record_intent(action(401, "app", vpn))  # a follower's restart, told under the vpn's
    store.record_intent(action(402, "db", db))
    assert [(a.container, a.incident_id) for a in store.actions("h", incident=vpn)] == [
        ("vpn", vpn),
        ("app", vpn),
    ]
    assert store.actions("other-host", incident=vpn) == []
    store.close()


def test_a_limit_reads_only_the_newest_actions_oldest_first(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "g.db")
    for n in range(1000):
        store.record_intent(action(n, "noisy", None))
    newest = store.actions("h", None, T0, limit=20)
    assert [a.requested_at for a in newest] == [T0 + timedelta(seconds=n) for n in range(980, 1000)]
    assert len(store.actions("h", "noisy", T0 + timedelta(seconds=995), limit=20)) == 5
    store.close()
