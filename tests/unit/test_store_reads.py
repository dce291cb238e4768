"""The store's bounded reads: what the status page and an incident's timeline ask for is read
by the query, never by reading a whole history and slicing it; what is in force (a silence, a
dead letter) is found by an index, however long the history it is kept with."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.history import T0 as HISTORY_T0
from bench.history import filled
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType, RemediationAction, Silence
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


def plans(store: SqliteStore, read: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> str:
    """How SQLite finds the rows of each statement `read()` runs (EXPLAIN QUERY PLAN)."""
    asked: list[tuple[str, tuple[Any, ...]]] = []
    query = store.db.query

    def recording(sql: str, params: tuple[Any, ...] = ()) -> Any:
        asked.append((sql, params))
        return query(sql, params)

    monkeypatch.setattr(store.db, "query", recording)
    read()
    monkeypatch.undo()
    return "\n".join(
        row["detail"] for sql, params in asked for row in query("EXPLAIN QUERY PLAN " + sql, params)
    )


def test_the_silences_in_force_are_found_by_an_index_however_many_were_lifted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy script that silences its containers for each deploy leaves thousands of lifted
    silences in the store's retention: the silences in force (read by the status page after
    every silence, and by `guardian status`) are not found by reading them all."""
    store = filled(tmp_path / "g.db", silences=5000, deliveries=0)  # and "db" in force
    now = HISTORY_T0 + timedelta(days=5)
    for name, hours in (("web", 1), ("old", -1)):  # "old" ended by its time
        store.add_silence(
            Silence(
                None, "h", name, now - timedelta(hours=3), now + timedelta(hours=hours), "", "me"
            )
        )

    assert [s.container for s in store.silences("h", now)] == ["db", "web"]
    assert "USING INDEX silences_in_force" in plans(
        store, lambda: store.silences("h", now), monkeypatch
    )
    store.close()


def test_a_containers_silence_is_found_among_its_open_ones_however_often_it_was_toggled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script that silences and lifts one container over and over leaves a lifted silence
    per toggle, each ending later than now: setting, lifting or reading the one in force finds
    it among the container's silences not lifted, and what a set or a lift answers is the row
    as the store reads it back."""
    store = SqliteStore(tmp_path / "g.db")
    for n in range(300):
        at = T0 + timedelta(seconds=n)
        store.add_silence(Silence(None, "h", "web", at, at + timedelta(hours=1), "deploy", "ci"))
        store.end_silence("h", "web", "ci", at + timedelta(milliseconds=500))
    now = T0 + timedelta(seconds=400)
    made = store.add_silence(Silence(None, "h", "web", now, now + timedelta(hours=1), "r", "me"))

    assert store.active_silence("h", "web", now) == made
    assert "USING INDEX silences_open" in plans(
        store, lambda: store.active_silence("h", "web", now), monkeypatch
    )
    lifted = store.end_silence("h", "web", "you", now + timedelta(seconds=1))
    assert lifted is not None and lifted.ended_by == "you"
    assert lifted == store.silences("h", now, include_ended=True)[-1]
    assert store.end_silence("h", "web", "you", now + timedelta(seconds=2)) is None
    store.close()


def test_the_newest_dead_letters_are_found_by_an_index_among_every_delivery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's dead letters (the newest 20) among a long history of deliveries, nearly all
    of them sent."""
    store = filled(tmp_path / "g.db", silences=0, deliveries=20_000, dead_every=500)
    outbox = SqliteOutbox(store.db)

    newest = outbox.dead_letters(20)
    assert [row["outbox_id"] for row in newest] == [n * 500 + 1 for n in range(20, 40)]
    assert "USING INDEX deliveries_dead" in plans(
        store, lambda: outbox.dead_letters(20), monkeypatch
    )
    store.close()


def test_the_hosts_restarts_of_the_last_minute_are_found_by_time_among_the_whole_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's budget is read at every decision: its restarts of the last minute are not
    found by reading every action of the history (90 days by default)."""
    store = filled(tmp_path / "g.db", silences=5000, deliveries=0)  # one restart every 6 min
    last = HISTORY_T0 + timedelta(minutes=6 * 4999)
    assert store.restart_times("h", last - timedelta(minutes=1)) == (last,)
    assert store.restart_times("h", last - timedelta(minutes=7)) == (
        last - timedelta(minutes=6),
        last,
    )
    plan = plans(store, lambda: store.restart_times("h", last - timedelta(minutes=1)), monkeypatch)
    assert "INDEX actions_host_kind (host=? AND kind=? AND requested_at>?)" in plan
    store.close()
