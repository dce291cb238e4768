"""A person's stop the event stream did not tell Guardian of (still on its way, the stream cut,
made before this run of Guardian began) is never undone: found in the engine's record or kept
in the store by an earlier run (service.watchers.stop_records; the simulator's F3). An exit the
engine recorded as a crash is still restarted."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from guardian.core.model import ActionKind, ContainerSnapshot, RemediationAction
from guardian.ports import EngineEvent
from tests.app import TestApp, make_world

LABELS = {"guardian.enable": "true"}


def event(w: TestApp, action: str, snap: ContainerSnapshot, **attributes: str) -> EngineEvent:
    """An event as the engine records it: the container's labels and name among its
    attributes."""
    attrs = {**LABELS, "name": snap.name, **attributes}
    return EngineEvent(action, snap.id, snap.name, w.clock.now(), attrs)


def stopped_by_a_person(w: TestApp, name: str, code: int = 1) -> ContainerSnapshot:
    """`docker stop` of a running container whose process answers SIGTERM with `code`: the
    engine records kill, die and stop (none of them read from the stream yet)."""
    snap = w.engine.add(name, health=None)
    w.engine.kept.append(event(w, "kill", snap, signal="15"))
    snap = w.engine.set(name, state="exited", exit_code=code, finished_at=w.clock.now())
    w.engine.kept.append(event(w, "die", snap, exitCode=str(code)))
    w.engine.kept.append(event(w, "stop", snap))
    return snap


def crashed(w: TestApp, name: str, code: int = 1) -> ContainerSnapshot:
    """The process ended on its own: the engine records its die alone."""
    snap = w.engine.add(name, health=None)
    snap = w.engine.set(name, state="exited", exit_code=code, finished_at=w.clock.now())
    w.engine.kept.append(event(w, "die", snap, exitCode=str(code)))
    return snap


def test_a_persons_stop_not_heard_yet_is_not_undone_by_a_sweep(w: TestApp) -> None:
    stopped_by_a_person(w, "app")
    w.clock.advance(10)
    w.healer.sweep()  # the stream has not told of it: the engine's record does
    assert w.engine.restarts == []
    assert w.store.open_incidents("h") == []
    w.engine.kept.clear()  # the ring rolled over: held all the same
    w.clock.advance(60)
    w.healer.sweep()
    assert w.engine.restarts == []


def test_an_exit_the_engine_recorded_as_a_crash_is_still_restarted(w: TestApp) -> None:
    crashed(w, "app")
    w.clock.advance(10)
    w.healer.sweep()
    assert w.restarted() == ["app"]


def test_an_exit_the_engine_no_longer_records_is_restarted_per_its_exit_code(w: TestApp) -> None:
    # Nobody heard how it ended and the engine's ring dropped it: a crash, as before.
    w.engine.add("app", state="exited", exit_code=1, health=None, finished_at=w.clock.now())
    w.healer.sweep()
    assert w.restarted() == ["app"]


def test_a_persons_stop_heard_by_an_earlier_run_is_not_undone_after_guardian_restarts(
    w: TestApp,
) -> None:
    snap = w.engine.add("app", health=None)
    w.healer.on_event(event(w, "kill", snap, signal="15"))
    snap = w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    w.healer.on_event(event(w, "die", snap, exitCode="1"))
    w.healer.on_event(event(w, "stop", snap))
    w.clock.advance(3600)  # the engine's ring holds none of it any more
    again = w.restart_guardian()
    again.healer.sweep()
    assert w.engine.restarts == []
    assert again.store.open_incidents("h") == []


def test_a_persons_stop_after_a_step_back_of_the_clock_is_kept_past_guardians_restart(
    w: TestApp,
) -> None:
    """The wall clock stepped back an hour after the container started: the engine stamps its
    start an hour after the person's stop. The next run of Guardian still leaves it alone
    (sim seed 1151 on the sweep's workers)."""
    snap = w.engine.add("app", health=None, started_at=w.clock.now())
    w.clock.step(hours=-1)
    w.healer.on_event(event(w, "kill", snap, signal="15"))
    snap = w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    w.healer.on_event(event(w, "die", snap, exitCode="1"))
    w.healer.on_event(event(w, "stop", snap))
    w.clock.advance(3600)  # the engine's ring holds none of it any more
    w.restart_guardian().healer.sweep()
    assert w.engine.restarts == []


def test_a_kept_stop_holds_only_until_the_container_starts_again(w: TestApp) -> None:
    snap = w.engine.add("app", health=None)
    w.healer.on_event(event(w, "stop", snap))
    w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    w.clock.advance(600)
    # While Guardian was down: a person started it again, and its process later crashed.
    w.engine.set("app", state="running", exit_code=0, started_at=w.clock.now())
    w.clock.advance(600)
    w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    w.restart_guardian().healer.sweep()
    assert w.restarted() == ["app"]


def test_a_persons_stop_in_the_record_read_at_start_up_is_held_when_the_ring_rolls_over(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path)
    stopped_by_a_person(w, "app")
    w.clock.advance(5)
    w.healer.read_engine_record()  # at start-up, before the first sweep
    w.engine.kept.clear()
    w.healer.sweep()
    assert w.engine.restarts == []


def test_guardians_own_restart_whose_start_failed_is_not_taken_for_a_persons_stop(
    w: TestApp,
) -> None:
    snap = w.engine.add("app", health=None)
    w.store.record_intent(
        RemediationAction(
            None, None, "h", "app", snap.id, ActionKind.RESTART, w.clock.now(), "allowed"
        )
    )
    # The restart stopped it (its process answered SIGTERM with 1); its start failed.
    w.clock.advance(0.2)
    w.engine.kept.append(event(w, "kill", snap, signal="15"))
    snap = w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    w.engine.kept.append(event(w, "die", snap, exitCode="1"))
    w.engine.kept.append(event(w, "stop", snap))
    w.clock.advance(timedelta(minutes=10).total_seconds())
    w.healer.sweep()
    assert w.restarted() == ["app"]


def test_guardian_status_shows_a_kept_stop_as_a_persons(w: TestApp) -> None:
    snap = w.engine.add("app", health=None)
    w.healer.on_event(event(w, "stop", snap))
    snap = w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    status = w.restart_guardian()  # another process: it holds nothing in memory
    assert status.healer.look(snap).result.skipped == "stopped_by_person"


def test_a_new_container_under_a_stopped_ones_name_starts_fresh(w: TestApp) -> None:
    snap = w.engine.add("app", health=None, created=w.clock.now() - timedelta(days=1))
    w.healer.on_event(event(w, "stop", snap))
    w.clock.advance(600)
    # `docker compose up` replaced it; the new container's process later crashed.
    w.engine.recreate("app", created=w.clock.now())
    w.clock.advance(600)
    w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())
    w.restart_guardian().healer.sweep()
    assert w.restarted() == ["app"]


def test_a_signal_that_stopped_nothing_is_not_kept_past_guardians_restart(w: TestApp) -> None:
    snap = w.engine.add("app", health=None)
    w.healer.on_event(event(w, "kill", snap, signal="1"))  # a SIGHUP to reload: it runs on
    w.clock.advance(3600)
    w.engine.set("app", state="exited", exit_code=1, finished_at=w.clock.now())  # a crash
    w.restart_guardian().healer.sweep()
    assert w.restarted() == ["app"]


def restarted_by_guardian(w: TestApp, name: str, verified: bool = True) -> list[EngineEvent]:
    """Guardian restarts `name` (unhealthy; added unless it is there) and, when `verified`,
    sees it healthy: the events the engine recorded of the restart (its kill, die and stop,
    then its start, stamped as the engine's clock resolves them: the start with the stop),
    which no run of Guardian has read yet."""
    if all(c.name != name for c in w.engine.containers.values()):
        w.engine.add(name, health="unhealthy")
    w.healer.sweep()
    assert w.restarted() == [name]
    snap = w.engine.containers[w.engine.id_of(name)]
    at = snap.started_at
    assert at is not None
    if verified:
        w.healer.verifier.verify()  # healthy: the restart's verdict is in, nothing awaits it
        assert not w.healer.ctx.state.restart_underway(name)
    return [
        EngineEvent(action, snap.id, name, at, {**LABELS, "name": name, **attrs})
        for action, attrs in (
            ("kill", {"signal": "15"}),
            ("die", {"exitCode": "143"}),
            ("stop", {}),
            ("start", {}),
        )
    ]


def test_guardians_own_restart_heard_again_by_a_later_run_is_not_a_persons_stop(
    w: TestApp,
) -> None:
    """Sim seed 1307: a later run of Guardian hears the restart's stop replayed from the
    engine's ring; the store holds the restart that made it, so it is not a person's, and a
    later crash of the container is healed."""
    events = restarted_by_guardian(w, "app")
    w.clock.advance(30)
    again = w.restart_guardian()  # kill -9, then a start: it replays the events missed
    for e in events[:3]:
        again.healer.on_event(e)
        assert not again.healer.ctx.state.person_stops.holds(e.container_id)
    again.healer.on_event(events[3])
    assert again.store.remembered("h", "person_stop:app") is None
    w.clock.advance(600)
    w.engine.set("app", state="exited", exit_code=2, finished_at=w.clock.now())  # a crash
    again.restart_guardian().healer.sweep()  # after another kill -9 of Guardian
    assert w.restarted() == ["app", "app"]


def test_guardians_own_restart_heard_again_in_the_same_run_is_not_a_persons_stop(
    w: TestApp,
) -> None:
    """The stream cut and replayed from the last event handled (the restart's start): its
    stop, stamped with it, comes again."""
    events = restarted_by_guardian(w, "app")
    for e in events:
        w.healer.on_event(e)
    for e in events[:3]:  # replayed
        w.healer.on_event(e)
    assert not w.healer.ctx.state.person_stops.holds(events[0].container_id)
    assert w.store.remembered("h", "person_stop:app") is None


def test_a_persons_stop_after_guardians_restart_started_is_held_all_the_same(
    w: TestApp,
) -> None:
    """Within the restart's stop timeout of its call, but after its start: a person's."""
    events = restarted_by_guardian(w, "app")
    again = w.restart_guardian()
    for e in events:
        again.healer.on_event(e)
    w.clock.advance(2)
    snap = w.engine.set("app", state="exited", exit_code=143, finished_at=w.clock.now())
    again.healer.on_event(event(w, "kill", snap, signal="15"))
    again.healer.on_event(event(w, "die", snap, exitCode="143"))
    again.healer.on_event(event(w, "stop", snap))
    assert again.healer.ctx.state.person_stops.holds(snap.id)
    assert again.store.remembered("h", "person_stop:app") == w.clock.now()
    again.restart_guardian().healer.sweep()
    assert w.restarted() == ["app"]


def test_a_verifying_restarts_stop_stamped_with_its_start_a_look_showed_is_its_own(
    w: TestApp,
) -> None:
    """Its start event not heard yet, a look showed the start: the restart's stop, stamped with
    it (the engine's clock resolves them alike), is the restart's own, not a person's."""
    w.engine.after_restart_health = "starting"  # its verdict waits
    events = restarted_by_guardian(w, "app", verified=False)
    w.healer.verifier.verify()  # a look shows its start
    for e in events[:3]:
        w.healer.on_event(e)
    assert not w.healer.ctx.state.person_stops.holds(events[0].container_id)
    assert w.store.remembered("h", "person_stop:app") is None


def test_an_older_start_replayed_is_not_a_resumed_restarts_start(w: TestApp) -> None:
    """Guardian crashed before the restart's verdict; the next run resumes its verification
    and hears again, from before it, the container's earlier start: not the restart's, so
    the restart's stop after it is still its own."""
    snap = w.engine.add("app", health="unhealthy")
    first = EngineEvent("start", snap.id, "app", w.clock.now(), {**LABELS, "name": "app"})
    w.clock.advance(60)
    w.engine.after_restart_health = "starting"
    events = restarted_by_guardian(w, "app", verified=False)
    again = w.restart_guardian()
    again.healer.verifier.reconcile()  # its verification resumed
    assert again.healer.ctx.state.restart_underway("app")
    for e in [first, *events[:3]]:
        again.healer.on_event(e)
    assert not again.healer.ctx.state.person_stops.holds(snap.id)
    assert again.store.remembered("h", "person_stop:app") is None
