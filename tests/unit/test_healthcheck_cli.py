"""`guardian healthcheck`: exit 0 when /healthz says 200, 1 otherwise, one line either way."""

from __future__ import annotations

import socket

import pytest

from guardian.entrypoints.cli import main
from guardian.entrypoints.cli.healthz import healthz_url
from guardian.entrypoints.http_server import HttpServer, Routes, check_handler


@pytest.fixture
def serve():
    servers: list[HttpServer] = []

    def start(healthy: bool, why: str, listen: str = "127.0.0.1:0") -> int:
        routes = Routes()
        routes.add("/healthz", check_handler(lambda: (healthy, why)))
        server = HttpServer(listen, routes)
        server.start()
        servers.append(server)
        return server.address[1]

    yield start
    for s in servers:
        s.stop()


def test_exits_0_when_healthz_is_ok(serve, monkeypatch, capsys):
    port = serve(True, "ok: last sweep 1.0s ago")
    monkeypatch.setenv("GUARDIAN_HTTP_LISTEN", f"127.0.0.1:{port}")

    assert main(["healthcheck"]) == 0
    assert "ok: last sweep" in capsys.readouterr().out


def test_exits_1_with_the_reason_when_healthz_fails(serve, monkeypatch, capsys):
    port = serve(False, "last sweep completed 95s ago (limit 30s)")
    monkeypatch.setenv("GUARDIAN_HTTP_LISTEN", f"0.0.0.0:{port}")  # reached on 127.0.0.1

    assert main(["healthcheck"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 503" in err and "last sweep completed 95s ago" in err


def test_exits_1_when_nothing_listens(monkeypatch, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed
    monkeypatch.setenv("GUARDIAN_HTTP_LISTEN", f"127.0.0.1:{port}")

    assert main(["healthcheck", "--timeout", "2"]) == 1
    assert capsys.readouterr().err.startswith(f"guardian: cannot reach http://127.0.0.1:{port}")


def test_a_bad_config_is_unhealthy_not_docker_reserved_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("GUARDIAN_HTTP_LISTEN", "nowhere")
    assert main(["healthcheck"]) == 1
    assert "config error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("listen", "url"),
    [
        ("0.0.0.0:9321", "http://127.0.0.1:9321/healthz"),
        ("127.0.0.1:9321", "http://127.0.0.1:9321/healthz"),
        ("[::]:9321", "http://[::1]:9321/healthz"),
        ("::1:9321", "http://[::1]:9321/healthz"),
        ("guardian.local:80", "http://guardian.local:80/healthz"),
    ],
)
def test_healthz_url_from_http_listen(listen, url):
    assert healthz_url(listen) == url
