"""The HTTP server's own limits on 127.0.0.1, with small limits so each shows within seconds:
a request that never finishes arriving is closed, a full house makes room for /healthz, an
oversized header is refused, and the limit fits the open-file limit."""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from guardian.entrypoints.http_server import (
    HttpServer,
    Request,
    Response,
    Routes,
    check_handler,
)
from guardian.runtime.http_limits import FD_RESERVE, Limits
from tests.helpers import runs, wait_until


@pytest.fixture
def serve() -> Iterator[object]:
    servers: list[HttpServer] = []

    def start(limits: Limits) -> tuple[str, int]:
        routes = Routes()
        routes.add("/healthz", check_handler(lambda: (True, "ok")))
        routes.add("/boom", lambda r: 1 // 0)  # type: ignore[arg-type,return-value]
        server = HttpServer("127.0.0.1:0", routes, limits)
        server.start()
        servers.append(server)
        return server.address

    yield start
    for s in servers:
        s.stop()


def test_the_server_sleeps_in_poll_while_no_client_is_connected() -> None:
    routes = Routes()
    routes.add("/healthz", check_handler(lambda: (True, "ok")))
    server = HttpServer("127.0.0.1:0", routes)
    server.start()
    try:
        assert get(server.address) == (200, b"ok\n")
        time.sleep(0.2)  # the loop closes the connection and goes back to poll()
        before = runs(server.thread_id)
        time.sleep(2.5)  # absence over a window: a 1 s timer would run at least twice
        assert runs(server.thread_id) - before == 0
        assert get(server.address) == (200, b"ok\n")  # and a client still wakes it
    finally:
        server.stop()


def test_the_server_sleeps_in_poll_while_every_connection_is_a_live_stream() -> None:
    """An open status page holds a stream: nothing of it can time out, so the loop waits for
    I/O instead of a timer; once the stream ends, an idle connection is timed out again."""
    end = threading.Event()

    def stream(request: Request) -> Response:
        def body() -> Iterator[bytes]:
            yield b"first\n"
            end.wait(10)

        return Response(200, content_type="text/event-stream", stream=body())

    routes = Routes()
    routes.add("/events", stream)
    server = HttpServer("127.0.0.1:0", routes, Limits(idle_timeout=1))
    server.start()
    try:
        with socket.create_connection(server.address, timeout=5) as s:
            s.sendall(b"GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
            received = b""
            while b"first" not in received:  # the head and the first chunk may come apart
                chunk = s.recv(4096)
                assert chunk, f"closed before the first event: {received!r}"
                received += chunk
            time.sleep(0.2)  # the loop's turn after the first write
            before = runs(server.thread_id)
            time.sleep(2.5)  # absence over a window: a 1 s timer would run at least twice
            assert runs(server.thread_id) - before == 0
            end.set()  # the stream ends; the connection, kept alive, is now idle
            wait_until(lambda: closed_by_server(s), 5)
    finally:
        end.set()
        server.stop()


def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def get(address: tuple[str, int], path: str = "/healthz") -> tuple[int, bytes]:
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_request_that_never_finishes_arriving_is_closed(serve):
    address = serve(Limits(request_timeout=1))
    with socket.create_connection(address) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: a")
        for _ in range(3):  # trickling bytes keeps the connection active, not the request alive
            s.sendall(b"a")
        wait_until(lambda: closed_by_server(s), 5, message="slow request closed")


def test_a_full_house_closes_its_idlest_connection_for_a_new_one(serve):
    address = serve(Limits(connections=4))
    idle = [socket.create_connection(address) for _ in range(4)]
    try:
        assert get(address) == (200, b"ok\n")
        wait_until(lambda: closed_by_server(idle[0]), 5, message="idlest connection closed")
        assert not any(closed_by_server(s) for s in idle[1:])
    finally:
        for s in idle:
            s.close()


def test_an_oversized_header_is_a_json_431_and_the_end_of_the_connection(serve):
    address = serve(Limits(header_bytes=1024))
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 2048 + b"\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split()[1] == b"431"
    assert "exceeds max_header" in json.loads(body)["error"]


def test_a_failing_handler_is_a_json_500_and_one_log_line(serve, caplog):
    status, body = get(serve(Limits()), "/boom")
    assert status == 500 and json.loads(body)["error"].startswith("internal error")
    [record] = [r for r in caplog.records if r.name == "guardian.http"]
    assert record.getMessage() == "http handler failed" and record.exc_info


def test_the_connection_limit_leaves_descriptors_for_everything_else():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (200, hard))
    try:
        assert Limits(connections=256).connection_limit() == 200 - FD_RESERVE
        assert Limits(connections=50).connection_limit() == 50
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_json_error_shape():
    response = Response.error(404, "no such path: /x")
    assert response.content_type == "application/json"
    assert json.loads(response.body) == {"error": "no such path: /x"}
