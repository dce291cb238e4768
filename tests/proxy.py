"""A Docker API proxy on a Unix socket, for tests: count, filter, or act on requests.

Guardian is pointed at `unix://<proxy.path>`; each request is forwarded to the real engine on a
fresh upstream connection (the proxy adds `Connection: close`, so every request is seen). A rule
can deny a request with a status code or run a side effect first (e.g. remove the container
just before its restart reaches the engine).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

UPSTREAM = "/var/run/docker.sock"

# (method, path) -> None to forward, or an int status to answer instead of forwarding.
Rule = Callable[[str, str], int | None]


@dataclass
class DockerProxy:
    path: Path
    upstream: str = UPSTREAM
    rule: Rule | None = None
    requests: list[tuple[str, str]] = field(default_factory=list)
    targets: list[tuple[str, str]] = field(default_factory=list)  # (method, path and query)
    _server: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _conns: list[socket.socket] = field(default_factory=list)

    def start(self) -> DockerProxy:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._stop.clear()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.path))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, daemon=True, name="proxy").start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection (the engine "goes away")."""
        self._stop.set()
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._conns.clear()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for m, p in self.requests if m == method and re.search(pattern, p))

    def subscriptions(self) -> int:
        """The live event streams asked for: GET /events without an `until` (a read of the
        engine's record over a window has one)."""
        return sum(
            1
            for m, t in self.targets
            if m == "GET" and t.partition("?")[0] == "/events" and "until=" not in t
        )

    def creates_of(self, name: str) -> list[str]:
        """The requests so far to create a container named `name`, in order."""
        return [
            t
            for m, t in list(self.targets)
            if m == "POST"
            and t.partition("?")[0] == "/containers/create"
            and parse_qs(urlsplit(t).query).get("name") == [name]
        ]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                assert self._server is not None
                client, _ = self._server.accept()
            except (OSError, AssertionError):
                return
            self._conns.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    client.close()
                    return
                head += chunk
            head_part, _, rest = head.partition(b"\r\n\r\n")
            lines = head_part.split(b"\r\n")
            method, target = lines[0].decode().split(" ")[:2]
            path = target.split("?")[0]
            path = re.sub(r"^/v[0-9.]+", "", path)
            self.requests.append((method, path))
            self.targets.append((method, re.sub(r"^/v[0-9.]+", "", target)))
            status = self.rule(method, path) if self.rule is not None else None
            if status is not None:
                body = b'{"message":"denied by test proxy"}'
                client.sendall(
                    f"HTTP/1.1 {status} Denied\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                client.close()
                return
            headers = [h for h in lines[1:] if not h.lower().startswith(b"connection:")]
            new_head = b"\r\n".join([lines[0], *headers, b"Connection: close"]) + b"\r\n\r\n"
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            self._conns.append(upstream)
            upstream.sendall(new_head + rest)
            threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            _pump(upstream, client)
        except OSError:
            with contextlib.suppress(OSError):
                client.close()


@dataclass
class HeldCreate:
    """A proxy that holds the first request to create a container named `name`: `arrived` is
    set as it comes, and it waits until `release` is set (60 s at most), then is answered 503
    on a connection its sender has closed meanwhile, never forwarded: the engine never sees it.
    Every other request goes through. For a real kill -9 between a removal and its create."""

    proxy: DockerProxy
    name: str
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def on(cls, path: Path, name: str) -> HeldCreate:
        held = cls(DockerProxy(path), name)
        held.proxy.rule = held._rule
        held.proxy.start()
        return held

    def creates(self) -> list[str]:
        return self.proxy.creates_of(self.name)

    def _rule(self, method: str, path: str) -> int | None:
        # The proxy appends a request's target before it asks the rule, and Guardian sends one
        # create at a time: one create of the name so far means this request is the first.
        if method != "POST" or path != "/containers/create" or len(self.creates()) != 1:
            return None
        self.arrived.set()
        self.release.wait(60)  # until the test lets it go, Guardian killed meanwhile
        return 503


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
