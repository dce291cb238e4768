"""A silence seen through the loop: no restart while it holds, the reason recorded, then healing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.sqlite.store import SqliteStore
from guardian.checks import CheckSettings
from guardian.core.policy import RestartPolicy
from guardian.healer import Healer, HealerSettings
from guardian.metrics import Metrics
from guardian.operations import Operator
from tests.fakes import FakeClock, FakeEngine


def test_silenced_container_is_not_restarted_until_the_silence_ends(tmp_path: Path) -> None:
    clock = FakeClock()
    engine = FakeEngine(clock)
    store = SqliteStore(tmp_path / "guardian.db")
    settings = HealerSettings(
        "host",
        "guardian.enable",
        RestartPolicy(),
        CheckSettings(),
        timedelta(seconds=1),
        timedelta(seconds=30),
    )
    healer = Healer(engine, store, clock, settings, Metrics(CollectorRegistry()))
    Operator(store, clock, "host").silence("app", timedelta(minutes=30), "upgrade", "alice")
    engine.add("app", health="unhealthy")

    for _ in range(3):  # several sweeps inside the silence: one record, no restart
        healer.sweep()
        clock.advance(minutes=5)
    assert engine.restarts == []
    decisions = [(a.kind, a.reason, a.outcome) for a in store.actions("host", "app")]
    assert decisions == [("decision", "silenced", "policy_denied")]

    clock.advance(minutes=15)  # 35 minutes in: the silence has expired
    healer.sweep()
    assert engine.restarts == [engine.id_of("app")]
    assert [a.reason for a in store.actions("host", "app")] == ["silenced", "allowed"]
