"""Maintenance windows' runs in the events feed: a start when a sweep first sees a window in
force, an end when a sweep sees it over, each once, across a restart of Guardian inside the
window and a window that ended while Guardian was down (told at the next start)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from guardian.core.detection.crontab import Cron
from guardian.core.detection.windows import MAX_NAME, MaintenanceWindow, periods_in_force
from guardian.entrypoints.reloader import rebuild
from guardian.service.state.maintenance import MaintenanceLog
from tests.app import TestApp, make_app, settings_for
from tests.fakes import T0

# T0 is 12:00 UTC: a window from 11:30 for an hour holds until 12:30.
NOON_WINDOW = {"containers": "db-*", "cron": "30 11 * * *", "duration": "1h"}


def maintenance_events(t: TestApp) -> list[tuple[str, Any, dict[str, Any]]]:
    page = t.app.operator.events(0, 1000)
    return [
        (e.kind, e.at, dict(e.fields)) for e in page.events if e.kind.startswith("maintenance.")
    ]


def test_a_window_in_force_is_one_start_and_one_end_at_its_end(tmp_path: Path) -> None:
    t = make_app(tmp_path, daemon=True, maintenance={"windows": [NOON_WINDOW]})
    t.engine.add("db-main", health="healthy")
    t.engine.add("web", health="healthy")
    t.healer.sweep()
    t.clock.advance(minutes=5)
    t.healer.sweep()
    [(kind, at, fields)] = maintenance_events(t)
    assert kind == "maintenance.started" and at == T0 - timedelta(minutes=30)
    assert fields["window"] == "maintenance.windows[0]" and fields["containers"] == "db-*"
    assert fields["until"] == (T0 + timedelta(minutes=30)).isoformat(timespec="microseconds")
    assert "30 11 * * *" in fields["schedule"]
    t.clock.advance(minutes=30)  # 12:35: over since 12:30
    t.healer.sweep()
    t.healer.sweep()
    assert [(k, at) for k, at, _ in maintenance_events(t)] == [
        ("maintenance.started", T0 - timedelta(minutes=30)),
        ("maintenance.ended", T0 + timedelta(minutes=30)),
    ]


def test_a_restart_inside_the_window_writes_no_second_start(tmp_path: Path) -> None:
    t = make_app(tmp_path, daemon=True, maintenance={"windows": [NOON_WINDOW]})
    t.engine.add("db-main", health="healthy")
    t.healer.sweep()
    t.clock.advance(minutes=10)
    again = t.restart_guardian()
    again.healer.sweep()
    assert [k for k, _, _ in maintenance_events(again)] == ["maintenance.started"]
    again.clock.advance(minutes=25)
    again.healer.sweep()
    assert [k for k, _, _ in maintenance_events(again)] == [
        "maintenance.started",
        "maintenance.ended",
    ]


def test_a_window_that_ended_while_guardian_was_down_ends_at_the_next_start(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path, daemon=True, maintenance={"windows": [NOON_WINDOW]})
    t.engine.add("db-main", health="healthy")
    t.healer.sweep()
    t.clock.advance(hours=3)  # Guardian was down from 12:00 to 15:00
    again = t.restart_guardian()
    again.healer.sweep()
    assert [(k, at) for k, at, _ in maintenance_events(again)] == [
        ("maintenance.started", T0 - timedelta(minutes=30)),
        ("maintenance.ended", T0 + timedelta(minutes=30)),  # its end, written at 15:00
    ]


def test_a_label_window_is_its_containers_and_ends_early_when_the_container_goes(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path, daemon=True)
    labels = {"guardian.enable": "true", "guardian.maintenance": "30 11 * * * 1h"}
    t.engine.add("app", health="healthy", labels=labels)
    t.healer.sweep()
    [(_, _, fields)] = maintenance_events(t)
    assert fields["containers"] == "app" and fields["window"] == "label guardian.maintenance"
    t.engine.remove("app")
    t.clock.advance(minutes=1)
    t.healer.sweep()
    assert [(k, at) for k, at, _ in maintenance_events(t)][-1] == (
        "maintenance.ended",
        T0 + timedelta(minutes=1),
    )


def test_a_guardian_check_records_no_maintenance(tmp_path: Path) -> None:
    t = make_app(tmp_path, maintenance={"windows": [NOON_WINDOW]})  # build_status: the CLI
    t.engine.add("db-main", health="healthy")
    t.healer.sweep()
    assert maintenance_events(t) == []


class FailingStore:
    def __init__(self) -> None:
        self.fail = True
        self.started: list[Any] = []

    def open_periods(self, host: str) -> list[Any]:
        from guardian.ports import StoreError

        if self.fail:
            raise StoreError("disk full")
        return []

    def start_period(self, host: str, period: Any) -> Any:
        self.started.append(period)
        return period

    def end_period(self, period_id: int, at: Any) -> None: ...


def test_a_store_that_fails_is_tried_again_at_the_next_sweep_and_texts_are_bounded() -> None:
    long = "x" * 1000
    window = MaintenanceWindow(long, Cron.parse("30 11 * * *"), timedelta(hours=1), origin=long)
    store = FailingStore()
    log = MaintenanceLog(store, lambda snap: (window,), "h", clock=None)  # type: ignore[arg-type]
    log.observe([window], T0)
    assert store.started == []
    store.fail = False
    log.observe([window], T0)
    [period] = store.started
    assert len(period.name) == MAX_NAME and len(period.containers) == MAX_NAME
    assert list(periods_in_force([window], T0)) == [period.key]


def test_a_reload_that_adds_a_window_over_the_same_containers_starts_it(tmp_path: Path) -> None:
    """Sweeps of the very same containers take their windows as the last sweep found them; a
    reload that gives them a window in force has it started at the next sweep."""
    t = make_app(tmp_path, daemon=True)
    t.engine.add("db-main", health="healthy")
    for _ in range(3):
        t.healer.sweep()
    assert maintenance_events(t) == []
    rebuild(t.app, settings_for(tmp_path / "new", {"maintenance": {"windows": [NOON_WINDOW]}}))
    t.healer.sweep()
    assert [k for k, _, _ in maintenance_events(t)] == ["maintenance.started"]
