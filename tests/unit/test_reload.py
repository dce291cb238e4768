"""`systemctl reload guardian` (SIGHUP): a valid config takes effect in the running loop without
losing in-flight work, a broken one is refused, and keys that need a restart are named."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from guardian.config import SCHEMA, ConfigError, Settings, reloadable
from guardian.core.model import ActionKind, Outcome
from guardian.entrypoints.daemon import Daemon
from tests.app import TestApp, make_app, settings_for
from tests.notify import RecordingNotifier, Ticks

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BASE: dict[str, dict[str, Any]] = {
    "watch": {"interval": "10s"},
    "restart": {"cooldown": "2s", "stop_timeout": "1s", "verify_timeout": "30s"},
}


class Config:
    """The config file a reload re-reads: `edit()` changes it, `broken()` spoils it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.sections: dict[str, dict[str, Any]] = {k: dict(v) for k, v in BASE.items()}
        self.error: str | None = None

    def edit(self, section: str, **values: Any) -> None:
        self.sections.setdefault(section, {}).update(values)

    def broken(self) -> None:
        self.error = "restart.cooldown = 'soon': expected a duration"

    def read(self) -> Settings:
        if self.error:
            raise ConfigError(self.error)
        return settings_for(self.tmp / "reread", self.sections)


@pytest.fixture(autouse=True)
def keep_log_level() -> Iterator[None]:
    """A reload sets the `guardian` logger's level: other tests keep theirs."""
    logger = logging.getLogger("guardian")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[TestApp, Daemon, Config, RecordingNotifier]]:
    notifier = RecordingNotifier(Ticks(), watchdog_s=60)
    t = make_app(tmp_path, daemon=True, supervisor=notifier, **BASE)
    config = Config(tmp_path)
    yield t, Daemon(t.app, reread=config.read), config, notifier
    t.store.close()


def test_a_changed_policy_applies_to_containers_already_seen(world) -> None:
    t, daemon, config, _ = world
    t.engine.add("app")
    daemon.sweep()  # the container's rules are worked out with dry_run off

    config.edit("restart", dry_run=True)
    daemon.reloader.reload()
    t.engine.set("app", health="unhealthy")
    daemon.sweep()

    assert t.restarted() == []
    decisions = [a for a in t.actions("app") if a.kind == ActionKind.DECISION]
    assert [a.reason for a in decisions] == ["dry_run"]


def test_a_changed_watch_label_watches_the_newly_labelled_containers(world) -> None:
    t, daemon, config, _ = world
    t.engine.add("team", health="unhealthy", labels={"team.heal": "true"})
    daemon.sweep()
    assert t.restarted() == []

    config.edit("watch", label="team.heal")
    daemon.reloader.reload()
    daemon.sweep()

    assert t.restarted() == ["team"]


def test_a_restart_awaiting_verification_survives_the_reload(world) -> None:
    t, daemon, config, _ = world
    t.engine.after_restart_health = "starting"
    t.engine.add("app", health="unhealthy")
    daemon.sweep()
    assert t.restarted() == ["app"] and t.healer.ctx.state.verifications.pending()

    config.edit("restart", cooldown="1m", verify_timeout="5m")
    daemon.reloader.reload()
    t.engine.set("app", health="healthy")
    t.clock.advance(5)
    daemon.verify()

    [restart] = t.restarts()
    assert restart.outcome is Outcome.SUCCEEDED
    assert t.store.open_incidents(t.host)[0].resolved_by == "guardian"
    assert t.app.settings["restart.cooldown"] == timedelta(minutes=1)


def test_a_broken_config_is_refused_in_one_line_and_the_old_one_stays(world, caplog) -> None:
    t, daemon, config, notifier = world
    before = t.app.settings
    config.edit("restart", dry_run=True)
    config.broken()

    with caplog.at_level(logging.INFO, logger="guardian"):
        daemon.reloader.reload()

    [line] = [r for r in caplog.records if r.name == "guardian.daemon"]
    assert line.levelno == logging.ERROR
    assert line.getMessage() == "config reload refused; the running config stays in force"
    assert "restart.cooldown" in line.guardian_fields["reason"]
    assert t.app.settings is before
    fields = [f for _, f in notifier.sent]
    assert fields[0][0] == "RELOADING=1" and fields[-1][0] == "READY=1"  # not left reloading
    t.engine.add("app", health="unhealthy")
    daemon.sweep()
    assert t.restarted() == ["app"]  # dry_run was not applied


def test_keys_that_need_a_restart_keep_their_values_and_are_named(world, caplog) -> None:
    t, daemon, config, _ = world
    listen, store = t.app.settings["http.listen"], t.app.settings["store.path"]
    config.edit("http", listen="127.0.0.1:9999")
    config.edit("store", path="/elsewhere/guardian.db")
    config.edit("restart", cooldown="7s")

    with caplog.at_level(logging.INFO, logger="guardian"):
        daemon.reloader.reload()

    [line] = [r for r in caplog.records if r.name == "guardian.daemon"]
    assert line.levelno == logging.WARNING
    assert line.guardian_fields == {
        "applied": "restart.cooldown",
        "restart_needed": "store.path,http.listen",
    }
    assert t.app.settings["http.listen"] == listen and t.app.settings["store.path"] == store
    assert t.app.settings["restart.cooldown"] == timedelta(seconds=7)


def test_a_changed_interval_reschedules_the_sweep_and_the_stall_limit(world) -> None:
    _, daemon, config, _ = world
    daemon.schedule()
    config.edit("watch", interval="3s")

    daemon.reloader.reload()

    trigger = daemon.scheduler.get_job("sweep").trigger
    assert trigger.interval == timedelta(seconds=3)
    assert daemon.systemd.liveness.limit == 3 * 3 + 30  # 3 x interval + docker.timeout


def test_the_docs_list_exactly_the_keys_a_reload_applies() -> None:
    text = CONFIGURATION.read_text()
    listed = text.split("<!-- reloadable -->", 2)[1]
    keys = [f"{s}.{k}" for s, keys in SCHEMA.items() for k in keys]
    applied = {k for k in keys if reloadable(k)}
    named = {k for k in keys if f"`{k}`" in listed or f"`{k.split('.')[0]}.*`" in listed}
    assert named == applied


def test_an_open_status_page_shows_the_reloaded_policy_at_once(world) -> None:
    from guardian.readside.page import PageReader

    t, daemon, config, _ = world
    t.engine.add("app", health="unhealthy")
    daemon.sweep()  # restarted, then seen healthy
    t.verify()
    t.engine.set("app", health="unhealthy")
    t.clock.advance(1)
    daemon.sweep()  # held back: the 2 s cooldown
    page = PageReader(t.healer, t.app.operator, t.app.changes)
    [row] = page.read(True).rows
    assert "cooldown" in row["next_restart"] and "12:00:02" in row["next_restart"]

    config.edit("restart", cooldown="1h")
    daemon.reloader.reload()
    [row] = page.read(True).rows
    assert "cooldown" in row["next_restart"] and "13:00:00" in row["next_restart"]
