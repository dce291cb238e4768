"""LightHttp: `GET` requests to an engine on a Unix socket through kept standard-library
`http.client` connections, for the requests Guardian makes most: the idle sweep's ping, the
inspect and the list of containers.

Through the Docker SDK (requests, urllib3, its per-request session machinery) a ping costs about
0.4-0.8 ms of CPU and an inspect about 0.5 ms; through a kept standard-library connection, about
0.15 ms and 0.18 ms (bench/RESULTS.md, "Idle as a user measures it"). Only for `unix://`: a TCP
or TLS engine keeps the SDK, whose transport (certificates, proxies) this does not repeat.

Every answer is hostile input. http.client bounds the status line and each header line (64 KiB)
and the number of headers (100); the body is read up to a bound given by the caller, and an
answer announcing or sending more is refused (AnswerTooLarge): the SDK reads an inspect whole
whatever its size, and its timeout bounds only the silence between two reads, so an engine (or a
proxy in front of it) that kept sending would grow Guardian's memory without end.
"""

from __future__ import annotations

import http.client
import itertools
import json
import select
import socket
import time
from collections.abc import Callable
from typing import Any, NamedTuple

MAX_ANSWER = 1024  # bytes of a ping's body read at most ("OK"); more is no engine's ping
KEEP = 4  # idle connections kept: the sweep's thread and a few reactions' at once


class PingFailed(Exception):
    """The engine did not answer the ping with 200."""


class AnswerTooLarge(Exception):
    """The engine's answer announced or sent more than the caller's bound (its connection is
    closed)."""


class Answer(NamedTuple):
    """A whole answer: its status and its body."""

    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON. Raises ValueError when it is not JSON, or nested deeper than the
        parser can follow."""
        try:
            return json.loads(self.body)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None

    def explanation(self, limit: int) -> str:
        """Why the engine refused, as the SDK's APIError.explanation: the JSON body's "message",
        else the body's text; at most `limit` characters."""
        try:
            message = self.json().get("message")
        except (ValueError, AttributeError):
            message = None
        text = message if isinstance(message, str) else self.body.decode("utf-8", "replace")
        return text.strip()[:limit]


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _dropped(conn: _UnixConnection) -> bool:
    """Whether an idle connection can no longer carry a request: closed by the engine (readable
    at its end), or holding bytes nobody asked for."""
    sock = conn.sock
    if sock is None:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _body(answer: http.client.HTTPResponse, limit: int) -> bytes:
    """The whole body of `answer`, at most `limit` bytes. Raises AnswerTooLarge, or
    http.client.IncompleteRead when the engine closed before the end."""
    if answer.length is not None and answer.length > limit:
        raise AnswerTooLarge(f"{answer.length} bytes, more than {limit} bytes")
    body = answer.read(limit + 1)
    if len(body) > limit:
        raise AnswerTooLarge(f"more than {limit} bytes")
    if answer.length:  # a short read of a Content-Length body: the connection ended
        raise http.client.IncompleteRead(body, answer.length)
    return body


class LightHttp:
    """GET requests to the engine at the Unix socket `path`, each on a connection of its own: an
    idle one taken, or a new one; given back only after a whole answer, at most `keep` idle.
    `saw_date(date, elapsed)` hears each answer's Date header (the engine's clock).

    Keeps no lock: the idle connections sit in `keep` slots, each with the generation it was
    taken in; a slot is claimed by dict.setdefault and emptied by dict.pop, each atomic in
    CPython, so at most `keep` are idle whatever threads give back at once and each idle one
    is taken, or closed, by one thread. close() draws a fresh generation before it empties
    the slots: a connection in use then, or given back while it ran, is closed, not kept."""

    def __init__(
        self,
        path: str,
        timeout: float,
        saw_date: Callable[[str | None, float], None],
        keep: int = KEEP,
    ) -> None:
        self.path = path
        self.timeout = timeout
        self.saw_date = saw_date
        self.keep = keep
        self._idle: dict[int, tuple[int, _UnixConnection]] = {}  # slot -> (generation, conn)
        self._generations = itertools.count(1)
        # A fresh number at each close() (never one seen before: equal, no close() since).
        self._generation = 0

    def get(self, path: str, limit: int) -> Answer:
        """The engine's whole answer to `GET path`, its body at most `limit` bytes. Raises
        OSError (TimeoutError past the timeout), http.client.HTTPException or AnswerTooLarge;
        the connection is then closed."""
        conn, generation = self._take()
        try:
            sent = time.monotonic()
            conn.request("GET", path)
            answer = conn.getresponse()
            # As the SDK's response hook: the headers just came, the body may be long.
            self.saw_date(answer.getheader("Date"), time.monotonic() - sent)
            body = _body(answer, limit)
        except BaseException:
            conn.close()
            raise
        if answer.will_close:
            conn.close()
        else:
            self._give_back(conn, generation)
        return Answer(answer.status, body)

    def ping(self) -> None:
        """Raises what get() raises, or PingFailed when the engine does not answer 200."""
        status = self.get("/_ping", MAX_ANSWER).status
        if status != 200:
            raise PingFailed(f"ping answered {status}")

    def close(self) -> None:
        """Closes the idle connections; one in use now is closed when its answer is whole."""
        self._generation = next(self._generations)
        for slot in range(self.keep):
            idle = self._idle.pop(slot, None)
            if idle is not None:
                idle[1].close()

    def _take(self) -> tuple[_UnixConnection, int]:
        generation = self._generation
        for slot in range(self.keep):
            idle = self._idle.pop(slot, None)
            if idle is None:
                continue
            taken_in, conn = idle
            if taken_in == generation and not _dropped(conn):
                return conn, generation
            conn.close()  # given back across a close(), or dropped by the engine
        return _UnixConnection(self.path, self.timeout), generation

    def _give_back(self, conn: _UnixConnection, generation: int) -> None:
        kept = (generation, conn)
        if generation == self._generation:
            for slot in range(self.keep):
                if self._idle.setdefault(slot, kept) is kept:
                    if generation != self._generation:  # a close() came meanwhile
                        self._unkeep(slot, kept)
                    return
        conn.close()

    def _unkeep(self, slot: int, kept: tuple[int, _UnixConnection]) -> None:
        """Empty `slot`, where `kept` went across a close(): whatever is there now is closed,
        unless it is another thread's of the generation in force (put back). Not there any
        more: a take has it, and closes it (its generation is not the one in force)."""
        found = self._idle.pop(slot, None)
        if found is None:
            return
        if (
            found is kept
            or found[0] != self._generation
            or self._idle.setdefault(slot, found) is not found
        ):
            found[1].close()
