"""GET /api/v1/events: what the store recorded after a cursor, over the real SQLite store, read
through the API handler as a client does (page by page, across restarts and crashes)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from guardian.adapters.sqlite.schema import MIGRATIONS
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.model import (
    ActionKind,
    Approval,
    HealthCheckResult,
    Outcome,
    ProblemType,
    RemediationAction,
)
from guardian.entrypoints.api import Api
from guardian.entrypoints.http_server import Request, Routes
from tests.app import TestApp, make_app, make_world
from tests.fakes import T0

TOKEN = "s3cret-token"
HOST = "h"


def api_of(t: TestApp, token: str | None = TOKEN, public_reads: bool = False) -> Api:
    return Api(t.healer, t.app.operator, token, public_reads)


def get(api: Api, token: str | None = TOKEN, **query: str) -> tuple[int, dict[str, Any]]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    routes = Routes()
    routes.mount("/api/v1", api)
    response = routes.dispatch(
        Request("GET", "/api/v1/events", {k: [v] for k, v in query.items()}, headers, b"", "c")
    )
    return response.status, json.loads(response.body)


def read_all(api: Api, cursor: str, limit: int = 2) -> tuple[list[dict[str, Any]], str]:
    """Every event after `cursor`, `limit` an answer, as a client resuming would; the cursor
    the last answer handed back."""
    seen: list[dict[str, Any]] = []
    while True:
        status, doc = get(api, since=cursor, limit=str(limit))
        assert status == 200, doc
        assert len(doc["events"]) <= limit
        seen += doc["events"]
        if not doc["events"]:
            assert str(doc["next"]) == cursor  # an empty answer keeps the cursor
            return seen, cursor
        cursor = str(doc["next"])


def open_incident(t: TestApp, container: str = "web") -> int:
    now = t.clock.now()
    result = HealthCheckResult(f"{container}-id", container, now, ProblemType.UNHEALTHY, "bad")
    return t.store.save_incident(incidents.record_detection(None, HOST, result, now)).id or 0


def intent(store: SqliteStore, incident_id: int | None, at=T0, container: str = "web") -> int:
    return store.record_intent(
        RemediationAction(
            None, incident_id, HOST, container, f"{container}-id", ActionKind.RESTART, at, "x"
        )
    )


def test_a_client_reading_two_at_a_time_sees_every_event_once_in_order_across_a_restart(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path, host=HOST)
    op = t.app.operator
    incident = open_incident(t)
    t.clock.advance(1)
    action = intent(t.store, incident, t.clock.now())
    t.clock.advance(1)
    t.store.record_outcome(action, Outcome.RESTARTED, "restarted", t.clock.now())
    op.change(incident, "ack", "alice")
    first, cursor = read_all(api_of(t), "0")
    assert [e["kind"] for e in first] == [
        "incident.opened",
        "action.requested",
        "action.outcome",
        "incident.changed",
    ]

    # Guardian restarts: a new app over the same store file; more is recorded after it.
    t.store.close()
    store = SqliteStore(t.settings["store.path"])
    again = make_app(tmp_path, clock=t.clock, engine=t.engine, settings=t.settings, sqlite=store)
    t.clock.advance(1)
    again.store.record_outcome(action, Outcome.SUCCEEDED, "healthy", again.clock.now())
    again.app.operator.silence("db", timedelta(hours=1), "upgrade", "bob")
    again.app.operator.unsilence("db", "bob")
    now = again.clock.now()
    answer = Approval(
        None, incident, HOST, "web", True, "carol", "go", now, now + timedelta(hours=1)
    )
    approval = again.store.add_approval(answer)
    again.store.use_approval(approval.id or 0, again.clock.now())
    later, _ = read_all(api_of(again), cursor)

    assert [e["kind"] for e in later] == [
        "action.outcome",
        "silence.set",
        "silence.lifted",
        "approval.given",
        "approval.used",
    ]
    everything = first + later
    cursors = [e["cursor"] for e in everything]
    assert cursors == sorted(set(cursors))  # each once, increasing
    assert everything == read_all(api_of(again), "0", limit=1000)[0]  # the same, read at once
    outcomes = [e["fields"]["outcome"] for e in everything if e["kind"] == "action.outcome"]
    assert outcomes == ["restarted", "succeeded"]  # the outcome updated its row: two events
    opened = everything[0]
    assert opened["container"] == "web" and opened["incident"] == incident
    assert opened["at"] == T0.isoformat(timespec="seconds")
    assert opened["fields"] == {
        "type": "unhealthy",
        "from": None,
        "to": "active",
        "actor": "guardian",
        "reason": opened["fields"]["reason"],
    }


def test_the_loop_s_healing_is_told_as_it_was_recorded(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    w.engine.add("app", health="unhealthy", health_output="probe failed")
    w.healer.sweep()
    w.clock.advance(2)
    w.healer.verifier.verify()
    seen, _ = read_all(api_of(w), "0", limit=3)
    assert [(e["kind"], e["fields"].get("to") or e["fields"].get("outcome")) for e in seen] == [
        ("incident.opened", "active"),
        ("incident.changed", "in_progress"),
        ("action.requested", None),
        ("action.outcome", "restarted"),
        ("action.outcome", "succeeded"),
        ("incident.changed", "resolved"),
    ]
    assert {e["container"] for e in seen} == {"app"}
    assert len({e["incident"] for e in seen}) == 1


_CRASH = """
import os, sys
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import ActionKind, RemediationAction
from tests.fakes import T0
store = SqliteStore(sys.argv[1])
action = RemediationAction(None, None, "h", "web", "web-id", ActionKind.RESTART, T0, "x")
store.record_intent(action)
os.kill(os.getpid(), 9)
"""


def test_kill_9_between_an_action_and_its_outcome_loses_neither(tmp_path: Path) -> None:
    t = make_app(tmp_path, host=HOST)
    path = str(t.settings["store.path"])
    t.store.close()
    crashed = subprocess.run([sys.executable, "-c", _CRASH, path], cwd=Path.cwd(), check=False)
    assert crashed.returncode == -9

    t = make_app(tmp_path, clock=t.clock, settings=t.settings, host=HOST, sqlite=SqliteStore(path))
    seen, cursor = read_all(api_of(t), "0")
    assert [e["kind"] for e in seen] == ["action.requested"]  # the client read the intent
    [unfinished] = t.store.unfinished_actions(HOST)
    t.store.record_outcome(unfinished.id or 0, Outcome.FAILED, "gone", T0 + timedelta(seconds=5))
    after, _ = read_all(api_of(t), cursor)
    assert [(e["kind"], e["fields"]["action"]) for e in seen + after] == [
        ("action.requested", unfinished.id),
        ("action.outcome", unfinished.id),
    ]
    assert after[0]["cursor"] > seen[0]["cursor"]


def test_a_cursor_older_than_the_store_holds_gets_410_with_the_oldest_held(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path, host=HOST)
    old = [intent(t.store, None, T0 + timedelta(minutes=m)) for m in range(3)]
    kept = intent(t.store, None, T0 + timedelta(days=2))
    assert old and kept
    pruned = t.store.prune(T0 + timedelta(days=1))
    assert pruned.events == 3

    status, doc = get(api_of(t), since="0")
    assert status == 410 and doc["oldest"] == 3 and "no longer held" in doc["error"]
    status, doc = get(api_of(t), since="2")
    assert status == 410 and doc["oldest"] == 3
    status, doc = get(api_of(t), since=T0.isoformat())  # a time before the cut-off
    assert status == 410 and doc["oldest"] == 3
    status, doc = get(api_of(t), since=str(doc["oldest"]))
    assert status == 200 and [e["cursor"] for e in doc["events"]] == [4]
    status, doc = get(api_of(t))  # no cursor: from the oldest held
    assert status == 200 and [e["cursor"] for e in doc["events"]] == [4]


def test_since_takes_an_rfc3339_time(tmp_path: Path) -> None:
    t = make_app(tmp_path, host=HOST)
    for minutes in range(4):
        intent(t.store, None, T0 + timedelta(minutes=minutes))
    api = api_of(t)
    at = (T0 + timedelta(minutes=2)).isoformat()
    status, doc = get(api, since=at)
    assert status == 200 and [e["cursor"] for e in doc["events"]] == [3, 4]
    assert get(api, since=at.replace("+", " "))[1] == doc  # a `+` the client left unencoded
    assert get(api, since=(T0 + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ"))[1] == doc
    two_hours_east = timezone(timedelta(hours=2))
    east = (T0 + timedelta(minutes=2)).astimezone(two_hours_east).isoformat()
    assert east.endswith("+02:00") and get(api, since=east)[1] == doc  # the same moment
    status, doc = get(api, since=(T0 + timedelta(days=1)).isoformat())
    assert (status, doc) == (200, {"events": [], "next": 4})  # nothing since: the newest


def test_an_answer_holds_100_events_unless_asked_for_up_to_1000(tmp_path: Path) -> None:
    t = make_app(tmp_path, host=HOST)
    for n in range(120):
        intent(t.store, None, T0 + timedelta(seconds=n), container=f"c{n}")
    status, doc = get(api_of(t))
    assert status == 200 and len(doc["events"]) == 100 and doc["next"] == 100
    status, doc = get(api_of(t), since="100")
    assert [e["container"] for e in doc["events"]] == [f"c{n}" for n in range(100, 120)]
    assert len(get(api_of(t), limit="1000")[1]["events"]) == 120


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "99999999999999999999"}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"since": "-1"}, "since"),
        ({"since": "2026-01-01T00:00:00"}, "since"),  # no offset: which time?
        ({"since": "2026-01-01"}, "since"),
        ({"since": "5"}, "since"),  # never handed out: the newest is 1
        ({"since": "9" * 40}, "since"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(
    tmp_path: Path, query: dict[str, str], named: str
) -> None:
    t = make_app(tmp_path, host=HOST)
    intent(t.store, None)
    status, doc = get(api_of(t), **query)
    assert status == 400 and set(doc) == {"error"}
    assert doc["error"].startswith(f"{named}") and "\n" not in doc["error"]


def test_the_events_need_the_token_as_the_other_reads(tmp_path: Path) -> None:
    t = make_app(tmp_path, host=HOST)
    intent(t.store, None)
    assert get(api_of(t), token=None)[0] == 401
    assert get(api_of(t), token="wrong")[0] == 403
    assert get(api_of(t, token=None))[0] == 403  # no token configured: the reads are off
    status, doc = get(api_of(t, public_reads=True), token=None)
    assert status == 200 and len(doc["events"]) == 1


def test_an_older_store_tells_what_it_held_in_the_order_of_its_times(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:9]:
        conn.executescript(script)
    minutes = [(T0 + timedelta(minutes=m)).isoformat() for m in range(4)]
    conn.execute(
        "INSERT INTO silences (host, container, created_at, until, reason, created_by,"
        " ended_at, ended_by) VALUES ('h', 'db', ?, ?, 'upgrade', 'bob', ?, 'bob')",
        (minutes[1], (T0 + timedelta(hours=1)).isoformat(), minutes[3]),
    )
    conn.execute(
        "INSERT INTO actions (host, container, container_id, kind, requested_at, reason,"
        " outcome, finished_at) VALUES ('h', 'web', 'cid', 'restart', ?, 'unhealthy',"
        " 'succeeded', ?)",
        (minutes[0], minutes[2]),
    )
    conn.execute("PRAGMA user_version = 9")
    conn.commit()
    conn.close()
    t = make_app(tmp_path, host=HOST, sqlite=SqliteStore(path))
    seen, _ = read_all(api_of(t), "0")
    assert [e["kind"] for e in seen] == [
        "action.requested",
        "silence.set",
        "action.outcome",
        "silence.lifted",
    ]
    intent(t.store, None)  # and what is written now comes after
    assert read_all(api_of(t), "4")[0][0]["cursor"] == 5
