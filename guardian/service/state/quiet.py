"""QuietRows: the containers a sweep need not judge again (docs/design.md rule 18), so that an
idle sweep's cost grows with what changes, not with the containers.

A watched container is quiet when the last sweep judged it from its listing alone (no inspect
wanted) running and healthy, or running without a healthcheck, with no problem, no skip, no
decision, no open incident and no namespace it shares (its leader may change under it): then
its judgement depends on nothing but that listing and what the loop hears of it. The next sweep
takes the row as it was while:
- the list shows the container as before (the adapter hands the same snapshot for an unchanged
  listing; equal ones count too),
- nothing was heard of it since: no engine event, no reaction (an event, a probe's, a resource
  rule's verdict), no recheck asked (a log rule's match, a decision's time),
- the settings are the same (a reload), the wall clock did not step, the engine stayed
  reachable,
- its healthy streak's reset check is made or not yet due, and no incident of its name opened.
Anything else, and it is judged as every container is.

A sweep that kept every row quiet leaves them as one whole (Whole): the next sweep of the very
same list, with nothing heard, kept or cleared since, under the same settings, before any row's
reset check is due and with no incident open of their names, takes them all at once, without
a walk over the containers (an idle host's sweep).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from guardian.core.assessment import Assessment
from guardian.core.model import ContainerSnapshot
from guardian.ports import Rechecks

MAX_ROWS = 10_000  # beyond, further containers are judged at every sweep
MAX_NEWS = 100  # containers heard of between two sweeps; beyond, the next one lists them all
# Tellings (heard, clear) between two of the sweep's calls; beyond, all taken as heard of.
MAX_INBOX = MAX_ROWS
# A row's `until` once its healthy streak's reset check was made: no check comes due again, and
# only what is heard of the container (or a reload, a step, an outage) ends its quiet.
FOREVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Whole:
    """Every row of a sweep's watched list, kept quiet: the list (the very object), its rows
    in its order, the soonest reset check among them, their names, the rows' version."""

    watched: Sequence[ContainerSnapshot]
    rows: tuple[Assessment, ...]
    soonest: datetime
    names: frozenset[str]
    version: int


@dataclass(frozen=True)
class QuietRow:
    row: Assessment
    # When its healthy streak's reset check is due (HealthyStreaks.quiet_until); FOREVER: made.
    until: datetime

    def holds(self, now: datetime) -> bool:
        """Its reset check is not due at `now` (never, once made: FOREVER lies after any time)."""
        return now < self.until


class QuietRows:
    """Kept by one thread, the sweep's (begin, keep, news, unsettled, again: the daemon's sweep
    job runs one at a time), and told by any (heard, clear: the events thread, the workers,
    rechecks, a clock step) through an inbox: a deque they append to, one operation atomic in
    CPython, that the sweep alone pops, from the front, at the start of each of its calls,
    applying what was told in the order told. So each of the sweep's calls sees everything
    told before it began, as under a lock; what is told while a sweep runs is applied at its
    keep(), or, told after keep() took the inbox, at the next call, before any row is read
    again (rows are read only by the sweep's calls). At most MAX_INBOX told between two of
    them; past it, what is told is not named (`_overflow`) and taken as every container heard
    of: judged again, none taken as it was."""

    def __init__(self) -> None:
        self._inbox: deque[str | None] = deque()  # container ids heard of; None: clear()
        self._overflow = False  # told past MAX_INBOX (set by any thread, reset by the sweep)
        self._rows: dict[str, QuietRow] = {}
        # Container ids heard of while a sweep runs (None: none runs; beyond MAX_ROWS of them,
        # the sweep keeps no row).
        self._heard: set[str] | None = None
        self._flooded = False
        self._settings: object = None
        # Container ids heard of since a sweep last asked for them (service/state/listing.py); None:
        # more than MAX_NEWS, or every container is to be judged again.
        self._news: set[str] | None = None
        # Every write to the rows or what ends them (heard, cleared, kept, a new settings): the
        # same number, the same rows; and the last sweep's whole, when it kept every row.
        self._version = 0
        self._whole: Whole | None = None

    # -- told by any thread -----------------------------------------------------------------

    def heard(self, container_id: str) -> None:
        """Something was heard of the container (an event, a reaction): judge it again."""
        self._tell(container_id)

    def clear(self) -> None:
        """Judge every container again (the clock stepped, the engine was out of reach)."""
        self._tell(None)

    def _tell(self, told: str | None) -> None:
        try:
            if self._inbox[-1] == told:
                # The same told last is not applied yet (applied only once popped): this
                # telling is applied with it.
                return
        except IndexError:
            pass  # empty, or emptied by the sweep meanwhile
        if len(self._inbox) < MAX_INBOX:
            self._inbox.append(told)  # a few threads at once may pass MAX_INBOX by one each
        else:
            self._overflow = True

    # -- the sweep's ------------------------------------------------------------------------

    def _take_told(self) -> None:
        """Apply what was told before this call, in the order told (the sweep's thread)."""
        if self._overflow:
            # Reset before it is applied: a telling that sets it again meanwhile is applied
            # by this call or the next, never lost.
            self._overflow = False
            self._cleared()
            self._heard_of_all()
        for _ in range(len(self._inbox)):  # not those told meanwhile: the next call's
            told = self._inbox.popleft()
            if told is None:
                self._cleared()
            else:
                self._heard_of(told)

    def _heard_of(self, container_id: str) -> None:
        self._rows.pop(container_id, None)
        self._version += 1
        if self._news is not None:
            self._news.add(container_id)
            if len(self._news) > MAX_NEWS:
                self._news = None
        if self._heard is not None and not self._flooded:
            self._heard.add(container_id)
            if len(self._heard) > MAX_ROWS:
                self._flooded, self._heard = True, set()

    def _heard_of_all(self) -> None:
        """Containers not named were heard of: as if each had been."""
        self._rows.clear()
        self._version += 1
        self._news = None
        if self._heard is not None:
            self._flooded, self._heard = True, set()

    def _cleared(self) -> None:
        self._rows.clear()
        self._settings = None
        self._news = None
        self._version += 1

    def begin(self, settings: object) -> dict[str, QuietRow]:
        """A sweep begins under `settings`: the rows it may take (none after a reload)."""
        self._take_told()
        if settings is not self._settings:
            self._rows.clear()
            self._settings = settings
            self._version += 1
        self._heard, self._flooded = set(), False
        self._whole = None  # a sweep judging row by row: kept whole again only by keep()
        return dict(self._rows)

    def news(self) -> set[str] | None:
        """The containers heard of since the last call (None: too many to name, or all of
        them); from now on, what is heard is news for the next call."""
        self._take_told()
        news, self._news = self._news, set()
        return news

    def unsettled(self, watched: Sequence[ContainerSnapshot], now: datetime) -> set[str]:
        """The ids of `watched` without a row a sweep at `now` may take (none, or its reset check
        due): none while the last sweep's whole of the very list holds, without a walk."""
        self._take_told()
        if self._holding_whole(watched, now) is not None:
            return set()
        rows = self._rows
        return {c.id for c in watched if c.id not in rows or not rows[c.id].holds(now)}

    def again(
        self,
        watched: Sequence[ContainerSnapshot],
        settings: object,
        now: datetime,
        open_names: set[str],
    ) -> tuple[Assessment, ...] | None:
        """Every row of `watched` as the last sweep kept them, when it kept them all and none
        can have changed since (Whole); else None (the sweep judges row by row)."""
        self._take_told()
        whole = self._holding_whole(watched, now)
        if whole is None or settings is not self._settings:
            return None
        return whole.rows if whole.names.isdisjoint(open_names) else None

    def _holding_whole(self, watched: Sequence[ContainerSnapshot], now: datetime) -> Whole | None:
        """The last sweep's whole, when it is of the very list `watched`, no row was written
        since and none of their reset checks is due at `now` (what was told taken first)."""
        whole = self._whole
        if whole is None or whole.watched is not watched or whole.version != self._version:
            return None
        return whole if now < whole.soonest else None

    def keep(
        self,
        rows: dict[str, QuietRow],
        watched: Sequence[ContainerSnapshot] | None = None,
        order: Sequence[Assessment] = (),
    ) -> None:
        """The sweep's quiet rows (those taken and those newly judged quiet), except any heard
        of while it ran; `watched` and its rows in `order`: the sweep kept every row quiet."""
        self._take_told()  # what was told while the sweep ran is not kept
        heard, flooded = self._heard or set(), self._flooded
        self._heard, self._flooded = None, False
        self._version += 1
        self._whole = None
        whole = not heard and not flooded and len(rows) == len(order) <= MAX_ROWS
        if watched is not None and whole:
            self._whole = Whole(
                watched,
                tuple(order),
                min((r.until for r in rows.values()), default=FOREVER),
                frozenset(a.snapshot.name for a in order),
                self._version,
            )
        if flooded:
            self._rows = {}
            return
        kept = (item for item in rows.items() if item[0] not in heard)
        self._rows = dict(itertools.islice(kept, MAX_ROWS))


def taken(kept: QuietRow, snap: ContainerSnapshot, now: datetime, open_names: set[str]) -> bool:
    """Whether the sweep takes `kept` for `snap` as it was."""
    last = kept.row.snapshot
    if last is not snap and last != snap:
        return False
    return kept.holds(now) and snap.name not in open_names


def is_quiet(a: Assessment) -> bool:
    """Whether a sweep's judgement of a container holds until something is heard of it."""
    snap, result = a.snapshot, a.result
    return (
        not snap.inspected
        and snap.runs_well
        and not snap.namespaces
        and result.problem is None
        and result.skipped is None
        and a.decision is None
    )


class HeardRechecks:
    """Rechecks that are news of their container: a sweep before the recheck runs judges it
    (commands and tests have no scheduler and wait for a sweep)."""

    def __init__(self, quiet: QuietRows, rechecks: Rechecks) -> None:
        self.quiet = quiet
        self.rechecks = rechecks

    def recheck(self, container_id: str, at: datetime) -> None:
        self.quiet.heard(container_id)
        self.rechecks.recheck(container_id, at)
