"""A container's last day as the status page draws it: SLOTS equal slots of SLOT each, aligned
to the wall clock (the last one is the slot now runs in), each the worst shade seen in it;
the actions as marks; an open incident as a bar from its start to now. Pure: time is an
argument, and the view holds plain values the template escapes.

48 slots of 30 minutes: a slot is 5 px of a 240 px strip, wide enough to see and to point at
on a phone, and a row stays small (neighbouring slots of one shade are drawn as one run).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from guardian.core.detection.windows import MaintenanceWindow
from guardian.core.history import ContainerHistory, Mark, Shade, Span
from guardian.core.model import Silence

SLOTS = 48
SLOT = timedelta(minutes=30)
DAY = SLOTS * SLOT
WIDTH = 480  # the SVG's own units: 10 per slot
MAX_MARKS = 48  # the newest drawn; the rest counted (`guardian actions` lists them)
MAX_VIEWS = 1024  # strip views kept by what they show (StripViews)
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_TINY = timedelta(microseconds=1)


def first_slot(now: datetime) -> datetime:
    """The start of the strip's first slot at `now`: the slot now runs in is the last."""
    return EPOCH + (now - EPOCH) // SLOT * SLOT - (SLOTS - 1) * SLOT


def next_slide(now: datetime) -> datetime:
    """When the strip next moves by the clock alone: the end of the slot now runs in."""
    return first_slot(now) + SLOTS * SLOT


@dataclass(frozen=True)
class Strip:
    start: datetime  # the first slot's start
    now: datetime
    slots: tuple[Shade, ...]
    marks: tuple[Mark, ...]  # the newest MAX_MARKS within the strip, oldest first
    marks_more: int
    open_since: datetime | None  # the start of the oldest open incident's problem
    open_incident: int | None


def _index(start: datetime, at: datetime) -> int:
    return (at - start) // SLOT


def coverage(runs: Sequence[tuple[datetime, datetime]], now: datetime) -> tuple[Shade, ...]:
    """Each slot HEALTHY where Guardian ran (from a run's first sweep to its last) for at
    least half of it, else UNKNOWN: the shade of a slot nothing was seen in. The slot now runs
    in is Guardian's own, which is running to show it."""
    start = first_slot(now)
    ran = [timedelta(0)] * SLOTS
    for first, last in runs:
        lo, hi = max(first, start), min(last, now)
        while lo < hi:
            i = _index(start, lo)
            end = min(hi, start + (i + 1) * SLOT)
            ran[i] += end - lo
            lo = end
    shades = [Shade.HEALTHY if 2 * r >= SLOT else Shade.UNKNOWN for r in ran]
    shades[-1] = Shade.HEALTHY
    return tuple(shades)


def window_spans(windows: Iterable[MaintenanceWindow], now: datetime) -> tuple[Span, ...]:
    """The maintenance windows in force in the strip's past slots, as spans (the slot now
    runs in is the container's condition's: in maintenance or not)."""
    return _past_windows(tuple(windows), first_slot(now))


@lru_cache(maxsize=256)
def _past_windows(windows: tuple[MaintenanceWindow, ...], start: datetime) -> tuple[Span, ...]:
    """Found once per slide for every container the same windows hold, in at most two steps
    of each window per slot however often it comes (a slot in maintenance is enough)."""
    end, spans = start + (SLOTS - 1) * SLOT, []
    for w in windows:
        at = start
        while at < end:
            active = w.active_at(at)
            if active is not None:
                spans.append(Span(Shade.MAINTENANCE, active[0], min(active[1], end)))
                at = max(active[1], start + (_index(start, at) + 1) * SLOT)
                continue
            nxt = w.next_start(at)
            if nxt is None or nxt >= end:
                break
            at = nxt
    return tuple(spans)


def strip(
    base: tuple[Shade, ...],
    history: ContainerHistory,
    now: datetime,
    live: Shade = Shade.HEALTHY,
    windows: Sequence[Span] = (),
) -> Strip:
    """The strip at `now` over `base` (coverage(): what a slot is with nothing in it): each
    span shades the slots it touches, `live` (what the container is now) the last one."""
    start = first_slot(now)
    slots = list(base)
    for span in (*history.spans, *windows):
        end = span.end if span.end is not None else now
        if end < start or span.start > now:
            continue
        first = max(0, _index(start, span.start))
        last = min(SLOTS - 1, _index(start, max(span.start, end - _TINY)))
        for i in range(first, last + 1):
            if span.shade > slots[i]:
                slots[i] = span.shade
    slots[-1] = max(slots[-1], live)
    shown = [m for m in history.marks if start <= m.at <= now]
    opened = [s for s in history.spans if s.end is None and s.incident is not None]
    oldest = min(opened, key=lambda s: s.start, default=None)
    return Strip(
        start,
        now,
        tuple(slots),
        tuple(shown[-MAX_MARKS:]),
        max(0, len(shown) - MAX_MARKS),
        oldest.start if oldest is not None else None,
        oldest.incident if oldest is not None else None,
    )


def with_silence(history: ContainerHistory, s: Silence) -> ContainerHistory | None:
    """`history` (as the store's history read gives it: the problems' spans, then the silences'
    as merged spans, oldest first) after the one write of `s`: set, or lifted; None when it
    does not follow from `history` alone (the store is read again). A container has one
    silence in force at most: a silence set ends the one in force then (it touches it)."""
    held = [p for p in history.spans if p.shade is Shade.MAINTENANCE and p.incident is None]
    problems = [
        p for p in history.spans if not (p.shade is Shade.MAINTENANCE and p.incident is None)
    ]
    last = held[-1] if held else None
    reaches = last is not None and last.start <= s.created_at and last.end is not None
    if s.ended_at is not None:  # lifted: the last span was the silence in force
        if last is None or not reaches or last.end != s.until:
            return None
        held[-1] = Span(Shade.MAINTENANCE, last.start, s.ended_at)
    elif last is not None and last.end is not None and last.end >= s.created_at:
        if not reaches:
            return None
        held[-1] = Span(Shade.MAINTENANCE, last.start, s.until)  # the one in force ends now
    else:
        held.append(Span(Shade.MAINTENANCE, s.created_at, s.until))
    return ContainerHistory((*problems, *held), history.marks)


@lru_cache(maxsize=1024)  # a day's slot boundaries, and some
def _clock(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%d %b %H:%M")


def _x(s: Strip, at: datetime) -> float:
    return round(max(0.0, (at - s.start) / DAY * WIDTH), 1)


def strip_view(s: Strip) -> dict[str, Any]:
    """The strip as the template draws it: runs of neighbouring slots of one shade, the marks
    and the open incident's bar, each with its accessible name (time and what happened)."""
    runs: list[dict[str, Any]] = []
    for i, shade in enumerate(s.slots):
        if runs and runs[-1]["shade"] == shade.name.lower():
            runs[-1]["slots"] += 1
            continue
        runs.append({"shade": shade.name.lower(), "word": shade.word, "first": i, "slots": 1})
    for run in runs:
        first = s.start + run["first"] * SLOT
        end = first + run["slots"] * SLOT
        run["x"], run["w"] = run.pop("first") * WIDTH // SLOTS, run.pop("slots") * WIDTH // SLOTS
        run["label"] = f"{_clock(first)} to {_clock(end)[-5:]} UTC: {run.pop('word')}"
    marks = [
        {
            "kind": m.kind,
            "x": round(_x(s, m.at) - 1.5, 1),  # a bar 3 wide, centred on its time
            "label": f"{m.kind} at {m.at.astimezone(UTC):%d %b %H:%M:%S} UTC: "
            + (m.outcome or "pending"),
        }
        for m in s.marks
    ]
    bar = None
    if s.open_since is not None:
        x = _x(s, s.open_since)
        bar = {
            "x": x,
            "w": max(2.0, WIDTH - x),  # to the strip's end: it lasts
            "label": f"incident #{s.open_incident} open since {_clock(s.open_since)} UTC",
        }
    return {"runs": runs, "marks": marks, "more": s.marks_more, "open": bar}


def shown(s: Strip) -> Hashable:
    """What strip_view draws of `s`: two strips with the same are drawn the same (the time of
    the read, `now`, is not drawn: it moves on every read)."""
    return (s.start, bytes(s.slots), s.marks, s.marks_more, s.open_since, s.open_incident)


class StripViews:
    """Strip views by what they show: a strip drawn as before (a container back to the shades
    it had, or a healthy one like many others) is the very view of then, which the renderer
    has the HTML of. Bounded: when MAX_VIEWS are kept, they are dropped and made again."""

    def __init__(self) -> None:
        self._views: dict[Hashable, dict[str, Any]] = {}

    def view(self, s: Strip) -> dict[str, Any]:
        key = shown(s)
        made = self._views.get(key)
        if made is None:
            if len(self._views) >= MAX_VIEWS:
                self._views.clear()
            made = self._views[key] = strip_view(s)
        return made
