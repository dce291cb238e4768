"""core.engine_record: the attempts the store could not remember, counted from what the engine
recorded (docs/design.md rule 16), and decide() holding the cap over them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from guardian.core.engine_record import EngineLog, Witness, explained, unrecorded_attempts
from guardian.core.model import Reason, Verdict
from guardian.core.policy import AttemptHistory, HostLoad, RestartPolicy, Target, decide
from tests.fakes import T0

NOW = T0
WINDOW = timedelta(hours=1)
COOLDOWN = timedelta(seconds=300)
POLICY = RestartPolicy(cooldown=COOLDOWN, max_attempts=3, window=WINDOW)
STOP = timedelta(seconds=10)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def log_of(
    *starts: float,
    covered_from: float | None = 3600,
    recorded_through: float | None = None,
    cid: str = "c1",
) -> EngineLog:
    """The engine's log read at NOW over the window: start events `starts` seconds ago."""
    return EngineLog(
        since=NOW - WINDOW,
        read_at=NOW,
        starts={cid: tuple(ago(s) for s in starts)},
        covered_from=ago(covered_from) if covered_from is not None else None,
        recorded_through=ago(recorded_through) if recorded_through is not None else None,
    )


def unrecorded(
    log: EngineLog,
    stored: tuple[float, ...] = (),
    created: float = 86400,
    started: float | None = None,
    now: datetime = NOW,
) -> list[float]:
    """The unrecorded attempts, in seconds before NOW."""
    witness = Witness("c1", ago(created), ago(started) if started is not None else None)
    found = unrecorded_attempts(
        log,
        witness,
        tuple(ago(s) for s in stored),
        now=now,
        cooldown=COOLDOWN,
        max_attempts=3,
        allowance=STOP,
    )
    return [(NOW - t).total_seconds() for t in found]


def test_restarts_the_store_recorded_are_not_counted_twice() -> None:
    # Guardian's restarts: the intent, then the engine's start a few seconds later.
    assert unrecorded(log_of(1795, 895), stored=(1800, 900), started=895) == []


def test_restarts_the_store_lost_count_from_the_engine_log() -> None:
    # A full disk kept the last two intents in memory only, then Guardian was killed.
    assert unrecorded(log_of(1795, 895, 295), stored=(1800,), started=295) == [895, 295]


def test_a_persons_restart_in_the_window_counts() -> None:
    # `docker restart` by a person: the engine cannot say who asked, so it counts.
    assert unrecorded(log_of(600), stored=(), started=600) == [600]


def test_a_restart_before_the_window_does_not_count() -> None:
    assert unrecorded(log_of(covered_from=3600), started=4000) == []


def test_the_first_start_of_a_container_is_no_restart() -> None:
    # `docker run` 10 minutes ago: created and started within a second.
    assert unrecorded(log_of(599.5), created=600, started=599.5) == []


def test_started_at_and_its_start_event_are_one_start() -> None:
    assert unrecorded(log_of(600.0), started=599.9) == [600.0]


@pytest.mark.parametrize(
    ("covered_from", "expected"),
    [
        # The ring reaches back 2 minutes: the restart 100 s ago is seen, and the container may
        # have been restarted a cooldown before it, and before that, unseen.
        (120, [700, 400, 100]),
        # The engine restarted 20 minutes ago and keeps nothing older; the container was
        # restarted 5 minutes ago, perhaps also in the 40 unseen minutes (a cooldown before).
        (1200, [1500, 1200.000001, 300]),
        # The engine returned no event at all: nothing is covered.
        (None, [900, 600, 300]),
    ],
)
def test_engine_history_shorter_than_the_window_assumes_restarts_at_every_cooldown(
    covered_from: float | None, expected: list[float]
) -> None:
    starts = (100,) if covered_from == 120 else (300,) if covered_from == 1200 else ()
    started = starts[0] if starts else 300
    found = unrecorded(log_of(*starts, covered_from=covered_from), started=started)
    assert found == pytest.approx(expected, abs=1e-5)  # enough to reach the cap, no more


def test_the_cap_holds_over_what_the_engine_could_not_show() -> None:
    # Three restarts while the disk was full; the engine's ring kept only the last.
    found = unrecorded(log_of(20, covered_from=60), started=20)
    history = AttemptHistory(attempts=tuple(ago(s) for s in found))
    decision = decide(Target("app"), history, HostLoad(), POLICY, NOW)
    assert decision.verdict is Verdict.GIVE_UP
    assert decision.reason is Reason.MAX_ATTEMPTS


def test_a_store_that_vouches_for_the_gap_leaves_nothing_to_assume() -> None:
    # The store's last mark is newer than the log's oldest event: nothing unseen is assumed;
    # the start it has no attempt for was a person's, and counts.
    assert unrecorded(log_of(covered_from=60, recorded_through=30), started=1000) == [1000]


def test_attempts_the_store_keeps_in_the_gap_stand_for_assumed_ones() -> None:
    found = unrecorded(log_of(covered_from=60), stored=(1305, 705), started=700)
    assert found == pytest.approx([1000])  # 700 explained; one of two assumed is kept


def test_a_container_created_within_the_gap_is_assumed_nothing_before_it() -> None:
    assert unrecorded(log_of(covered_from=60), created=500, started=100) == pytest.approx(
        [400, 100]
    )


def test_no_start_since_the_gap_means_no_restart_in_it() -> None:
    assert unrecorded(log_of(covered_from=60), created=86400, started=5000) == []


def test_clock_stepped_back_between_runs_the_store_mark_vouches_for_nothing() -> None:
    # The mark was written by a clock that ran a day ahead: it lies ahead of the reading.
    log = EngineLog(
        since=NOW - WINDOW,
        read_at=NOW,
        starts={},
        covered_from=ago(60),
        recorded_through=NOW + timedelta(days=1),
    )
    assert unrecorded(log, started=300) == pytest.approx([900, 600, 300])


def test_clock_stepped_back_between_runs_stored_attempts_ahead_still_explain_nothing_away() -> None:
    # The attempts were stamped a day ahead, the engine's stamps are true: they do not match,
    # so the engine's count adds to the store's (the stored ones count as now): the cap holds.
    found = unrecorded(log_of(1200, 600), stored=(-86400, -86400 + 600), started=600)
    assert found == [1200, 600]
    stored = (NOW + timedelta(days=1), NOW + timedelta(days=1, seconds=600))
    history = AttemptHistory(attempts=(*stored, *(ago(s) for s in found)))
    assert decide(Target("app"), history, HostLoad(), POLICY, NOW).verdict is Verdict.GIVE_UP


def test_clock_stepped_forward_between_runs_the_engine_still_shows_the_restarts() -> None:
    # Guardian's clock jumped an hour ahead while it was stopped: its stored attempts look
    # older than the window, but the engine (its own clock, read through the skew) shows them.
    found = unrecorded(log_of(900, 600, 300), stored=(), started=300)
    assert found == [900, 600, 300]


def test_an_engine_stamp_ahead_of_now_counts_as_now() -> None:
    log = EngineLog(NOW - WINDOW, NOW, {"c1": (NOW + timedelta(seconds=30),)}, ago(3600))
    assert unrecorded(log) == [0]


def test_each_attempt_explains_one_start_only() -> None:
    assert explained([ago(100), ago(99)], [ago(101)], STOP) == [ago(99)]


def test_a_restart_soon_after_the_first_start_counts() -> None:
    # Created and started, then restarted three seconds later: only the first start is free.
    assert unrecorded(log_of(599.5, 597), created=600, started=597) == [597]


def test_restarts_two_seconds_apart_are_two_restarts() -> None:
    assert unrecorded(log_of(6, 4, 2), created=600, started=2) == [6, 4, 2]
