"""A label's long stop timeout costs the host no more restart slots than the operator's own
restart.stop_timeout (issue 26): past it, a running restart only waits for the container's own
process to end and no longer holds a restart.max_concurrent slot; a stop never waits for it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from guardian.core.model import ActionOutcome, Outcome, Reason
from guardian.runtime.work_queue import KeyedQueue
from tests.app import TestApp, make_app
from tests.fakes import FakeRestartCalls
from tests.helpers import wait_until

SLOW = {"guardian.enable": "true", "guardian.stop_timeout": "10m"}


def holding_calls(tmp: Path, **restart: object) -> tuple[TestApp, list[Callable[[], None]]]:
    # (Many containers failing at once would read as a host storm: not this test's subject.)
    """Guardian whose restart calls never return (as while the engine waits out a stop
    timeout): each is kept, not run."""
    calls = FakeRestartCalls()
    w = make_app(
        tmp,
        restart_calls=calls,
        restart={
            "cooldown": "1s",
            "stop_timeout": "10s",
            "max_concurrent": 2,
            "max_per_minute": 100,
            **restart,
        },
        storm={"min_containers": 1000},
    )
    return w, calls.held


def test_a_long_stop_gives_its_slot_up_after_the_operators_stop_timeout(tmp_path: Path) -> None:
    w, held = holding_calls(tmp_path)
    for name in ("slow1", "slow2"):
        w.engine.add(name, health="unhealthy", labels=SLOW)
    w.healer.sweep()
    assert len(held) == 2  # both slots taken
    w.engine.add("web", health="unhealthy")
    report = w.healer.sweep()
    [decision] = [r.decision for r in report.rows if r.snapshot.name == "web"]
    assert decision is not None and decision.reason is Reason.CONCURRENCY
    assert decision.retry_at == w.clock.now() + (w.settings["restart.stop_timeout"])
    w.clock.advance(10)  # the operator's stop timeout: the slow calls only wait now
    w.healer.sweep()
    assert len(held) == 3 and w.healer.ctx.state.claims.long_stops(w.clock.now()) == 2


def test_a_stop_timeout_within_the_operators_holds_its_slot_until_the_call_returns(
    tmp_path: Path,
) -> None:
    w, held = holding_calls(tmp_path, max_concurrent=1)
    w.engine.add("a", health="unhealthy", labels={"guardian.enable": "true"})
    w.engine.add("b", health="unhealthy", labels={"guardian.enable": "true"})
    w.healer.sweep()
    w.clock.advance(3600)
    w.healer.sweep()
    assert len(held) == 1, "a restart within the operator's stop timeout gave its slot up"


def test_max_concurrent_still_bounds_what_is_asked_of_the_engine_at_once(tmp_path: Path) -> None:
    w, held = holding_calls(tmp_path)
    for i in range(6):
        w.engine.add(f"slow{i}", health="unhealthy", labels=SLOW)
    asked: list[tuple[datetime, int]] = []
    for _ in range(4):
        before = len(held)
        w.healer.sweep()
        asked.append((w.clock.now(), len(held) - before))
        w.clock.advance(10)
    assert [n for _, n in asked] == [2, 2, 2, 0]


def test_a_stop_leaves_calls_in_flight_to_the_engine() -> None:
    queue = KeyedQueue(lambda key, work: [call() for call in work.calls], limit=4)
    release = threading.Event()
    ran: list[str] = []

    def slow() -> None:
        with queue.calling():
            release.wait(30)
            ran.append("slow")

    queue.add_call("slow-id", slow)
    queue.add_call("quick-id", lambda: ran.append("quick"))
    wait_until(lambda: "quick" in ran, 5, message="the quick call ran")
    clock = iter([0.0, 0.0, 1.0, 2.0, 99.0])
    assert queue.close(3, monotonic=lambda: next(clock, 99.0)) == 1  # left, not waited for
    release.set()
    wait_until(lambda: queue.busy() == 0, 5, message="the slow call ended")
    try:
        queue.add_call("late-id", lambda: None)
    except RuntimeError as exc:
        assert "stopping" in str(exc)
    else:
        raise AssertionError("a closed queue took a call")


def test_a_restart_returning_after_stop_records_nothing(tmp_path: Path) -> None:
    w, held = holding_calls(tmp_path)
    w.engine.add("slow", health="unhealthy", labels=SLOW)
    w.healer.sweep()
    w.healer.ctx.state.claims.stop_recording()
    held[0]()  # the engine finally restarted it, after Guardian stopped
    [intent] = w.restarts()
    assert intent.outcome is None and intent.extra["stop_timeout"] == "600"


def test_the_next_start_verifies_a_restart_left_to_the_engine_without_asking_again(
    tmp_path: Path,
) -> None:
    w, _held = holding_calls(tmp_path)
    w.engine.add("slow", health="unhealthy", labels=SLOW)
    w.healer.sweep()
    w.healer.ctx.state.claims.stop_recording()
    w.clock.advance(5)
    again = w.restart_guardian()
    assert again.app.verifier.reconcile() == 1
    again.healer.sweep()
    assert w.engine.restarts == [], "asked the engine for a second restart"
    w.clock.advance(60)
    w.engine.set("slow", health="healthy", started_at=w.clock.now())  # the engine's restart
    again.verify()
    [intent] = w.restarts()
    assert intent.outcome is not None and intent.outcome.value == "succeeded"


def test_the_next_start_verifies_a_restart_left_to_the_engine_after_a_step_forward(
    tmp_path: Path,
) -> None:
    """The wall clock stepped two hours forward after the request: by the monotonic clock kept
    with the intent only seconds passed, within the 10 minutes the engine may take to stop.
    It used to look two hours old: interrupted, and the container asked for a second restart."""
    w, _held = holding_calls(tmp_path)
    w.engine.add("slow", health="unhealthy", labels=SLOW)
    w.healer.sweep()
    w.healer.ctx.state.claims.stop_recording()
    w.clock.advance(5)
    w.clock.step(hours=2)
    again = w.restart_guardian()
    assert again.app.verifier.reconcile() == 1
    again.healer.sweep()
    assert w.engine.restarts == [], "asked the engine for a second restart"


def test_an_unanswered_restart_is_not_asked_again_by_the_next_run_after_a_step_forward(
    tmp_path: Path,
) -> None:
    """Timed out after sending (the engine carries it out within its stop timeout), then
    Guardian died before verifying it and the wall clock stepped ten minutes forward: the next
    run verifies it again while the engine may still do it. It used to forget it and, the
    cooldown over by the wall clock, restart the container a second time."""
    w = make_app(tmp_path, restart={"cooldown": "60s", "stop_timeout": "10s"})
    w.engine.add("web", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.UNKNOWN, "timed out after sending")]
    w.healer.sweep()
    assert len(w.engine.restarts) == 1
    w.clock.advance(1)
    w.clock.step(600)
    again = w.restart_guardian()
    again.app.verifier.reconcile()
    again.healer.sweep()
    assert len(w.engine.restarts) == 1, "asked the engine for a second restart"
    w.clock.advance(5)
    w.engine.set("web", health="healthy", started_at=w.clock.now())  # the engine's restart
    again.verify()
    [intent] = w.restarts()
    assert intent.outcome is Outcome.SUCCEEDED


def test_an_unanswered_restart_past_its_stop_timeout_is_left_as_it_was(tmp_path: Path) -> None:
    """Long past what the engine may take (by the monotonic clock): nothing to wait for."""
    w = make_app(tmp_path, restart={"cooldown": "60s", "stop_timeout": "10s"})
    w.engine.add("web", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.UNKNOWN, "timed out after sending")]
    w.healer.sweep()
    w.clock.advance(3600)  # past its stop timeout and verify_timeout
    again = w.restart_guardian()
    again.app.verifier.reconcile()
    assert not again.app.verifier.awaiting()
    [intent] = w.restarts()
    assert intent.outcome is Outcome.UNKNOWN
