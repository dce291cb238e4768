"""A call the sweep decided waits for its container's worker; a person's stop, kill or silence
meanwhile withdraws it, unsent (service/healing/sending.py; the simulator's F12 and F13), and
a stop is taken for a restart's own only once its call was sent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from guardian.core.model import ActionKind, ContainerSnapshot, Outcome
from guardian.ports import EngineEvent
from guardian.service.operator import Operator
from guardian.service.state.state import LoopState
from tests.app import HOST, TestApp, make_app
from tests.fakes import FakeClock, FakeRestartCalls


def waiting_calls(tmp: Path) -> tuple[TestApp, list[Callable[[], None]]]:
    """Guardian whose restart calls wait, as in the work queue for their container's worker:
    the test runs them from the list when it chooses."""
    calls = FakeRestartCalls()
    w = make_app(
        tmp,
        restart_calls=calls,
        restart={"cooldown": "2s", "stop_timeout": "1s", "verify_timeout": "30s"},
    )
    return w, calls.held


def event(w: TestApp, action: str, snap: ContainerSnapshot) -> EngineEvent:
    attrs = {"guardian.enable": "true", "name": snap.name}
    return EngineEvent(action, snap.id, snap.name, w.clock.now(), attrs)


def decided_and_waiting(tmp: Path) -> tuple[TestApp, Callable[[], None]]:
    w, held = waiting_calls(tmp)
    w.engine.add("web", health="unhealthy")
    w.healer.sweep()  # decided and claimed: the call waits for web's worker
    [call] = held
    assert w.healer.ctx.state.claims.running("web")
    return w, call


def test_a_persons_stop_heard_while_a_restart_waits_for_its_worker_withdraws_it(
    tmp_path: Path,
) -> None:
    w, call = decided_and_waiting(tmp_path)
    snap = w.engine.containers[w.engine.id_of("web")]
    w.healer.on_event(event(w, "kill", snap))  # docker stop web, heard on the events thread
    snap = w.engine.set("web", state="exited", exit_code=143, finished_at=w.clock.now())
    w.healer.on_event(event(w, "die", snap))
    w.healer.on_event(event(w, "stop", snap))
    call()  # the worker takes it
    assert w.engine.restarts == []
    [restart] = [a for a in w.actions("web") if a.kind == ActionKind.RESTART]
    assert restart.outcome == Outcome.WITHDRAWN
    assert "a person stopped" in restart.detail
    assert not w.healer.ctx.state.restart_underway("web")  # its claim and slot given up
    w.clock.advance(60)
    w.healer.sweep()
    assert w.engine.restarts == []


def test_a_silence_set_while_a_restart_waits_for_its_worker_withdraws_it(tmp_path: Path) -> None:
    w, held = waiting_calls(tmp_path)
    w.engine.add("web", health="unhealthy")
    w.healer.sweep()  # decided and claimed: the call waits for web's worker
    call = held.pop()
    Operator(w.store, w.clock, HOST).silence("web", timedelta(minutes=30), "upgrade", "alice")
    call()
    assert w.engine.restarts == []
    [restart] = [a for a in w.actions("web") if a.kind == ActionKind.RESTART]
    assert restart.outcome == Outcome.WITHDRAWN and "silenced until" in restart.detail
    w.healer.sweep()  # decided again: held by the silence, with its own reason
    assert w.engine.restarts == []
    assert w.actions("web")[-1].reason == "silenced"
    w.clock.advance(minutes=31)
    w.healer.sweep()  # the silence is over: decided again, its call waits for the worker
    held.pop()()
    assert w.restarted() == ["web"]


def test_a_stop_is_a_restarts_own_only_once_its_call_was_sent() -> None:
    state = LoopState(FakeClock())
    claim = state.claims.claim("web", waits=True)  # decided: waiting for its worker
    assert not state.caused_by_restart("web-id", "web")
    state.heard_start("web")  # a start before the call was sent is not its own
    assert state.send(claim, "web-id")
    assert state.caused_by_restart("web-id", "web")  # the call's own stop and kill
    state.heard_start("web")  # the restart's start: a stop after it is a person's
    assert not state.caused_by_restart("web-id", "web")


def test_a_call_is_not_sent_once_a_persons_stop_of_its_container_was_heard() -> None:
    state = LoopState(FakeClock())
    claim = state.claims.claim("web", waits=True)
    assert state.stop_heard("web-id", "web")  # a person's: held
    assert state.person_stops.holds("web-id")
    assert not state.send(claim, "web-id")
    assert not claim.sent
