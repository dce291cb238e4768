"""A silence seen through the loop: no restart while it holds, the reason recorded, then healing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from guardian.service.operator import Operator
from tests.app import make_app


def test_silenced_container_is_not_restarted_until_the_silence_ends(tmp_path: Path) -> None:
    t = make_app(tmp_path, host="host", restart={"stop_timeout": "1s", "verify_timeout": "30s"})
    clock, engine, store, healer = t.clock, t.engine, t.store, t.healer
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
