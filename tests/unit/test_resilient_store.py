"""LoopStore: a store that cannot be written never stops healing, and catches up later."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.run_stamps import RunStamps
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.facts import Fact, NotificationsNotQueued
from guardian.core.model import HealthCheckResult, Outcome, ProblemType, RemediationAction
from guardian.core.outbound import notifications
from guardian.ports import StoreError
from guardian.service.facts import FactStream
from guardian.service.healing.written import LoopStore
from tests.fakes import T0, FakeClock


class FullDisk(SqliteStore):
    """A real SQLite store whose writes fail while `full` is set, as on a full disk."""

    full = False

    def record_intent(self, action: RemediationAction, notifications=()) -> int:  # type: ignore[no-untyped-def]
        if self.full:
            raise StoreError(f"store {self.path}: database or disk is full")
        return super().record_intent(action, notifications)

    def release_held(self, incident_id: int | None, output: str = "") -> int:
        if self.full:
            raise StoreError(f"store {self.path}: database or disk is full")
        return super().release_held(incident_id, output)


def loop_store(
    inner: SqliteStore, registry: CollectorRegistry | None = None, facts: FactStream | None = None
) -> LoopStore:
    """The loop's store over `inner`, as bootstrap builds it."""
    metrics = PrometheusMetrics(registry or CollectorRegistry())
    return LoopStore(inner, metrics, facts or FactStream(), RunStamps(FakeClock()))


def restart(at_seconds: float) -> RemediationAction:
    return RemediationAction(
        None, None, "h", "web", "id", "restart", T0 + timedelta(seconds=at_seconds), "allowed"
    )


def test_unwritable_restarts_still_count_are_counted_as_errors_and_written_later(
    tmp_path: Path,
) -> None:
    inner = FullDisk(tmp_path / "g.db")
    registry = CollectorRegistry()
    store = loop_store(inner, registry)
    inner.full = True
    temp_id = store.record_intent(restart(1))
    assert temp_id < 0
    store.record_outcome(temp_id, Outcome.SUCCEEDED, "observed healthy", T0)
    # The budget still sees the attempt that could not be written.
    assert store.restart_times("h", T0) == (T0 + timedelta(seconds=1),)
    assert registry.get_sample_value("guardian_store_errors_total") == 2  # intent, flush
    assert inner.actions("h") == []

    inner.full = False
    store.record_intent(restart(5))
    written = inner.actions("h")
    assert [(a.requested_at, a.outcome) for a in written] == [
        (T0 + timedelta(seconds=1), Outcome.SUCCEEDED),
        (T0 + timedelta(seconds=5), None),
    ]
    assert store.restart_times("h", T0) == tuple(a.requested_at for a in written)
    store.close()


def test_the_notifications_of_a_refused_write_are_handed_on_not_dropped(tmp_path: Path) -> None:
    inner = FullDisk(tmp_path / "g.db")
    handed: list[str] = []
    facts = FactStream()

    def unqueued(fact: Fact) -> None:
        if isinstance(fact, NotificationsNotQueued):
            handed.extend(n.detail for n in fact.notifications)

    facts.subscribe(unqueued)
    store = loop_store(inner, facts=facts)
    note = notifications.test_message("h", "slack", T0)
    store.record_intent(restart(1), [replace(note, detail="kept 1")])  # written: queued
    inner.full = True
    temp_id = store.record_intent(restart(2), [replace(note, detail="kept 2")])
    store.record_outcome(temp_id, Outcome.FAILED, "x", T0, [replace(note, detail="outcome 2")])
    store.record_intent(restart(3), [])
    assert handed == ["kept 2", "outcome 2"]
    inner.full = False
    store.record_intent(restart(4), [replace(note, detail="kept 4")])
    assert handed == ["kept 2", "outcome 2"]  # written: queued in the store, not handed on
    store.close()


def test_an_opening_held_when_the_store_refused_its_release_goes_with_the_next_write(
    tmp_path: Path,
) -> None:
    """An opening judged from the container cache is queued held; the disk fills before the
    restart call returns: the first write that lands releases it, told what the probe said."""
    inner = FullDisk(tmp_path / "g.db")
    store = loop_store(inner)
    result = HealthCheckResult("web-id", "web", T0, ProblemType.UNHEALTHY, "health check failing")
    change = incidents.record_detection(None, "h", result, T0)
    opening = replace(notifications.opened(change.incident, None, T0), held=True)
    incident = store.save_incident(change, (opening,))
    inner.full = True
    assert store.release_held(incident.id, "db: connection refused") == 0
    assert store.degraded()
    inner.full = False
    store.record_intent(restart(2))
    [(payload,)] = inner.db.query("SELECT payload FROM outbox WHERE dispatched=0")
    assert json.loads(payload)["detail"] == "db: connection refused"
    assert not store.degraded()
    store.close()


def test_a_restart_held_in_memory_counts_after_an_earlier_runs_counter_reset_stamped_ahead(
    tmp_path: Path,
) -> None:
    """An earlier run reset the counter, then the wall clock stepped back ten minutes before
    this run began, so the reset's stamp lies ahead of this run's clock. This run restarts
    the container on a full disk (the intent is held in memory): the reset came before that
    restart, which still counts against the budget once the clock passed the reset's stamp
    (sim seed 570 on the sweep's workers: a third restart within max_attempts 2)."""
    inner = FullDisk(tmp_path / "g.db")
    inner.record_reset("h", "web", T0 + timedelta(minutes=10))  # the earlier run's
    clock = FakeClock()
    store = LoopStore(inner, PrometheusMetrics(CollectorRegistry()), FactStream(), RunStamps(clock))
    inner.full = True
    clock.advance(60)
    assert store.record_intent(restart(60)) < 0  # held in memory
    clock.advance(minutes=15)  # past the reset's stamp
    reset = store.last_reset("h", "web")
    counted = [at for at in store.restart_times("h", T0) if reset is None or at > reset]
    assert counted == [T0 + timedelta(seconds=60)]
    store.close()
