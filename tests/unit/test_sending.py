"""A call is sent by the worker that decided it, at once; a person's stop, kill or removal heard
on the events thread between the decision and the send withdraws it, unsent (Remediator.may_send;
the simulator's F12). A stop is taken for a restart's own only once its call was sent, and only
before its start: heard, or shown by a look at the container when its event was lost (F14)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from guardian.core.model import ActionKind, ContainerSnapshot, Outcome, RemediationAction
from guardian.core.verification import PendingVerify
from guardian.ports import EngineEvent
from guardian.service.healing.decisions import ladder_history
from guardian.service.state.state import LoopState
from tests.app import HOST, TestApp, make_app
from tests.fakes import FakeClock, FakeRestartCalls


def waiting_calls(tmp: Path) -> tuple[TestApp, list[Callable[[], None]]]:
    """Guardian whose restart calls wait between their decision and their send, for as long
    as the test chooses: it runs them from the list."""
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


def pending_verify(name: str, at: datetime) -> PendingVerify:
    """A restart of `name` requested at `at`, awaiting its verdict (no start before it known)."""
    return PendingVerify(1, None, name, f"{name}-id", at, at + timedelta(seconds=30), None)


def decided_and_waiting(tmp: Path) -> tuple[TestApp, Callable[[], None]]:
    w, held = waiting_calls(tmp)
    w.engine.add("web", health="unhealthy")
    w.healer.sweep()  # decided and claimed: the call not sent yet
    [call] = held
    assert w.healer.ctx.state.claims.running("web")
    return w, call


def test_a_persons_stop_heard_between_a_restarts_decision_and_its_send_withdraws_it(
    tmp_path: Path,
) -> None:
    w, call = decided_and_waiting(tmp_path)
    snap = w.engine.containers[w.engine.id_of("web")]
    w.healer.on_event(event(w, "kill", snap))  # docker stop web, heard on the events thread
    snap = w.engine.set("web", state="exited", exit_code=143, finished_at=w.clock.now())
    w.healer.on_event(event(w, "die", snap))
    w.healer.on_event(event(w, "stop", snap))
    call()  # the worker sends it
    assert w.engine.restarts == []
    [restart] = [a for a in w.actions("web") if a.kind == ActionKind.RESTART]
    assert restart.outcome == Outcome.WITHDRAWN
    assert "a person stopped" in restart.detail
    assert not w.healer.ctx.state.restart_underway("web")  # its claim and slot given up
    w.clock.advance(60)
    w.healer.sweep()
    assert w.engine.restarts == []


def test_a_stop_is_a_restarts_own_only_once_its_call_was_sent() -> None:
    state = LoopState(FakeClock())
    claim = state.claims.claim("web", waits=True)  # decided: not sent yet
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


def test_a_persons_stop_while_a_restart_whose_start_was_never_heard_awaits_its_verdict_holds(
    tmp_path: Path,
) -> None:
    """The restart's own events were lost (the stream cut, the engine's ring rolled over): the
    person's stop after its start is told apart by the start an inspect shows (sim F14)."""
    w = make_app(
        tmp_path, restart={"cooldown": "2s", "stop_timeout": "1s", "verify_timeout": "30s"}
    )
    w.engine.add("web", health="unhealthy")
    w.healer.sweep()  # restarted; none of its events heard
    assert w.restarted() == ["web"]
    w.clock.advance(2)
    snap = w.engine.containers[w.engine.id_of("web")]
    w.healer.on_event(event(w, "kill", snap))  # docker stop web, 2 s after the restart's start
    # Its process answers SIGTERM with 1: only the stop's events tell it from a crash.
    snap = w.engine.set("web", state="exited", exit_code=1, finished_at=w.clock.now())
    w.healer.on_event(event(w, "die", snap))
    w.healer.on_event(event(w, "stop", snap))
    w.verify()  # the verify look shows the restart's start before the stop: a person's
    assert w.healer.ctx.state.person_stops.holds(snap.id)
    for _ in range(3):
        w.clock.advance(60)
        w.healer.sweep()
        w.verify()
    assert w.restarted() == ["web"]


def test_a_stop_stamped_after_a_verifying_restarts_start_an_inspect_showed_is_a_persons() -> None:
    clock = FakeClock()
    state = LoopState(clock)
    restarted_at = clock.now()
    p = pending_verify("web", restarted_at)
    state.claims.claim("web").hand_over(p)  # its start event never heard
    before, after = restarted_at - timedelta(seconds=1), restarted_at + timedelta(seconds=2)
    assert state.caused_by_restart("web-id", "web", before)
    assert not state.stop_heard("web-id", "web", after)  # its start not known yet: doubted
    assert not state.person_stops.holds("web-id")
    assert state.restart_seen(p, restarted_at)  # a look shows its start: the stop was after
    assert state.person_stops.holds("web-id")
    assert state.caused_by_restart("web-id", "web", before)  # stamped before its start: its own
    assert not state.caused_by_restart("web-id", "web", after)


def test_a_stop_heard_before_the_restarts_start_was_heard_is_its_own() -> None:
    clock = FakeClock()
    state = LoopState(clock)
    p = pending_verify("web", clock.now())
    state.claims.claim("web").hand_over(p)
    assert not state.stop_heard("web-id", "web", clock.now() + timedelta(seconds=1))
    state.heard_start("web")  # the stream is in order: that stop came before this start
    assert not state.restart_seen(p, clock.now())
    assert not state.person_stops.holds("web-id")


def test_a_withdrawn_recreate_is_not_a_rung_taken() -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    row = RemediationAction(None, 1, HOST, "web", "web-id", ActionKind.RECREATE, at, "escalated")
    taken = replace(row, outcome=Outcome.TRANSIENT_FAILURE)
    assert ladder_history([taken], "web-id")[1] == (("recreate", at),)
    assert ladder_history([replace(row, outcome=Outcome.WITHDRAWN)], "web-id")[1] == ()
