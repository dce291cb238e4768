"""Page viewers against the HTTP port: live streams beyond the cap are refused, the streams
held never take a thread from /healthz or the API, and they end cleanly when Guardian stops. A
signed stream ends with its session; anonymous readers never take the slots kept for signed
ones, nor one address every anonymous slot."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest
import requests

from bench.page import StreamClient
from guardian.entrypoints.http_server import HttpServer, Routes, check_handler
from guardian.entrypoints.page.handler import StatusPage
from guardian.entrypoints.page.sessions import Sessions
from guardian.readside.page import PageReader
from guardian.runtime.http_limits import Limits
from tests.app import TestApp, make_app
from tests.helpers import runs, wait_until
from tests.live import LiveStream, sign_in, sign_out

STREAMS = 3
TOKEN = "page-streams-token-0123456789abcdef"


def serve_page(
    g: TestApp,
    streams: int,
    threads: int = 1,
    *,
    public: bool = True,
    sessions: Sessions | None = None,
    per_address: int | None = None,
) -> tuple[StatusPage, HttpServer]:
    """A status page over `g` (anyone may read it unless `public` is False), served on
    127.0.0.1 with `streams` streams. Without `sessions` nobody can sign in, so no stream is
    kept for signed ones; without `per_address` one address may hold them all."""
    page = StatusPage(
        PageReader(g.healer, g.app.operator, g.app.changes),
        g.app.operator,
        sessions or Sessions(None, 3600),
        g.app.changes,
        public_reads=public,
        max_streams=streams,
        streams_per_address=per_address,
    )
    routes = Routes()
    routes.add("/healthz", check_handler(lambda: (True, "ok")))
    page.mount(routes)
    http = HttpServer("127.0.0.1:0", routes, Limits(threads=threads, streams=streams))
    http.start()
    return page, http


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[HttpServer, str]]:
    g = make_app(tmp_path)
    g.engine.add("web")
    page, http = serve_page(g, STREAMS, threads=2)
    page.feed.keepalive = 0.2  # a client that left is noticed at the stream's next write
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


def _threads_runs(prefix: str) -> int:
    """How many times the kernel put the threads named `prefix...` on a CPU so far."""
    return sum(runs(t.native_id) for t in threading.enumerate() if t.name.startswith(prefix))


def test_a_change_wakes_the_pump_alone_however_many_pages_are_open(tmp_path: Path) -> None:
    """Eight pages open: each change is read once and written to all eight by the feed's
    one thread; the pages' own HTTP threads sleep until their stream ends."""
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy")
    page, http = serve_page(g, 8)
    pages = [StreamClient(http.address[1]) for _ in range(8)]
    try:
        wait_until(lambda: page.feed.joined == 8, 5, message="eight streams past their first")
        before = _threads_runs("waitress")
        for n, health in enumerate(["unhealthy", "healthy"] * 3, start=1):
            g.engine.set("web", health=health)
            g.app.changes.changed(["web"])
            wait_until(lambda n=n: all(len(p.ids) == 1 + n for p in pages), 5)
        assert _threads_runs("waitress") == before
    finally:
        for p in pages:
            p.close()
        http.stop()


def test_a_client_that_never_reads_is_ended_and_never_holds_back_the_others(
    tmp_path: Path,
) -> None:
    """An attacker opens a stream and reads nothing while the page changes: once MAX_BACKLOG
    bytes wait for it, its stream ends and its slot is free again; a page that reads gets
    every change meanwhile."""
    g = make_app(tmp_path)
    for n in range(200):  # ~1 KB of rows each: every new container resends the whole table
        g.engine.add(f"{n:03d}-" + "x" * 300)
    page, http = serve_page(g, 2)
    page.feed.settle = 0
    stuck = socket.socket()  # the smallest window: what it does not read waits on the server
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(http.address)
    stuck.sendall(b"GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
    wait_until(lambda: page.feed.joined == 1, 5)
    reader = StreamClient(http.address[1])
    try:
        wait_until(lambda: page.feed.joined == 2, 5)
        for n in range(1000):  # 200 KB a change: beyond any socket buffer and MAX_BACKLOG
            g.engine.add(f"new-{n:04d}")
            g.app.changes.changed([f"new-{n:04d}"])
            wait_until(lambda n=n: len(reader.ids) == 2 + n, 5, message="the reader's event")
            if page.feed.open == 1:
                break
        assert page.feed.open == 1, "the stream that reads nothing still holds its slot"
        assert len(reader.ids) == len(set(reader.ids))  # each change once, none skipped
    finally:
        stuck.close()
        reader.close()
        http.stop()


def test_a_page_that_reads_late_gets_every_event_whole_and_in_order(tmp_path: Path) -> None:
    """The pump writes an event straight to the client's socket; what the socket does not
    take waits in the server's buffer, and the events after it queue behind it. A page
    that reads only after 200 KB events filled its socket gets each one whole (chunked
    framing intact, its JSON complete), in order, the last showing the present."""
    g = make_app(tmp_path)
    for n in range(200):  # ~1 KB of rows each: every new container resends the whole table
        g.engine.add(f"{n:03d}-" + "x" * 300)
    page, server = serve_page(g, 1)
    page.feed.settle = 0
    late = socket.socket()  # a small window: the socket takes a part of each event
    late.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    late.settimeout(10)
    late.connect(server.address)
    conn = http.client.HTTPConnection(*server.address)
    conn.sock = late
    try:
        conn.request("GET", "/events")
        response = conn.getresponse()
        assert response.getheader("Transfer-Encoding") == "chunked"
        wait_until(lambda: page.feed.joined == 1, 5, message="the stream joined the pump")
        [stream] = page.feed._joined  # noqa: SLF001 -- what waits for this client
        waiting = []  # bytes that waited for the client after each event
        while len(waiting) < 40 and waiting[-2:].count(True) < 2:
            name = f"new-{len(waiting):02d}"
            g.engine.add(name)
            g.app.changes.changed([name])
            wait_until(lambda: stream.sent.version == g.app.changes.version, 5)
            waiting.append(stream._backlog() > 0)  # noqa: SLF001
        assert waiting[-2:] == [True, True], "the socket took every event whole"
        last = f"new-{len(waiting) - 1:02d}"
        events: list[tuple[str, dict[str, object]]] = []
        event_id = ""
        while not events or last not in str(events[-1][1]):
            line = response.readline().decode().rstrip("\n")
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                events.append((event_id, json.loads(line[6:])))
        versions = [int(i.rsplit("-", 1)[1]) for i, _ in events]
        assert versions == sorted(set(versions)) and len(versions) >= 2
        rows = str(events[-1][1]["parts"])
        assert all(f"new-{n:02d}" in rows for n in range(len(waiting)))
    finally:
        conn.close()
        server.stop()


def test_a_page_over_http_1_0_gets_its_events_unchunked(tmp_path: Path) -> None:
    """HTTP/1.0 has no chunked encoding: the stream's events are the body as they are."""
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy")
    page, server = serve_page(g, 1)
    try:
        with socket.create_connection(server.address, timeout=10) as s:
            s.sendall(b"GET /events HTTP/1.0\r\n\r\n")
            s.settimeout(0.05)
            received = b""

            def ids() -> list[bytes]:
                nonlocal received
                with contextlib.suppress(TimeoutError):
                    received += s.recv(65536)
                return [line for line in received.split(b"\n") if line.startswith(b"id: ")]

            wait_until(lambda: page.feed.joined == 1, 5, message="past its first event")
            wait_until(lambda: len(ids()) == 1, 5)
            g.engine.set("web", health="unhealthy")
            g.app.changes.changed(["web"])
            wait_until(lambda: len(ids()) == 2, 5)
        head, body = received.split(b"\r\n\r\n", 1)
        assert b"Transfer-Encoding" not in head
        assert body.startswith(b"retry: ") and b'data-state=\\"unhealthy\\"' in body
    finally:
        server.stop()


def url_of(http: HttpServer) -> str:
    host, port = http.address
    return f"http://{host}:{port}"


def test_sign_out_ends_the_sessions_stream_at_once_and_nothing_follows(tmp_path: Path) -> None:
    """Alice signs out while her page streams: her stream ends before the sign-out is
    answered, and the change that follows reaches Bob's stream, never hers."""
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy")
    page, http = serve_page(g, STREAMS, public=False, sessions=Sessions(TOKEN, 3600))
    url = url_of(http)
    alice, bob = (
        LiveStream(http.address, sign_in(url, TOKEN)),
        LiveStream(http.address, sign_in(url, TOKEN)),
    )
    try:
        alice.wait_events(1), bob.wait_events(1)
        wait_until(lambda: page.feed.joined == 2, 5, message="both streams past their first")
        sign_out(url, alice.cookie)
        out = time.monotonic()
        assert alice.ended.wait(3), "the stream outlived its session"
        g.engine.set("web", health="unhealthy")
        g.app.changes.changed(["web"])
        bob.wait_events(2)
        assert alice.raw(out) in (b"", b"0\r\n\r\n"), "the stream wrote after the sign-out"
        assert alice.events() == 1
        wait_until(lambda: page.feed.open == 1, 5, message="the slot given back")
    finally:
        alice.close(), bob.close()
        http.stop()


def test_a_signed_stream_ends_when_its_session_expires_though_nothing_changes(
    tmp_path: Path,
) -> None:
    """A stream's life is its session's: at the session's end the stream ends, without a
    change or a keep-alive to notice it by (the ttl here is seconds; config's is 5m or more)."""
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy")
    ttl = 2.0
    page, http = serve_page(g, STREAMS, public=False, sessions=Sessions(TOKEN, ttl))
    page.feed.keepalive = 3600  # nothing else wakes the stream
    url = url_of(http)
    signed_at = time.monotonic()
    stream = LiveStream(http.address, sign_in(url, TOKEN))
    try:
        stream.wait_events(1)
        assert stream.ended.wait(ttl + 3), "the stream outlived its session"
        assert time.monotonic() - signed_at >= ttl
        assert stream.events() == 1
        wait_until(lambda: page.feed.open == 0, 5, message="the slot given back")
    finally:
        stream.close()
        http.stop()


def test_anonymous_streams_never_take_the_slots_kept_for_signed_sessions(
    tmp_path: Path,
) -> None:
    """With public reads and 8 streams: one address holds at most 3 anonymous streams, every
    address together 6; the 2 kept for signed sessions serve an operator's pages."""
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy")
    page, http = serve_page(g, 8, sessions=Sessions(TOKEN, 3600), per_address=3)  # the defaults
    url = url_of(http)
    held: list[LiveStream] = []

    def stream(source: str, cookie: str = "") -> LiveStream:
        s = LiveStream(http.address, cookie, source=source)
        held.append(s)
        return s

    try:
        for _ in range(3):
            assert stream("127.0.0.2").status == 200
        refused = stream("127.0.0.2")  # one address's share is full
        assert refused.status == 503 and "retry-after: 10" in refused.headers()
        for _ in range(3):
            assert stream("127.0.0.3").status == 200
        refused = stream("127.0.0.4")  # every anonymous slot is taken
        assert refused.status == 503 and "retry-after: 10" in refused.headers()
        cookie = sign_in(url, TOKEN)
        signed = [stream("127.0.0.4", cookie), stream("127.0.0.2", cookie)]
        for s in signed:
            assert s.status == 200
            s.wait_events(1)
        assert stream("127.0.0.5", cookie).status == 503  # page.streams, all open
        assert page.feed.open == 8
    finally:
        for s in held:
            s.close()
        http.stop()
