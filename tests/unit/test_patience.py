"""restart.act_after counts from when the problem began (issue 41): Docker keeps only its last
five health probes, so the start is kept with the incident. Through bootstrap over a fake
engine whose containers carry Docker's own health log (read by the real payload parser), a
fake clock and the real store."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from guardian.adapters.engine.engine_payloads import inspect_snapshot
from guardian.adapters.sqlite.schema import MIGRATIONS
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import ActionKind, IncidentState, Reason
from guardian.ports import EngineEvent
from guardian.service.healing.healer import Healer
from guardian.service.watchers.clock_steps import StepWatch
from tests.app import TestApp, make_app
from tests.fakes import T0

KEPT = 5  # Docker's maxLogEntries


def stamp(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


@dataclass
class Probed:
    """One container whose health check Docker runs: each probe() is one result, kept in a
    log of the last five, turning it unhealthy after `retries` failures in a row."""

    w: TestApp
    name: str
    retries: int = 1
    log: list[dict[str, Any]] = field(default_factory=list)
    streak: int = 0
    status: str = "starting"

    def __post_init__(self) -> None:
        self.id = f"{self.name}-id".ljust(64, "0")
        self.started_at = self.w.clock.now()
        self.probe(ok=True)

    def probe(self, ok: bool) -> None:
        at = stamp(self.w.clock.now())
        entry = {"Start": at, "End": at, "ExitCode": 0 if ok else 1, "Output": "" if ok else "no"}
        self.log = [*self.log, entry][-KEPT:]
        self.streak = 0 if ok else self.streak + 1
        if ok:
            self.status = "healthy"
        elif self.streak >= self.retries:
            self.status = "unhealthy"
        self.show()

    def show(self) -> None:
        """What the engine's inspect says now (a restart by Guardian is the fake engine's)."""
        current = self.w.engine.containers.get(self.id)
        if current is not None and current.started_at != self.started_at:
            return  # restarted: the fake engine shows it healthy
        data = {
            "Id": self.id,
            "Name": f"/{self.name}",
            "State": {
                "Status": "running",
                "StartedAt": stamp(self.started_at),
                "Health": {"Status": self.status, "FailingStreak": self.streak, "Log": self.log},
            },
            "Config": {
                "Labels": {"guardian.enable": "true"},
                "Healthcheck": {"Retries": self.retries},
            },
            "HostConfig": {},
        }
        self.w.engine.containers[self.id] = inspect_snapshot(data)

    def restarted(self) -> bool:
        return self.id in self.w.engine.restarts


def patient(tmp: Path, act_after: str) -> TestApp:
    return make_app(tmp, restart={"act_after": act_after, "cooldown": "2s", "window": "1h"})


def began(w: TestApp, name: str) -> datetime | None:
    [incident] = w.store.open_incidents(w.host, name)
    return incident.problem_since


def held_back(w: TestApp, name: str) -> list[str]:
    return [a.reason for a in w.actions(name) if a.kind == ActionKind.DECISION]


def test_probes_every_30s_and_act_after_5m_acts_at_5_minutes(tmp_path: Path) -> None:
    """Five minutes are ten probes: the one that turned it unhealthy is long out of the log."""
    w = patient(tmp_path, "5m")
    c = Probed(w, "web", retries=3)
    for _ in range(2):
        w.clock.advance(30)
        c.probe(ok=False)
        w.healer.sweep()
    w.clock.advance(30)
    c.probe(ok=False)  # the third failure: unhealthy now
    turned = w.clock.now()
    w.healer.sweep()
    assert began(w, "web") == turned and not c.restarted()
    while w.clock.now() < turned + timedelta(minutes=5):
        w.clock.advance(30)
        c.probe(ok=False)
        if w.clock.now() == turned + timedelta(minutes=5):
            # A breath before its patience ends, with the turn rotated out of the log.
            w.clock.advance(-1)
            assert w.engine.containers[c.id].unhealthy_since is None
            w.healer.sweep()
            assert not c.restarted(), "acted before act_after"
            w.clock.advance(1)
        w.healer.sweep()
    assert c.restarted(), "act_after: 5m never acted"
    assert Reason.ACT_AFTER in held_back(w, "web")


@pytest.mark.parametrize(
    ("heard", "acts_at"),
    [
        # The engine's unhealthy event at 0 s: the start itself.
        (True, 8),
        # Only the log: unhealthy at least since its oldest failure (2 s), the latest the turn
        # can be; later, never sooner, and it does not move on as the log rotates.
        (False, 10),
    ],
)
def test_a_log_whose_failing_probe_has_scrolled_out_counts_from_the_earliest_evidence(
    tmp_path: Path, heard: bool, acts_at: int
) -> None:
    w = patient(tmp_path, "8s")
    c = Probed(w, "web")
    w.clock.advance(1)
    turned = w.clock.now()
    c.probe(ok=False)  # unhealthy: Docker's event now; Guardian is busy elsewhere
    for _ in range(6):
        w.clock.advance(1)
        c.probe(ok=False)
    assert w.engine.containers[c.id].unhealthy_since is None  # the turn has rotated out
    if heard:
        w.healer.react(c.id, detected_at=turned)
    else:
        w.healer.sweep()
    assert began(w, "web") == turned + timedelta(seconds=0 if heard else 2)
    while w.clock.now() < turned + timedelta(seconds=acts_at):
        assert not c.restarted(), f"acted at {w.clock.now() - turned}"
        w.clock.advance(0.5)
        if (w.clock.now() - turned).total_seconds() % 1 == 0:
            c.probe(ok=False)
        w.healer.sweep()
    assert c.restarted()


@pytest.mark.parametrize("seen_healthy", [True, False])
def test_healthy_for_one_probe_then_unhealthy_again_starts_the_patience_again(
    tmp_path: Path, seen_healthy: bool
) -> None:
    """Probes every 30 s, act_after 5m: unhealthy at 0, healthy for one probe at 2 min,
    unhealthy again at 2.5 min: acts at 7.5 min. Whether or not a look saw the healthy probe
    (the incident resolved and recurred, or the engine's exact turn moved on)."""
    w = patient(tmp_path, "5m")
    c = Probed(w, "web")
    w.clock.advance(30)
    first = w.clock.now()
    c.probe(ok=False)
    w.healer.sweep()
    for _ in range(3):
        w.clock.advance(30)
        c.probe(ok=False)
        w.healer.sweep()
    w.clock.advance(30)
    c.probe(ok=True)
    if seen_healthy:
        w.healer.sweep()
        [incident] = w.store.open_incidents(w.host, "web")
        assert incident.state is IncidentState.RESOLVED
    w.clock.advance(30)
    again = w.clock.now()
    c.probe(ok=False)
    w.healer.sweep()
    assert again == first + timedelta(minutes=2, seconds=30)
    assert began(w, "web") == again
    while w.clock.now() < again + timedelta(minutes=5):
        assert not c.restarted(), f"acted {w.clock.now() - first} after the first turn"
        w.clock.advance(30)
        c.probe(ok=False)
        w.healer.sweep()
    assert c.restarted()


def test_a_restarted_guardian_counts_from_the_start_its_store_kept(tmp_path: Path) -> None:
    w = patient(tmp_path, "8s")
    c = Probed(w, "web")
    w.clock.advance(1)
    turned = w.clock.now()
    c.probe(ok=False)
    w.healer.sweep()
    for _ in range(7):  # Guardian down; the log rotates the turn out
        w.clock.advance(1)
        c.probe(ok=False)
    again = w.restart_guardian()
    again.healer.sweep()  # 7 s after the turn: its own look would say 2 s
    assert not c.restarted()
    assert began(again, "web") == turned
    again.clock.advance(1)
    c.probe(ok=False)
    again.healer.sweep()  # 8 s after the turn
    assert c.restarted()


@pytest.mark.parametrize("hours", [1, -1])
def test_a_step_of_the_wall_clock_neither_shortens_nor_lengthens_patience(
    tmp_path: Path, hours: int
) -> None:
    """The turn has rotated out of the log (only a bound is left), and the wall clock steps an
    hour 1 min into a 5 min patience: it still acts 5 min after the start it kept."""
    w = patient(tmp_path, "5m")
    watch = StepWatch(w.clock, w.app.metrics, w.app.loop.follow_step)
    start = w.clock.now() - timedelta(seconds=10)
    w.engine.add("web", health="unhealthy", unhealthy_by=start, health_log_at=w.clock.now())
    w.healer.sweep()
    w.clock.advance(50)
    w.clock.step(hours=hours)
    w.engine.clock_stepped(timedelta(hours=hours))
    watch.look()
    w.healer.sweep()
    assert w.engine.restarts == [], "acted a step sooner"
    w.clock.advance(minutes=3, seconds=59)
    w.healer.sweep()
    assert w.engine.restarts == [], "acted a step sooner"
    w.clock.advance(1)  # 5 min after the start, on the monotonic clock
    w.healer.sweep()
    assert w.engine.restarts == [w.engine.id_of("web")], "waited a step longer"


def test_a_store_from_before_keeps_its_incidents_and_their_opening_stands_in(
    tmp_path: Path,
) -> None:
    """Schema 5 had no problem start: the upgrade adds it empty, the opening stands in, and a
    step moves it from there."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:5]:
        conn.executescript(script)
    conn.execute(
        "INSERT INTO incidents (host, container, container_id, type, state, opened_at, last_seen)"
        " VALUES ('h', 'web', 'cid', 'unhealthy', 'active', ?, ?)",
        (T0.isoformat(), T0.isoformat()),
    )
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    try:
        [incident] = store.open_incidents("h")
        assert incident.problem_since is None and incident.began == T0
        store.move_problem_starts("h", timedelta(hours=1))
        [incident] = store.open_incidents("h")
        assert incident.problem_since == T0 + timedelta(hours=1)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("action", "status", "evidence"),
    [
        ("health_status", "unhealthy", True),  # Docker's turn: the start itself
        ("health_status", "healthy", False),  # a reason to look; the problem may begin later
        ("health_status", "", False),  # Podman's: the status before its check
        ("die", "", False),  # an exit's start is its FinishedAt, which the engine keeps
        ("oom", "", False),
    ],
)
def test_only_an_event_that_says_unhealthy_lends_its_time_to_the_problem_start(
    action: str, status: str, evidence: bool
) -> None:
    attributes = {"name": "web", "health_status": status} if status else {"name": "web"}
    event = EngineEvent(action, "cid", "web", T0, attributes)
    assert Healer.reported_at(event) == (T0 if evidence else None)
