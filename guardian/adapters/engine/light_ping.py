"""LightPing: `GET /_ping` on a Unix socket through one kept `http.client` connection.

An idle sweep asks the engine for nothing but whether it answers (service/state/listing.py), six
times a minute by default. Through the Docker SDK (requests, urllib3, header parsing by the
email package) a ping costs about 0.8 ms of CPU; through one kept standard-library connection,
about 0.15 ms (bench/RESULTS.md, "Idle as a user measures it"). Only for `unix://`: a TCP or
TLS engine keeps the SDK's ping, whose transport (certificates, proxies) this does not repeat.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable

MAX_ANSWER = 1024  # bytes of a ping's body read at most ("OK"); more is no engine's ping


class PingFailed(Exception):
    """The engine did not answer the ping with 200 (the connection is closed)."""


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


class LightPing:
    """Pings the engine at a Unix socket `path`; `saw_date(date, elapsed)` hears each answer's
    Date header (the engine's clock). One ping at a time."""

    def __init__(
        self, path: str, timeout: float, saw_date: Callable[[str | None, float], None]
    ) -> None:
        self.path = path
        self.timeout = timeout
        self.saw_date = saw_date
        self._lock = threading.Lock()
        self._conn: _UnixConnection | None = None

    def ping(self) -> None:
        """Raises OSError, http.client.HTTPException or PingFailed when the engine does not
        answer 200 within the timeout."""
        with self._lock:
            conn = self._conn or _UnixConnection(self.path, self.timeout)
            self._conn = None  # kept again only after a whole answer
            sent = time.monotonic()
            try:
                conn.request("GET", "/_ping")
                answer = conn.getresponse()
                answer.read(MAX_ANSWER)
            except BaseException:
                conn.close()
                raise
            elapsed = time.monotonic() - sent
            if answer.status != 200 or not answer.isclosed():
                conn.close()
                raise PingFailed(f"ping answered {answer.status}")
            if not answer.will_close:
                self._conn = conn
            else:
                conn.close()
        self.saw_date(answer.getheader("Date"), elapsed)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
