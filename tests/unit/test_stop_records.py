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
