"""What the status page shows, gathered in one read: the containers through container_status()
(the same answer as `guardian status` and GET /api/v1/containers, its maintenance windows as
`guardian status` words them), the open incidents with their timelines, recent actions and dead
letters. Plain values for the templates.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from guardian import __version__
from guardian.core.history import ContainerHistory, Shade
from guardian.core.model import Incident, RemediationAction, Silence, Transition, Verdict
from guardian.ports import EngineUnavailable, Record
from guardian.readside.changes import Changes, Since
from guardian.readside.condition import LIVE, condition
from guardian.readside.queries import Judgements, Records
from guardian.readside.status import ContainerStatus, Statuses
from guardian.readside.strip import (
    StripViews,
    coverage,
    first_slot,
    next_slide,
    strip,
    window_spans,
    with_silence,
)
from guardian.readside.views import (
    action_view,
    incident_view,
    maintenance_view,
    text,
    timeline_view,
    transition_view,
    when,
)

MAX_INCIDENTS = 100  # open incidents shown with their timelines
MAX_TIMELINE = 50  # the latest entries of each timeline
MAX_KEPT_TRANSITIONS = 5000  # transitions' views kept for the next read
MAX_ACTIONS = 20
MAX_DEAD_LETTERS = 20
MAX_ROWS_IN_PLACE = 32  # changed rows brought up to date one by one; beyond, all
MAX_WINDOWS_SHOWN = 3  # a container's maintenance windows in its row; `guardian status` lists all
ACTIONS_SINCE = timedelta(days=1)
SHOWN_HEALTH = ("healthy", "unhealthy", "starting")
NO_HISTORY = ContainerHistory()
STRIP_KINDS = frozenset((Record.INCIDENTS, Record.ACTIONS, Record.SILENCES))
Base = tuple[Shade, ...]  # a strip's slots before a container's own history (strip.coverage)


@dataclass
class PageData:
    host: str
    now: datetime
    version: str
    uptime: str
    engine_error: str | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    incidents: list[dict[str, Any]] = field(default_factory=list)
    incidents_hidden: int = 0
    actions: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    silences: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def shown_state(c: ContainerStatus) -> str:
    """The row's state: a running container's health when it has one, else its state."""
    if c.state == "running" and c.health in SHOWN_HEALTH:
        return c.health
    return c.state


def _attempts(c: ContainerStatus) -> str:
    d = c.decision
    if d is None or not d.max_attempts:
        return ""
    return f"{d.used} of {d.max_attempts}"


def _next_restart(c: ContainerStatus) -> str:
    if c.restart_now:
        d = c.decision
        # A rung of the ladder (or a stop) is what happens now, not a restart: say which.
        return "now" if d is None or d.verdict is Verdict.RESTART else f"now: {d.verdict}"
    if c.held_back and c.retry_at is not None:
        return f"held back ({c.held_back}); next allowed {_human(c.retry_at)}"
    if c.held_back:
        return f"held back ({c.held_back})"
    return ""


def _human(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else ""


def _windows(c: ContainerStatus, now: datetime) -> tuple[list[dict[str, Any]], datetime | None]:
    """The container's maintenance windows as `guardian status` shows them (maintenance_view),
    those in force first, then by their next start; and when the clock alone changes them (the
    first end or start to come)."""
    views = maintenance_view((c,), now)
    views.sort(key=lambda v: (v["in_force_until"] is None, v["next_start"] or "~"))
    times = [v[k] for v in views for k in ("in_force_until", "next_start") if v[k] is not None]
    return views, min(map(datetime.fromisoformat, times), default=None)


def _row(
    c: ContainerStatus,
    windows: list[dict[str, Any]],
    condition: tuple[str, str],
    strip: dict[str, Any],
) -> dict[str, Any]:
    unresolved = [i for i in c.incidents if i.is_open]
    first = unresolved[0] if unresolved else None
    return {
        "name": c.name,
        "state": shown_state(c),
        "condition": condition[1],
        "shade": condition[0],
        "strip": strip,
        "incident": first.id if first is not None else "",
        "incident_text": (
            f"#{first.id} {first.type}, {first.state}" + (", escalated" if first.escalated else "")
            if first is not None
            else ""
        ),
        "more_incidents": len(unresolved) - 1 if unresolved else 0,
        "attempts": _attempts(c),
        "next_restart": _next_restart(c),
        "silenced_until": _human(c.silence.until) if c.silence else "",
        "silence_reason": text(c.silence.reason) if c.silence else "",
        "maintenance": windows[:MAX_WINDOWS_SHOWN],
        "maintenance_more": max(0, len(windows) - MAX_WINDOWS_SHOWN),
    }


# A container's status, its row, when the clock alone changes the row (a window's start or
# end, the condition's duration, the strip's slide), the strip's history and base.
_Kept = tuple[ContainerStatus, dict[str, Any], datetime | None, ContainerHistory, Base]


def _kept_row(
    last: _Kept | None,
    c: ContainerStatus,
    now: datetime,
    history: ContainerHistory,
    base: Base,
    views: StripViews,
) -> _Kept:
    """`c` and its row at `now`: the very row of `last` when `c` is its status, its history
    and base are the same and the clock did not move it, or when it shows the same. Its
    strip's view is the one `views` made for a strip that shows the same."""
    if (
        last is not None
        and last[0] is c
        and (last[2] is None or now < last[2])
        and last[4] is base
        and last[3] == history
    ):
        return last
    windows, due = _windows(c, now) if c.maintenance else ([], None)
    shade, text, changes = condition(c, windows, now)
    spans = window_spans(c.maintenance, now) if c.maintenance else ()
    view = views.view(strip(base, history, now, LIVE.get(shade, Shade.HEALTHY), spans))
    row = _row(c, windows, (shade, text), view)
    due = min(t for t in (due, changes, next_slide(now)) if t is not None)
    kept = last[1] if last is not None and last[1] == row else row
    return (c, kept, due, history, base)


def _tally(c: ContainerStatus, row: dict[str, Any]) -> tuple[int, ...]:
    """What the container adds to the summary: (unhealthy, restarting, given up, silenced)."""
    incidents = c.incidents
    return (
        bool(row["incident"] or row["state"] == "unhealthy"),
        c.state == "restarting" or any(i.state == "in_progress" for i in incidents),
        any(i.escalated for i in incidents),
        c.silence is not None,
    )


def _passed(kept: _Kept, now: datetime) -> bool:
    return kept[2] is not None and kept[2] <= now


def _first_due(rows: Iterable[_Kept]) -> datetime | None:
    return min((kept[2] for kept in rows if kept[2] is not None), default=None)


def _find(statuses: list[ContainerStatus], name: str) -> ContainerStatus | None:
    """The status of `name` in `statuses` (sorted by name), or None."""
    at = bisect_left(statuses, name, key=attrgetter("name"))
    return statuses[at] if at < len(statuses) and statuses[at].name == name else None


def no_dead_letters(limit: int) -> list[dict[str, Any]]:
    """The dead letters of a Guardian without an outbox."""
    return []


def _silences(in_force: Iterable[Silence]) -> list[dict[str, Any]]:
    """The silences in force as shown."""
    return [
        {
            "container": s.container,
            "until": _human(s.until),
            "reason": text(s.reason),
            "by": s.created_by,
        }
        for s in in_force
    ]


def _same(fresh: list[dict[str, Any]], kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return kept if fresh == kept else fresh


@dataclass
class _StoreParts:
    """What the page shows from the store, for one audience, as of a version of Changes."""

    version: int
    incidents: list[dict[str, Any]]
    incidents_hidden: int
    actions: list[dict[str, Any]]
    dead_letters: list[dict[str, Any]]
    silences: list[dict[str, Any]]
    silences_end: datetime | None  # the first shown silence to end: then they are read again
    # What each shown incident and action was built from, and what was built, by id: an
    # unchanged one is not built again (its timeline read, its text redacted).
    built_incidents: dict[int, tuple[Incident, dict[str, Any]]]
    built_actions: dict[int, tuple[RemediationAction, dict[str, Any]]]


class PageReader:
    """Reads the page's data after each change, as little as the change needs (Changes names
    what it is about): the containers through Statuses (container_status() kept current), the
    store's parts only after a write, and of the incidents' timelines only those a write
    named. `dead_letters(limit)` lists the outbox's newest `limit` (oldest first), so the page
    reads no more of them than it shows."""

    def __init__(
        self,
        judgements: Judgements,
        records: Records,
        changes: Changes,
        dead_letters: Callable[[int], list[dict[str, Any]]] = no_dead_letters,
        monotonic: Callable[[], float] = time.monotonic,
        statuses: Statuses | None = None,
    ) -> None:
        self.records = records
        self.changes = changes
        self.statuses = statuses or Statuses(judgements, records, changes)
        self.dead_letters = dead_letters
        self.monotonic = monotonic
        self.started = monotonic()
        # What is kept here and in `statuses` (asked only from read()) is brought up to date by
        # each read: one read at a time, which its owner keeps (the status page reads under its
        # Feed's reading lock, entrypoints/page/feed.py), so no lock of its own.
        # Each container's status and row as last read, the rows in order, each row's
        # position in it, and the summary's counts (kept up to date row by row); the first
        # time the clock alone changes a row (a maintenance window; maybe earlier than any).
        self._rows: dict[str, _Kept] = {}
        self._ordered: list[dict[str, Any]] = []
        self._position: dict[str, int] = {}
        self._tally: dict[str, tuple[int, ...]] = {}
        self._counts = [0] * 4  # unhealthy, restarting, given up, silenced
        self._due: datetime | None = None
        self._store: dict[bool, _StoreParts] = {}
        # A transition never changes once written: its view is built once (never modified),
        # and an open incident's are read on from the last one read.
        self._transitions: dict[Transition, dict[str, Any]] = {}
        self._read_transitions: dict[int, tuple[Transition, ...]] = {}
        # The strips' history by container as of a version of Changes, read whole from the
        # first slot of `_strip_from` on, and the slots before a container's own (coverage).
        self._history: dict[str, ContainerHistory] = {}
        self._history_version = 0
        self._strip_from: datetime | None = None
        self._base: Base = ()
        self._strip_views = StripViews()

    def read(self, with_output: bool) -> PageData:
        """Everything the page shows. `with_output` False: nothing a container printed (health
        output, log tails) is included, for readers who have not signed in. The lists of a part
        that did not change are the very lists of the last read (the renderer keeps their
        HTML). Not from two threads at once: each read moves on what the last one kept."""
        records, now = self.records, self.records.clock.now()
        data = PageData(records.host, now, __version__, self._uptime(), None)
        moved = self._history_changed(now)
        try:
            statuses, changed = self.statuses.read_changed()
            more = None
            if moved is not None and changed is not None:  # a row it has not: read whole
                more = changed | frozenset(n for n in moved if n in self._rows)
            self._rows_of(statuses, more, now)
        except EngineUnavailable as exc:
            self._rows_of([], None, now)
            data.engine_error = str(exc)
        # The page's stream wakes when a window starts or ends with nothing else changing.
        due = self._due
        self.changes.due((due - now).total_seconds() if due is not None else None)
        data.rows = list(self._ordered)
        counts = self._counts
        parts = self._store_parts(with_output, now)
        data.incidents, data.incidents_hidden = parts.incidents, parts.incidents_hidden
        data.actions, data.dead_letters = parts.actions, parts.dead_letters
        data.silences = parts.silences
        data.summary = self._summary(data, counts)
        return data

    def _rows_of(
        self, statuses: list[ContainerStatus], changed: frozenset[str] | None, now: datetime
    ) -> None:
        """The rows brought up to date with `statuses`, sorted by name, of which `changed`
        may differ from the last read (None: any), and those the clock moved by `now`. A row
        whose status did not change, or shows the same, stays the very row of last time: the
        renderer keeps its HTML."""
        if changed is not None and self._due is not None and self._due <= now:
            changed = changed | {n for n, kept in self._rows.items() if _passed(kept, now)}
        if changed is not None and len(changed) <= MAX_ROWS_IN_PLACE:
            found = {name: _find(statuses, name) for name in changed}
            if len(statuses) == len(self._ordered) and all(
                c is not None and name in self._position for name, c in found.items()
            ):
                # The same containers: the changed rows in place, the counts by difference.
                for name, c in found.items():
                    assert c is not None
                    self._update(name, c, now)
                if self._due is not None and self._due <= now:
                    self._due = _first_due(self._rows.values())
                return
        rows, tally = {}, {}
        for c in statuses:
            history = self._history.get(c.name, NO_HISTORY)
            rows[c.name] = kept = _kept_row(
                self._rows.get(c.name), c, now, history, self._base, self._strip_views
            )
            tally[c.name] = _tally(c, kept[1])
        self._rows, self._tally = rows, tally
        self._due = _first_due(rows.values())
        self._ordered = [kept[1] for kept in rows.values()]
        self._position = {c.name: n for n, c in enumerate(statuses)}
        self._counts = [sum(counts) for counts in zip(*tally.values(), strict=True)] or [0] * 4

    def _history_changed(self, now: datetime) -> frozenset[str] | None:
        """Brings the strips' history up to date, and returns the containers whose history
        changed (None: any). Read whole (one read for every container) at first, when the
        strip slides to a new slot, and after a change that names nothing; else only the
        containers a write of incidents, actions or silences named."""
        version, since = self.changes.since(self._history_version)
        self._history_version, start = version, first_slot(now)
        if start != self._strip_from or since.store is None:
            read = self.records.history(start)
            self._history, self._strip_from = read.containers, start
            base = coverage(read.runs, now)
            self._base = self._base if base == self._base else base  # rows compare it by id
            return None
        names = since.store if since.wrote & STRIP_KINDS else frozenset()
        if not names:
            return names
        fresh = self._silenced(since, names)
        unknown = names - fresh.keys()
        if unknown:
            fresh |= self.records.history(start, unknown).containers
        moved = set()
        for name in names:
            new = fresh.get(name, NO_HISTORY)
            if self._history.get(name, NO_HISTORY) != new:
                self._history[name] = new
                moved.add(name)
        return frozenset(moved)

    def _silenced(self, since: Since, names: frozenset[str]) -> dict[str, ContainerHistory]:
        """The histories of `names` that follow from the silences written alone (when nothing
        else of the strip's was written), without a read: a silence set or lifted costs the
        page no query."""
        written = since.silences_written
        if since.wrote & STRIP_KINDS != {Record.SILENCES} or written is None:
            return {}
        out = {}
        for name in names - since.silences_rewritten:
            silence = written.get(name)
            if silence is not None:
                new = with_silence(self._history.get(name, NO_HISTORY), silence)
                if new is not None:
                    out[name] = new
        return out

    def _update(self, name: str, c: ContainerStatus, now: datetime) -> None:
        last = self._rows[name]
        history = self._history.get(name, NO_HISTORY)
        self._rows[name] = kept = _kept_row(last, c, now, history, self._base, self._strip_views)
        if kept is last:
            return
        if kept[2] is not None and (self._due is None or kept[2] < self._due):
            self._due = kept[2]
        self._ordered[self._position[name]] = kept[1]
        old, new = self._tally[name], _tally(c, kept[1])
        if old != new:
            self._tally[name] = new
            self._counts = [n - o + m for n, o, m in zip(self._counts, old, new, strict=True)]

    def _store_parts(self, with_output: bool, now: datetime) -> _StoreParts:
        last = self._store.get(with_output)
        version, since = self.changes.since(last.version if last is not None else 0)
        ended = last is not None and last.silences_end is not None and last.silences_end <= now
        if last is not None and not since.wrote and not ended:
            last.version = version
            return last
        again = since.incidents if last is not None else None
        parts = self._read_store(version, with_output, now, last, again, since.wrote)
        self._store[with_output] = parts
        return parts

    def _read_store(
        self,
        version: int,
        with_output: bool,
        now: datetime,
        last: _StoreParts | None,
        again: frozenset[int] | None,
        wrote: frozenset[Record],
    ) -> _StoreParts:
        """The store's parts; of `last`'s incidents those unchanged are kept but for the ones
        in `again`, whose timeline changed (None: every one is read again); its actions and
        dead letters unless such records were written."""
        # As the containers' read read them, else from the store. Those may be older than
        # `version` (a write landed since): the parts are then as old as they are.
        at, incidents_read, in_force = self.statuses.store_read() or (
            version,
            self.records.open_incidents(),
            self.records.silences_in_force(now),
        )
        version = min(version, at)
        open_incidents = [i for i in incidents_read if i.is_open]
        built_incidents = self._built_incidents(open_incidents, with_output, last, again)
        incidents = [entry for _, entry in built_incidents.values()]
        # Kept while not closed: a resolved incident reopens when its container fails again.
        not_closed = {i.id for i in incidents_read}
        self._read_transitions = {
            i: t for i, t in self._read_transitions.items() if i in not_closed
        }
        if last is not None and Record.ACTIONS not in wrote:
            built_actions, actions = last.built_actions, last.actions
        else:
            built_actions = self._actions(with_output, now, last)
            actions = [view for _, view in built_actions.values()]
        if last is not None and Record.DELIVERIES not in wrote:
            dead_letters = last.dead_letters
        else:
            dead_letters = self._dead_letters(with_output)
        silences = _silences(in_force)
        if last is not None:
            # A list that did not change stays the very list: the renderer keeps its HTML.
            incidents = _same(incidents, last.incidents)
            actions = _same(actions, last.actions)
            dead_letters = _same(dead_letters, last.dead_letters)
            silences = _same(silences, last.silences)
        return _StoreParts(
            version,
            incidents,
            max(0, len(open_incidents) - MAX_INCIDENTS),
            actions,
            dead_letters,
            silences,
            min((s.until for s in in_force), default=None),
            built_incidents,
            built_actions,
        )

    def _built_incidents(
        self,
        open_incidents: list[Incident],
        with_output: bool,
        last: _StoreParts | None,
        again: frozenset[int] | None,
    ) -> dict[int, tuple[Incident, dict[str, Any]]]:
        """The shown open incidents by id, each with what was built from it: `last`'s kept
        while unchanged and not in `again` (None: every one is built again)."""
        kept = last.built_incidents if last is not None and again is not None else {}
        built_incidents = {}
        for incident in open_incidents[:MAX_INCIDENTS]:
            assert incident.id is not None
            was = kept.get(incident.id)
            if was is None or was[0] != incident or (again is not None and incident.id in again):
                was = (incident, self._incident(incident, with_output))
            built_incidents[incident.id] = was
        return built_incidents

    def _dead_letters(self, with_output: bool) -> list[dict[str, Any]]:
        """The outbox's newest dead letters as shown (their errors only `with_output`)."""
        return [
            {
                "id": row.get("id"),
                "channel": row.get("channel"),
                "kind": row.get("kind"),
                "incident": row.get("incident_id"),
                "attempts": row.get("attempts"),
                "error": text(row.get("last_error")) if with_output else None,
                "at": row.get("finished_at"),
            }
            for row in self.dead_letters(MAX_DEAD_LETTERS)
        ]

    def _actions(
        self, with_output: bool, now: datetime, last: _StoreParts | None
    ) -> dict[int, tuple[RemediationAction, dict[str, Any]]]:
        """The recent actions, newest first, each built again only when it changed."""
        kept = last.built_actions if last is not None else {}
        built = {}
        for a in reversed(self.records.recent_actions(now - ACTIONS_SINCE, MAX_ACTIONS)):
            assert a.id is not None
            done = kept.get(a.id)
            if done is None or done[0] != a:
                view = action_view(a)
                if not with_output:
                    view["detail"] = None
                done = (a, view)
            built[a.id] = done
        return built

    def _incident(self, incident: Incident, with_output: bool) -> dict[str, Any]:
        """An open incident as shown: its view, its timeline (the latest MAX_TIMELINE entries,
        and whether there are earlier ones) and whether it awaits a person's approval."""
        assert incident.id is not None
        view = incident_view(incident)
        known = self._read_transitions.get(incident.id, ())
        entries = self.records.timeline(incident, MAX_TIMELINE + 1, known)
        self._read_transitions[incident.id] = tuple(e for e in entries if isinstance(e, Transition))
        timeline = timeline_view(entries, transition=self._transition)
        if not with_output:
            view["detail"] = None
            # A new dict where there is a detail (an action's): the kept views stay as built.
            timeline = [{**e, "detail": ""} if e["detail"] else e for e in timeline]
        return {
            **view,
            "opened": _human(incident.opened_at),
            "timeline": timeline[-MAX_TIMELINE:],
            "timeline_more": len(timeline) > MAX_TIMELINE,
            "awaiting_approval": self.records.awaiting_approval(incident),
        }

    def _transition(self, t: Transition) -> dict[str, Any]:
        view = self._transitions.get(t)
        if view is None:
            if len(self._transitions) >= MAX_KEPT_TRANSITIONS:
                self._transitions.clear()
            view = self._transitions[t] = transition_view(t)
        return view

    @staticmethod
    def _summary(data: PageData, counts: list[int]) -> dict[str, Any]:
        unhealthy, restarting, given_up, silenced = counts
        return {
            "watched": len(data.rows),
            "unhealthy": unhealthy,
            "restarting": restarting,
            "given_up": given_up,
            "silenced": silenced,
            "engine": "unreachable" if data.engine_error else "reachable",
            "updated": when(data.now),
        }

    def _uptime(self) -> str:
        seconds = int(self.monotonic() - self.started)
        days, rest = divmod(seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes = rest // 60
        if days:
            return f"{days}d {hours}h"
        if hours:
            return f"{hours}h {minutes}m"
        return f"{minutes}m"
