"""The front of the port: which Host names are answered, who the client is behind a trusted
proxy, and the headers every answer carries (through the WSGI app, no socket)."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from guardian.entrypoints.http_server import Request, Response, Routes, wsgi_app
from guardian.logs import FIELDS
from guardian.runtime.http_front import Front, host_name
from tests.fakes import FakeClock


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("LocalHost:9321", "localhost"),
        ("guardian.lan.", "guardian.lan"),
        ("[::1]:9321", "[::1]"),
        ("127.0.0.1", "127.0.0.1"),
        ("", ""),
    ],
)
def test_the_name_of_a_host_header_drops_its_port(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        ("localhost:9321", True),
        ("127.0.0.1:8080", True),  # a published port: the name is what rebinding changes
        ("[::1]:9321", True),
        ("172.17.0.5:9321", True),  # Prometheus scraping a sidecar by address
        ("guardian.lan", True),
        ("GUARDIAN.LAN:443", True),
        ("rebind.attacker.example:9321", False),
        ("localhost.attacker.example", False),
        ("guardian.lan.attacker.example", False),
        ("", False),
        (None, True),  # no Host: an HTTP/1.0 client, never a browser
    ],
)
def test_only_the_listed_names_and_addresses_are_answered(
    header: str | None, allowed: bool
) -> None:
    front = Front.of("0.0.0.0:9321", ["guardian.lan"])
    assert front.host_allowed(header) is allowed


def test_a_star_answers_every_name_and_the_listen_host_and_hostname_are_allowed() -> None:
    assert Front.of("127.0.0.1:9321", ["*"]).host_allowed("anything.example")
    assert Front.of("guardian.lan:9321").host_allowed("guardian.lan:9321")
    assert Front.of("0.0.0.0:9321", hostname="Host-A").host_allowed("host-a:9321")
    assert not Front.of("0.0.0.0:9321").host_allowed("host-a:9321")


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("10.0.0.7", "1.2.3.4", "10.0.0.7"),  # not a trusted proxy: its header is a claim
        ("127.0.0.1", "1.2.3.4", "1.2.3.4"),
        ("127.0.0.1", "6.6.6.6, 1.2.3.4", "1.2.3.4"),  # the left part is the client's own word
        ("127.0.0.1", "1.2.3.4, 127.0.0.1", "1.2.3.4"),  # two proxies
        ("127.0.0.1", "", "127.0.0.1"),
        ("127.0.0.1", "junk, 1.2.3.4", "1.2.3.4"),
        ("127.0.0.1", "1.2.3.4, junk", "127.0.0.1"),
        ("127.0.0.1", "[2001:db8::1]", "2001:db8::1"),
    ],
)
def test_the_client_behind_a_trusted_proxy_is_the_right_most_untrusted_address(
    peer: str, forwarded: str, client: str
) -> None:
    front = Front.of("127.0.0.1:9321", trusted_proxies=["127.0.0.0/8"])
    assert front.client(peer, forwarded) == client


def call(
    app: Any, path: str, host: str | None = "127.0.0.1:9321", **extra: str
) -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(),
        **({} if host is None else {"HTTP_HOST": host}),
        **extra,
    }
    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def test_a_foreign_host_is_misdirected_before_any_handler() -> None:
    asked: list[Request] = []
    routes = Routes()
    routes.add("/metrics", lambda r: asked.append(r) or Response.text(200, "ok"))
    app = wsgi_app(routes, Front.of("127.0.0.1:9321"))
    status, headers, _ = call(app, "/metrics", host="rebind.attacker.example:9321")
    assert status.startswith("421") and asked == []
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert call(app, "/metrics")[0].startswith("200") and len(asked) == 1


def test_every_answer_has_nosniff_and_a_csp_and_no_error_echoes_the_path() -> None:
    routes = Routes()
    routes.add(
        "/page", lambda r: Response(200, b"<p>", "text/html", {"Content-Security-Policy": "mine"})
    )
    app = wsgi_app(routes)
    status, headers, body = call(app, "/<script>alert(1)</script>")
    assert status.startswith("404") and b"script" not in body
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert call(app, "/page")[1]["Content-Security-Policy"] == "mine"


def test_an_http11_request_without_a_host_is_a_400_before_any_handler() -> None:
    asked: list[Request] = []
    routes = Routes()
    routes.add("/metrics", lambda r: asked.append(r) or Response.text(200, "ok"))
    app = wsgi_app(routes, Front.of("127.0.0.1:9321", ["*"]))
    status, headers, body = call(app, "/metrics", host=None, SERVER_PROTOCOL="HTTP/1.1")
    assert status.startswith("400") and asked == []
    assert json.loads(body) == {"error": "bad request: HTTP/1.1 needs a Host header"}
    assert headers["X-Content-Type-Options"] == "nosniff"
    # HTTP/1.0 has no Host to require; an empty Host is what RFC 9112 has a client send when
    # the target has no authority: judged as any name (here "*" answers every one).
    assert call(app, "/metrics", host=None, SERVER_PROTOCOL="HTTP/1.0")[0].startswith("200")
    assert call(app, "/metrics", host="", SERVER_PROTOCOL="HTTP/1.1")[0].startswith("200")
    assert len(asked) == 2


def failed_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str, int]]:
    """Each "http handler failed" line: its level, client and count of lines held back."""
    return [
        (r.levelno, r.__dict__[FIELDS]["client"], r.__dict__[FIELDS]["held_back"])
        for r in caplog.records
        if r.getMessage() == "http handler failed" and r.exc_info
    ]


def test_a_failing_handler_writes_one_error_line_per_client_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    routes = Routes()
    routes.add("/boom", lambda r: 1 // 0)  # type: ignore[arg-type,return-value]
    app = wsgi_app(routes, now=clock.monotonic)
    with caplog.at_level(logging.INFO, logger="guardian"):
        statuses = [call(app, "/boom")[0] for _ in range(100)]
        clock.tick(59)
        statuses.append(call(app, "/boom")[0])
        assert failed_lines(caplog) == [(logging.ERROR, "127.0.0.1", 0)]

        clock.tick(1)  # a minute since the first line: the next says what was held back
        call(app, "/boom")
        assert failed_lines(caplog)[1:] == [(logging.ERROR, "127.0.0.1", 100)]

        call(app, "/boom", REMOTE_ADDR="127.0.0.2")  # another client has a line of its own
        assert failed_lines(caplog)[2:] == [(logging.ERROR, "127.0.0.2", 0)]
    assert len(caplog.records) == 3
    assert {s[:3] for s in statuses} == {"500"} and len(statuses) == 101
