"""What a sweep costs beyond the engine's list call: store reads that do not grow with the number
of healthy containers, and per-container rules worked out once (bench/RESULTS.md, section 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app import TestApp, make_world


@pytest.fixture
def w(tmp_path: Path) -> TestApp:
    return make_world(tmp_path)


def statements_in_steady_sweep(tmp: Path, healthy: int) -> int:
    w = make_world(tmp)
    for i in range(healthy):
        w.engine.add(f"app{i}")
    w.engine.add("sick", health="unhealthy")
    w.healer.sweep()  # the first sweep opens the incident and restarts
    w.healer.verifier.verify()
    w.clock.advance(5)
    w.healer.sweep()
    statements: list[str] = []
    w.store.db.trace(statements.append)
    w.clock.advance(5)
    w.healer.sweep()
    return len(statements)


def test_a_steady_sweep_reads_the_store_as_often_for_50_healthy_containers_as_for_5(
    tmp_path: Path,
) -> None:
    few = statements_in_steady_sweep(tmp_path / "few", 5)
    many = statements_in_steady_sweep(tmp_path / "many", 50)
    assert few == many


def test_the_counter_resets_again_after_a_new_healthy_streak(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy")
    w.healer.sweep()
    w.healer.verifier.verify()
    w.clock.advance(601)
    w.healer.sweep()
    first = w.store.last_reset("h", "app")
    assert first == w.clock.now()
    w.clock.advance(10)
    w.healer.sweep()
    assert w.store.last_reset("h", "app") == first  # the same streak: no second reset
    w.engine.set("app", health="unhealthy")
    w.clock.advance(10)
    w.healer.sweep()
    w.healer.verifier.verify()
    w.clock.advance(601)
    w.healer.sweep()
    assert w.store.last_reset("h", "app") == w.clock.now()  # a new streak: reset again
    assert w.store.open_incidents("h") == []


def test_changed_labels_of_the_same_container_take_effect(w: TestApp) -> None:
    w.engine.add("app")
    w.healer.sweep()
    w.engine.set(
        "app", health="unhealthy", labels={"guardian.enable": "true", "guardian.self": "true"}
    )
    w.healer.sweep()
    assert w.engine.restarts == []
    assert [a.reason for a in w.store.actions("h")] == ["self"]
