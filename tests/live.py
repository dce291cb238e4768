"""A status page's live stream (`GET /events`) read raw, as an attacker's or a person's client
would: from a chosen loopback address, with or without a session cookie, every byte kept with
when it came, so a test can say what arrived after a moment and whether the body ended."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import requests

from tests.helpers import wait_until


class LiveStream:
    """One `/events` request on a connection of its own (`Connection: close`: the end of the
    body is the end of the connection), read on a thread until the server closes it."""

    def __init__(self, address: tuple[str, int], cookie: str = "", source: str = "127.0.0.1"):
        self.cookie = cookie
        self.sock = socket.create_connection(address, timeout=10, source_address=(source, 0))
        head = f"GET /events HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nConnection: close\r\n"
        if cookie:
            head += f"Cookie: {cookie}\r\n"
        self.sock.sendall((head + "\r\n").encode())
        self.received: list[tuple[float, bytes]] = []  # (monotonic, bytes)
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True, name="live-stream")
        self._thread.start()

    def _read(self) -> None:
        self.sock.settimeout(None)
        try:
            while chunk := self.sock.recv(65536):
                self.received.append((time.monotonic(), chunk))
        except OSError:
            pass  # closed by close()
        self.ended.set()

    def raw(self, after: float = 0.0) -> bytes:
        """What came (the response's head included) at or after monotonic `after`."""
        return b"".join(chunk for at, chunk in list(self.received) if at >= after)

    @property
    def status(self) -> int:
        """The response's status code, once its head came."""
        head = wait_until(lambda: b"\r\n\r\n" in self.raw() and self.raw(), 10, 0.01, "a head")
        return int(head.split(b" ", 2)[1])

    def headers(self) -> str:
        return self.raw().split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()

    def events(self, after: float = 0.0) -> int:
        """How many events (parts of the page) came at or after `after`."""
        return self.raw(after).count(b"event: parts")

    def wait_events(self, n: int, timeout: float = 10) -> None:
        wait_until(lambda: self.events() >= n, timeout, 0.01, f"{n} events on the stream")

    def close(self) -> None:
        # A close() alone leaves the reading thread's recv() blocked until the server ends the
        # body; shutdown() wakes it at once.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(5)


def sign_in(url: str, token: str, name: str = "alice") -> str:
    """A session's cookie, signed in as the page does (a form posted from this host)."""
    r = requests.post(
        f"{url}/signin",
        data={"token": token, "name": name},
        headers={"Origin": url},
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 303, r.text
    return f"guardian_session={r.cookies['guardian_session']}"


def sign_out(url: str, cookie: str) -> None:
    r = requests.post(
        f"{url}/signout",
        headers={"Origin": url, "Cookie": cookie},
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 303, r.text
