"""The idle sweep's ping on a Unix socket (adapters/engine/light_ping.py): one kept connection
while the engine answers 200, a failure for anything else, never a wait beyond the timeout."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardian.adapters.engine.light_ping import LightPing, PingFailed

DATE = "Sun, 06 Dec 2026 05:00:00 GMT"


class FakeEngine:
    """A Unix socket answering each request with `answer` (None: never answers); counts the
    connections it accepted and the requests it read."""

    def __init__(self, path: Path, answer: bytes | None) -> None:
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        while True:
            try:
                chunk = conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
            while b"\r\n\r\n" in data:
                _, _, data = data.partition(b"\r\n\r\n")
                self.requests += 1
                if self.answer is not None:
                    conn.sendall(self.answer)

    def close(self) -> None:
        self.server.close()
        for conn in self.open:
            conn.close()


def ok(extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nDate: {DATE}\r\nContent-Length: 2\r\n{extra}"
        "Content-Type: text/plain\r\n\r\nOK"
    ).encode()


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "engine.sock"


def test_pings_share_one_connection_and_each_hears_the_engines_date(sock: Path) -> None:
    engine = FakeEngine(sock, ok())
    dates: list[str | None] = []
    ping = LightPing(str(sock), 2.0, lambda date, elapsed: dates.append(date))
    try:
        for _ in range(5):
            ping.ping()
        assert (engine.connections, engine.requests) == (1, 5)
        assert dates == [DATE] * 5
    finally:
        ping.close()
        engine.close()


def test_an_answer_that_closes_is_not_kept(sock: Path) -> None:
    engine = FakeEngine(sock, ok("Connection: close\r\n"))
    ping = LightPing(str(sock), 2.0, lambda *_: None)
    try:
        ping.ping()
        ping.ping()
        assert engine.connections == 2
    finally:
        ping.close()
        engine.close()


def test_anything_but_200_fails_and_the_next_ping_connects_again(sock: Path) -> None:
    engine = FakeEngine(sock, b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
    ping = LightPing(str(sock), 2.0, lambda *_: None)
    try:
        with pytest.raises(PingFailed, match="500"):
            ping.ping()
        engine.answer = ok()
        ping.ping()
        assert engine.connections == 2
    finally:
        ping.close()
        engine.close()


def test_an_engine_that_never_answers_fails_within_the_timeout(sock: Path) -> None:
    engine = FakeEngine(sock, None)
    ping = LightPing(str(sock), 0.3, lambda *_: None)
    try:
        with pytest.raises(TimeoutError):
            ping.ping()
    finally:
        ping.close()
        engine.close()


def test_a_broken_answer_or_no_socket_fails(sock: Path) -> None:
    engine = FakeEngine(sock, b"garbage\r\n\r\n")
    ping = LightPing(str(sock), 1.0, lambda *_: None)
    try:
        with pytest.raises(http.client.HTTPException):
            ping.ping()
    finally:
        ping.close()
        engine.close()
    with pytest.raises(OSError):
        LightPing(str(sock.with_name("none.sock")), 1.0, lambda *_: None).ping()
