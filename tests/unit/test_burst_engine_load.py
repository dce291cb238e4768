"""A burst costs the engine the restarts and no more (issue 18): while Guardian's own restart of
a container runs, the events it causes start no reaction, and a sweep that meets the container
mid-restart leaves it to the restart. Each such look was an inspect of a container the engine is
stopping: it answers only once the stop is done (measured: up to 9.7 s in a 100-container burst)
and holds a job thread, or the whole sweep, meanwhile."""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from guardian.core.assessment import SweepReport
from guardian.core.model import ActionOutcome, ContainerSnapshot, ProblemType
from guardian.core.verification import PendingVerify, awaiting_first_check, judge
from guardian.entrypoints.daemon import Daemon
from guardian.ports import EngineEvent
from tests.app import TestApp, make_app
from tests.fakes import T0
from tests.helpers import run_in_main_thread, wait_until

WATCHED = {"guardian.enable": "true"}
# What the engine reports about a container while `docker restart` stops and starts it.
RESTART_EVENTS = ("kill", "die", "stop", "start", "restart")


def during_restart(
    w: TestApp, monkeypatch: pytest.MonkeyPatch, step: object
) -> list[ActionOutcome]:
    """Run `step()` inside the engine's first restart call, as the event listener and the sweep
    do on other threads while the call waits for the container to stop."""
    real = w.engine.restart
    outcomes: list[ActionOutcome] = []
    calls: list[str] = []

    def restart(cid: str, timeout: timedelta, started: datetime | None) -> ActionOutcome:
        calls.append(cid)
        if len(calls) == 1:
            w.engine.set(w.engine.containers[cid].name, state="exited", exit_code=143)
            step()  # type: ignore[operator]
        outcome = real(cid, timeout, started)
        outcomes.append(outcome)
        return outcome

    monkeypatch.setattr(w.engine, "restart", restart)
    return outcomes


def test_the_events_of_guardians_own_restart_start_no_reaction(
    w: TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = w.engine.add("app", health="unhealthy")
    other = w.engine.add("other")
    reacts: list[tuple[str, str, bool]] = []

    def events() -> None:
        for cid, name in ((snap.id, "app"), (other.id, "other")):
            for action in RESTART_EVENTS:
                event = EngineEvent(action, cid, name, w.clock.now(), WATCHED)
                reacts.append((name, action, w.healer.on_event(event)))

    during_restart(w, monkeypatch, events)
    w.healer.react(snap.id)
    assert len(w.engine.restarts) == 1
    ours = [action for name, action, react in reacts if name == "app" and react]
    assert ours == []  # the restart's own death: nothing to inspect, the restart is at it
    # Another container dying meanwhile is news, and so is this one's death once the restart
    # returned: the verification judges it at once.
    assert ("other", "die", True) in reacts
    assert w.healer.on_event(EngineEvent("die", snap.id, "app", w.clock.now(), WATCHED))


def test_a_sweep_meeting_a_restart_midway_leaves_the_container_to_it(
    w: TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = w.engine.add("app", health="unhealthy")
    w.engine.add("sick", health="unhealthy")
    reports: list[tuple[int, SweepReport]] = []

    def sweep() -> None:
        before = w.engine.inspect_calls
        report = w.healer.sweep()
        reports.append((w.engine.inspect_calls - before, report))

    during_restart(w, monkeypatch, sweep)
    w.healer.react(snap.id)
    [(inspects, report)] = reports
    rows = {row.snapshot.name: row.result for row in report.rows}
    assert rows["app"].skipped == "restart_in_flight" and rows["app"].problem is None
    # The other unhealthy container is still inspected and healed by that sweep.
    assert inspects == 1 and rows["sick"].problem is ProblemType.UNHEALTHY
    assert len(w.engine.restarts) == 2
    # Nothing new was opened for the exit the restart itself caused.
    types = sorted((i.container, i.type) for i in w.store.open_incidents("h"))
    assert types == [("app", ProblemType.UNHEALTHY), ("sick", ProblemType.UNHEALTHY)]


def test_a_sweep_requests_every_restart_before_the_first_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events off (or the stream lost): the sweep finds the burst. A restart call returns once
    the engine has stopped and started the container, up to its stop timeout later; the sweep
    made the calls one after another, so the last of N containers waited for N stops. Here no
    call returns before all three are in: one after another, the first waits in vain."""
    t = make_app(
        tmp_path,
        daemon=True,
        http={"listen": "127.0.0.1:0"},
        watch={"events": False},
        restart={"max_concurrent": 3},
        storm={"threshold": "100%"},
    )
    names = ["a", "b", "c"]
    for name in names:
        t.engine.add(name, health="unhealthy")
    together = threading.Barrier(len(names), timeout=10)
    real = t.engine.restart

    def restart(cid: str, timeout: timedelta, started: datetime | None) -> ActionOutcome:
        together.wait()  # the engine stops them all at once
        return real(cid, timeout, started)

    monkeypatch.setattr(t.engine, "restart", restart)
    d = Daemon(t.app)

    def scenario() -> None:
        wait_until(
            lambda: sorted(str(a.outcome) for a in t.restarts()) == ["restarted"] * 3,
            20,
            message="three restarts returned",
        )

    run_in_main_thread(d.run_forever, scenario, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert sorted(t.restarted()) == names and not together.broken


def test_the_verify_tick_asks_one_list_for_a_burst_and_inspects_only_news(w: TestApp) -> None:
    """After a burst, every restarted container reports `starting` until its first health check:
    no verdict is possible then, and an inspect each told the busy engine nothing. The tick
    asks one list for all of them and inspects only those whose health has news."""
    names = [f"c{i}" for i in range(5)]
    for i in range(20):
        w.engine.add(f"ok{i}")  # five unhealthy out of 25: no storm
    for name in names:
        w.engine.add(name, health="unhealthy")
    w.engine.after_restart_health = "starting"
    w.healer.sweep()
    assert sorted(w.restarted()) == names
    lists, inspects = w.engine.list_calls, w.engine.inspect_calls
    w.clock.advance(1)
    w.healer.verifier.verify()  # all five due, all starting
    assert (w.engine.list_calls - lists, w.engine.inspect_calls - inspects) == (1, 0)
    w.engine.set("c0", health="healthy")
    w.engine.set("c1", health="unhealthy")
    w.clock.advance(2)
    w.healer.verifier.verify()
    assert w.engine.inspect_calls - inspects == 2  # the two with news, judged by an inspect
    outcomes = {a.container: str(a.outcome) for a in w.restarts()}
    assert outcomes == {
        "c0": "succeeded",
        "c1": "unhealthy_after_restart",
        **{n: "restarted" for n in names[2:]},
    }
    w.clock.advance(60)  # past verify_timeout: the rest are judged, each by its inspect
    w.healer.verifier.verify()
    assert w.engine.inspect_calls - inspects == 5
    assert {str(a.outcome) for a in w.restarts() if a.container in names[2:]} == {
        "unhealthy_after_restart"
    }


def test_a_restart_held_for_a_free_slot_goes_ahead_when_one_frees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """restart.max_concurrent holds the restarts beyond it (`max_concurrent` in the decision).
    When a restart call ends, the oldest held container is judged again at once, not at the next
    sweep: here the sweep comes once a minute, and all three are restarted within seconds."""
    t = make_app(
        tmp_path,
        daemon=True,
        http={"listen": "127.0.0.1:0"},
        watch={"events": False, "interval": "60s"},
        restart={"max_concurrent": 1},
        storm={"threshold": "100%"},
    )
    names = ["a", "b", "c"]
    for name in names:
        t.engine.add(name, health="unhealthy")
    d = Daemon(t.app)
    real = t.engine.restart

    def restart(cid: str, timeout: timedelta, started: datetime | None) -> ActionOutcome:
        d.first_sweep_done.wait(10)  # the engine is still stopping it when the sweep ends
        return real(cid, timeout, started)

    monkeypatch.setattr(t.engine, "restart", restart)
    held: list[str] = []

    def scenario() -> None:
        wait_until(lambda: sorted(t.restarted()) == names, 10, message="three restarts")
        held.extend(a.container for a in t.actions() if a.reason == "max_concurrent")

    run_in_main_thread(d.run_forever, scenario, lambda: os.kill(os.getpid(), signal.SIGTERM))
    # The first sweep held two of them: one slot. Which one took it is the workers' race (the
    # sweep hands its applies to them at once).
    assert len(held) == len(set(held)) == 2


@pytest.mark.parametrize("health", ["starting", "healthy", "unhealthy", None])
@pytest.mark.parametrize("before_deadline", [True, False])
def test_what_the_tick_skips_is_what_judge_cannot_decide(
    health: str | None, before_deadline: bool
) -> None:
    """The tick skips a container only where judge() would give no verdict, whatever the
    inspect it saves would have shown (a new start, or none)."""
    p = PendingVerify(1, 1, "app", "app-id", T0, T0 + timedelta(seconds=30), T0)
    now = T0 + timedelta(seconds=10 if before_deadline else 40)
    summary = ContainerSnapshot(id="app-id", name="app", labels={}, state="running", health=health)
    skipped = awaiting_first_check(p, summary, now)
    assert skipped == (health == "starting" and before_deadline)
    if skipped:
        for started in (None, T0 - timedelta(hours=1), T0 + timedelta(seconds=5)):
            full = replace(summary, inspected=True, started_at=started)
            assert judge(p, full, now, timedelta(seconds=30)) is None
