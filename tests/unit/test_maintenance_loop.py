"""Maintenance windows through the loop: config and labels read, no restart while a window
holds (the reason recorded), healing at its end, and a clock step never ending a window early."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from guardian.config import ConfigError
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import rules_for
from guardian.service.watchers.clock_steps import StepWatch
from tests.app import make_app, settings_for
from tests.fakes import T0

# T0 is 12:00 UTC: a window from 11:30 for an hour holds until 12:30.
NOON_WINDOW = {"containers": "db-*", "cron": "30 11 * * *", "duration": "1h"}


def reasons(t, name: str) -> list[str]:
    return [a.reason for a in t.store.actions(t.host, name)]


def test_a_container_broken_inside_its_window_is_healed_at_the_windows_end(tmp_path: Path):
    t = make_app(tmp_path, maintenance={"windows": [NOON_WINDOW]})
    t.engine.add("db-main", health="unhealthy")
    t.engine.add("web", health="unhealthy")  # not matched: healed at once
    t.healer.sweep()
    assert t.restarted() == ["web"]
    for _ in range(5):  # 25 minutes inside the window: one record, no restart
        t.clock.advance(minutes=5)
        t.healer.sweep()
    assert reasons(t, "db-main") == ["silenced"]
    t.clock.advance(minutes=5)  # 12:30: the window has ended
    t.healer.sweep()
    assert t.restarted() == ["web", "db-main"]
    assert reasons(t, "db-main") == ["silenced", "allowed"]


def test_a_label_window_holds_its_own_container_only(tmp_path: Path):
    t = make_app(tmp_path)
    t.engine.add(
        "app",
        health="unhealthy",
        labels={"guardian.enable": "true", "guardian.maintenance": "30 11 * * * 1h"},
    )
    t.engine.add("other", health="unhealthy")
    t.healer.sweep()
    assert t.restarted() == ["other"]
    t.clock.advance(minutes=30)
    t.healer.sweep()
    assert t.restarted() == ["other", "app"]


@pytest.mark.parametrize(("hours", "then"), [(-1, 60), (1, 0)])
def test_a_clock_step_never_ends_a_window_early(tmp_path: Path, hours: int, then: int):
    """Seen in the window at 12:00 (30 real minutes left), then the clock steps: forward an
    hour (past the window's end by the calendar), the container stays held for those 30 real
    minutes; back an hour (before the window by the calendar), too, and as the wall clock then
    reaches 11:30 again the calendar's window holds it once more (waiting longer, never acting
    sooner: docs/design.md rule 12)."""
    t = make_app(tmp_path, maintenance={"windows": [NOON_WINDOW]})
    steps = StepWatch(t.clock, t.app.metrics, t.app.loop.follow_step)
    t.engine.add("db-main", health="unhealthy")
    t.healer.sweep()
    t.clock.step(hours=hours)
    t.engine.clock_stepped(timedelta(hours=hours))
    steps.look()
    for _ in range(5 + then // 5):
        t.clock.advance(minutes=5)
        t.healer.sweep()
    assert t.restarted() == []
    t.clock.advance(minutes=5)
    t.healer.sweep()
    assert t.restarted() == ["db-main"]


def test_a_person_silence_longer_than_the_window_holds_past_it(tmp_path: Path):
    from guardian.service.operator import Operator

    t = make_app(tmp_path, host="host", maintenance={"windows": [NOON_WINDOW]})
    Operator(t.store, t.clock, "host").silence("db-main", timedelta(hours=2), "x", "ana")
    t.engine.add("db-main", health="unhealthy")
    t.healer.sweep()
    t.clock.advance(minutes=45)  # past the window, inside the person's silence
    t.healer.sweep()
    assert t.restarted() == []
    t.clock.advance(minutes=80)
    t.healer.sweep()
    assert t.restarted() == ["db-main"]


def test_the_short_form_and_the_environment_are_read(tmp_path: Path):
    settings = settings_for(tmp_path, {})
    path = tmp_path / "short.yaml"
    path.write_text("maintenance:\n  - {containers: 'db-*', cron: '0 2 * * *', duration: 1h}\n")
    from guardian.config import load_settings

    [window] = load_settings(path, env={})["maintenance.windows"]
    assert (window.containers, window.duration, window.origin) == (
        "db-*",
        timedelta(hours=1),
        "maintenance.windows[0]",
    )
    env = {
        "GUARDIAN_MAINTENANCE_WINDOWS": '[{"containers": "x", "cron": "0 3 * * 0", '
        '"duration": "30m", "tz": "Europe/Berlin"}]'
    }
    [window] = load_settings(None, env=env)["maintenance.windows"]
    assert str(window.zone) == "Europe/Berlin" and window.applies_to("x")
    assert settings["maintenance.windows"] == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "maintenance:\n  - {containers: 'db-*', cron: '0 25 * * *', duration: 1h}\n",
            "maintenance.windows[0].cron: ",
        ),
        (
            "maintenance:\n  - {containers: 'db-*', cron: '0 2 * * *', duration: 0s}\n",
            "maintenance.windows[0].duration: ",
        ),
        (
            "maintenance:\n  - {containers: 'a', cron: '0 2 * * *', duration: 1h, tz: Mars/X}\n",
            "maintenance.windows[0].tz: ",
        ),
        (
            "maintenance:\n  windows: [{containers: 'a', cron: '0 2 * * *', when: 1h}]\n",
            "maintenance.windows[0].when: unknown key",
        ),
        ("maintenance:\n  windows: [3]\n", "maintenance.windows[0]: expected a mapping"),
    ],
)
def test_a_bad_window_is_one_line_naming_the_field(tmp_path: Path, text: str, message: str):
    from guardian.config import load_settings

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={})
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_bad_maintenance_label_is_a_warning_and_the_rest_applies():
    labels = {
        "guardian.enable": "true",
        "guardian.maintenance": "0 2 * * * forever",
        "guardian.max_attempts": "1",
    }
    rules = rules_for(labels, RestartPolicy(), timedelta(seconds=10), "guardian.enable")
    assert rules.maintenance == () and rules.policy.max_attempts == 1
    [warning] = rules.warnings
    assert warning.startswith("label guardian.maintenance=") and "duration" in warning


def test_t0_is_inside_the_window_the_tests_use():
    from guardian.config import load_settings

    assert load_settings(None, env={})["maintenance.windows"] == ()  # built-in: no window
    from guardian.core.detection.windows import from_config

    window = from_config(NOON_WINDOW, "w")
    assert window.active_at(T0) == (T0 - timedelta(minutes=30), T0 + timedelta(minutes=30))


def test_status_shows_each_window_in_force_and_its_next_start(tmp_path: Path):
    from guardian.readside.status import container_status
    from guardian.readside.views import maintenance_view

    t = make_app(tmp_path, maintenance={"windows": [NOON_WINDOW]})
    t.engine.add("db-main", health="unhealthy")
    t.engine.add("web")
    t.engine.add(
        "app",
        labels={"guardian.enable": "true", "guardian.maintenance": "0 3 * * 0 2h Europe/Berlin"},
    )
    statuses = {c.name: c for c in container_status(t.healer, t.app.operator)}
    assert statuses["db-main"].held_back == "silenced"
    assert statuses["db-main"].retry_at == T0 + timedelta(minutes=30)
    rows = maintenance_view(statuses.values(), T0)
    assert sorted(rows, key=lambda r: r["container"]) == [
        {
            "container": "app",
            "window": "0 3 * * 0 for 2h (Europe/Berlin)",
            "from": "label guardian.maintenance",
            "in_force_until": None,
            "next_start": "2026-01-04T02:00:00+00:00",  # Sunday 03:00 CET
        },
        {
            "container": "db-main",
            "window": "30 11 * * * for 1h (UTC)",
            "from": "maintenance.windows[0]",
            "in_force_until": "2026-01-01T12:30:00+00:00",
            "next_start": "2026-01-02T11:30:00+00:00",
        },
    ]
    assert t.restarted() == []  # a read: nothing restarted
