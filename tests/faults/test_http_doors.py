"""The doors of issue 40 that an untrusted party knocks on over HTTP, against a real
`guardian run`: a rebound Host name, a token guessed from one address, sign-in lock-outs from
many addresses, and the headers of every answer. Clients speak from other loopback addresses
(127.0.0.2, ...: all loopback on Linux) by binding their socket's source address."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.faults.raw_http import exchange, request
from tests.helpers import wait_until

TOKEN = "doors-" + "0123456789abcdef" * 3
MARKER = "nosuchthing-7f3a"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Client:
    """HTTP/1.1 from one source address, on one kept-alive connection."""

    def __init__(self, url: str, source: str = "127.0.0.1") -> None:
        host, _, port = url.removeprefix("http://").rpartition(":")
        self.host, self.port = host, int(port)
        self.conn = http.client.HTTPConnection(
            host, self.port, timeout=10, source_address=(source, 0)
        )

    def ask(
        self, method: str, path: str, body: bytes = b"", host: str | None = None, **headers: str
    ) -> Answer:
        sent = {"Host": host or f"{self.host}:{self.port}", **headers}
        self.conn.request(method, path, body=body or None, headers=sent)
        r = self.conn.getresponse()
        data = r.read()
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, data)

    def close(self) -> None:
        self.conn.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sign_in(client: Client, token: str) -> Answer:
    origin = f"http://{client.host}:{client.port}"
    body = urlencode({"token": token, "name": "op"}).encode()
    return client.ask(
        "POST",
        "/signin",
        body,
        Origin=origin,
        **{"Content-Type": "application/x-www-form-urlencoded"},
    )


@pytest.fixture
def running(guardian) -> Any:
    g = guardian(
        env={"GUARDIAN_API_TOKEN": TOKEN},
        http={"allowed_hosts": ["guardian.lan"], "trusted_proxies": ["127.0.0.9"]},
    )
    # /healthz answers 503 until the first sweep: a Host the port answers is then judged 200.
    wait_until(lambda: g.lines('msg="sweep done"'), 20, message="first sweep")
    yield g
    assert "Traceback" not in g.log()


@pytest.fixture
def url(running) -> str:
    return str(running.http_url)


PATHS = ["/metrics", "/healthz", "/readyz", "/api/v1/incidents", "/", "/static/page.js"]


def test_a_host_of_another_name_is_misdirected_on_every_path(url):
    c = Client(url)
    for path in PATHS:
        a = c.ask("GET", path, host="rebind.attacker.example:9321")
        assert a.status == 421, (path, a.status)
        assert b"guardian_" not in a.body and b"<html" not in a.body.lower()
        a = c.ask("GET", path, host="rebind.attacker.example", **bearer(TOKEN))
        assert a.status == 421, path
        # The names this Guardian is: localhost, an address, the name the operator listed.
        for host in ("localhost:9321", "127.0.0.1:80", "guardian.lan", "[::1]:9321"):
            assert c.ask("GET", path, host=host, **bearer(TOKEN)).status == 200, (path, host)
    c.close()


def test_an_http11_request_without_a_host_is_a_400_on_every_path(url):
    """RFC 9112 3.2: a server answers 400 to an HTTP/1.1 request that lacks Host; HTTP/1.0
    has none to send, and is answered as a request with an address for its Host."""
    for path in PATHS:
        raw = f"GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n".encode()
        [reply], _ = exchange(url, raw)
        assert reply.status == 400, (path, reply.status)
        assert reply.json() == {"error": "bad request: HTTP/1.1 needs a Host header"}
        assert reply.headers["x-content-type-options"] == "nosniff"
        [old], _ = exchange(url, f"GET {path} HTTP/1.0\r\n\r\n".encode())
        [hosted], _ = exchange(url, request("GET", path, Connection="close"))
        assert old.status == hosted.status != 400, (path, old.status, hosted.status)


def test_wrong_bearer_tokens_from_one_address_meet_429_and_the_right_token_still_passes(url):
    guesser = Client(url, "127.0.0.2")
    answers = [
        guesser.ask("GET", "/api/v1/incidents", **bearer(f"guess-{i:02}-{'x' * 30}"))
        for i in range(60)
    ]
    statuses = [a.status for a in answers]
    assert set(statuses) == {403, 429}, statuses
    limited = [a for a in answers if a.status == 429]
    assert len(limited) >= 40 and all(int(a.headers["retry-after"]) > 0 for a in limited)
    # Another address, and the guesser's own: the right token is never refused.
    other = Client(url, "127.0.0.3")
    assert other.ask("GET", "/api/v1/incidents", **bearer(TOKEN)).status == 200
    assert other.ask("GET", "/api/v1/incidents", **bearer("wrong-" + "y" * 30)).status == 403
    assert guesser.ask("GET", "/api/v1/incidents", **bearer(TOKEN)).status == 200
    guesser.close()
    other.close()


def test_after_10200_addresses_guess_once_a_new_guesser_meets_429_and_the_right_token_passes(
    running,
):
    # More clients than the limiter remembers (10,000), each from an address of its own in
    # 127.1.0.0/16, one wrong token each, well within the minute the limiter counts.
    url = running.http_url
    began = time.monotonic()
    for i in range(10_200):
        c = Client(url, f"127.1.{i // 256}.{i % 256}")
        assert c.ask("GET", "/api/v1/incidents", **bearer(f"flood-{i:05}-{'f' * 30}")).status == 403
        c.close()
    # Had the first guesses left the window, the table would not be full: nothing proved.
    assert time.monotonic() - began < 45, "the flood took longer than the limiter's minute"
    guesser = Client(url, "127.2.0.1")
    statuses = [
        guesser.ask("GET", "/api/v1/incidents", **bearer(f"guess-{n:02}-{'g' * 30}")).status
        for n in range(11)
    ]
    assert 429 in statuses, statuses
    wait_until(
        lambda: [
            line for line in running.lines("wrong credentials limited") if "127.2.0.1" in line
        ],
        5,
        message="the new guesser's limit logged",
    )
    assert Client(url, "127.2.0.2").ask("GET", "/api/v1/incidents", **bearer(TOKEN)).status == 200
    guesser.close()


def test_wrong_sign_ins_from_five_addresses_lock_nobody_out(url):
    for n in range(2, 7):
        c = Client(url, f"127.0.0.{n}")
        for _ in range(4):
            assert sign_in(c, "wrong-" + "z" * 30).status == 403
        c.close()
    # A fresh address is neither refused its first wrong token nor the right one.
    assert sign_in(Client(url, "127.0.0.8"), "wrong-" + "z" * 30).status == 403
    fresh = Client(url, "127.0.0.7")
    a = sign_in(fresh, TOKEN)
    assert a.status == 303 and "guardian_session=" in a.headers["set-cookie"]
    fresh.close()


def test_behind_a_trusted_proxy_each_forwarded_client_is_limited_on_its_own(url):
    proxy = Client(url, "127.0.0.9")
    guesses = [sign_in_via(proxy, "wrong-" + "p" * 30, "203.0.113.5").status for _ in range(15)]
    assert guesses[:10] == [403] * 10 and set(guesses[10:]) == {429}
    assert sign_in_via(proxy, TOKEN, "203.0.113.6").status == 303
    assert sign_in_via(proxy, "wrong-" + "q" * 30, "203.0.113.7").status == 403
    # The header is a claim from anyone else: a client not listed is limited by its address.
    liar = Client(url, "127.0.0.10")
    for _ in range(10):
        sign_in_via(liar, "wrong-" + "l" * 30, "198.51.100.1")
    assert sign_in_via(liar, "wrong-" + "l" * 30, "198.51.100.2").status == 429
    proxy.close()
    liar.close()


def sign_in_via(proxy: Client, token: str, client: str) -> Answer:
    origin = f"http://{proxy.host}:{proxy.port}"
    body = urlencode({"token": token}).encode()
    return proxy.ask(
        "POST",
        "/signin",
        body,
        Origin=origin,
        **{"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": client},
    )


def test_every_answer_has_nosniff_and_a_csp_and_errors_do_not_echo_the_path(url):
    c = Client(url)
    answers = {path: c.ask("GET", path) for path in PATHS}
    answers["404"] = c.ask("GET", f"/{MARKER}<script>")
    answers["api 404"] = c.ask("GET", f"/api/v1/{MARKER}", **bearer(TOKEN))
    answers["static 404"] = c.ask("GET", f"/static/{MARKER}")
    answers["421"] = c.ask("GET", "/metrics", host="rebind.attacker.example")
    answers["413"] = c.ask("POST", "/api/v1/silences", b"x" * 70_000, **bearer(TOKEN))
    c.close()
    for what, a in answers.items():
        assert a.headers.get("x-content-type-options") == "nosniff", what
        assert "default-src" in a.headers.get("content-security-policy", ""), what
        assert MARKER.encode() not in a.body, what
    for what in ("404", "api 404", "static 404", "421", "413"):
        assert json.loads(answers[what].body)["error"], what
    csp = answers["/metrics"].headers["content-security-policy"]
    assert csp.startswith("default-src 'none'")
    assert answers["/"].headers["content-security-policy"].startswith("default-src 'self'")
