"""A fake HTTP receiver on 127.0.0.1 for notification tests: records every request and answers
from a script (200, 429 + Retry-After, 5xx, 404/410, or never)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer (until the receiver stops)

    @staticmethod
    def json(doc: Any, status: int = 200) -> Answer:
        return Answer(status, json.dumps(doc), {"Content-Type": "application/json"})


HANG = Answer(hang=True)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived
    status: int | None = None  # what was answered (None: never answered)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def free_port() -> int:
    """A port nothing listens on (for "the receiver is down")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeReceiver:
    """Answers each request with the next scripted Answer, then with `default` (or `respond`)."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Recorded] = []
        self.script: list[Answer] = []
        self.default = Answer()
        self.respond: Callable[[Recorded], Answer] | None = None
        self._lock = threading.Lock()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                rec = Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                    time.monotonic(),
                )
                answer = receiver._next(rec)
                if answer.hang:
                    receiver._release.wait(120)
                    return
                rec.status = answer.status
                body = answer.body.encode()
                self.send_response(answer.status)
                for k, v in answer.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET = do_PUT = _serve

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def _next(self, rec: Recorded) -> Answer:
        with self._lock:
            self.requests.append(rec)
            if self.script:
                return self.script.pop(0)
        return self.respond(rec) if self.respond is not None else self.default

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answered(self, status: int = 200) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.status == status]

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def receiver(port: int = 0) -> Any:
    r = FakeReceiver(port)
    try:
        yield r
    finally:
        r.stop()
