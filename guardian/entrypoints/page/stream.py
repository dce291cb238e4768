"""One live page's stream: its SSE body, written from the feed's pump through the writer the
server gave it, one write at a time, each after checking that the stream's session (if signed)
is still live, and ended for a client that lets more than MAX_BACKLOG bytes wait."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from guardian.entrypoints.page.slots import StreamSlot
from guardian.logs import kv

log = logging.getLogger("guardian.page")

MAX_BACKLOG = 2 * 1024 * 1024  # bytes waiting for a stream's client before it is ended

Parts = dict[str, str]


@dataclass(frozen=True)
class Snapshot:
    """The parts of the page as of a change (`version`), read once for every stream."""

    version: int
    updated: str
    parts: Parts


class Stream:
    """A live page's SSE body. The server attaches a writer (to the client's socket, or WSGI's
    `write`) and iterates it: its thread writes the first events, then waits for the end while
    the pump writes the rest. Every write first checks that a signed stream's session is live.
    close(), always called by the server (even for a stream never started), tells the feed
    once (`closed`), which gives the slot back."""

    def __init__(
        self,
        slot: StreamSlot,
        session_id: str | None,
        time_left: Callable[[str], float],
        closed: Callable[[Stream], None],
    ) -> None:
        self.slot = slot
        self.session_id = session_id
        self.signed = session_id is not None
        self.sent: Snapshot | None = None  # the parts the page has
        self.written_at = 0.0  # monotonic
        self._time_left = time_left  # of a session, by its id (0: it ended)
        self._closed = closed
        self._first: Generator[bytes, None, None] | None = None
        self._write: Callable[[bytes], object] | None = None
        self._backlog: Callable[[], int] = lambda: 0
        self._cond = threading.Condition()  # one write at a time; the end waits for it
        self._ended = False
        self._released = False

    def begin(self, first: Generator[bytes, None, None]) -> None:
        """The first events, which the server's thread writes before the pump takes over."""
        self._first = first

    def attach(self, write: Callable[[bytes], object], backlog: Callable[[], int] | None) -> None:
        """Write through `write` from the pump's thread; `backlog()`: the bytes written that
        still wait for the client."""
        self._write = write
        if backlog is not None:
            self._backlog = backlog

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> bytes:
        # The first events go through the writer too, each checked like the pump's, so a
        # sign-out that ends the stream waits for a write under way and none follows it.
        while self._first is not None:
            try:
                data = next(self._first)
            except StopIteration:
                self._first = None
                break
            if self._write is None:  # no writer: the server writes what it is given
                if self.time_left() <= 0:
                    self.end()
                    break
                return data
            if not self.push(data, time.monotonic()):
                break
        with self._cond:
            while not self._ended:
                self._cond.wait()
        raise StopIteration

    @property
    def ended(self) -> bool:
        """No more is written to it."""
        return self._ended

    def time_left(self) -> float:
        """Seconds the stream's session has left (0: it ended); no end for an anonymous one."""
        return self._time_left(self.session_id) if self.session_id is not None else math.inf

    def push(self, data: bytes, now: float) -> bool:
        """Write `data`; False when the stream ended or ends now: its session ended, it has no
        writer, its client is gone, or lets more than MAX_BACKLOG bytes wait."""
        with self._cond:
            if self._ended:
                return False
            if self.time_left() <= 0:
                log.debug("status page stream ended", extra=kv(reason="session ended"))
                self._end()
                return False
            if self._write is None:
                self._end()
                return False
            if self._backlog() > MAX_BACKLOG:
                log.info("status page stream ended: its client reads too slowly")
                self._end()
                return False
            try:
                self._write(data)
            except Exception as exc:  # noqa: BLE001 - one client's failure ends its stream only
                log.debug("status page stream ended", extra=kv(reason=type(exc).__name__))
                self._end()
                return False
            self.written_at = now
            return True

    def end(self) -> None:
        """No more writes; the server's thread returns once the current one is done."""
        with self._cond:
            self._end()

    def _end(self) -> None:
        self._ended = True
        self._cond.notify_all()

    def close(self) -> None:
        self.end()
        if not self._released:
            self._released = True
            if self._first is not None:
                self._first.close()
            self._closed(self)
