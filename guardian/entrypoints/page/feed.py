"""The page's live stream (Server-Sent Events): what changed, as the parts of the page to
replace, within moments of Guardian seeing it.

Nothing runs while no page is open: one open stream waits on the loop's Changes (a condition)
and lets each change settle for them all, the others wake once per settled change; the parts are
read and rendered once per change, however many streams share them. Streams are
capped (`page.streams`): each holds an HTTP thread of its own, so viewers never take one from
/healthz, /metrics, the API or healing; beyond the cap a stream is refused with 503 and
Retry-After. An idle stream gets one keep-alive comment every KEEPALIVE seconds.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from guardian.logs import kv
from guardian.service.changes import Changes

log = logging.getLogger("guardian.page")

KEEPALIVE = 15.0  # seconds: at most one write per idle stream per this
RETRY_MS = 3000  # EventSource's reconnect delay
RETRY_AFTER = 10  # seconds, with the 503 of a full house
# A change's fellows (the event, then the incident and the decision written about it) come
# within milliseconds: a stream lets them settle, then reads and sends once for them all.
SETTLE = 0.05  # seconds without a change
SETTLE_ROUNDS = 4  # at most this many such waits: a stream is never held back 0.2 s more
MAX_EVENTS_MADE = 64

Parts = dict[str, str]


@dataclass(frozen=True)
class Snapshot:
    version: int
    updated: str
    parts: Parts


def delta(sent: Parts, parts: Parts) -> Parts:
    """The parts to send a page that shows `sent`: the changed rows one by one, or the whole
    table body when the set or order of containers changed; the other parts when changed."""
    out = {
        k: v
        for k, v in parts.items()
        if not k.startswith("row:") and k not in ("order", "part-rows") and sent.get(k) != v
    }
    if sent.get("order") != parts.get("order"):
        out["part-rows"] = parts["part-rows"]
    else:
        out.update((k, v) for k, v in parts.items() if k.startswith("row:") and sent.get(k) != v)
    return out


class Feed:
    """Shared snapshots of the parts (one per change and audience) and the capped streams.
    `read(signed)` returns (the time it read, the parts)."""

    def __init__(
        self,
        changes: Changes,
        read: Callable[[bool], tuple[str, Parts]],
        max_streams: int,
        keepalive: float = KEEPALIVE,
        settle: float = SETTLE,
    ) -> None:
        self.changes = changes
        self.read = read
        self.max_streams = max_streams
        self.keepalive = keepalive
        self.settle = settle
        self.boot = secrets.token_hex(4)  # an id from another run never matches this run's
        self._lock = threading.Lock()
        self._reading = {True: threading.Lock(), False: threading.Lock()}
        self._cache: dict[bool, Snapshot] = {}
        self._events_made: dict[tuple[bool, int, int], bytes] = {}
        self.open = 0
        self._turn = threading.Condition()  # the streams wait here for a settled change
        self._settled = 0  # the version the last settled change reached
        self._leading = False  # a stream follows Changes for all of them

    def event_id(self, version: int) -> str:
        return f"{self.boot}-{version}"

    def snapshot(self, signed: bool) -> Snapshot:
        """The parts as of the latest change, read once for every stream that asks."""
        with self._reading[signed]:
            version = self.changes.version
            cached = self._cache.get(signed)
            if cached is not None and cached.version == version:
                return cached
            updated, parts = self.read(signed)
            snap = Snapshot(version, updated, parts)
            self._cache[signed] = snap
            return snap

    def claim(self) -> bool:
        """A slot for one more stream, or False when `max_streams` are open."""
        with self._lock:
            if self.open >= self.max_streams or self.changes.closed:
                return False
            self.open += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.open -= 1

    def stream(self, signed: bool, last_id: str) -> Stream:
        """The stream of a claimed slot; `last_id` is the last event the page has (its
        Last-Event-ID, or the id the page was rendered at): when current, nothing is resent."""
        return Stream(self, self._events(signed, last_id))

    def _events(self, signed: bool, last_id: str) -> Iterator[bytes]:
        yield f"retry: {RETRY_MS}\n\n".encode()
        snap = self._safe_snapshot(signed)
        if snap is None:
            return
        sent = snap if last_id == self.event_id(snap.version) else None
        if sent is None:
            yield self._event(snap, snap.parts)
            sent = snap
        version = snap.version
        while True:
            now_at = self.settled(version, self.keepalive, partial(self._prepare, signed, sent))
            if self.changes.closed:
                return
            if now_at == version:
                yield b": keep-alive\n\n"
                continue
            fresh = self._safe_snapshot(signed)
            if fresh is None:
                return
            version = fresh.version
            event = self._change(signed, sent, fresh)
            if event:
                yield event
                sent = fresh

    def _prepare(self, signed: bool, sent: Snapshot) -> None:
        fresh = self._safe_snapshot(signed)
        if fresh is not None:
            self._change(signed, sent, fresh)

    def settled(self, version: int, timeout: float, prepare: Callable[[], None]) -> int:
        """The version once a change after `version` settled, or `version` when `timeout`
        seconds or Guardian's stop came first. One waiting stream follows Changes and lets
        each change settle for all of them (the others wake once per settled change, not at
        each of its fellows), and calls `prepare` (reads and makes its event) before it wakes
        them: they find it made. When it stops waiting another takes over."""
        deadline = time.monotonic() + timeout
        with self._turn:
            while self._settled <= version and not self.changes.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if self._leading:
                    self._turn.wait(remaining)
                    continue
                self._leading, after = True, max(version, self._settled)
                self._turn.release()
                try:
                    at = self.changes.wait(after, remaining)
                    if at > after:
                        if self.settle > 0:
                            at = self.changes.settle(at, self.settle, SETTLE_ROUNDS)
                        prepare()
                finally:
                    self._turn.acquire()
                    self._leading = False
                self._settled = max(self._settled, at)
                self._turn.notify_all()
            return max(self._settled, version)

    def _change(self, signed: bool, sent: Snapshot, fresh: Snapshot) -> bytes:
        """The event taking a page from `sent` to `fresh` (b"" when nothing it shows changed),
        made once for every stream that makes the same step."""
        key = (signed, sent.version, fresh.version)
        with self._lock:
            event = self._events_made.get(key)
        if event is None:
            changed = delta(sent.parts, fresh.parts)
            event = self._event(fresh, changed) if changed else b""
            with self._lock:
                if len(self._events_made) > MAX_EVENTS_MADE:
                    self._events_made.clear()
                self._events_made[key] = event
        return event

    def _safe_snapshot(self, signed: bool) -> Snapshot | None:
        try:
            return self.snapshot(signed)
        except Exception:
            log.exception("status page read failed")
            return None

    def _event(self, snap: Snapshot, parts: Parts) -> bytes:
        doc = json.dumps({"updated": snap.updated, "parts": parts}, separators=(",", ":"))
        return f"id: {self.event_id(snap.version)}\nevent: parts\ndata: {doc}\n\n".encode()

    def close(self) -> None:
        """Guardian stops: every stream ends after its current write, and no new one starts."""
        self.changes.close()
        with self._turn:
            self._turn.notify_all()
        log.debug("status page streams ended", extra=kv(open=self.open))


class Stream:
    """An SSE body for waitress: iterating writes events; close() (always called by the
    server, also for a stream never started) gives the slot back once."""

    def __init__(self, feed: Feed, events: Iterator[bytes]) -> None:
        self.feed = feed
        self.events = events
        self._released = False

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> bytes:
        return next(self.events)

    def close(self) -> None:
        if not self._released:
            self._released = True
            getattr(self.events, "close", lambda: None)()
            self.feed.release()
