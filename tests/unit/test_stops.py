"""core.detection.stops: whether the engine's record shows that someone asked for a container's
last exit (`docker stop`: kill, die, stop; `docker kill`: kill, die) or that it ended on its own
(die alone), and Guardian's own stops told apart (the simulator's F3)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from guardian.core.detection.stops import Seen, stop_requested
from tests.fakes import T0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def record(*events: tuple[str, float] | tuple[str, float, int]) -> list[Seen]:
    """(action, seconds after T0[, a die's exit code]) -> the container's events, in order."""
    return [Seen(e[0], at(e[1]), e[2] if len(e) > 2 else None) for e in events]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("events", "code", "own", "asked"),
    [
        # A person's docker stop: the process answered SIGTERM with exit code 1.
        (record(("start", 0), ("kill", 100), ("die", 100.5, 1), ("stop", 100.6)), 1, (), 100),
        # docker kill -s TERM: no stop event, the kill just before the exit.
        (record(("start", 0), ("kill", 100), ("die", 101, 1)), 1, (), 100),
        # The kill left the ring, the stop after the exit did not.
        (record(("die", 100, 1), ("stop", 100.2)), 1, (), 100.2),
        # A crash: the exit alone is a run that ended on its own.
        (record(("start", 0), ("die", 100, 1)), 1, (), None),
        # A SIGHUP to reload an hour before a crash did not end the run.
        (record(("start", 0), ("kill", 40), ("die", 3640, 1)), 1, (), None),
        # A restart's own kill lies before the start that began the run a crash ended.
        (
            record(("kill", 10), ("die", 10, 143), ("stop", 10), ("start", 11), ("die", 30, 1)),
            1,
            (),
            None,
        ),
        # Guardian's own restart, asked after the run began, whose start failed: its own stop.
        (
            record(("start", 0), ("kill", 100.1), ("die", 100.5, 1), ("stop", 100.6)),
            1,
            (100,),
            None,
        ),
        # Guardian's successful restart began this run: a person's stop after it is a person's.
        (
            record(
                ("kill", 100),
                ("die", 100, 143),
                ("stop", 100),
                ("start", 101),
                ("kill", 130),
                ("die", 130, 1),
                ("stop", 130),
            ),
            1,
            (99.9,),
            130,
        ),
        # The record no longer holds the exit: nothing to say.
        (record(("start", 0)), 1, (), None),
        (record(), 1, (), None),
        # Started since the record's last exit: not the exit shown.
        (record(("kill", 100), ("die", 100, 1), ("stop", 100), ("start", 200)), 1, (), None),
        # The record's last exit carries another code than the container shows.
        (record(("kill", 100), ("die", 100, 2), ("stop", 100)), 1, (), None),
        # A die without a code (as some engines send it) is the exit shown.
        (record(("kill", 100), ("die", 100), ("stop", 100)), 1, (), 100),
    ],
)
def test_the_engines_record_tells_a_requested_exit_from_one_of_its_own(
    events: list[Seen], code: int | None, own: tuple[float, ...], asked: float | None
) -> None:
    found = stop_requested(events, code, tuple(at(o) for o in own))
    assert found == (at(asked) if asked is not None else None)


def test_a_persons_kill_after_guardians_restart_whose_start_left_the_record_is_a_persons() -> None:
    """Guardian restarted the container at 100; it ran 6.7 s (State.StartedAt to FinishedAt, the
    engine's own stamps, in whatever frame they are read); the engine's ring lost the restart's
    events, and a person's `docker kill` at 107 is all the record keeps of the run. The restart
    began the run: it did not end it."""
    events = record(("kill", 107), ("die", 107.1, 137))
    ran = timedelta(seconds=6.7)
    assert stop_requested(events, 137, (at(100),)) is None  # the record alone cannot tell
    assert stop_requested(events, 137, (at(100),), ran) == at(107)
    # Guardian's own restart asked after the run began still accounts for its kill.
    assert stop_requested(events, 137, (at(101),), ran) is None
    # Of the start the record kept and the one the length places, the later is the run's.
    kept = record(("start", 101), ("kill", 107), ("die", 107.1, 137))
    assert stop_requested(kept, 137, (at(100.7),), ran) == at(107)
