"""Whether a container's exit was asked for, as the engine recorded it: `docker stop` logs a
`kill` before the exit and a `stop` after it, `docker kill` a `kill`; a process that ends on its
own logs only its `die`. Read where the event stream did not tell Guardian of a person's stop
(docs/design.md rule 16: the engine remembers too). Pure: the events come in as values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.core.engine_record import EARLY, in_reach

# How long before its exit a `kill` may have been sent and still be what ended the run: a
# process that outlives `docker stop`'s timeout (10 s by default) is killed (exit 137, a signal
# code the checks leave alone anyway). A signal much earlier (a SIGHUP to reload) did not end it.
KILL_BOUND = timedelta(seconds=60)
STARTS = ("start", "restart")


@dataclass(frozen=True)
class Seen:
    """One event of the container as the engine recorded it: its action, its stamp (in
    Guardian's frame) and, for a `die`, the exit code it carries (None: not said)."""

    action: str
    at: datetime
    exit_code: int | None = None


def stop_requested(
    events: Sequence[Seen],
    exit_code: int | None,
    own: Sequence[datetime],
    ran: timedelta | None = None,
) -> datetime | None:
    """When someone asked the engine to stop or kill the container's last run, as the engine's
    record shows it; None when the record shows a run that ended on its own, or does not hold
    the exit shown (`exit_code`: State.ExitCode).

    `events`: the container's events, oldest first. The exit is the last `die` with no start
    after it; its run began at the start before it. A `stop` after that `die`, or a `kill` in
    that run at most KILL_BOUND before it, was asked for, unless Guardian asked it (`own`: when
    Guardian asked the engine to restart or stop this container): an action asked after the
    run began, from EARLY before the event to KILL_BOUND and LATE after it, accounts for it.
    `ran` (how long the run lasted by the engine's own stamps, State.FinishedAt − StartedAt:
    a length, whatever frame each stamp is read in) places the run's start back from its exit
    when the record lost its start event: a restart that began the run did not end it."""
    dies = [i for i, e in enumerate(events) if e.action == "die"]
    if not dies:
        return None  # the engine no longer keeps this exit
    end = dies[-1]
    died = events[end]
    if died.exit_code is not None and exit_code is not None and died.exit_code != exit_code:
        return None  # not the exit shown
    after = events[end + 1 :]
    if any(e.action in STARTS for e in after):
        return None  # started since: the record's last exit is not the one shown
    began = next((e.at for e in reversed(events[:end]) if e.action in STARTS), None)
    if ran is not None and ran >= timedelta(0):
        shown = died.at - ran
        if began is None or began < shown:
            began = shown  # the run's start, its event gone from the record
    run = [e for e in events[:end] if began is None or e.at > began]
    asked = [e for e in run if e.action == "kill" and died.at - e.at <= KILL_BOUND]
    asked += [e for e in after if e.action == "stop"]

    def guardians(at: datetime) -> bool:
        return any((began is None or began < o) and in_reach(o, KILL_BOUND, at) for o in own)

    return next((e.at for e in asked if not guardians(e.at)), None)


def restart_made(
    at: datetime, asked: Sequence[tuple[datetime, timedelta]], started: datetime | None
) -> bool:
    """Whether a stop or kill of a container, stamped `at` by the engine, may be the own of one
    of Guardian's restart calls the store holds (`asked`: when each was asked, with its stop
    timeout): within its reach (core.engine_record.in_reach, as explained places a restart's
    start), and no start of the container known
    (`started`: the last one heard) between the ask and the stop, since a restart's own stop
    comes before its start and a stop after that start is a person's. A start stamped with the
    stop is taken for after it (the engine's clock resolves them alike)."""
    return any(
        in_reach(o, allowance, at) and (started is None or not o - EARLY <= started < at)
        for o, allowance in asked
    )
