"""What the engine remembers of a container's starts, set against what the store remembers of
Guardian's attempts (docs/design.md rule 16): the attempts the store has no record of,
witnessed by the engine or assumed where the engine's memory ends. Pure: times and history come
in as values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.core.stamps import no_later_than

# The earliest start known, this close to the container's creation, is its first start
# (`docker run`), not a restart; a `docker create` started later counts as one (the safe side).
FIRST_START = timedelta(seconds=5)
# How much earlier than the intent's stamp the engine may stamp its start (clock skew bounds
# within what the engine's Date headers allow).
EARLY = timedelta(seconds=2)
# State.StartedAt and the start event of the same start differ by the engine's own bookkeeping.
SAME_START = timedelta(seconds=1)
# Beyond the stop timeout, how long after its intent a restart's start may come.
LATE = timedelta(seconds=10)


def in_reach(asked: datetime, allowance: timedelta, at: datetime) -> bool:
    """Whether what the engine stamped `at` may be the work of a call Guardian asked at `asked`
    whose stop timeout is `allowance`: from EARLY before the ask to the stop timeout and LATE
    after it."""
    return asked - EARLY <= at <= asked + allowance + LATE


@dataclass(frozen=True)
class EngineLog:
    """The engine's event log as read back at one reconciliation, in Guardian's frame.

    `starts` are the start events of each container (by id) from `since` on. `covered_from`:
    from when the log is complete; the engine keeps a bounded ring of events (256 on Docker
    20.10) and none across its own restart, so it is the oldest event it still returned (None:
    it returned none, nothing is covered). `recorded_through`: until when the store is known to
    hold every attempt (the last sweep whose mark was written; None: a new or replaced store).
    `signalled`: the containers the engine was sending a stop signal when the log was read (a
    kill with no start after it), and when: a restart, or a stop, perhaps still under way.
    """

    since: datetime
    read_at: datetime
    starts: dict[str, tuple[datetime, ...]]
    covered_from: datetime | None
    recorded_through: datetime | None = None
    signalled: dict[str, datetime] = field(default_factory=dict)

    def moved(self, step: timedelta) -> EngineLog:
        """The log with every stamp moved by a step of the wall clock since it was read."""
        if not step:
            return self

        def by(at: datetime | None) -> datetime | None:
            return None if at is None else at + step

        return EngineLog(
            self.since + step,
            self.read_at + step,
            {k: tuple(t + step for t in v) for k, v in self.starts.items()},
            by(self.covered_from),
            by(self.recorded_through),
            {k: t + step for k, t in self.signalled.items()},
        )

    def under_way(self, container_id: str, allowance: timedelta) -> datetime | None:
        """When the engine was sent the stop signal of a restart (or a stop) of the container
        that may still be under way at the reading: a kill with no start after it, within
        `allowance` (its stop timeout) and LATE of the reading; None otherwise."""
        kill = self.signalled.get(container_id)
        if kill is None or kill < self.read_at - allowance - LATE:
            return None
        return kill

    def gap(self, created: datetime | None) -> tuple[datetime, datetime] | None:
        """The part of the window neither the store nor the log vouches for, for a container
        created at `created`: (lower, upper), or None when there is none. A mark ahead of the
        reading (the clock stepped back since it was written) vouches for nothing."""
        lower = self.since
        through = self.recorded_through
        if through is not None and through <= self.read_at:
            lower = max(lower, through)
        if created is not None:
            lower = max(lower, created + FIRST_START)
        upper = self.covered_from if self.covered_from is not None else self.read_at
        upper = min(upper, self.read_at)
        return (lower, upper) if lower < upper else None


@dataclass(frozen=True)
class Witness:
    """One container as the engine shows it: its id, creation and last start (State.StartedAt),
    in Guardian's frame."""

    container_id: str
    created: datetime | None
    started_at: datetime | None


def restarting(
    events: Sequence[tuple[str, datetime]], covered_from: datetime | None
) -> list[datetime]:
    """The starts among one container's events (action, time; oldest first) that restart it,
    without knowing when it was created: a start after any other event of it but its create
    (it ran, or was stopped, before), or the log's oldest event (what came before it is lost).
    A container's first start (`docker run`; a `docker create` started later) is not one."""
    found: list[datetime] = []
    before = False
    for action, at in events:
        if action == "start" and (before or (covered_from is not None and at <= covered_from)):
            found.append(at)
        if action != "create":
            before = True
    return found


def signalled(events: Sequence[tuple[str, datetime]]) -> datetime | None:
    """When the last kill among one container's events (oldest first) was sent, when no start
    came after it: a stop signal whose restart (or stop) may still be under way."""
    kill: datetime | None = None
    for action, at in events:
        if action == "kill":
            kill = at
        elif action == "start":
            kill = None
    return kill


def explained(
    starts: Iterable[datetime], attempts: Iterable[datetime], allowance: timedelta
) -> list[datetime]:
    """The starts no attempt accounts for. An attempt accounts for at most one start: the first
    one from EARLY before it to `allowance` + LATE after it (a restart's start follows its
    intent within the stop timeout)."""
    left = sorted(attempts)
    unexplained: list[datetime] = []
    for start in sorted(starts):
        match = next((a for a in left if in_reach(a, allowance, start)), None)
        if match is None:
            unexplained.append(start)
        else:
            left.remove(match)
    return unexplained


def unrecorded_attempts(
    log: EngineLog,
    container: Witness,
    stored: Sequence[datetime],
    *,
    now: datetime,
    cooldown: timedelta,
    max_attempts: int,
    allowance: timedelta,
) -> tuple[datetime, ...]:
    """The attempts of `container` within the log's window that the store has no record of
    (`stored`: its attempts as the store keeps them), to count beside them.

    - Every start the engine witnessed (a start event, or State.StartedAt) that no stored
      attempt accounts for counts, whoever made it: a person's `docker restart` and Docker's
      restart policy count like Guardian's own. The container's first start does not.
    - Where neither the store nor the log vouches for a part of the window (the log's ring
      does not reach back so far, the engine restarted, the store is new or its last mark is
      older), a start after that part means restarts may have been made in it unseen: Guardian
      assumes it restarted there as often as its cooldown allowed, back from the earliest start
      it knows, up to the cap, less the attempts the store keeps there.

    - A restart the engine was still carrying out when the log was read (its kill, no start
      after it: EngineLog.under_way) counts from its kill, as the start it will make; a start
      after it within the allowance is that restart's own, not another.

    A stamp ahead of `now` counts as made now (a step back never hands a budget back).
    """
    events = log.starts.get(container.container_id, ())
    last = container.started_at
    if last is not None and any(abs(s - last) <= SAME_START for s in events):
        last = None  # State.StartedAt is also the last start event: one start, not two
    kill = log.under_way(container.container_id, allowance)
    if kill is not None:
        if last is not None and in_reach(kill, allowance, last):
            last = None  # the start of the restart the kill began: counted from its kill
        events = (*events, kill)
    witnessed = sorted(
        {no_later_than(s, now) for s in (*events, last) if s is not None and s > log.since}
    )
    created = container.created
    if witnessed and created is not None and witnessed[0] <= created + FIRST_START:
        witnessed.pop(0)  # its first start
    counted = explained(witnessed, (no_later_than(a, now) for a in stored), allowance)
    gap = log.gap(container.created)
    if gap is None or not witnessed or cooldown <= timedelta(0):
        return tuple(counted)
    lower, upper = gap
    anchor = min(witnessed)
    assumed: list[datetime] = []
    # The latest an unseen restart can be: a cooldown before the earliest known start, and
    # inside the part nobody vouches for.
    at = min(anchor - cooldown, upper - timedelta(microseconds=1))
    # Enough to reach the cap: more would only move its end later.
    while lower < at and len(assumed) < max_attempts - len(counted):
        assumed.append(at)
        at -= cooldown
    kept_there = sum(1 for a in stored if lower < no_later_than(a, now) < upper)
    assumed = assumed[: max(0, len(assumed) - kept_there)]  # the latest ones: the strictest
    return tuple(sorted((*counted, *assumed)))
