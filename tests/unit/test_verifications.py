"""A verification is handed over from its claim in one step, judged only once its call's outcome
is written, by one thread, and stays verifying until its verdict is written; what was read from
the store while a restart came and went is known to be stale."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

from guardian.core.stamps import Reading
from guardian.core.verification import PendingVerify
from guardian.service.state.state import LoopState
from tests.fakes import T0, FakeClock

CYCLES = 2000


def pending(container: str, action_id: int) -> PendingVerify:
    now = FakeClock().now()
    return PendingVerify(
        action_id, 1, container, f"{container}-id", now, now + timedelta(hours=1), None
    )


def test_a_claim_handed_over_is_never_seen_neither_running_nor_verifying() -> None:
    state = LoopState(FakeClock())
    seen: set[tuple[int, bool, bool]] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            with state.lock:  # what decide() reads, in one hold of the restart lock
                epoch = state.epoch_of("web")
                seen.add(
                    (
                        epoch % 3,
                        state.claims.running("web"),
                        state.verifications.verifying("web"),
                    )
                )

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for action_id in range(CYCLES):  # each restart: claimed, handed over, judged
            p = pending("web", action_id)
            state.claims.claim("web").hand_over(p)
            state.verifications.outcome_written(p)
            assert state.verifications.begin_verdict(p)
            state.verifications.verdict_written(p)
    finally:
        done.set()
        watcher.join(10)
    # Epoch modulo 3: 0 idle, 1 running, 2 verifying. A gap in the hand-over would show a
    # running or verifying epoch with the container in neither.
    assert seen <= {(0, False, False), (1, True, False), (2, False, True)}


def test_a_restart_handed_over_is_verifying_at_once_and_judged_once_recorded() -> None:
    state = LoopState(FakeClock())
    claim = state.claims.claim("web", timedelta(seconds=10))
    p = pending("web", 7)
    with state.lock:
        assert state.claims.running("web") and not state.verifications.verifying("web")
    assert claim.hand_over(p) and not claim.release()  # ended once, by the hand-over
    verifications = state.verifications
    assert not state.claims.running("web") and verifications.verifying("web")
    assert state.restart_underway("web") and state.claims.slots_held(T0) == 0
    now = FakeClock().now()
    # Its outcome row is not written yet: a verdict now would be overwritten by it.
    assert verifications.due(now) == [] and verifications.due(now, "web") == []
    assert not verifications.begin_verdict(p)
    verifications.outcome_written(p)
    assert verifications.due(now, "web") == [p] and verifications.begin_verdict(p)
    verifications.verdict_written(p)
    assert not state.restart_underway("web")


def test_a_verification_settled_meanwhile_is_not_put_back_by_a_late_look() -> None:
    verifications = LoopState(FakeClock()).verifications
    p = pending("web", 7)
    verifications.resume(p)
    now = FakeClock().now()
    [due] = verifications.due(now)
    # One thread writes the verdict; the container stays verifying until it is written.
    assert verifications.begin_verdict(due) and not verifications.begin_verdict(due)
    assert verifications.verifying("web") and verifications.due(now) == []
    verifications.verdict_written(due)
    verifications.looked(due, now)  # the tick's late "no verdict yet" for what was settled
    assert verifications.pending() == [] and verifications.due(now + timedelta(hours=2)) == []
    verifications.resume(p2 := pending("web", 8))
    assert verifications.due(now) == [p2]  # the next restart's first look is not delayed


def test_what_was_read_while_a_restart_came_and_went_is_stale() -> None:
    state = LoopState(FakeClock())
    epoch = state.epoch_of("web")
    assert state.no_restart_since("web", epoch)
    state.claims.claim("web").release()  # a whole restart call between the read and the check
    assert not state.no_restart_since("web", epoch)
    assert state.no_restart_since("web", state.epoch_of("web"))


def test_a_stop_heard_after_the_restarts_start_is_a_persons_while_its_verdict_awaits() -> None:
    """The engine's events come in order: Guardian's restart stops, then starts, the container;
    a stop heard after that start, while the verdict still awaits, is a person's (sim F4)."""
    state = LoopState(FakeClock())
    claim = state.claims.claim("web")
    assert state.caused_by_restart("web-id", "web")  # the call runs: its own stop and kill
    state.heard_start("web")  # the restart's start, heard before or after the call returns
    claim.hand_over(pending("web", 1))
    assert not state.caused_by_restart("web-id", "web")  # a person's stop now
    state.verifications.verdict_written(state.verifications.pending()[0])
    again = state.claims.claim("web")  # the next restart: its own stop comes before its start
    again.hand_over(pending("web", 2))
    assert state.caused_by_restart("web-id", "web")
    state.heard_start("web")
    assert not state.caused_by_restart("web-id", "web")
    state.heard_start("db")  # a start of a container no restart is under way for: nothing kept
    assert not state.caused_by_restart("db-id", "db")


def test_the_containers_start_before_a_restart_is_kept_to_the_microsecond_until_a_step() -> None:
    # A restart left to the engine is verified against the container's start before it: the
    # same start means the engine has not restarted it yet. Placed again a moment later, when
    # the two clocks read a few microseconds apart (they do: slewing, reading them one after
    # the other), it must still equal the start an inspect shows, or the old run is taken for
    # the restart's and judged (a second restart followed, in CI). A real step moves it.
    clock = FakeClock()
    state = LoopState(clock)
    started = T0 - timedelta(minutes=5, microseconds=123_457)
    p = replace(pending("web", 1), previous_started_at=started, left_to_engine=True)
    state.verifications.resume(p)
    [due] = state.verifications.pending()
    for _ in range(3):
        clock.advance(1)
        clock.step(microseconds=-1)  # the wall clock a microsecond behind the monotonic
        placed = state.verifications.placed(due, Reading(clock.now(), clock.monotonic()))
        assert placed.previous_started_at == started
    clock.step(seconds=30)
    placed = state.verifications.placed(due, Reading(clock.now(), clock.monotonic()))
    assert placed.previous_started_at == started + timedelta(seconds=30, microseconds=-3)
