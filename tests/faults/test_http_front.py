"""Hostile HTTP against a running `guardian run`: smuggling after a 413, chunked bodies, bad
Content-Length, odd paths, a port that cannot be had. The right status, nothing executed
twice, and not one traceback in the log."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.faults.conftest import run_cli
from tests.faults.raw_http import exchange, request
from tests.integration.conftest import base_config

TOKEN = "front-door-token-0123456789abcdef"


def silence(container: str) -> bytes:
    doc = {"container": container, "for": "1h", "reason": "test", "by": "attacker"}
    return request(
        "POST",
        "/api/v1/silences",
        json.dumps(doc).encode(),
        Authorization=f"Bearer {TOKEN}",
        Content_Type="application/json",
    )


def silenced(url: str) -> list[str]:
    [reply], _ = exchange(url, request("GET", "/api/v1/silences", Connection="close"))
    return [s["container"] for s in reply.json()["silences"]]


def assert_clean_log(log: str) -> None:
    assert "Traceback" not in log
    assert all(line.startswith("ts=") for line in log.splitlines()[1:] if line.strip()), log


@pytest.fixture
def url(guardian) -> Any:
    # Reads open: these tests are about framing, not who may read (issue 17 covers that).
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, api={"public_reads": True})
    yield g.http_url
    assert_clean_log(g.log())


def test_the_rest_of_a_refused_body_is_never_read_as_a_request(url):
    head = request("POST", "/api/v1/silences", Content_Length="70000")
    replies, closed = exchange(url, head + silence("smuggled-cl"))
    assert [r.status for r in replies] == [413] and closed
    assert replies[0].json()["error"].startswith("Request Entity Too Large")

    chunked = request("POST", "/api/v1/silences", Transfer_Encoding="chunked")
    chunks = b"".join(b"%x\r\n%s\r\n" % (8192, b"x" * 8192) for _ in range(9))
    replies, closed = exchange(url, chunked + chunks + silence("smuggled-te"))
    assert [r.status for r in replies] == [413] and closed

    assert silenced(url) == []


def test_a_chunked_body_is_one_request_executed_once(url):
    body = json.dumps({"container": "chunky", "for": "1h", "reason": "test", "by": "me"}).encode()
    half = len(body) // 2
    chunked = request(
        "POST",
        "/api/v1/silences",
        Transfer_Encoding="chunked",
        Authorization=f"Bearer {TOKEN}",
        Content_Type="application/json",
    ) + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:])
    pipelined = chunked + request("GET", "/api/v1/silences")

    replies, _ = exchange(url, pipelined, quiet=2)

    assert [r.status for r in replies] == [201, 200]
    assert replies[0].json()["silence"]["container"] == "chunky"
    assert silenced(url) == ["chunky"]


@pytest.mark.parametrize(
    "length", ["abc", "-1", "1e3", "12, 13", "0x10", "99999999999999999999999"]
)
def test_a_bad_content_length_is_a_400_that_closes_the_connection(url, length):
    raw = request("POST", "/api/v1/silences", Content_Length=length) + silence("after-bad-cl")
    replies, closed = exchange(url, raw)
    assert [r.status for r in replies] in ([400], [413]) and closed
    assert "Content-Length" in replies[0].json()["error"] or replies[0].status == 413
    assert silenced(url) == []


def test_two_different_content_lengths_are_refused(url):
    raw = request("POST", "/api/v1/silences", Content_Length="5") + b"Content-Length: 6\r\n"
    replies, closed = exchange(url, raw.replace(b"\r\n\r\nContent", b"\r\nContent") + b"\r\n")
    assert [r.status for r in replies] == [400] and closed


@pytest.mark.parametrize(
    "framing",
    [
        ("Transfer-Encoding: chunked",),
        ("transfer-encoding: CHUNKED",),
        ("Transfer-Encoding: gzip, chunked",),
        ("Transfer-Encoding: identity",),
        ("Transfer-Encoding:", "Transfer-Encoding: chunked"),
    ],
)
@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_a_request_framed_by_both_length_and_chunks_is_a_400_that_closes_the_connection(
    url, framing, version
):
    """A proxy that frames by Content-Length would pass the chunk below as the body and the
    silence after it as a request of its own: it is never read here (RFC 9112 6.1)."""
    smuggled = silence("smuggled-cl-te")
    chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(smuggled), smuggled)
    head = [f"POST /api/v1/silences {version}", "Host: localhost", *framing]
    head.append(f"Content-Length: {len(chunk)}")
    raw = ("\r\n".join(head) + "\r\n\r\n").encode() + chunk + request("GET", "/healthz")
    replies, closed = exchange(url, raw)
    assert [r.status for r in replies] == [400] and closed, replies
    assert "not both" in replies[0].json()["error"]
    assert silenced(url) == []


ODD_PATHS = [
    ("/api/v1/incidents/%C2%B2", 404),  # a digit to str.isdigit(), not to int()
    ("/api/v1/incidents/%ff", 404),
    ("/api/v1/incidents/99999999999999999999999", 404),
    ("/api/v1/incidents/-1", 404),
    ("/api/v1/%00", 404),
    ("/api/v1/incidents?state=%ff", 400),
    ("/api/v1/incidents?" + "&".join(f"f{i}=1" for i in range(200)), 400),
    ("/api/v1/actions?since=forever", 400),
    ("/%2e%2e/%2e%2e/etc/passwd", 404),
    ("/healthz/../metrics", 404),
    ("/" + "a" * 4000, 404),
]


@pytest.mark.parametrize(("target", "status"), ODD_PATHS)
def test_odd_paths_get_a_json_error_never_a_500(url, target, status):
    [reply], _ = exchange(url, request("GET", target, Connection="close"))
    assert reply.status == status
    assert reply.headers["content-type"] == "application/json"
    if "f199=1" in target:
        assert reply.json()["error"] == "bad request: more than 50 query fields"
    assert reply.json()["error"]


def test_a_thousand_times_at_the_calendars_edge_are_400s_and_write_no_error_line(guardian):
    """Issue 64: each was a 500 and an error line, from anyone while reads are open."""
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, api={"public_reads": True})
    edges = ["0001-01-01T00:00:00%2B01:00", "9999-12-31T23:59:59-01:00"] * 500
    raw = b"".join(request("GET", f"/api/v1/events?since={t}") for t in edges)
    replies, _ = exchange(g.http_url, raw + request("GET", "/api/v1/events", Connection="close"))
    assert [r.status for r in replies] == [400] * 1000 + [200]
    assert all(r.json()["error"].startswith("since: ") for r in replies[:-1])
    assert g.lines("level=error") == []
    assert_clean_log(g.log())


def test_a_method_the_health_endpoints_do_not_take_is_a_405(url):
    [reply], _ = exchange(url, request("DELETE", "/healthz", Connection="close"))
    assert reply.status == 405 and reply.headers["allow"] == "GET, HEAD"
    assert reply.json()["error"]


@pytest.mark.parametrize("listen", ["in use", "192.0.2.1:9321", "no-such-host.invalid:9321"])
def test_an_address_that_cannot_be_had_is_one_line_naming_http_listen(
    listen, tmp_path: Path, exposure
):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if listen == "in use":
            listen = f"127.0.0.1:{taken.getsockname()[1]}"
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(base_config(tmp_path, http={"listen": listen})))

        result = run_cli(exposure, "run", "--config", str(config))

    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "level=debug" not in line]
    assert [line for line in lines if not line.startswith("ts=")] == [
        line for line in lines if f"http.listen {listen}: cannot listen: " in line
    ]
    assert len([line for line in lines if "http.listen" in line]) == 1
    assert "Traceback" not in result.stderr
