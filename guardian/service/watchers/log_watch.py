"""Log rules at work (core.detection.log_rules): the output of each running watched container with a
rule is followed on a thread of its own and matched in bulk (service/watchers/log_scan.py); a match
turns the container's result into `log_match` until it starts again, and asks for it to be judged at
once. decide() does the rest, as for any problem.

Each follower is bounded (service/watchers/log_follower.py: a flood is sampled, never queued; the
backlogs dropped are counted in `skipped`); at most MAX_FOLLOWED containers are followed, the
operator's logs.rules first (core.detection.log_rules.allot): a label's rule waits for a slot, and
the containers waiting are named once each and counted. No rule: no thread at all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from guardian.core.detection import log_rules
from guardian.core.detection.log_rules import (
    LogRule,
    PatternError,
    Wanted,
    allot,
    by_operator,
    rank,
)
from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.core.stamps import Reading
from guardian.logs import kv
from guardian.ports import (
    Clock,
    Engine,
    EngineEvent,
    LogPattern,
    Patterns,
    Rechecks,
)
from guardian.service.state.present import only_present
from guardian.service.watchers.log_follower import Compiled, LogFollower

log = logging.getLogger("guardian.logs")

MAX_FOLLOWED = 64  # containers followed at once; more are reported, not followed
JOIN_TIMEOUT = 2.0  # seconds stop() waits for the follower threads
MAX_WARNED = 4096  # containers remembered as told they wait (each told once)
WAITING = (
    f"log rule not followed: the output of at most {MAX_FOLLOWED} containers is followed, "
    "the operator's logs.rules first"
)


@dataclass(frozen=True)
class LogMatch:
    """The first match since the container's last start: when it was read (on the monotonic
    clock; placed on the wall clock as it reads when judged), what it says."""

    at: float
    detail: str


def _run(f: LogFollower) -> None:
    f.run()


def _end(f: LogFollower) -> None:
    f.end()


class LogWatch:
    """`rules_of(snapshot)`: the log rules of a watched container (label and config), () for
    one not watched. Followers run once start() is called (the daemon); `guardian check` and
    status only judge what was matched."""

    def __init__(
        self,
        engine: Engine,
        patterns: Patterns,
        rules_of: Callable[[ContainerSnapshot], tuple[LogRule, ...]],
        clock: Clock,
        rechecks: Rechecks,
        waiting: Callable[[int], None] = lambda _count: None,
    ) -> None:
        """`waiting`: told how many containers' rules wait for a slot, whenever it changes."""
        self.engine = engine
        self.patterns = patterns
        self.rules_of = rules_of
        self.clock = clock
        self.rechecks = rechecks
        self.skipped = 0  # backlogs dropped because a follower fell behind a flood
        self._lock = threading.Lock()
        self._active = False
        self._followers: dict[str, LogFollower] = {}  # by container id
        self._matches: dict[str, LogMatch] = {}  # by container id
        self._waiting: dict[str, str] = {}  # container id -> name: a rule, no slot
        self._told_waiting: set[str] = set()  # names warned of waiting
        self._count_waiting = waiting
        self._compiled: dict[str, LogPattern | str] = {}  # pattern -> compiled, or why not
        self._warned: set[tuple[str, str]] = set()
        # The last list update() was given when none of its containers had a rule: the very
        # list again, with nothing followed or matched since, has none either.
        self._ruleless: list[ContainerSnapshot] | None = None

    # -- the daemon ----------------------------------------------------------------------

    def start(self) -> None:
        """Follow from now on (the next sweep or start event attaches the followers)."""
        with self._lock:
            self._active = True

    def stop(self) -> None:
        """End every follower and wait a little for their threads."""
        with self._lock:
            self._active = False
            followers, self._followers = list(self._followers.values()), {}
            told = self._wait_for_slots({})
        self._tell_waiting(told)
        for f in followers:
            _end(f)
        for f in followers:
            if f.thread.is_alive():
                f.thread.join(JOIN_TIMEOUT / max(1, len(followers)))

    def followed(self) -> list[str]:
        """The names of the containers whose output is followed now."""
        with self._lock:
            return sorted(f.name for f in self._followers.values() if f.ended_at is None)

    # -- what the loop tells it ----------------------------------------------------------

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow the running containers of the last sweep that have a rule, as many as there
        are slots in rank order (log_rules.allot); stop following the others; attach again to
        a running one whose stream ended."""
        if snapshots is self._ruleless:
            with self._lock:
                if not self._followers and not self._matches and not self._waiting:
                    return  # an idle sweep's list, walked once
        wanted: dict[str, tuple[ContainerSnapshot, Compiled]] = {}
        for snap in snapshots:
            if snap.state != "running":
                continue
            compiled = self._compile(snap)
            if compiled:
                wanted[snap.id] = (snap, compiled)
        followed, waiting = allot((_wanted(s, c) for s, c in wanted.values()), MAX_FOLLOWED)
        present = {s.id for s in snapshots}
        now = self.clock.now()
        with self._lock:
            self._matches = only_present(self._matches, present)
            keep = {w.id for w in followed}
            stale = [f for cid, f in self._followers.items() if cid not in keep]
            for f in stale:
                del self._followers[f.container_id]
            starts = []
            for w in followed:
                snap, compiled = wanted[w.id]
                old = self._followers.get(w.id)
                keys = tuple((r.match, r.origin) for r, _ in compiled)
                if old is not None and old.key == keys and old.ended_at is None:
                    continue
                # A stream that ended while the container runs again: from where it ended.
                since = now
                if old is not None:
                    if old.key == keys and old.ended_at is not None:
                        since = old.ended_at
                    stale.append(old)
                new = self._attach(w.id, snap.name, compiled, since)
                if new is not None:
                    starts.append(new)
            told = self._wait_for_slots({w.id: w.name for w in waiting} if self._active else {})
        self._ruleless = None if wanted else snapshots
        self._tell_waiting(told)
        for f in stale:
            _end(f)
        for f in starts:
            _run(f)

    def on_event(self, event: EngineEvent) -> None:
        """A start: what was matched belongs to the previous run, and the new run is followed
        from its start (a rule of a container just created is followed from here on, in a
        free slot, or in a label's when the operator's rule names it). A destroy: forget it."""
        cid = event.container_id
        if event.action == "destroy":
            with self._lock:
                self._matches.pop(cid, None)
                gone = self._followers.pop(cid, None)
                told = self._wait_for_slots(_without(self._waiting, cid))
            self._tell_waiting(told)
            if gone is not None:
                _end(gone)
            return
        if event.action != "start":
            return
        with self._lock:
            self._matches.pop(cid, None)
            old = self._followers.get(cid)
        compiled = old.patterns if old is not None else ()
        if old is None:
            # A container not followed yet: its labels ride on the event.
            snap = ContainerSnapshot(cid, event.container_name, event.attributes, "running", None)
            compiled = self._compile(snap)
        if not compiled:
            return
        ending = [] if old is None else [old]
        with self._lock:
            if old is not None and self._followers.get(cid) is not old:
                return  # a sweep or another event got here first
            waiting = _without(self._waiting, cid)
            if old is not None:
                del self._followers[cid]
            elif self._active:
                evicted = self._make_room(Wanted(cid, event.container_name, _operator(compiled)))
                waiting.update((f.container_id, f.name) for f in evicted)
                ending += evicted
            new = self._attach(cid, event.container_name, compiled, event.at)
            if new is None and self._active:
                waiting[cid] = event.container_name
            told = self._wait_for_slots(waiting)
        self._tell_waiting(told)
        for f in ending:
            _end(f)
        if new is not None:
            _run(new)

    def unfollowed(self, snapshots: list[ContainerSnapshot]) -> dict[str, str]:
        """Of these containers, those with a log rule that is not followed, by name, with why.
        While following (the daemon): the containers waiting for a slot now. Otherwise
        (`guardian status`): those that would wait, by the same rank (log_rules.allot)."""
        if self._active:
            with self._lock:
                return {s.name: WAITING for s in snapshots if s.id in self._waiting}
        wanted = [
            Wanted(s.id, s.name, by_operator(rules))
            for s in snapshots
            if s.state == "running" and (rules := self.rules_of(s))
        ]
        return {w.name: WAITING for w in allot(wanted, MAX_FOLLOWED)[1]}

    def _make_room(self, newcomer: Wanted) -> list[LogFollower]:
        """With every slot taken, the follower ranked last gives its slot up to a newcomer
        ranked before it (under the lock; the caller ends it). None is ended otherwise."""
        if len(self._followers) < MAX_FOLLOWED:
            return []
        last = max(self._followers.values(), key=lambda f: rank(_followed(f)))
        if rank(_followed(last)) < rank(newcomer):
            return []
        del self._followers[last.container_id]
        return [last]

    def _wait_for_slots(self, waiting: dict[str, str]) -> tuple[list[str], int] | None:
        """The containers whose rules wait now (under the lock): (the names not yet told of,
        how many wait), for _tell_waiting; None when nothing changed."""
        if waiting == self._waiting:
            return None
        self._waiting = waiting
        if len(self._told_waiting) > MAX_WARNED:
            self._told_waiting.clear()
        fresh = [name for name in waiting.values() if name not in self._told_waiting]
        self._told_waiting.update(fresh)
        return fresh, len(waiting)

    def _tell_waiting(self, told: tuple[list[str], int] | None) -> None:
        """One warning for each container newly left waiting; the count for the metric."""
        if told is None:
            return
        names, count = told
        for name in sorted(names):
            log.warning(
                "log rule not followed: every slot is taken",
                extra=kv(container=name, max=MAX_FOLLOWED, waiting=count),
            )
        self._count_waiting(count)

    # -- judgements ----------------------------------------------------------------------

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """A container with a match since its last start has a `log_match` problem (unless it
        has another one already, or is not judged)."""
        found = self._match_of(snap)
        if found is None or result.problem is not None or result.skipped is not None:
            return result
        detail, since = found
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, ProblemType.LOG_MATCH, detail,
            source=result.source, since=since, since_exact=True,
        )  # fmt: skip

    def matched(self, snap: ContainerSnapshot, _now: datetime) -> bool:
        """A sweep inspects a container with a match (its start tells whether it is stale)."""
        with self._lock:
            return snap.id in self._matches

    def relapsed(self, snap: ContainerSnapshot) -> str | None:
        """What the container matched since its last start (a restart's verification fails
        on it), or None."""
        found = self._match_of(snap)
        if found is None or snap.started_at is None:
            return None
        return f"matched again after the restart: {found[0]}"

    def _match_of(self, snap: ContainerSnapshot) -> tuple[str, datetime] | None:
        """What the container matched since its last start, and when, on the wall clock as it
        reads now (the engine's stamps are in the same frame: adapters/engine/engine_clock)."""
        clocks = Reading(self.clock.now(), self.clock.monotonic())
        with self._lock:
            found = self._matches.get(snap.id)
            if found is None:
                return None
            at = clocks.wall_of(found.at)
            if snap.started_at is not None and snap.started_at > at:
                del self._matches[snap.id]  # from a run before its last start
                return None
        return found.detail, at

    # -- followers -----------------------------------------------------------------------

    def _compile(self, snap: ContainerSnapshot) -> Compiled:
        rules = self.rules_of(snap)
        compiled = []
        for rule in rules:
            known = self._compiled.get(rule.match)
            if known is None:
                try:
                    known = self.patterns.compile(rule.match)
                except PatternError as exc:
                    known = str(exc)
                with self._lock:
                    if len(self._compiled) > 4 * log_rules.MAX_RULES + MAX_FOLLOWED:
                        self._compiled.clear()  # patterns of labels long gone
                    self._compiled[rule.match] = known
            if isinstance(known, str):
                self._warn(snap.name, rule, known)
            else:
                compiled.append((rule, known))
        return tuple(compiled)

    def _warn(self, name: str, rule: LogRule, reason: str) -> None:
        shown = f"{rule.origin}={log_rules.shown(rule.match)!r}: {reason}; rule ignored"
        if rule.origin == log_rules.LABEL:
            shown = f"label {shown}"
        with self._lock:
            if (name, shown) in self._warned:
                return
            if len(self._warned) > 1000:
                self._warned.clear()
            self._warned.add((name, shown))
        log.warning("bad label ignored", extra=kv(container=name, problem=shown))

    def _attach(
        self, cid: str, name: str, patterns: Compiled, since: datetime
    ) -> LogFollower | None:
        """A follower registered (under the lock) for the caller to run; None when not
        following now (before start(), or every slot taken)."""
        if not self._active:
            return None
        if len(self._followers) >= MAX_FOLLOWED:
            return None
        f = LogFollower(
            cid,
            name,
            patterns,
            since,
            engine=self.engine,
            clock=self.clock,
            matching=self._matching,
            matched=self._matched,
            behind=self._behind,
        )
        self._followers[cid] = f
        return f

    def _matching(self, container_id: str) -> bool:
        """Whether a follower should match: not while a match awaits the next start."""
        with self._lock:
            return container_id not in self._matches

    def _behind(self, f: LogFollower, why: str) -> None:
        """Count a dropped backlog; said at warning once per container, then at debug (a flood
        that lasts drops one every few seconds)."""
        with self._lock:
            self.skipped += 1
            first = (f.name, "behind") not in self._warned
            self._warned.add((f.name, "behind"))
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "log follower behind a flood; backlog dropped, following from now",
            extra=kv(container=f.name, reason=why, skipped=self.skipped),
        )

    def _matched(self, f: LogFollower, rule: LogRule, line: bytes) -> None:
        clocks = Reading(self.clock.now(), self.clock.monotonic())
        said = log_rules.detail(rule, line.decode("utf-8", errors="replace"))
        now, found = clocks.wall, LogMatch(clocks.mono, said)
        with self._lock:
            if self._followers.get(f.container_id) is not f or f.container_id in self._matches:
                return  # a follower of a previous run, or matched already
            self._matches[f.container_id] = found
        log.info("log rule matched", extra=kv(container=f.name, rule=rule.origin))
        self.rechecks.recheck(f.container_id, now)


def _operator(compiled: Compiled) -> bool:
    return by_operator(rule for rule, _ in compiled)


def _wanted(snap: ContainerSnapshot, compiled: Compiled) -> Wanted:
    return Wanted(snap.id, snap.name, _operator(compiled))


def _followed(f: LogFollower) -> Wanted:
    return Wanted(f.container_id, f.name, _operator(f.patterns))


def _without(waiting: dict[str, str], cid: str) -> dict[str, str]:
    return {k: v for k, v in waiting.items() if k != cid}
