"""Log rules through the loop: only containers with a rule are followed, a match opens a
log_match incident that decide() handles like any other, a restart is verified by the new run's
output, and a container without a rule costs no thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.core.model import ActionKind, Outcome, ProblemType
from guardian.entrypoints.reloader import rebuild
from guardian.logs import FIELDS
from guardian.ports import EngineEvent
from guardian.readside.status import container_status
from guardian.service.watchers.log_watch import MAX_FOLLOWED
from tests.app import TestApp, make_app, settings_for
from tests.helpers import wait_until

RULE = {"guardian.enable": "true", "guardian.logs.match": "FATAL|too many open files"}
DB_RULE = {"containers": "db-*", "match": "x"}
CONFIG_RULE = {"containers": "api-*", "match": "OOM"}
RESTART = {"cooldown": "2s", "max_attempts": 3, "window": "1h", "verify_timeout": "30s"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[TestApp]:
    t = make_app(
        tmp_path, restart=RESTART, logs={"rules": [{"containers": "api-*", "match": "OOM"}]}
    )
    t.app.logs.start()  # as the daemon does
    yield t
    t.app.logs.stop()


def followers() -> list[threading.Thread]:
    return [th for th in threading.enumerate() if th.name == "log-follow" and th.is_alive()]


def started(t: TestApp, name: str) -> None:
    """The engine's start event for `name`, as the event listener hands it to the loop."""
    snap = t.engine.containers[t.engine.id_of(name)]
    t.healer.on_event(EngineEvent("start", snap.id, name, t.clock.now(), dict(snap.labels)))


def matched(t: TestApp, name: str) -> None:
    snap = t.engine.containers[t.engine.id_of(name)]
    wait_until(lambda: t.app.logs.matched(snap, t.clock.now()), 5, message=f"{name} matched")


def incident_of(t: TestApp, name: str):  # type: ignore[no-untyped-def]
    [incident] = t.store.open_incidents(t.host, name)
    return incident


def test_a_matched_line_opens_a_log_match_incident_and_the_container_is_restarted(
    world: TestApp,
) -> None:
    t = world
    t.engine.add("app", health=None, labels=RULE)
    t.healer.sweep()
    t.engine.log_stream("app").write("INFO ok\nINFO FATAL: pool exhausted DB_PASSWORD=hunter2\n")
    matched(t, "app")
    t.healer.sweep()
    assert t.restarted() == ["app"]
    incident = incident_of(t, "app")
    assert incident.type is ProblemType.LOG_MATCH
    assert incident.detail == (
        "log line matched /FATAL|too many open files/ (guardian.logs.match): "
        "INFO FATAL: pool exhausted DB_PASSWORD=***"
    )


def test_the_restart_is_verified_by_the_new_runs_output(world: TestApp) -> None:
    t = world
    t.engine.add("app", health=None, labels=RULE)
    t.healer.sweep()
    t.engine.log_stream("app").write("FATAL: pool exhausted\n")
    matched(t, "app")
    t.healer.sweep()
    started(t, "app")  # the restart's start: the new run is followed from its start
    t.engine.log_stream("app").write("INFO up again\n")
    t.clock.advance(11)  # no healthcheck: running 10 s without a new match
    t.verify()
    [restart] = t.restarts()
    assert restart.outcome is Outcome.SUCCEEDED
    assert t.engine.follows[-1][1] == t.clock.now() - timedelta(seconds=11)  # from its start


def test_a_match_after_the_restart_fails_its_verification_and_decide_holds_the_next(
    world: TestApp,
) -> None:
    t = world
    t.engine.add("app", health=None, labels=RULE)
    t.healer.sweep()
    t.engine.log_stream("app").write("FATAL: pool exhausted\n")
    matched(t, "app")
    t.healer.sweep()
    started(t, "app")
    t.engine.log_stream("app").write("too many open files\n")
    matched(t, "app")
    t.clock.advance(1)
    t.verify()
    [restart] = t.restarts()
    assert restart.outcome is Outcome.UNHEALTHY_AFTER_RESTART
    assert "matched again after the restart" in restart.detail
    t.healer.sweep()  # still matched, within the 2 s cooldown: held, not restarted again
    assert t.restarted() == ["app"]
    assert [a.reason for a in t.actions("app") if a.kind == ActionKind.DECISION] == ["cooldown"]


def test_a_container_without_a_rule_costs_no_follower_thread(world: TestApp) -> None:
    t = world
    before = followers()
    for name in ("web", "db", "worker"):
        t.engine.add(name)
    t.healer.sweep()
    assert t.engine.follows == [] and followers() == before == []
    assert t.app.logs.followed() == []


def test_config_rules_follow_the_containers_their_selector_names(world: TestApp) -> None:
    t = world
    t.engine.add("api-1", health=None)
    t.engine.add("db-1", health=None)
    t.healer.sweep()
    assert t.app.logs.followed() == ["api-1"]
    t.engine.log_stream("api-1").write("java.lang.OOM\n")
    matched(t, "api-1")
    t.healer.sweep()
    assert incident_of(t, "api-1").detail.startswith("log line matched /OOM/ (logs.rules[0]): ")


def test_an_invalid_label_pattern_is_one_warning_naming_the_container_and_the_label(
    world: TestApp, caplog: pytest.LogCaptureFixture
) -> None:
    t = world
    t.engine.add("app", labels={"guardian.enable": "true", "guardian.logs.match": "(abc"})
    with caplog.at_level(logging.WARNING, "guardian"):
        t.healer.sweep()
        t.healer.sweep()
    [warned] = [getattr(r, FIELDS) for r in caplog.records if r.getMessage() == "bad label ignored"]
    assert warned == {
        "container": "app",
        "problem": "label guardian.logs.match='(abc': invalid RE2 pattern: missing ): (abc; "
        "rule ignored",
    }
    assert t.engine.follows == []


def test_a_follower_attaches_again_when_the_stream_ended_and_the_container_runs(
    world: TestApp,
) -> None:
    t = world
    t.engine.add("app", health=None, labels=RULE)
    t.healer.sweep()
    t.engine.log_stream("app").end()  # the container stopped: the engine ends the stream
    wait_until(lambda: t.app.logs.followed() == [], 5, message="the follower ended")
    t.healer.sweep()
    assert len(t.engine.follows) == 2 and t.app.logs.followed() == ["app"]


def test_a_match_from_before_the_last_start_is_stale(world: TestApp) -> None:
    t = world
    t.engine.add("app", health=None, labels=RULE)
    t.healer.sweep()
    t.engine.log_stream("app").write("FATAL\n")
    matched(t, "app")
    t.clock.advance(1)
    t.engine.set("app", started_at=t.clock.now())  # restarted by someone else, event missed
    t.healer.sweep()
    assert t.restarted() == [] and t.store.open_incidents(t.host, "app") == []


def test_nothing_is_followed_before_the_daemon_starts_it_nor_after_it_stops(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path)  # `guardian check`: the loop without the daemon
    t.engine.add("app", labels=RULE)
    t.healer.sweep()
    assert t.engine.follows == []
    t.app.logs.start()
    t.healer.sweep()
    stream = t.engine.log_stream("app")
    t.app.logs.stop()
    assert stream.closed and followers() == []


def test_a_follower_behind_a_flood_drops_the_backlog_and_follows_from_the_end(
    world: TestApp,
) -> None:
    t = world
    t.engine.add("app", health=None, labels=RULE)
    t.healer.sweep()
    stream = t.engine.log_stream("app")
    stream.written_at = t.clock.now() - timedelta(seconds=30)  # the engine delivers it late
    stream.write("INFO written half a minute ago\n")
    wait_until(lambda: len(t.engine.follows) == 2, 5, message="attached again")
    assert stream.closed and t.app.logs.skipped == 1
    _, since, tail, _ = t.engine.follows[-1]
    assert (since, tail) == (t.clock.now(), 0)  # from the end of the log: no backlog


def test_a_reload_follows_the_new_rules(world: TestApp, tmp_path: Path) -> None:
    t = world
    t.engine.add("api-1", health=None)
    t.engine.add("db-1", health=None)
    t.healer.sweep()
    assert t.app.logs.followed() == ["api-1"]
    new = settings_for(
        tmp_path / "new", {"logs": {"rules": [{"containers": "db-*", "match": "x"}]}}
    )
    rebuild(t.app, new)
    t.healer.sweep()
    assert t.app.logs.followed() == ["db-1"]
    assert t.engine.log_stream("db-1") is not None
    assert [s.closed for c, _, _, s in t.engine.follows if c == t.engine.id_of("api-1")] == [True]


def test_a_reload_that_gives_ruleless_containers_a_rule_follows_them(
    world: TestApp, tmp_path: Path
) -> None:
    """Sweeps of the same containers, none with a rule, do not work the rules out again; a
    reload that gives them one does, at the next sweep."""
    t = world
    t.engine.add("web-1", health=None)
    for _ in range(3):
        t.clock.advance(10)
        t.healer.sweep()
    assert t.app.logs.followed() == []
    rebuild(
        t.app,
        settings_for(
            tmp_path / "new", {"logs": {"rules": [{"containers": "web-*", "match": "x"}]}}
        ),
    )
    t.healer.sweep()
    assert t.app.logs.followed() == ["web-1"]


# -- the slots: the operator's rules first (issue 64) -----------------------------------------

NEVER = {"guardian.enable": "true", "guardian.logs.match": "never-printed-[0-9]{40}"}


def filled(t: TestApp, count: int = MAX_FOLLOWED + 6) -> list[str]:
    """`count` running containers whose own labels ask for their output to be followed,
    swept before anything else: more than there are slots."""
    names = [f"squat-{n:03d}" for n in range(count)]
    for name in names:
        t.engine.add(name, health=None, labels=NEVER)
    t.healer.sweep()
    return names


def waiting_now(t: TestApp) -> float | None:
    return t.app.metrics.registry.get_sample_value("guardian_log_rules_unfollowed")


def told(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        getattr(r, FIELDS)["container"]
        for r in caplog.records
        if r.getMessage() == "log rule not followed: every slot is taken"
    ]


def test_labelled_containers_that_came_first_keep_no_slot_from_the_operators_rule(
    world: TestApp, caplog: pytest.LogCaptureFixture
) -> None:
    t = world
    with caplog.at_level(logging.WARNING, "guardian"):
        squatters = filled(t)
        assert len(t.app.logs.followed()) == MAX_FOLLOWED and waiting_now(t) == 6
        t.engine.add("api-victim", health=None)  # named by logs.rules: api-*
        started(t, "api-victim")  # into a full house: it takes the last-ranked label's slot
    assert "api-victim" in t.app.logs.followed()
    assert len(t.app.logs.followed()) == MAX_FOLLOWED
    assert waiting_now(t) == 7
    # Each container left waiting is told of once, by name, the one the victim displaced too.
    assert sorted(told(caplog)) == squatters[MAX_FOLLOWED - 1 :]
    t.engine.log_stream("api-victim").write("java.lang.OOM\n")
    matched(t, "api-victim")
    t.healer.sweep()
    assert t.restarted() == ["api-victim"]
    assert sorted(told(caplog)) == squatters[MAX_FOLLOWED - 1 :]  # not told again


def test_a_sweep_gives_the_operators_rule_a_slot_its_start_event_did_not(
    world: TestApp,
) -> None:
    t = world
    filled(t)
    t.engine.add("api-victim", health=None)  # its start event unheard
    t.healer.sweep()
    assert "api-victim" in t.app.logs.followed() and waiting_now(t) == 7


def test_a_freed_slot_goes_to_the_next_waiting_container(world: TestApp) -> None:
    t = world
    squatters = filled(t)
    first_waiting = squatters[MAX_FOLLOWED]
    t.engine.remove(squatters[0])
    t.healer.sweep()
    assert first_waiting in t.app.logs.followed() and waiting_now(t) == 5


def test_a_label_rule_started_into_a_full_house_waits(
    world: TestApp, caplog: pytest.LogCaptureFixture
) -> None:
    t = world
    filled(t, MAX_FOLLOWED)
    t.engine.add("zz-late", health=None, labels=NEVER)
    with caplog.at_level(logging.WARNING, "guardian"):
        started(t, "zz-late")
    assert "zz-late" not in t.app.logs.followed() and waiting_now(t) == 1
    assert told(caplog) == ["zz-late"]


def test_status_says_whose_log_rule_is_not_followed(world: TestApp) -> None:
    t = world
    squatters = filled(t)
    rows = {row.name: row for row in container_status(t.healer, t.app.operator)}
    waiting = [name for name, row in rows.items() if row.notes]
    assert waiting == squatters[MAX_FOLLOWED:]
    assert rows[waiting[0]].notes[0].startswith("log rule not followed")
    assert rows[squatters[0]].notes == ()


def test_guardian_status_works_out_the_same_slots_without_the_daemon(tmp_path: Path) -> None:
    t = make_app(tmp_path, logs={"rules": [CONFIG_RULE]})  # `guardian status`: nothing followed
    squatters = [f"squat-{n:03d}" for n in range(MAX_FOLLOWED + 2)]
    for name in squatters:
        t.engine.add(name, health=None, labels=NEVER)
    t.engine.add("api-victim", health=None)
    rows = {row.name: row for row in container_status(t.healer, t.app.operator)}
    assert sorted(name for name, row in rows.items() if row.notes) == squatters[-3:]
