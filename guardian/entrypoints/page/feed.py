"""The page's live stream (Server-Sent Events): what changed, as the parts of the page to
replace, within moments of Guardian seeing it.

Nothing runs while no page is open. A stream's own HTTP thread writes its first event; from
then on one thread of the feed (the pump, there while a stream is open) waits on the loop's
Changes, lets each change settle, reads and renders the parts once, and writes every open page
the event that takes it from what it has to the present (each step made once): a change wakes
one thread however many pages are open. The streams' threads wait for their end. Streams are
capped (`page.streams`, shared out by StreamSlots): each holds an HTTP thread of its own, so
viewers never take one from /healthz, /metrics, the API or healing; beyond its share a stream
is refused with 503 and Retry-After. A signed stream belongs to its session: the session is
checked before each write, and the stream ends at sign-out or at the session's expiry. An idle
stream gets one keep-alive comment every KEEPALIVE seconds. A client that reads too slowly to
keep the stream's MAX_BACKLOG bytes or fewer waiting is ended, never waited for (its browser
reconnects and gets the present).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Generator
from itertools import compress
from operator import ne

from guardian.entrypoints.page.slots import StreamRefused, StreamSlot, StreamSlots
from guardian.entrypoints.page.stream import Parts, Snapshot, Stream
from guardian.logs import kv
from guardian.readside.changes import Changes

log = logging.getLogger("guardian.page")

KEEPALIVE = 15.0  # seconds: at most one write per idle stream per this
RETRY_MS = 3000  # EventSource's reconnect delay
RETRY_AFTER = 10  # seconds, with the 503 of a full house
# A change's fellows (the event, then the incident and the decision written about it) come
# within milliseconds: a stream lets them settle, then reads and sends once for them all.
SETTLE = 0.05  # seconds without a change
SETTLE_ROUNDS = 4  # at most this many such waits: a stream is never held back 0.2 s more
MAX_EVENTS_MADE = 64
KEEPALIVE_LINE = b": keep-alive\n\n"


def delta(sent: Parts, parts: Parts) -> Parts:
    """The parts to send a page that shows `sent`: the changed rows one by one, or the whole
    table body when the set or order of containers changed; the other parts when changed."""
    # Those whose HTML is not the one sent, compared in C (a kept part is the very string).
    changed = dict(compress(parts.items(), map(ne, parts.values(), map(sent.get, parts))))
    if "order" in changed:
        return {k: v for k, v in changed.items() if not k.startswith("row:") and k != "order"}
    changed.pop("part-rows", None)
    return changed


class Feed:
    """Shared snapshots of the parts (one per change and audience), the capped streams and the
    pump that writes them. `read(signed)` returns (the time it read, the parts);
    `time_left(session_id)` the seconds a session has left (0: it ended)."""

    def __init__(
        self,
        changes: Changes,
        read: Callable[[bool], tuple[str, Parts]],
        slots: StreamSlots,
        time_left: Callable[[str], float] = lambda _: math.inf,
        keepalive: float = KEEPALIVE,
        settle: float = SETTLE,
    ) -> None:
        self.changes = changes
        self.read = read
        self.slots = slots
        self.time_left = time_left
        self.keepalive = keepalive
        self.settle = settle
        self.boot = secrets.token_hex(4)  # an id from another run never matches this run's
        # The feed's one lock, over two things:
        # - every read of the page's data, one at a time: the parts' reads here, which keep one
        #   snapshot per audience and version in `_cache` (a step's event is made once, by
        #   versions, for every stream that makes it), and the whole page's (StatusPage.index);
        #   the reader (readside.page.PageReader) keeps no lock of its own. One for both
        #   audiences: the pump reads them one after the other anyway;
        # - the open streams, joined or not, `slots`, which counts them, the pump and the
        #   events made: held only for a few list and dict operations, never across a read,
        #   a write to a client or a wait. Its holders call nothing that takes it again.
        # One lock rather than two: a claim, a join or a stream's end that comes while a read
        # runs waits for that read (tens of milliseconds), which a new stream's first event
        # waits for anyway; nothing that waits for a client or for a change holds it.
        self.reading = threading.Lock()
        self._cache: dict[bool, Snapshot] = {}
        self._events_made: dict[tuple[bool, int, int], bytes] = {}
        self._streams: list[Stream] = []  # every stream with a slot, until its close()
        self._joined: list[Stream] = []  # the streams the pump writes
        self._pumped = 0  # every joined stream was written the parts of this version or later
        self._pump: threading.Thread | None = None

    @property
    def open(self) -> int:
        """How many streams hold a slot."""
        return self.slots.open

    @property
    def joined(self) -> int:
        """How many streams the pump writes (those past their first event)."""
        with self.reading:
            return len(self._joined)

    def event_id(self, version: int, signed: bool) -> str:
        """The id of the parts at `version` for an audience: a page that reconnects as another
        (signed out meanwhile) never keeps the other's parts as current."""
        return f"{self.boot}{'s' if signed else 'p'}-{version}"

    def snapshot(self, signed: bool) -> Snapshot:
        """The parts as of the latest change, read once for every stream that asks."""
        with self.reading:
            version = self.changes.version
            cached = self._cache.get(signed)
            if cached is not None and cached.version == version:
                return cached
            updated, parts = self.read(signed)
            snap = Snapshot(version, updated, parts)
            self._cache[signed] = snap
            return snap

    def claim(self, signed: bool, client: str) -> StreamSlot:
        """A slot for one more stream from `client`; StreamRefused when its share is full or
        Guardian stops."""
        if self.changes.closed:
            raise StreamRefused("Guardian is stopping")
        with self.reading:
            return self.slots.claim(signed, client)

    def stream(self, slot: StreamSlot, session_id: str | None, last_id: str) -> Stream:
        """The stream of a claimed slot, signed when it belongs to `session_id`; `last_id` is
        the last event the page has (its Last-Event-ID, or the id the page was rendered at):
        when current, nothing is resent."""
        stream = Stream(slot, session_id, self.time_left, self._closed)
        stream.begin(self.first_events(stream, last_id))
        with self.reading:
            self._streams.append(stream)
        return stream

    def _closed(self, stream: Stream) -> None:
        """A stream's close(): the pump writes it no more, its slot is free again."""
        self.leave(stream)
        with self.reading:
            self._streams.remove(stream)
            self.slots.release(stream.slot)

    def end_session(self, session_id: str) -> int:
        """The session signed out: its streams end now, each after the write under way, so
        nothing reaches them once the sign-out is answered. How many there were."""
        with self.reading:
            ending = [s for s in self._streams if s.session_id == session_id]
        for stream in ending:
            stream.end()
        return len(ending)

    def first_events(self, stream: Stream, last_id: str) -> Generator[bytes, None, None]:
        """What a stream's own thread writes: the reconnect delay, every part unless the page
        has them (`last_id`), and what changed meanwhile, until the pump takes it over."""
        yield f"retry: {RETRY_MS}\n\n".encode()
        snap = self._safe_snapshot(stream.signed)
        if snap is not None and last_id != self.event_id(snap.version, stream.signed):
            yield self._event(stream.signed, snap, snap.parts)
        while snap is not None:
            stream.sent = snap
            if self.join(stream):
                return
            # A change came that the pump already wrote the others: this page catches up.
            fresh = self._safe_snapshot(stream.signed)
            event = self._change(stream.signed, snap, fresh) if fresh is not None else b""
            if event:
                yield event
            snap = fresh
        stream.end()  # the page could not be read: its browser reconnects

    def join(self, stream: Stream) -> bool:
        """Hand a stream that was sent `stream.sent` to the pump; False when the pump already
        wrote the others a later change (the stream catches up first). Starts the pump."""
        with self.reading:
            if self.changes.closed:
                stream.end()
                return True
            assert stream.sent is not None
            if self._pump is None:
                self._pumped = stream.sent.version
                self._pump = threading.Thread(target=self._run, name="page-feed", daemon=True)
                self._pump.start()  # its first round waits for this lock
            elif stream.sent.version < self._pumped:
                return False
            stream.written_at = time.monotonic()
            self._joined.append(stream)
            return True

    def leave(self, stream: Stream) -> None:
        with self.reading:
            if stream in self._joined:
                self._joined.remove(stream)

    def _run(self) -> None:
        try:
            while self._round():
                pass
        except Exception:
            log.exception("status page streams failed")
            with self.reading:
                ended, self._joined, self._pump = self._joined, [], None
            for stream in ended:  # their browsers reconnect
                stream.end()

    def _round(self) -> bool:
        """Wait for a change (or a keep-alive's time), write it to every joined stream; False
        when none is left or Guardian stops (the pump ends)."""
        with self.reading:
            streams = list(self._joined)
            if not streams or self.changes.closed:
                self._pump = None
                return False
            after = self._pumped
        due = min(s.written_at for s in streams) + self.keepalive - time.monotonic()
        # A signed stream lives no longer than its session: the pump wakes to end it.
        sessions_end = min((s.time_left() for s in streams if s.signed), default=math.inf)
        at = self.changes.wait(after, min(due, sessions_end))
        if self.changes.closed:
            with self.reading:
                self._pump = None
            return False
        if at > after:
            if self.settle > 0:
                self.changes.settle(self.settle, SETTLE_ROUNDS)
            self._write_change()
        now = time.monotonic()
        for stream in streams:
            if stream.time_left() <= 0:
                stream.end()
                self.leave(stream)
            elif now - stream.written_at >= self.keepalive and not stream.push(KEEPALIVE_LINE, now):
                self.leave(stream)
        return True

    def _write_change(self) -> None:
        """The present, read once per audience, written to each joined stream as the event
        from what it was sent; a stream whose read failed or whose client is gone ends."""
        with self.reading:
            audiences = {s.signed for s in self._joined}
        fresh = {signed: self._safe_snapshot(signed) for signed in audiences}
        with self.reading:
            read = [snap.version for snap in fresh.values() if snap is not None]
            self._pumped = max(self._pumped, min(read, default=self._pumped))
            streams = list(self._joined)
        now = time.monotonic()
        for stream in streams:
            if stream.signed not in fresh:  # joined meanwhile, the first of its audience
                fresh[stream.signed] = self._safe_snapshot(stream.signed)
            snap, sent = fresh[stream.signed], stream.sent
            if snap is None:
                stream.end()
                self.leave(stream)
                continue
            assert sent is not None
            if sent.version >= snap.version:  # it joined with a later read than this one
                continue
            event = self._change(stream.signed, sent, snap)
            if event and not stream.push(event, now):
                self.leave(stream)
                continue
            stream.sent = snap

    def _change(self, signed: bool, sent: Snapshot, fresh: Snapshot) -> bytes:
        """The event taking a page from `sent` to `fresh` (b"" when nothing it shows changed),
        made once for every stream that makes the same step."""
        key = (signed, sent.version, fresh.version)
        with self.reading:
            event = self._events_made.get(key)
        if event is None:
            changed = delta(sent.parts, fresh.parts)
            event = self._event(signed, fresh, changed) if changed else b""
            with self.reading:
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

    def _event(self, signed: bool, snap: Snapshot, parts: Parts) -> bytes:
        doc = json.dumps({"updated": snap.updated, "parts": parts}, separators=(",", ":"))
        return f"id: {self.event_id(snap.version, signed)}\nevent: parts\ndata: {doc}\n\n".encode()

    def close(self) -> None:
        """Guardian stops: every stream ends after its current write, and no new one starts."""
        self.changes.close()
        with self.reading:
            streams = list(self._joined)
        for stream in streams:
            stream.end()
        log.debug("status page streams ended", extra=kv(open=self.open))
