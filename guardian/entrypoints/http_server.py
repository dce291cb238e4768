"""The HTTP server: /metrics, /healthz, /readyz, and routes other modules mount (the API).

A stdlib ThreadingHTTPServer on a background thread; handlers are plain functions from Request
to Response so they can be tested without a socket.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry, generate_latest

from guardian.logs import kv

log = logging.getLogger("guardian.http")
MAX_BODY = 64 * 1024
# What generate_latest() writes (legacy metric names): the text format every Prometheus reads.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, status: int, text: str) -> Response:
        return cls(status, (text.rstrip("\n") + "\n").encode())


Handler = Callable[[Request], Response]


class Routes:
    """Exact paths and path prefixes mapped to handlers; the longest prefix wins."""

    def __init__(self) -> None:
        self.exact: dict[str, Handler] = {}
        self.prefixes: dict[str, Handler] = {}

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
            return Response.text(404, "not found")
        return handler(request)


def metrics_handler(registry: CollectorRegistry) -> Handler:
    def handle(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response.text(405, "method not allowed")
        return Response(200, generate_latest(registry), METRICS_CONTENT_TYPE)

    return handle


def check_handler(check: Callable[[], tuple[bool, str]]) -> Handler:
    """/healthz and /readyz: 200 with "ok", or 503 with a one-line reason."""

    def handle(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response.text(405, "method not allowed")
        ok, reason = check()
        return Response.text(200 if ok else 503, reason or ("ok" if ok else "not ok"))

    return handle


class HttpServer:
    """Serves `routes` on host:port from a daemon thread until stop()."""

    def __init__(self, listen: str, routes: Routes) -> None:
        host, _, port = listen.rpartition(":")
        self.routes = routes
        self.host = host.strip("[]") or "127.0.0.1"
        self.port = int(port)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        routes = self.routes

        class RequestHandler(BaseHTTPRequestHandler):
            server_version = "guardian"
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(Response.text(413, f"body larger than {MAX_BODY} bytes"))
                    return
                body = self.rfile.read(length) if length > 0 else b""
                request = Request(
                    self.command,
                    url.path,
                    parse_qs(url.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                try:
                    response = routes.dispatch(request)
                except Exception:
                    log.exception("http handler failed", extra=kv(path=url.path))
                    response = Response.text(500, "internal error")
                self._send(response)

            def _send(self, response: Response) -> None:
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(response.body)

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http request", extra=kv(line=format % args))

        self._server = ThreadingHTTPServer((self.host, self.port), RequestHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)
        self._thread.start()
        log.info("http server listening", extra=kv(address=f"{self.host}:{self.address[1]}"))

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
