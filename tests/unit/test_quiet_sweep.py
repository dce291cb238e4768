"""Quiet containers (service/state/quiet.py, issue 44): an idle sweep judges again only what
changed, and each way a row kept from the last sweep could be stale is judged again: a listing that
changed without an event, an event, a recheck, a reload, a clock step, an outage, a healthy
streak's reset falling due, a namespace whose leader may change. Over the fake engine (which,
as DockerEngine's list does, hands the same snapshot for an unchanged container)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.core import incidents
from guardian.core.model import HealthCheckResult, IncidentState, ProblemType
from guardian.ports import EngineEvent
from guardian.service.state import quiet as quiet_module
from guardian.service.state.quiet import MAX_ROWS, HeardRechecks
from tests.app import TestApp, make_app


@pytest.fixture
def judged(w: TestApp, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each container was judged by a sweep."""
    return w.count_judged(monkeypatch)


def sweeps(w: TestApp, n: int, every: float = 10) -> None:
    for _ in range(n):
        w.clock.advance(every)
        w.healer.sweep()


def made_quiet(w: TestApp, judged: Counter[str], *names: str) -> None:
    """`names` running healthy, swept twice (quiet), the count of judgements started afresh."""
    for name in names:
        w.engine.add(name)
    sweeps(w, 2)
    judged.clear()


def event(w: TestApp, action: str, name: str, **extra: str) -> EngineEvent:
    snap = next(s for s in w.engine.containers.values() if s.name == name)
    attributes = {**snap.labels, "name": name, "image": "busybox", **extra}
    return EngineEvent(action, snap.id, name, w.clock.now(), attributes)


def test_an_idle_sweep_judges_no_quiet_container_again(w: TestApp, judged: Counter[str]) -> None:
    for i in range(1000):
        w.engine.add(f"ok{i}")
    w.engine.add("bare", health=None)  # no healthcheck: quiet too
    w.healer.sweep()
    assert len(judged) == 1001
    judged.clear()
    sweeps(w, 3)
    assert judged == Counter()
    # The sweep still counts every one of them (the report, the metrics).
    report = w.healer.sweep()
    assert len(report.rows) == 1001
    assert w.metric("guardian_containers_watched") == 1001


def test_a_listing_that_turns_unhealthy_without_an_event_is_judged_and_restarted(
    w: TestApp, judged: Counter[str]
) -> None:
    made_quiet(w, judged, "app", "other")
    w.engine.set("app", health="unhealthy")  # the stream never said so
    w.healer.sweep()
    assert judged == Counter({"app": 1})
    assert w.restarted() == ["app"]


def test_a_label_changed_under_a_quiet_container_is_judged(
    w: TestApp, judged: Counter[str]
) -> None:
    made_quiet(w, judged, "app")
    w.engine.set("app", labels={"guardian.enable": "false"})
    w.healer.sweep()
    w.engine.set("app", labels={"guardian.enable": "true", "guardian.max_attempts": "1"})
    w.healer.sweep()
    assert judged == Counter({"app": 1})  # no longer watched, then watched anew


@pytest.mark.parametrize("action", ["die", "start", "oom", "update", "health_status"])
def test_an_event_of_a_quiet_container_has_it_judged_again(
    w: TestApp, judged: Counter[str], action: str
) -> None:
    # A person's `docker restart` leaves the listing as it was: running, healthy.
    made_quiet(w, judged, "app", "other")
    w.healer.on_event(event(w, action, "app", health_status="healthy"))
    sweeps(w, 2)
    assert judged == Counter({"app": 1})


def test_a_recheck_asked_between_two_sweeps_has_the_container_judged(
    w: TestApp, judged: Counter[str]
) -> None:
    # A log rule's match asks a recheck; without a scheduler the next sweep is that recheck.
    made_quiet(w, judged, "app")
    asked: list[str] = []

    class Scheduler:
        def recheck(self, container_id: str, _at: object) -> None:
            asked.append(container_id)

    HeardRechecks(w.healer.quiet, Scheduler()).recheck(w.engine.id_of("app"), w.clock.now())
    w.healer.sweep()
    assert judged == Counter({"app": 1}) and asked == [w.engine.id_of("app")]


def test_a_reaction_has_the_container_judged_at_the_next_sweep(
    w: TestApp, judged: Counter[str]
) -> None:
    # A probe's or a resource rule's verdict reacts at once; the sweep after judges it anew.
    made_quiet(w, judged, "app")
    w.healer.react(w.engine.id_of("app"), source="probe")
    w.healer.sweep()
    assert judged == Counter({"app": 1})


def test_a_reload_has_every_container_judged_again(w: TestApp, judged: Counter[str]) -> None:
    made_quiet(w, judged, "a", "b")
    rules = w.healer.ctx.rules
    rules.retune(replace(rules.settings, stop_timeout=timedelta(seconds=3)))
    w.healer.sweep()
    assert judged == Counter({"a": 1, "b": 1})


def test_a_clock_step_has_every_container_judged_again(w: TestApp, judged: Counter[str]) -> None:
    made_quiet(w, judged, "a")
    w.healer.follow_step(timedelta(hours=1))
    w.healer.sweep()
    assert judged == Counter({"a": 1})


def test_an_outage_has_every_container_judged_again(w: TestApp, judged: Counter[str]) -> None:
    w.engine.add("a")
    sweeps(w, 2)
    w.engine.reachable = False
    w.healer.sweep()
    w.engine.reachable = True
    judged.clear()
    w.healer.sweep()
    assert judged == Counter({"a": 1})


def test_a_quiet_containers_healthy_streak_still_resets_its_counter_when_due(
    w: TestApp, judged: Counter[str]
) -> None:
    w.engine.add("app")
    w.healer.sweep()
    sweeps(w, 1, every=300)
    assert w.store.last_reset("h", "app") is None and judged["app"] == 1
    sweeps(w, 1, every=301)  # healthy for reset_after (600 s)
    assert w.store.last_reset("h", "app") == w.clock.now() and judged["app"] == 2
    sweeps(w, 3)
    assert judged["app"] == 2  # checked once a streak: quiet again


def test_a_container_with_an_open_incident_is_judged_at_every_sweep(
    w: TestApp, judged: Counter[str]
) -> None:
    w.engine.add("app", health="unhealthy")
    w.healer.sweep()
    w.healer.verifier.verify()  # healthy again: the incident is resolved, not closed
    [incident] = w.store.open_incidents("h")
    assert incident.state is IncidentState.RESOLVED
    judged.clear()
    sweeps(w, 3)
    assert judged == Counter({"app": 3})


def test_a_namespace_follower_is_judged_at_every_sweep(w: TestApp, judged: Counter[str]) -> None:
    w.engine.add("vpn")
    w.engine.add("app", namespaces=(("network", "vpn"),))
    sweeps(w, 1)
    judged.clear()
    sweeps(w, 3)
    assert judged == Counter({"app": 3})


def test_a_storm_among_quiet_containers_holds_every_restart(tmp_path: Path) -> None:
    w = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "5m"})
    for i in range(10):
        w.engine.add(f"c{i}")
    sweeps(w, 2)  # all ten quiet
    for i in range(8):
        w.engine.set(f"c{i}", health="unhealthy")
    w.healer.sweep()  # eight of ten at once: a storm, held
    assert w.restarted() == []
    assert w.actions("c0")[-1].reason == "storm"


def test_an_event_while_the_sweep_runs_has_a_row_it_took_judged_at_the_next(
    w: TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    w.engine.add("a")
    w.engine.add("b")
    sweeps(w, 2)
    w.engine.set("b", labels={"guardian.enable": "true", "guardian.max_attempts": "2"})
    assess, judged = w.healer.assess, Counter[str]()

    def meanwhile(snap, source, detected_at=None):  # type: ignore[no-untyped-def]
        judged[snap.name] += 1
        if snap.name == "b":  # "a" was taken quiet before; an event of it comes now
            w.healer.on_event(event(w, "die", "a"))
        return assess(snap, source, detected_at)

    monkeypatch.setattr(w.healer, "assess", meanwhile)
    w.healer.sweep()
    assert judged == Counter({"b": 1})
    judged.clear()
    w.healer.sweep()
    assert judged["a"] == 1


def test_a_flood_of_events_during_a_sweep_keeps_no_row(w: TestApp) -> None:
    # Hostile: containers created and destroyed as fast as the engine can, each a new id.
    w.engine.add("a")
    sweeps(w, 2)
    quiet = w.healer.quiet
    rows = quiet.begin(w.healer.ctx.settings)
    assert list(rows) == [w.engine.id_of("a")]
    for i in range(MAX_ROWS + 5):
        quiet.heard(f"{i:064x}")
    quiet.keep(rows)
    assert quiet.begin(w.healer.ctx.settings) == {}  # all judged again


def test_an_idle_sweep_takes_the_last_sweeps_rows_whole_until_anything_could_change_them(
    w: TestApp, judged: Counter[str]
) -> None:
    """A sweep that kept every row quiet leaves them whole: the next sweep of the same list
    takes the very rows at once; an incident opened under one of their names (a write of
    another process, which no event tells) has that container judged at the next sweep."""
    made_quiet(w, judged, "web", "db")
    first = w.healer.sweep().rows
    again = w.healer.sweep().rows
    assert [id(a) for a in again] == [id(a) for a in first] and judged == Counter()
    result = HealthCheckResult("id", "db", w.clock.now(), ProblemType.UNHEALTHY, "from the CLI")
    w.store.save_incident(incidents.record_detection(None, "h", result, w.clock.now()))
    w.healer.sweep()
    assert judged == Counter({"db": 1})


def test_a_reset_check_falling_due_ends_the_whole(w: TestApp, judged: Counter[str]) -> None:
    """The rows taken whole hold only until the soonest healthy streak's reset check."""
    w.engine.add("app")
    w.healer.sweep()
    sweeps(w, 3, every=60)
    assert judged["app"] == 1
    sweeps(w, 1, every=500)  # 680 s healthy: past reset_after (600 s)
    assert judged["app"] == 2 and w.store.last_reset("h", "app") is not None


def test_beyond_max_rows_the_containers_past_the_bound_are_judged_at_every_sweep(
    w: TestApp, judged: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows kept stop at MAX_ROWS: a sweep of more quiet containers keeps no whole, and
    those past the bound are judged at every sweep."""
    monkeypatch.setattr(quiet_module, "MAX_ROWS", 3)
    made_quiet(w, judged, "a", "b", "c", "d", "e")
    sweeps(w, 3)
    assert sorted(judged.items()) == [("d", 3), ("e", 3)]
