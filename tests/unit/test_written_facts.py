"""LoopStore: the loop's writes are published as facts once written; a write the store refused
is told as "may be unwritten", and held actions written later as StoreRecovered."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.run_stamps import RunStamps
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core import incidents
from guardian.core.facts import AttemptWritten, Fact, IncidentWritten, StoreRecovered
from guardian.core.model import HealthCheckResult, Outcome, ProblemType, RemediationAction
from guardian.ports import Store, StoreError
from guardian.service.facts import FactStream
from guardian.service.healing.written import LoopStore
from tests.fakes import T0, FakeClock


class FullDisk(SqliteStore):
    """A real SQLite store whose action writes fail while `full` is set."""

    full = False

    def record_intent(self, action: RemediationAction, notifications=()) -> int:  # type: ignore[no-untyped-def]
        if self.full:
            raise StoreError(f"store {self.path}: database or disk is full")
        return super().record_intent(action, notifications)


def restart(incident: int | None) -> RemediationAction:
    return RemediationAction(
        None, incident, "h", "web", "id", "restart", T0 + timedelta(seconds=1), "allowed"
    )


def detection() -> incidents.IncidentChange:
    result = HealthCheckResult("id", "web", T0, ProblemType.UNHEALTHY, "down")
    return incidents.record_detection(None, "h", result, T0)


def build(tmp_path: Path) -> tuple[FullDisk, LoopStore, list[Fact]]:
    inner = FullDisk(tmp_path / "g.db")
    facts = FactStream()
    heard: list[Fact] = []
    facts.subscribe(heard.append)
    return (
        inner,
        LoopStore(inner, PrometheusMetrics(CollectorRegistry()), facts, RunStamps(FakeClock())),
        heard,
    )


def test_an_incident_write_carries_the_incident_as_written(tmp_path: Path) -> None:
    _, store, heard = build(tmp_path)
    change = detection()
    saved = store.save_incident(change)
    assert heard == [IncidentWritten("web", saved.id, saved)]
    assert saved.id is not None


def test_a_swallowed_incident_write_says_read_again(tmp_path: Path) -> None:
    inner, store, heard = build(tmp_path)

    def refuse(*args: object) -> object:
        raise StoreError("disk full")

    inner.save_incident = refuse  # type: ignore[method-assign,assignment]
    change = detection()
    store.save_incident(change)
    assert heard == [IncidentWritten("web", None, None)]


def test_held_actions_are_told_once_written(tmp_path: Path) -> None:
    inner, store, heard = build(tmp_path)
    inner.full = True
    held = store.record_intent(restart(None))
    store.record_outcome(held, Outcome.SUCCEEDED, "observed healthy", T0)
    assert heard == []  # nothing written yet
    inner.full = False
    written = store.record_intent(restart(None))
    assert heard == [StoreRecovered(), AttemptWritten("web", None, True)]
    store.record_outcome(written, Outcome.SUCCEEDED, "observed healthy", T0)
    assert heard[-1] == AttemptWritten("web", None, True)
    store.close()


# The Store port's methods LoopStore leaves to the inner store (reached through __getattr__).
READS = {
    "current_incident",
    "open_incidents",
    "get_incident",
    "transitions",
    "actions",
    "last_action",
    "unfinished_actions",
    "unanswered_restarts",
    "first_restart_after_reset",
    "history",
    "remembered",
    "list_incidents",
    "active_silence",
    "silences",
    "approvals",
    "approval_for",
    "unused_approvals",
    "rollback_requests",
    "events_after",
    "event_cursor_at",
    "event_horizon",
    "kept_records",
}
PERSONS_WRITES = {
    "save_state_change",
    "add_silence",
    "end_silence",
    "add_approval",
    "use_approval",
    "add_rollback_request",
    "use_rollback_request",
}


def test_every_other_method_of_the_port_is_a_loop_write_on_the_one_path() -> None:
    """A method added to the Store port is either a read or a person's write (raising on a
    failing store, published by the Operator), or a loop write LoopStore takes through _write:
    none reaches the inner store unnoticed."""
    port = {name for name in vars(Store) if not name.startswith("_")}
    own = {name for name in vars(LoopStore) if not name.startswith("_")}
    assert port - own == READS | PERSONS_WRITES
    assert port & own == {
        "save_incident",
        "record_intent",
        "record_outcome",
        "withdraw_unsent",
        "release_held",
        "record_reset",
        "remember",
        "move_problem_starts",
        "keep_record",
        "touch_kept",
        "restart_times",
        "last_reset",
        "close",
    }
