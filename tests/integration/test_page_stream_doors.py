"""The status page's live streams against a real `guardian run` and a real container, as an
attacker would try them: a signed stream ends with its session (sign-out), and anonymous
readers (public reads) never take the streams kept for signed sessions, nor one address every
anonymous stream."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests

from tests.helpers import wait_until
from tests.integration.conftest import RUN_ID
from tests.live import LiveStream, sign_in

WATCH = {"label": f"gdt.{RUN_ID}.watch", "interval": "30s"}
OPT_IN = {"enable": None, "labels": {WATCH["label"]: "true"}}
TOKEN = "page-doors-token-0123456789abcdef0123"
MARKER = "STREAM-SAID-5e1c"


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


@pytest.fixture
def streams() -> Iterator[list[LiveStream]]:
    """The streams a test opens, closed at its end."""
    opened: list[LiveStream] = []
    yield opened
    for s in opened:
        s.close()


def test_sign_out_ends_an_open_signed_stream_and_nothing_follows(containers, guardian, streams):
    """Alice signs out while her page streams: her stream ends within seconds and carries
    nothing after, not even the health output of the incident that opens next, which Bob's
    stream shows; her cookie no longer opens a stream."""
    name = containers.run("doors-out", health_cmd=f"echo {MARKER}; test ! -f /run/sick", **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, watch=WATCH, restart={"dry_run": True})
    url = g.http_url
    at = address(url)
    alice, bob = (
        LiveStream(at, sign_in(url, TOKEN, "alice")),
        LiveStream(at, sign_in(url, TOKEN, "bob")),
    )
    streams += [alice, bob]
    alice.wait_events(1), bob.wait_events(1)

    r = requests.post(
        f"{url}/signout",
        headers={"Origin": url, "Cookie": alice.cookie},
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 303
    out = time.monotonic()
    assert alice.ended.wait(5), "the stream outlived its session"

    containers.make_unhealthy(name)
    wait_until(lambda: MARKER.encode() in bob.raw(), 30, message="the incident on Bob's stream")
    assert alice.raw(out) in (b"", b"0\r\n\r\n"), "the stream wrote after the sign-out"
    assert MARKER.encode() not in alice.raw() and alice.events() == 1
    again = LiveStream(at, alice.cookie)
    streams.append(again)
    assert again.status == 401


def test_anonymous_streams_filling_page_streams_leave_signed_ones_served(
    containers, guardian, streams
):
    """With public reads and the default 8 streams, anonymous readers from three addresses
    try to hold them all: one address gets 3, all together 6, the rest 503 with Retry-After;
    an operator's two signed pages are still served."""
    containers.run("doors-slots", **OPT_IN)
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, watch=WATCH, api={"public_reads": True})
    url = g.http_url
    at = address(url)

    def stream(source: str, cookie: str = "") -> LiveStream:
        s = LiveStream(at, cookie, source=source)
        streams.append(s)
        return s

    for _ in range(3):
        assert stream("127.0.0.2").status == 200
    one_address = stream("127.0.0.2")
    assert one_address.status == 503 and "retry-after:" in one_address.headers()
    for _ in range(3):
        assert stream("127.0.0.3").status == 200
    anonymous_full = stream("127.0.0.4")
    assert anonymous_full.status == 503 and "retry-after:" in anonymous_full.headers()

    cookie = sign_in(url, TOKEN, "operator")
    for source in ("127.0.0.4", "127.0.0.2"):
        signed = stream(source, cookie)
        assert signed.status == 200
        signed.wait_events(1)
    assert stream("127.0.0.5", cookie).status == 503  # every one of page.streams is open
