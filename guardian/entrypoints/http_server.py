"""The HTTP server: /metrics, /healthz, /readyz, and routes other modules mount (the API).

Waitress serves them on a background thread within the limits of http_limits; before any
handler, an HTTP/1.1 request without Host is refused (400), http_front refuses a Host this
Guardian is not (421) and names the client. Handlers are plain functions from Request to
Response, so they can be tested without a socket. A handler that fails is a 500 and at most
one error line per client a minute (line_pacer): no client can fill the log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, generate_latest
from waitress import wasyncore

from guardian.logs import kv
from guardian.runtime.http_front import HEADERS, Front
from guardian.runtime.http_limits import BACKLOG_KEY, WRITE_KEY, GuardedServer, Limits
from guardian.runtime.line_pacer import LinePacer

log = logging.getLogger("guardian.http")
MAX_QUERY_FIELDS = 50
# What generate_latest() writes (legacy metric names): the text format every Prometheus reads.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes
    # The client's address: the peer's, or the one a trusted proxy names (http_front.Front).
    client: str = ""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    # A body written as it comes (a live stream), instead of `body`; close() is always called.
    stream: Iterable[bytes] | None = None

    @classmethod
    def text(cls, status: int, text: str) -> Response:
        return cls(status, (text.rstrip("\n") + "\n").encode())

    @classmethod
    def json(cls, status: int, doc: Any, headers: dict[str, str] | None = None) -> Response:
        body = (json.dumps(doc, indent=2) + "\n").encode()
        return cls(status, body, "application/json", headers or {})

    @classmethod
    def error(cls, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        """The one shape of every error Guardian answers: `{"error": "..."}`."""
        return cls.json(status, {"error": message}, headers)


Handler = Callable[[Request], Response]


class Routes:
    """Exact paths and path prefixes mapped to handlers; the longest prefix wins."""

    def __init__(self) -> None:
        self.exact: dict[str, Handler] = {}
        self.prefixes: dict[str, Handler] = {}
        self.on_stop: list[Callable[[], None]] = []  # ends what handlers hold open (streams)

    def add(self, path: str, handler: Handler) -> None:
        self.exact[path] = handler

    def mount(self, prefix: str, handler: Handler) -> None:
        self.prefixes[prefix.rstrip("/") + "/"] = handler

    def dispatch(self, request: Request) -> Response:
        handler = self.exact.get(request.path)
        if handler is None:
            for prefix in sorted(self.prefixes, key=len, reverse=True):
                if request.path.startswith(prefix) or request.path + "/" == prefix:
                    handler = self.prefixes[prefix]
                    break
        if handler is None:
            return Response.error(404, "no such path")
        return handler(request)


def metrics_handler(registry: CollectorRegistry) -> Handler:
    def handle(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response.error(405, "method not allowed; use GET", {"Allow": "GET, HEAD"})
        return Response(200, generate_latest(registry), METRICS_CONTENT_TYPE)

    return handle


def check_handler(check: Callable[[], tuple[bool, str]]) -> Handler:
    """/healthz and /readyz: 200 with "ok", or 503 with a one-line reason."""

    def handle(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response.error(405, "method not allowed; use GET", {"Allow": "GET, HEAD"})
        ok, reason = check()
        return Response.text(200 if ok else 503, reason or ("ok" if ok else "not ok"))

    return handle


StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def _request(environ: dict[str, Any], front: Front) -> Request:
    """The WSGI environ as a Request; ValueError for input no handler should see."""
    # PATH_INFO is the percent-decoded path as latin-1 (PEP 3333): back to its bytes, then UTF-8.
    path = str(environ.get("PATH_INFO", "")).encode("latin-1").decode("utf-8", "replace")
    try:
        query = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=MAX_QUERY_FIELDS)
    except ValueError:
        raise ValueError(f"more than {MAX_QUERY_FIELDS} query fields") from None
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    # waitress has framed the body (Content-Length or chunked) and refused one over the limit.
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    client = front.client(str(environ.get("REMOTE_ADDR", "")), headers.get("x-forwarded-for", ""))
    return Request(str(environ["REQUEST_METHOD"]), path, query, headers, body, client)


def _refused_in_front(environ: dict[str, Any], front: Front) -> Response | None:
    """The answer given before anything reads the request, or None to read it."""
    host = environ.get("HTTP_HOST")
    if host is None and environ.get("SERVER_PROTOCOL") == "HTTP/1.1":
        # RFC 9112 3.2. HTTP/1.0 has no Host to send, and is answered as ever.
        return Response.error(400, "bad request: HTTP/1.1 needs a Host header")
    if not front.host_allowed(host):
        # A page that rebinds a name of its own to this address gets nothing, not even /metrics.
        return Response.error(
            421, "misdirected request: this Host is not one of http.allowed_hosts"
        )
    return None


def wsgi_app(
    routes: Routes, front: Front | None = None, now: Callable[[], float] = time.monotonic
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """`routes` as a WSGI application: every failure is a JSON error; a handler's failure is
    also an error line, at most one per client a minute on the monotonic clock `now`."""
    front = front or Front.of("")
    failures = LinePacer(now=now)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = None
        refused = _refused_in_front(environ, front)
        if refused is not None:
            response = refused
        else:
            try:
                request = _request(environ, front)
            except ValueError as exc:
                response = Response.error(400, f"bad request: {exc}")
        if request is not None:
            try:
                response = routes.dispatch(request)
            except Exception:
                held = failures.admit(request.client)
                if held is not None:
                    fields = {"path": request.path[:100], "client": request.client}
                    log.exception("http handler failed", extra=kv(**fields, held_back=held))
                response = Response.error(500, "internal error; see Guardian's log")
        status = f"{response.status} {HTTPStatus(response.status).phrase}"
        extra = {**HEADERS, **response.headers}
        if response.stream is not None:
            write = start_response(
                status, [("Content-Type", response.content_type), *extra.items()]
            )
            # A stream written from another thread (the status page's) needs a write straight
            # to its client's socket and the count of bytes still waiting for that client.
            attach = getattr(response.stream, "attach", None)
            if attach is not None:
                attach(environ.get(WRITE_KEY, write), environ.get(BACKLOG_KEY))
            return response.stream
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *extra.items(),
        ]
        start_response(status, headers)
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [response.body]

    return app


class ListenError(Exception):
    """The configured address cannot be listened on (in use, not local, not resolvable)."""


class HttpServer:
    """Serves `routes` on host:port from a daemon thread until stop()."""

    def __init__(
        self, listen: str, routes: Routes, limits: Limits | None = None, front: Front | None = None
    ) -> None:
        host, _, port = listen.rpartition(":")
        self.listen = listen
        self.routes = routes
        self.limits = limits or Limits()
        self.front = front or Front.of(listen)
        self.host = host.strip("[]") or "127.0.0.1"
        self.port = int(port)
        self._server: GuardedServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return str(self._server.effective_host), int(self._server.effective_port)

    @property
    def thread_id(self) -> int | None:
        """The serving thread's kernel id (for /proc/self/task/<id>), while it runs."""
        return self._thread.native_id if self._thread is not None else None

    def start(self) -> None:
        """Listen, or raise ListenError naming http.listen."""
        socket_map: dict[int, Any] = {}
        try:
            adj = self.limits.adjustments(self.host, self.port)
            self._server = GuardedServer(
                wsgi_app(self.routes, self.front), socket_map, adj, self.limits.request_timeout
            )
        except (OSError, ValueError) as exc:
            wasyncore.close_all(socket_map)
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ListenError(f"http.listen {self.listen}: cannot listen: {reason}") from None
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._serve, args=(self._server, socket_map), name="http", daemon=True
        )
        self._thread.start()
        log.info(
            "http server listening",
            extra=kv(
                address=f"{self.host}:{self.address[1]}",
                connections=self._server.limit,
                body_bytes=self.limits.body_bytes,
            ),
        )

    def _serve(self, server: GuardedServer, socket_map: dict[int, Any]) -> None:
        try:
            while not self._stopping.is_set():
                timeout = server.loop_timeout()
                wasyncore.loop(timeout=timeout, map=socket_map, use_poll=True, count=1)
        finally:
            server.task_dispatcher.shutdown(timeout=5)
            wasyncore.close_all(socket_map)

    def stop(self) -> None:
        if self._server is None:
            return
        for end in self.routes.on_stop:
            end()
        self._stopping.set()
        # Wakes the loop out of poll(); a trigger already closed means the loop is ending.
        with contextlib.suppress(OSError):
            self._server.pull_trigger()
        if self._thread is not None:
            self._thread.join(10)
        self._server = None
