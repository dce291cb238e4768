"""One followed container's output (service/watchers/log_watch.py follows those with a rule): read
on a thread of its own, matched in bulk (service/watchers/log_scan.py), within its bounds.

Reads of at most READ_SIZE bytes, PACE apart while output trickles (a few large reads, not one
wake-up per line), back to back while it pours, and at most BUDGET bytes matched a second
whatever the container writes. A follower that spent its budget BEHIND_SECONDS seconds in a row,
or reads output written more than MAX_LAG ago, drops the backlog and follows on from the end of
the log: a flood is sampled, never queued.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from guardian.core.detection.log_rules import LogRule
from guardian.logs import kv
from guardian.ports import Clock, Engine, EngineUnavailable, LogPattern, LogStream
from guardian.service.watchers.log_scan import LineScanner

log = logging.getLogger("guardian.logs")

READ_SIZE = 64 * 1024  # bytes of one read of a container's output
PACE = 0.05  # seconds between two reads while output trickles
# A read this large says more is waiting: read on at once. (The engine's socket holds a few
# hundred messages, ~20 KiB of short lines: waiting PACE after each would cap a follower at a
# few thousand lines a second.)
POURING = 8 * 1024
BUDGET = 2 * 1024 * 1024  # bytes of output matched a second, per container
BEHIND_SECONDS = 3  # seconds in a row the budget ran out: drop the backlog, follow from the end
# The output read was written this long ago (the engine's stamp): the engine delivers a flood
# slower than it is written (~20,000 short lines a second on 2 cores), so a follower would fall
# further behind for as long as it lasts. Drop the backlog, follow from the end.
MAX_LAG = timedelta(seconds=5)
RECENT_LINES = 100  # a (re)attach reads at most this many lines from before it

Compiled = tuple[tuple[LogRule, LogPattern], ...]


class LogFollower:
    """Follows `container_id`'s output from `since` once run() is called, until end() or the
    output ends. `matching()` says whether to match (not while a match awaits the container's
    next start), `matched(self, rule, line)` is told a match, `behind(self, why)` a dropped
    backlog."""

    def __init__(
        self,
        container_id: str,
        name: str,
        patterns: Compiled,
        since: datetime,
        *,
        engine: Engine,
        clock: Clock,
        matching: Callable[[str], bool],
        matched: Callable[[LogFollower, LogRule, bytes], None],
        behind: Callable[[LogFollower, str], None],
    ) -> None:
        self.container_id = container_id
        self.name = name
        self.patterns = patterns
        self.ended_at: datetime | None = None  # the stream ended (the container stopped, or cut)
        self._since = since
        self._engine = engine
        self._clock = clock
        self._matching = matching
        self._matched = matched
        self._behind = behind
        self._stop = threading.Event()
        self._stream: LogStream | None = None
        self.thread = threading.Thread(target=self._follow, name="log-follow", daemon=True)

    @property
    def key(self) -> tuple[tuple[str, str], ...]:
        """What it matches: a follower of other rules is replaced."""
        return tuple((r.match, r.origin) for r, _ in self.patterns)

    def run(self) -> None:
        self.thread.start()

    def end(self) -> None:
        """Stop following, from any thread: a read waiting on the engine returns."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def _follow(self) -> None:
        """On the follower's own thread: read, match, pace; attach again at the end of the log
        when it fell behind a flood."""
        since, tail = self._since, RECENT_LINES
        try:
            while not self._stop.is_set():
                # Said before asking: Podman answers a follow only with the first output, and
                # what is written from `since` on is read whenever the answer comes.
                shown = since.isoformat(timespec="seconds")
                log.info("log followed", extra=kv(container=self.name, since=shown, tail=tail))
                stream = self._engine.follow_logs(self.container_id, since, tail)
                self._stream = stream
                if self._stop.is_set():  # ended while attaching: end() saw no stream
                    stream.close()
                    return
                try:
                    if not self._read(stream):
                        return
                finally:
                    stream.close()
                since, tail = self._clock.now(), 0  # behind: resume at the end of the log
        except EngineUnavailable as exc:
            log.debug("log stream lost", extra=kv(container=self.name, reason=str(exc)))
        except Exception:
            log.exception("log follower failed", extra=kv(container=self.name))
        finally:
            self.ended_at = self._clock.now()

    def _read(self, stream: LogStream) -> bool:
        """Read `stream` until it ends (False) or the follower fell behind (True)."""
        scanner = LineScanner(self.patterns)
        clock = self._clock
        second, used, spent = clock.monotonic(), 0, 0  # this second's budget, and used
        while not self._stop.is_set():
            block = stream.read(READ_SIZE)
            if not block:
                return False
            # Matched already: read on (the stream stays current), unmatched.
            if self._matching(self.container_id):
                found = scanner.feed(block)
                if found is not None:
                    self._matched(self, *found)
            written = stream.written_at
            if written is not None and clock.now() - written > MAX_LAG:
                self._behind(self, "lag")
                return True
            used += len(block)
            now = clock.monotonic()
            if used >= BUDGET:  # spent: nothing more this second
                spent += 1
                if spent >= BEHIND_SECONDS:
                    self._behind(self, "budget")
                    return True
                self._stop.wait(max(0.0, second + 1.0 - now))
                second, used = clock.monotonic(), 0
                continue
            if now - second >= 1.0:
                second, used, spent = now, 0, 0
            if len(block) < POURING:
                self._stop.wait(PACE)  # lets output gather: a few large reads, not one per line
        return False
