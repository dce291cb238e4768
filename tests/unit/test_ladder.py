"""The escalation ladder through the loop, over fakes: restarts, then recreate from the
container's own record, then stop and page; each rung through the one decision point."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from guardian.adapters.sqlite.schema import MIGRATIONS
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.escalation.recreate import RecreateSpec, build
from guardian.core.model import (
    ActionKind,
    ContainerSnapshot,
    IncidentState,
    Outcome,
    RemediationAction,
    Verdict,
)
from guardian.core.outbound.notifications import Kind, Notification
from guardian.core.outbound.routing import severity
from guardian.ports import StoreError
from guardian.readside.changes import Changes
from guardian.readside.page import PageReader
from guardian.readside.status import container_status
from tests.app import TestApp, make_app
from tests.fakes import T0, fake_record

LABELS = {"guardian.enable": "true", "com.example.team": "web"}


def ladder(tmp: Path, **restart: Any) -> TestApp:
    """Guardian with a ladder of recreate then stop, 2 attempts, a short cooldown."""
    w = make_app(
        tmp,
        restart={
            "cooldown": "2s",
            "max_attempts": 2,
            "window": "1h",
            "stop_timeout": "1s",
            "verify_timeout": "30s",
            "escalate": ["recreate", "stop"],
            **restart,
        },
    )
    w.engine.after_restart_health = "unhealthy"  # never healthy: restarts do not help
    return w


def test_the_ladder_climbs_restart_restart_recreate_stop_then_nothing(tmp_path: Path) -> None:
    w = ladder(tmp_path)
    w.engine.add("web", health="unhealthy", labels=LABELS)
    w.climb()
    assert w.engine.steps == [
        ("restart", "web"),
        ("restart", "web"),
        ("remove", "web"),
        ("create", "web"),
        ("stop", "web"),
    ]
    [now] = [c for c in w.engine.containers.values() if c.name == "web"]
    assert now.labels == LABELS and now.state == "exited"  # stopped, not removed
    [incident] = w.store.open_incidents("h")
    assert incident.escalated and incident.state is IncidentState.IN_PROGRESS
    assert incident.container_id == now.id  # the incident followed the recreated container
    kinds = [a.kind for a in w.actions("web") if a.kind != ActionKind.DECISION]
    assert kinds == ["restart", "restart", "recreate", "stop"]
    [recreate] = [a for a in w.actions("web") if a.kind == ActionKind.RECREATE]
    assert json.loads(recreate.record)["Name"] == "/web"  # stored with the intent
    assert recreate.successor == now.id and recreate.reason == "escalated"

    # Each rung taken is counted once, by rung and why (bounded labels).
    taken = "guardian_restart_decisions_total"
    assert w.metric(taken, decision="recreate", reason="escalated") == 1
    assert w.metric(taken, decision="stop", reason="escalated") == 1
    w.climb(10)  # nothing after the stop: no restart, no second page
    assert len(w.engine.steps) == 5
    assert [n["kind"] for n in w.queued()].count("gave_up") == 0


def test_each_rung_is_told_once_and_only_the_stop_rung_is_critical(tmp_path: Path) -> None:
    w = ladder(tmp_path)
    w.engine.add("web", health="unhealthy", labels=LABELS)
    w.climb()
    attempts = [n for n in w.queued() if n["kind"] == "attempt"]
    rungs = [n for n in attempts if "restarts did not help" in n["detail"]]
    assert [("recreate" in n["detail"], n["outcome"]) for n in rungs] == [
        (True, "restarted"),
        (False, "stopped"),
    ]
    assert "stop, the ladder's rung 3 of 3" in rungs[1]["detail"]

    def sev(n: dict[str, Any]) -> str:
        fields = {k: v for k, v in n.items() if k in Notification.__dataclass_fields__}
        fields["kind"] = Kind(fields["kind"])
        fields["at"] = w.clock.now()
        fields.pop("receivers", None)
        return severity(Notification(**fields))

    critical = [n for n in w.queued() if sev(n) == "critical"]
    assert [n["outcome"] for n in critical] == ["stopped"]  # never an attempt before it
    assert all(sev(n) != "critical" for n in attempts if n["outcome"] != "stopped")


def test_a_recreated_container_keeps_its_budget(tmp_path: Path) -> None:
    """Its history is its lineage's: the new id does not start a fresh budget (no loop)."""
    w = ladder(tmp_path, escalate=["recreate"])
    w.engine.add("web", health="unhealthy", labels=LABELS)
    w.climb(60)
    assert [s for s, _ in w.engine.steps] == ["restart", "restart", "remove", "create"]
    [incident] = w.store.open_incidents("h")
    assert incident.escalated  # no rung left: given up once
    assert [n["kind"] for n in w.queued()].count("gave_up") == 1


def test_a_recreate_that_would_lose_an_anonymous_volume_is_refused_and_the_ladder_moves_on(
    tmp_path: Path,
) -> None:
    w = ladder(tmp_path)
    w.engine.add("db", health="unhealthy", labels=LABELS)
    anonymous = {"Type": "volume", "Name": "f" * 64, "Destination": "/var/lib/data"}
    w.engine.record_extra["db"] = {"Mounts": [anonymous]}
    w.climb()
    assert [s for s, _ in w.engine.steps] == ["restart", "restart", "stop"]  # never removed
    [recreate] = [a for a in w.actions("db") if a.kind == ActionKind.RECREATE]
    assert recreate.outcome is Outcome.POLICY_DENIED and recreate.record == ""
    assert "anonymous volume" in recreate.detail and "/var/lib/data" in recreate.detail
    assert "a person would run: docker rm -f db" in recreate.detail
    [incident] = w.store.open_incidents("h")
    timeline = w.app.operator.timeline(incident)
    assert any(
        "recreate refused: an anonymous volume" in getattr(e, "detail", "") for e in timeline
    )
    told = [n for n in w.queued() if n["kind"] == "attempt" and n["outcome"] == "policy_denied"]
    assert len(told) == 1 and "recreate refused: an anonymous volume" in told[0]["detail"]


def test_a_create_the_engine_refuses_keeps_the_record_and_says_what_to_run(
    tmp_path: Path,
) -> None:
    w = ladder(tmp_path, escalate=["recreate"])
    w.engine.add("web", health="unhealthy", labels=LABELS)
    w.engine.create_refusal = "create: a published port is taken (port is already allocated)"
    w.climb()
    [recreate] = [a for a in w.actions("web") if a.kind == ActionKind.RECREATE]
    assert recreate.outcome is Outcome.PERMANENT_FAILURE and json.loads(recreate.record)
    [incident] = w.store.open_incidents("h")
    assert "port is already allocated" in incident.detail
    assert "docker compose up -d --force-recreate" in incident.detail
    assert [s for s, _ in w.engine.steps] == ["restart", "restart", "remove", "create"]


def test_escalate_ask_waits_for_a_persons_approval_before_the_recreate(tmp_path: Path) -> None:
    w = ladder(tmp_path, escalate_ask=["recreate"])
    w.engine.add("web", health="unhealthy", labels=LABELS)
    w.climb()
    assert [s for s, _ in w.engine.steps] == ["restart", "restart"]  # waiting for a person
    [incident] = w.store.open_incidents("h")
    w.app.operator.answer(incident.id or 0, True, "alice", "recreate it")
    w.climb(3)
    assert [s for s, _ in w.engine.steps][:4] == ["restart", "restart", "remove", "create"]
    [recreate] = [a for a in w.actions("web") if a.kind == ActionKind.RECREATE]
    assert recreate.reason == "approved"


def test_a_storm_holds_every_rung_as_it_holds_restarts(tmp_path: Path) -> None:
    w = ladder(tmp_path)
    w.engine.add("web", health="unhealthy", labels=LABELS)
    w.climb(2)  # the two restarts
    assert [s for s, _ in w.engine.steps] == ["restart", "restart"]
    for i in range(12):  # a storm breaks out: most of the host unhealthy at once
        w.engine.add(f"other{i}", health="unhealthy", labels=LABELS)
    w.climb(10)
    steps = [s for s, n in w.engine.steps if n == "web"]
    assert "remove" not in steps and "stop" not in steps


def _crashed_mid_recreate(w: TestApp, removed: bool = True) -> ContainerSnapshot:
    """The store as a Guardian killed after a recreate's removal and before its create leaves
    it: the intent with the whole record, no outcome; the container removed."""
    snap = w.engine.add("web", health="unhealthy", labels=LABELS)
    record = json.dumps(fake_record(snap))
    w.store.record_intent(
        RemediationAction(
            None,
            None,
            w.host,
            "web",
            snap.id,
            ActionKind.RECREATE,
            w.clock.now(),
            "escalated",
            record=record,
        )
    )
    if removed:
        w.engine.remove_container(snap.id, timedelta(seconds=1))
    return snap


def test_a_crash_between_remove_and_create_creates_it_at_the_next_start_once(
    tmp_path: Path,
) -> None:
    w = ladder(tmp_path)
    _crashed_mid_recreate(w)
    assert not [c for c in w.engine.containers.values() if c.name == "web"]
    w = w.restart_guardian()
    w.app.verifier.reconcile()
    [web] = [c for c in w.engine.containers.values() if c.name == "web"]
    assert web.labels == LABELS
    [recreate] = [a for a in w.actions("web") if a.kind == ActionKind.RECREATE]
    assert recreate.outcome is Outcome.RESTARTED and recreate.successor == web.id
    w = w.restart_guardian()  # and again: never a second create
    w.app.verifier.reconcile()
    w.app.verifier.reconcile()
    assert [s for s, _ in w.engine.steps] == ["remove", "create"]


def test_a_crash_after_the_create_records_the_container_that_is_there(tmp_path: Path) -> None:
    w = ladder(tmp_path)
    snap = _crashed_mid_recreate(w)
    spec = build(fake_record(snap))
    assert isinstance(spec, RecreateSpec)
    made = w.engine.create_container(spec)  # created, then Guardian was killed
    w = w.restart_guardian()
    w.app.verifier.reconcile()
    [recreate] = [a for a in w.actions("web") if a.kind == ActionKind.RECREATE]
    assert recreate.successor == made.container_id
    assert [s for s, _ in w.engine.steps] == ["remove", "create"]  # not created twice


def test_a_crash_before_the_removal_leaves_the_container_as_it_was(tmp_path: Path) -> None:
    w = ladder(tmp_path)
    _crashed_mid_recreate(w, removed=False)
    w = w.restart_guardian()
    w.app.verifier.reconcile()
    [recreate] = [a for a in w.actions("web") if a.kind == ActionKind.RECREATE]
    assert recreate.outcome is Outcome.INTERRUPTED and w.engine.steps == []


def test_a_store_from_before_the_ladder_reads_its_actions_without_a_record(tmp_path: Path) -> None:
    """Schema 8 kept no record or successor: the upgrade adds both empty, and a recreate's
    outcome writes the successor once (a later outcome, its verification's, keeps it)."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:8]:
        conn.executescript(script)
    conn.execute(
        "INSERT INTO actions (host, container, container_id, kind, requested_at, reason)"
        " VALUES ('h', 'web', 'cid', 'restart', ?, 'unhealthy')",
        (T0.isoformat(),),
    )
    conn.execute("PRAGMA user_version = 8")
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    try:
        [old] = store.actions("h")
        assert (old.record, old.successor) == ("", "")
        action_id = store.record_intent(
            RemediationAction(
                None, None, "h", "web", "cid", ActionKind.RECREATE, T0, "escalated", record="{}"
            )
        )
        store.record_outcome(action_id, Outcome.RESTARTED, "recreated", T0, successor="new")
        store.record_outcome(action_id, Outcome.SUCCEEDED, "healthy", T0)
        recreate = store.actions("h")[-1]
        assert (recreate.record, recreate.successor, recreate.outcome) == (
            "{}",
            "new",
            Outcome.SUCCEEDED,
        )
    finally:
        store.close()


def test_status_and_the_page_say_the_rung_guardian_takes_next(tmp_path: Path) -> None:
    w = ladder(tmp_path)
    w.engine.add("web", health="unhealthy", labels=LABELS)
    while [s for s in w.engine.steps if s[0] == "restart"] != [("restart", "web")] * 2:
        w.climb(1)
    w.healer.verifier.verify()
    w.clock.advance(3)  # past the cooldown: the recreate is what decide() says now
    [row] = [c for c in container_status(w.healer, w.app.operator) if c.name == "web"]
    assert row.decision is not None and row.decision.verdict is Verdict.RECREATE
    assert (row.restart_now, row.held_back) == (True, None)
    assert "2 restarts did not help: recreate" in row.decision.detail
    page = PageReader(w.healer, w.app.operator, Changes(), monotonic=lambda: 0.0).read(True)
    [shown] = [r for r in page.rows if r["name"] == "web"]
    assert (shown["next_restart"], shown["attempts"]) == ("now: recreate", "2 of 2")


class _FullDisk(SqliteStore):
    """A real store whose action writes fail while `full` is set, as on a full disk."""

    full = False

    def record_intent(self, action: RemediationAction, notifications=()) -> int:  # type: ignore[no-untyped-def]
        if self.full:
            raise StoreError(f"store {self.path}: database or disk is full")
        return super().record_intent(action, notifications)


def test_a_recreate_whose_record_the_store_did_not_keep_removes_nothing(tmp_path: Path) -> None:
    """docs/design.md rule 20: the record is stored before the removal, or nothing is removed."""
    store = _FullDisk(tmp_path / "full.db")
    w = make_app(
        tmp_path,
        sqlite=store,
        restart={
            "cooldown": "2s",
            "max_attempts": 2,
            "window": "1h",
            "stop_timeout": "1s",
            "verify_timeout": "30s",
            "escalate": ["recreate"],
        },
    )
    w.engine.after_restart_health = "unhealthy"
    w.engine.add("web", health="unhealthy", labels=LABELS)
    while [s for s in w.engine.steps if s[0] == "restart"] != [("restart", "web")] * 2:
        w.climb(1)
    store.full = True
    w.climb(10)
    assert ("remove", "web") not in w.engine.steps  # the container is still there, once
    assert [c.name for c in w.engine.containers.values()] == ["web"]
