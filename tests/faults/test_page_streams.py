"""Page viewers against the HTTP port: live streams beyond the cap are refused, the streams
held never take a thread from /healthz or the API, and they end cleanly when Guardian stops."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest
import requests

from guardian.entrypoints.http_limits import Limits
from guardian.entrypoints.http_server import HttpServer, Routes, check_handler
from guardian.entrypoints.page.handler import StatusPage
from guardian.entrypoints.page.model import PageReader
from guardian.entrypoints.page.sessions import Sessions
from tests.app import make_app
from tests.helpers import wait_until

STREAMS = 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[HttpServer, str]]:
    g = make_app(tmp_path)
    g.engine.add("web")
    page = StatusPage(
        PageReader(g.healer, g.app.operator, g.app.changes),
        g.app.operator,
        Sessions("token", 3600),
        g.app.changes,
        public_reads=True,
        max_streams=STREAMS,
    )
    routes = Routes()
    routes.add("/healthz", check_handler(lambda: (True, "ok")))
    page.mount(routes)
    page.feed.keepalive = 0.2  # a client that left is noticed at the stream's next write
    http = HttpServer("127.0.0.1:0", routes, Limits(threads=2, streams=STREAMS))
    http.start()
    host, port = http.address
    yield http, f"http://{host}:{port}"
    http.stop()


def open_stream(url: str) -> requests.Response:
    r = requests.get(f"{url}/events", stream=True, timeout=10)
    assert r.status_code == 200
    assert next(r.iter_lines()).startswith(b"retry:")  # the stream is being served
    return r


def test_streams_beyond_the_cap_get_503_and_never_starve_healthz(server) -> None:
    _, url = server
    held = [open_stream(url) for _ in range(STREAMS)]
    refused = requests.get(f"{url}/events", timeout=5)
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
    # Both of the port's own threads are free: /healthz and the page answer at once, together.
    with futures.ThreadPoolExecutor(4) as pool:
        asked = [
            pool.submit(requests.get, f"{url}{p}", timeout=2) for p in ["/healthz"] * 3 + ["/"]
        ]
        assert [f.result().status_code for f in asked] == [200, 200, 200, 200]
    # A viewer who leaves gives the slot back at the stream's next write (a keep-alive).
    held.pop().close()
    held.append(wait_until(lambda: _try_stream(url), 5, message="a slot freed"))
    for r in held:
        r.close()


def _try_stream(url: str) -> requests.Response | None:
    r = requests.get(f"{url}/events", stream=True, timeout=10)
    if r.status_code == 503:
        return None
    assert r.status_code == 200
    return r


def test_a_stream_ends_when_guardian_stops(server) -> None:
    http, url = server
    stream = open_stream(url)
    started = time.monotonic()
    http.stop()
    rest = b"".join(stream.iter_content(None))  # the chunked body ends: a clean end
    assert time.monotonic() - started < 3
    assert b"event: parts" in rest or rest == b""
