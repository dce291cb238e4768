"""EngineClock: the engine's clock against Guardian's, so the engine's stamps (State.StartedAt,
health probe times, event times) are judged in Guardian's frame even when the two clocks differ
(a remote engine, a host whose clock Guardian does not share, a skewed VM).

Every engine response carries a `Date` header (a socket proxy that allows only Guardian's
endpoints still sends it, unlike /info's SystemTime). A header has whole seconds, so one answer
bounds the skew within about a second; the latest answers (ANSWERS of them) narrow the bounds
together, back to one that contradicts the newer (either clock stepped there: the bounds start
afresh after it). While the bounds allow no skew at all, there is none: a local engine's stamps
are taken as they are.

A stamp of a container's state is placed where it was first seen and then moves with the steps
of Guardian's wall clock (adapters.clock.wall_offset), as every stamp Guardian holds does: a
grace period or a verification that began before a step keeps its length through it.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict, deque
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from guardian.adapters.clock import stepped_between, wall_offset
from guardian.core.model import ContainerSnapshot
from guardian.ports import Clock

SEEN = 4096  # state stamps remembered (the oldest are forgotten first)
ANSWERS = 64  # the latest answers' bounds kept: minutes of sweeps, a second's worth of inspects

Bounds = tuple[float, float]  # what one answer, or several together, allow the skew to be


@dataclass(frozen=True)
class _Frame:
    """The skew as the answers up to `last` (the newest then) make it."""

    last: Bounds | None
    bounds: Bounds | None  # None: no answer yet
    skew: timedelta


def frame_of(answers: list[Bounds]) -> _Frame:
    """The answers' bounds narrowed together, newest first, back to the first that contradicts
    them (either clock stepped there: what came before tells nothing of the clocks now)."""
    if not answers:
        return _Frame(None, None, timedelta(0))
    low, high = answers[-1]
    for before_low, before_high in reversed(answers[:-1]):
        narrowed = max(low, before_low), min(high, before_high)
        if narrowed[0] > narrowed[1]:
            break
        low, high = narrowed
    skew = timedelta(0) if low <= 0 <= high else timedelta(seconds=(low + high) / 2)
    return _Frame(answers[-1], (low, high), skew)


class EngineClock:
    """Keeps no lock: each answer's bounds are appended to a bounded deque (one C call, from
    whichever thread got the answer: none is lost), and the skew is worked out from a copy of
    it (one C call) by whoever reads it first after a new answer, kept as one frame swapped
    whole and used while the newest answer is the one it was worked out with. A stamp is
    placed once: the first placement stays (setdefault, one C call); the oldest are forgotten
    first (popitem, one C call)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._answers: deque[Bounds] = deque(maxlen=ANSWERS)  # oldest first
        self._frame = _Frame(None, None, timedelta(0))
        # An engine stamp -> where it was placed when first seen, and wall_offset() then.
        self._seen: OrderedDict[datetime, tuple[datetime, float]] = OrderedDict()
        self._header: tuple[str, float] | None = None  # the last Date parsed, as a timestamp

    def _now(self) -> _Frame:
        """The frame of the answers so far."""
        frame = self._frame
        answers = self._answers
        if not answers or answers[-1] is frame.last:  # answers only grow: [-1] is there
            return frame
        frame = frame_of(list(answers))
        self._frame = frame  # an older frame written after it is worked out again: [-1]
        return frame

    @property
    def skew(self) -> timedelta:
        """The engine's clock minus Guardian's wall clock (positive: the engine is ahead)."""
        return self._now().skew

    @property
    def uncertainty(self) -> timedelta | None:
        """How far an engine stamp in Guardian's frame may be off: the width of what the
        answers allow (None: no answer yet)."""
        bounds = self._now().bounds
        if bounds is None:
            return None
        low, high = bounds
        return timedelta(seconds=high - low)

    def saw_date(self, date: str | None, elapsed: float = 0.0) -> None:
        """An engine response's `Date` header (RFC 7231), just received, `elapsed` seconds
        after its request was sent."""
        if not date:
            return
        header = self._header
        if header is not None and header[0] == date:
            engine_at = header[1]  # answers within one second share their Date
        else:
            parsed = http_date(date)
            if parsed is None:
                return  # a broken header tells nothing; the skew stays
            engine_at = parsed.timestamp()
            self._header = (date, engine_at)
        received = self.clock.now().timestamp()
        sent = received - max(0.0, elapsed)
        # The engine wrote the header between `sent` and `received`, within its second.
        self._answers.append((engine_at - received, engine_at + 1 - sent))

    def ours(self, stamp: datetime) -> datetime:
        """An engine stamp in Guardian's frame."""
        return stamp - self.skew

    def theirs(self, stamp: datetime) -> datetime:
        """A Guardian stamp in the engine's frame (e.g. the `since` of an event stream)."""
        return stamp + self.skew

    def snapshot(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        """`snap` with the engine's stamps in Guardian's frame."""
        offset = wall_offset(self.clock)
        stamps = (
            snap.started_at,
            snap.finished_at,
            snap.health_log_at,
            snap.unhealthy_since,
            snap.unhealthy_by,
            snap.created,
        )
        skew = self.skew  # one frame for all of them
        placed = tuple(self._placed(stamp, offset, skew) for stamp in stamps)
        if placed == stamps:
            return snap
        started_at, finished_at, health_log_at, unhealthy_since, unhealthy_by, created = placed
        return replace(
            snap,
            started_at=started_at,
            finished_at=finished_at,
            health_log_at=health_log_at,
            unhealthy_since=unhealthy_since,
            unhealthy_by=unhealthy_by,
            created=created,
        )

    def _placed(self, stamp: datetime | None, offset: float, skew: timedelta) -> datetime | None:
        if stamp is None:
            return None
        seen = self._seen.get(stamp)
        if seen is None:
            if len(self._seen) >= SEEN:
                with contextlib.suppress(KeyError):  # another thread took the last meanwhile
                    self._seen.popitem(last=False)
            # Two threads placing it at once: the first placement stays, for both.
            seen = self._seen.setdefault(stamp, (stamp - skew, offset))
        at, then = seen
        return at + stepped_between(then, offset)


def http_date(date: str | None) -> datetime | None:
    """An HTTP `Date` header (RFC 7231) as an aware time; None when it is missing or unreadable."""
    try:
        parsed = parsedate_to_datetime(date or "")
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else None
