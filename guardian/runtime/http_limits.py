"""The limits of Guardian's HTTP port, and the waitress server that enforces them.

Waitress bounds header and body sizes, idle time and pipelining; this adds what it leaves out:
a request must arrive whole in time, a full house makes room by closing its idlest connections
(as nginx reuses keep-alive connections), and running out of descriptors is logged once.
"""

from __future__ import annotations

import errno
import heapq
import json
import logging
import resource
import socket
from dataclasses import dataclass
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import ClientDisconnected, HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError, TransferEncodingNotImplemented
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, WSGITask

from guardian.adapters.clock import monotonic
from guardian.logs import kv
from guardian.runtime.http_front import HEADERS

log = logging.getLogger("guardian.http")

EVICT_SHARE = 8  # when full, close the idlest 1/8: the accepts that follow need no search
FD_RESERVE = 128  # descriptors kept for the engine client, the store and notifications
BACKLOG_KEY = "guardian_http.backlog"  # environ: () -> bytes written that still wait for the client
# environ: (bytes) -> None, the body written from another thread straight to the client's socket
WRITE_KEY = "guardian_http.write"


@dataclass(frozen=True)
class Limits:
    """What one client may hold: docs/monitoring.md lists these with their reasons."""

    connections: int = 256
    threads: int = 4
    streams: int = 0  # threads of their own for live streams (the status page), capped there
    idle_timeout: int = 30  # seconds a connection may sit silent between requests
    request_timeout: int = 10  # seconds from a request's first byte to its last
    header_bytes: int = 16 * 1024
    body_bytes: int = 64 * 1024

    def connection_limit(self) -> int:
        """`connections`, lowered to fit the open-file limit with FD_RESERVE to spare."""
        try:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (OSError, ValueError):
            return self.connections
        if soft == resource.RLIM_INFINITY:
            return self.connections
        return min(self.connections, max(8, soft - FD_RESERVE))

    def adjustments(self, host: str, port: int) -> Adjustments:
        return Adjustments(
            host=host,
            port=port,
            ident="guardian",
            threads=self.threads + self.streams,
            connection_limit=self.connection_limit(),
            channel_timeout=self.idle_timeout,
            max_request_header_size=self.header_bytes,
            # waitress refuses a body of max_request_body_size bytes or more
            max_request_body_size=self.body_bytes + 1,
            log_socket_errors=False,  # a client resetting its connection is not news
            expose_tracebacks=False,
            # X-Forwarded-* reach Guardian, which trusts them only from http.trusted_proxies
            # (http_front) and page.trust_forwarded_proto; waitress would drop them all.
            clear_untrusted_proxy_headers=False,
        )


class JsonErrorTask(ErrorTask):  # type: ignore[misc]
    """Waitress's answer to a request it refused (400, 413, 431), as Guardian's JSON error."""

    def execute(self) -> None:
        error = self.request.error
        body = (json.dumps({"error": f"{error.reason}: {error.body}"}) + "\n").encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.response_headers.extend(HEADERS.items())
        self.set_close_on_finish()  # the rest of what this client sent is never parsed
        self.content_length = len(body)
        self.write(body)


class BacklogTask(WSGITask):  # type: ignore[misc]
    """A request's task whose environ tells how many bytes written wait for the client: a
    stream written from another thread ends a client that reads too slowly instead of
    blocking in waitress's write once its buffer is full."""

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        channel = self.channel
        environ[BACKLOG_KEY] = lambda: int(channel.total_outbufs_len)
        environ[WRITE_KEY] = self.write_through
        return environ

    def write_through(self, data: bytes) -> None:
        """WSGI's write for a long response written from another thread (a live stream): a
        chunk goes straight to the socket while nothing waits in the connection's buffer,
        sparing waitress's buffers for each small event; what the socket does not take
        goes through them (the loop sends it when the client reads)."""
        channel = self.channel
        if not (self.wrote_header and self.chunked_response and data):
            self.write(data)
            return
        chunk = b"%X\r\n%b\r\n" % (len(data), data)
        with channel.outbuf_lock:
            if not channel.connected:
                raise ClientDisconnected
            if not channel.total_outbufs_len:
                try:
                    sent = channel.socket.send(chunk)
                except BlockingIOError:
                    sent = 0
                except OSError as exc:
                    raise ClientDisconnected from exc
                chunk = chunk[sent:]
                if sent:
                    channel.touch()
        if chunk:
            channel.write_soon(chunk)


BOTH = "a request carries Content-Length or Transfer-Encoding, not both"


class FramedParser(HTTPRequestParser):  # type: ignore[misc]
    """Waitress's request parser, refusing a request framed two ways. With both Content-Length
    and Transfer-Encoding, a proxy in front that frames by the length sees another request
    where this server reads a chunk (request smuggling): RFC 9112 6.1 says to close such a
    connection; it is answered 400 and closed, and nothing pipelined after it is read."""

    def parse_header(self, header_plus: bytes) -> None:
        try:
            super().parse_header(header_plus)
        except TransferEncodingNotImplemented:
            if "CONTENT_LENGTH" in self.headers:  # framed two ways whatever the coding
                raise ParsingError(BOTH) from None
            raise
        # HTTP/1.1: waitress took Transfer-Encoding out of the headers and set `chunked`.
        framed_by_te = self.chunked or "TRANSFER_ENCODING" in self.headers
        if framed_by_te and "CONTENT_LENGTH" in self.headers:
            raise ParsingError(BOTH)


class TimedChannel(HTTPChannel):  # type: ignore[misc]
    """A waitress connection that remembers when the request it is reading began, and when it
    was last active, on the monotonic clock: a step of the wall clock neither closes every
    connection nor lets one sit for the step's length."""

    error_task_class = JsonErrorTask
    task_class = BacklogTask
    parser_class = FramedParser
    request_began = 0.0
    _active_at = 0.0

    @property
    def last_activity(self) -> float:
        return self._active_at

    @last_activity.setter
    def last_activity(self, _wall: float) -> None:
        # waitress stamps activity with time.time(); its idle timeout reads it back here.
        self.touch()

    def touch(self) -> None:
        """The connection was active now (monotonic)."""
        self._active_at = monotonic()

    def received(self, data: bytes) -> bool:
        if self.request is None:
            self.request_began = monotonic()
        return bool(super().received(data))


class GuardedServer(TcpWSGIServer):  # type: ignore[misc]
    """Waitress's TCP server with the request timeout, eviction when full, and a calm answer
    to running out of file descriptors. Runs on HttpServer's loop thread."""

    channel_class = TimedChannel

    def __init__(
        self, app: Any, socket_map: dict[int, Any], adj: Adjustments, request_timeout: int
    ) -> None:
        self.socket_map = socket_map
        self.request_timeout = request_timeout
        self.limit = int(adj.connection_limit)
        self.paused_until = 0.0
        self.next_cleanup = 0.0  # the timeouts are checked once a second
        self.short_of = ""  # what ran out, while it lasts: logged once
        ipv4 = [info for info in adj.listen if info[0] == socket.AF_INET]
        super().__init__(app, map=socket_map, adj=adj, sockinfo=(ipv4 or adj.listen)[0])

    def maintenance(self, now: float) -> None:
        """Close idle connections (waitress) and those whose request takes too long to arrive."""
        super().maintenance(now)
        cutoff = now - self.request_timeout
        for channel in list(self.active_channels.values()):
            reading = channel.request is not None and not channel.requests
            if reading and channel.request_began < cutoff:
                channel.will_close = True

    def readable(self) -> bool:
        now = monotonic()
        if now >= self.next_cleanup:
            self.next_cleanup = now + 1.0
            self.maintenance(now)
        return bool(self.accepting) and now >= self.paused_until

    def loop_timeout(self) -> float | None:
        """How long the loop may block in poll(): for ever while accepting is not paused and
        no connection can time out (none is open, or each is being answered: a live page's
        stream; a client, a finished response or stop() wakes it), else until the next
        timeout check or the end of the pause."""
        if not self.paused_until and all(c.requests for c in self.active_channels.values()):
            return None
        now = monotonic()
        if self.paused_until and now >= self.paused_until:
            self.paused_until = 0.0
        return max(0.001, min(self.next_cleanup, self.paused_until or self.next_cleanup) - now)

    def open_connections(self) -> int:
        """Connections held, not counting those already told to close."""
        held = len(self.active_channels)
        if held < self.limit:
            return held
        return sum(1 for c in self.active_channels.values() if not c.will_close)

    def evict(self) -> int:
        """Close the connections silent the longest that are not being answered."""
        idle = [c for c in self.active_channels.values() if not c.requests and not c.will_close]
        batch = max(1, self.limit // EVICT_SHARE)
        for channel in heapq.nsmallest(batch, idle, key=lambda c: c.last_activity):
            channel.will_close = True
        return min(len(idle), batch)

    def handle_accept(self) -> None:
        """Accept the clients waiting, a batch per turn of the loop; when full, first close the
        idlest connections (they close on the loop's next turn), or, every connection being
        answered, wait a moment."""
        for _ in range(max(1, self.limit // EVICT_SHARE)):
            if self.open_connections() >= self.limit and not self.evict():
                self.pause(0.1, "connections", "http connection limit reached; every one is busy")
                return
            try:
                pair = self.accept()
                if pair is None:
                    return  # nobody else waiting
                conn, addr = pair
                self.set_socket_options(conn)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self.evict()
                    self.pause(1.0, "descriptors", "http server out of file descriptors", exc)
                return  # else the client left before it was accepted
            if self.short_of:
                log.info("http server accepting again", extra=kv(after=self.short_of))
                self.short_of = ""
            self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self.socket_map)

    def pause(self, seconds: float, what: str, message: str, exc: OSError | None = None) -> None:
        """Stop accepting for `seconds`; logged once until a client is accepted again."""
        self.paused_until = monotonic() + seconds
        if self.short_of != what:
            self.short_of = what
            reason = (exc.strerror or str(exc)) if exc is not None else None
            log.error(message, extra=kv(reason=reason, connections=len(self.active_channels)))
