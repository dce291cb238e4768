"""The status page without a socket or browser: hostile names escaped, sign-in and its limits,
cross-site refusals, the actions through the operator service, the stream's cap and diffs."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from guardian.core import incidents
from guardian.core.model import HealthCheckResult, IncidentState, ProblemType
from guardian.entrypoints.credential_limiter import PER_CLIENT
from guardian.entrypoints.http_server import Request, Response, Routes
from guardian.entrypoints.page.feed import delta
from guardian.entrypoints.page.handler import StatusPage
from guardian.entrypoints.page.sessions import COOKIE, MAX_SESSIONS, Session, Sessions
from guardian.readside.page import PageReader
from tests.app import TestApp, make_app
from tests.helpers import wait_until

TOKEN = "page-token-0123456789"
HOST = "host"
ORIGIN = "http://guardian.test:9321"
SAME = {"host": "guardian.test:9321", "origin": ORIGIN}
HOSTILE = 'evil<script>alert(1)</script>"'


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def g(tmp_path: Path) -> TestApp:
    return make_app(tmp_path, host=HOST)


def page_of(
    g: TestApp,
    *,
    public: bool = False,
    streams: int = 2,
    now: Clock | None = None,
    token: str | None = TOKEN,
):
    sessions = Sessions(token, 3600, now or Clock())
    page = StatusPage(
        PageReader(g.healer, g.app.operator, g.app.changes),
        g.app.operator,
        sessions,
        g.app.changes,
        public_reads=public,
        max_streams=streams,
    )
    routes = Routes()
    page.mount(routes)
    return page, routes


def get(
    routes: Routes, path: str, cookie: str = "", client: str = "10.0.0.1", **headers: str
) -> Response:
    h = {"host": SAME["host"], **headers}
    if cookie:
        h["cookie"] = cookie
    return routes.dispatch(Request("GET", path, {}, h, b"", client))


def post(
    routes: Routes,
    path: str,
    form: dict[str, str],
    cookie: str = "",
    client: str = "10.0.0.1",
    **headers: str,
) -> Response:
    h = {**SAME, "content-type": "application/x-www-form-urlencoded", **headers}
    if cookie:
        h["cookie"] = cookie
    return routes.dispatch(Request("POST", path, {}, h, urlencode(form).encode(), client))


def sign_in(routes: Routes) -> str:
    r = post(routes, "/signin", {"token": TOKEN, "name": "alice"})
    assert r.status == 303, r.body
    return r.headers["Set-Cookie"].split(";")[0]


def open_incident(g: TestApp, container: str, detail: str = "probe failed") -> int:
    now = g.clock.now()
    result = HealthCheckResult("id", container, now, ProblemType.UNHEALTHY, detail)
    saved = g.store.save_incident(incidents.record_detection(None, HOST, result, now))
    return saved.id or 0


def html(r: Response) -> str:
    return r.body.decode()


class Served:
    """A live stream served as the HTTP server serves it: iterated on a thread of its own
    (its first events), the rest written through the writer it was given (WSGI's write)."""

    def __init__(self, r: Response) -> None:
        assert r.status == 200 and r.stream is not None
        self.stream: Any = r.stream
        self.got: queue.Queue[bytes | None] = queue.Queue()
        self.stream.attach(self.got.put, None)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        for chunk in self.stream:
            self.got.put(chunk)
        self.stream.close()
        self.got.put(None)  # the body ended

    def next(self) -> bytes:
        chunk = self.got.get(timeout=5)
        assert chunk is not None, "the stream ended"
        return chunk

    def event(self) -> dict[str, Any]:
        """The next change event's document."""
        return json.loads(self.next().split(b"data: ", 1)[1])  # type: ignore[no-any-return]

    def rest(self) -> list[bytes]:
        """What it writes until its body ends."""
        out: list[bytes] = []
        while (chunk := self.got.get(timeout=5)) is not None:
            out.append(chunk)
        return out


def test_hostile_container_names_and_output_are_text_not_markup(g: TestApp) -> None:
    g.engine.add(HOSTILE, health="unhealthy", labels={"guardian.enable": "true"})
    open_incident(g, HOSTILE, detail="<img src=x onerror=alert(1)>")
    _, routes = page_of(g)
    body = html(get(routes, "/", sign_in(routes)))
    assert "<script>alert(1)" not in body and "<img src=x" not in body
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body


def test_signed_out_page_is_a_sign_in_form_that_names_nothing(g: TestApp) -> None:
    g.engine.add("secret-db", labels={"guardian.enable": "true"})
    _, routes = page_of(g)
    r = get(routes, "/")
    assert r.status == 200 and 'type="password"' in html(r)
    assert "secret-db" not in html(r) and HOST not in html(r)
    for path in ("/events", "/parts"):
        assert get(routes, path).status == 401


def test_every_page_response_carries_the_strict_headers(g: TestApp) -> None:
    _, routes = page_of(g)
    for r in (get(routes, "/"), get(routes, "/static/page.css"), get(routes, "/events")):
        csp = r.headers["Content-Security-Policy"]
        assert csp.startswith("default-src 'self'; frame-ancestors 'none'")
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert get(routes, "/static/../handler.py").status == 404


def test_a_wrong_token_gives_no_session_and_is_rate_limited(g: TestApp) -> None:
    _, routes = page_of(g)
    for _ in range(PER_CLIENT):
        r = post(routes, "/signin", {"token": "guess"})
        assert r.status == 403 and "Set-Cookie" not in r.headers
        assert "not Guardian&#39;s API token" in html(r)
    r = post(routes, "/signin", {"token": "guess"})
    assert r.status == 429 and int(r.headers["Retry-After"]) > 0
    assert "Set-Cookie" not in r.headers
    # The limit slows guessing; it never refuses the right token, from there or elsewhere.
    assert post(routes, "/signin", {"token": TOKEN}).status == 303
    assert post(routes, "/signin", {"token": TOKEN}, client="10.0.0.2").status == 303


def test_the_session_cookie_is_httponly_strict_expiring_and_secure_only_behind_tls(
    g: TestApp,
) -> None:
    now = Clock()
    _, routes = page_of(g, now=now)
    r = post(routes, "/signin", {"token": TOKEN}, **{"x-forwarded-proto": "https"})
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=3600" in cookie
    assert "Secure" not in cookie  # the forwarded header is not trusted unless configured
    session = cookie.split(";")[0]
    assert get(routes, "/", session).status == 200 and "Sign out" in html(get(routes, "/", session))
    now.t += 3601
    assert 'type="password"' in html(get(routes, "/", session))


def test_past_max_sessions_the_oldest_end_even_when_people_sign_in_at_once() -> None:
    sessions = Sessions(TOKEN, 3600, Clock())
    first = [sessions.sign_in(TOKEN, "early", "10.0.0.1") for _ in range(MAX_SESSIONS)]
    later: list[Session] = []

    def sign_in_50() -> None:
        later.extend(sessions.sign_in(TOKEN, "late", "10.0.0.2") for _ in range(50))

    threads = [threading.Thread(target=sign_in_50) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def live(session: Session) -> bool:
        return sessions.get(f"{COOKIE}={session.id}") is not None

    assert all(live(s) for s in later)  # every one of the 400 new sessions
    # as many early ones ended as were signed in past the cap, no more: the oldest
    assert [live(s) for s in first] == [False] * 400 + [True] * (MAX_SESSIONS - 400)


def test_a_trusted_proxy_makes_the_cookie_secure(g: TestApp) -> None:
    page, routes = page_of(g)
    page.trust_forwarded_proto = True
    r = post(routes, "/signin", {"token": TOKEN}, **{"x-forwarded-proto": "https"})
    assert "; Secure" in r.headers["Set-Cookie"]


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.test"},
        {"origin": "null"},
        {"origin": "", "referer": "http://evil.test/page"},
        {"origin": "", "referer": ""},
    ],
)
def test_cross_site_posts_are_refused(g: TestApp, headers: dict[str, str]) -> None:
    incident = open_incident(g, "app")
    _, routes = page_of(g)
    cookie = sign_in(routes)
    r = post(routes, "/actions/ack", {"incident": str(incident)}, cookie, **headers)
    assert r.status == 403
    assert g.store.get_incident(incident).state is IncidentState.ACTIVE  # type: ignore[union-attr]
    assert post(routes, "/signin", {"token": TOKEN}, **headers).status == 403


def test_actions_go_through_the_operator_and_refusals_show_its_message(g: TestApp) -> None:
    incident = open_incident(g, "app")
    _, routes = page_of(g)
    cookie = sign_in(routes)
    assert post(routes, "/actions/ack", {"incident": str(incident)}, cookie).status == 303
    shown = g.store.get_incident(incident)
    assert shown is not None and shown.state is IncidentState.ACKNOWLEDGED
    assert f"Incident #{incident} acknowledged." in html(get(routes, "/", cookie))
    # Acknowledging twice: the state machine's own words.
    post(routes, "/actions/ack", {"incident": str(incident)}, cookie)
    body = html(get(routes, "/", cookie))
    assert 'role="alert"' in body and f"incident {incident}" in body
    post(routes, "/actions/resolve", {"incident": str(incident), "reason": ""}, cookie)
    assert "a reason is required" in html(get(routes, "/", cookie))
    r = post(
        routes, "/actions/silence", {"container": "app", "for": "2h", "reason": "deploy"}, cookie
    )
    assert r.status == 303
    [silence] = g.store.silences(HOST, g.clock.now())
    assert silence.container == "app" and silence.created_by == "alice"
    post(routes, "/actions/silence", {"container": "app", "for": "90d", "reason": "x"}, cookie)
    assert "at most 30d" in html(get(routes, "/", cookie))
    post(routes, "/actions/unsilence", {"container": "app"}, cookie)
    assert g.store.silences(HOST, g.clock.now()) == []
    assert post(routes, "/actions/ack", {"incident": str(incident)}).status == 401


def test_public_reads_show_the_page_without_what_containers_printed(g: TestApp) -> None:
    g.engine.add("web", health="unhealthy", labels={"guardian.enable": "true"})
    open_incident(g, "web", detail="SECRET-HEALTH-OUTPUT")
    _, routes = page_of(g, public=True)
    body = html(get(routes, "/"))
    assert 'data-container="web"' in body and "SECRET-HEALTH-OUTPUT" not in body
    assert "/actions/ack" not in body
    parts = json.loads(get(routes, "/parts").body)["parts"]
    assert "SECRET-HEALTH-OUTPUT" not in json.dumps(parts)


def test_rows_carry_the_machine_contract(g: TestApp) -> None:
    g.engine.add("web", health="unhealthy", labels={"guardian.enable": "true"})
    g.engine.add("db", health="healthy", labels={"guardian.enable": "true"})
    incident = open_incident(g, "web")
    _, routes = page_of(g)
    body = html(get(routes, "/", sign_in(routes)))
    assert f'data-container="web" data-state="unhealthy" data-incident="{incident}"' in body
    assert 'data-container="db" data-state="healthy" data-incident=""' in body


def test_streams_beyond_their_share_are_refused_with_retry_after(g: TestApp) -> None:
    """Two streams and public reads: one for anyone, one kept for a signed session."""
    page, routes = page_of(g, public=True, streams=2)
    first = get(routes, "/events")
    assert first.status == 200
    anonymous = get(routes, "/events", client="10.0.0.2")
    assert anonymous.status == 503 and int(anonymous.headers["Retry-After"]) > 0
    assert b"kept for signed sessions" in anonymous.body
    cookie = sign_in(routes)
    assert get(routes, "/events", cookie).status == 200
    full = get(routes, "/events", cookie)
    assert full.status == 503 and b"(page.streams)" in full.body
    assert first.stream is not None
    first.stream.close()  # type: ignore[attr-defined]
    assert get(routes, "/events").status == 200
    page.feed.close()
    assert get(routes, "/events", cookie).status == 503


def test_sign_out_ends_the_sessions_streams_before_it_is_answered(g: TestApp) -> None:
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    page, routes = page_of(g, streams=3)
    alice, bob = sign_in(routes), sign_in(routes)
    mine, theirs = Served(get(routes, "/events", alice)), Served(get(routes, "/events", bob))
    for stream in (mine, theirs):
        stream.next(), stream.next()  # retry:, then every part
    wait_until(lambda: page.feed.joined == 2, 5)
    assert post(routes, "/signout", {}, alice).status == 303
    assert mine.stream.ended  # at once, not at its next write
    g.engine.set("web", health="unhealthy")
    g.app.changes.changed(["web"])
    assert "row:web" in theirs.event()["parts"]
    assert mine.rest() == []  # the body ends with nothing more
    assert page.feed.open == 1
    assert get(routes, "/events", alice).status == 401
    page.feed.close()


def test_a_signed_stream_writes_nothing_once_its_session_expired(g: TestApp) -> None:
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    clock = Clock()
    page, routes = page_of(g, now=clock)
    stream = Served(get(routes, "/events", sign_in(routes)))
    stream.next(), stream.next()  # retry:, then every part
    wait_until(lambda: page.feed.joined == 1, 5)
    clock.t += 3600  # the session's ttl
    g.engine.set("web", health="unhealthy")
    g.app.changes.changed(["web"])
    assert stream.rest() == []  # the change is not written: the stream ends instead
    assert page.feed.open == 0
    page.feed.close()


def test_a_stream_sends_the_parts_then_only_what_changed_and_ends_on_stop(g: TestApp) -> None:
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    g.engine.add("db", health="healthy", labels={"guardian.enable": "true"})
    page, routes = page_of(g, public=True)
    page.feed.keepalive = 0.01
    stream = Served(get(routes, "/events"))
    assert stream.next().startswith(b"retry:")
    first = stream.next().decode()
    assert "event: parts" in first and "row:web" in first and "row:db" in first
    assert stream.next() == b": keep-alive\n\n"  # nothing happened
    g.engine.set("web", health="unhealthy")
    g.app.changes.changed()
    while (event := stream.next()) == b": keep-alive\n\n":
        pass
    doc = json.loads(event.split(b"data: ", 1)[1])
    assert "row:web" in doc["parts"] and "row:db" not in doc["parts"]
    page.feed.close()
    assert set(stream.rest()) <= {b": keep-alive\n\n"}  # and the body ends


def test_a_reconnect_with_the_current_event_id_resends_nothing(g: TestApp) -> None:
    page, routes = page_of(g, public=True)
    page.feed.keepalive = 0.01
    snap = page.feed.snapshot(False)
    r = get(routes, "/events", **{"last-event-id": page.feed.event_id(snap.version, False)})
    stream = Served(r)
    stream.next()
    assert stream.next() == b": keep-alive\n\n"
    page.feed.close()


def test_a_page_signed_out_meanwhile_reconnects_to_every_part_of_its_audience(
    g: TestApp,
) -> None:
    """The page had the signed parts of the present; it reconnects signed out (public reads):
    its id is not the anonymous one, so every part comes again, without container output."""
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    page, routes = page_of(g, public=True)
    version = page.feed.snapshot(True).version
    r = get(routes, "/events", **{"last-event-id": page.feed.event_id(version, True)})
    stream = Served(r)
    assert stream.next().startswith(b"retry:")
    event = stream.next()
    assert event.startswith(f"id: {page.feed.event_id(version, False)}\n".encode())
    assert b"row:web" in event
    page.feed.close()


def test_delta_sends_changed_rows_or_the_whole_body_when_the_set_changes() -> None:
    base = {"order": "a\nb", "part-rows": "AB", "row:a": "A", "row:b": "B", "part-meta": "m"}
    assert delta(base, {**base, "row:a": "A2"}) == {"row:a": "A2"}
    grown = {**base, "order": "a\nb\nc", "part-rows": "ABC", "row:c": "C"}
    assert delta(base, grown) == {"part-rows": "ABC"}
    assert delta(base, base) == {}


def test_an_incident_awaiting_approval_is_approved_from_the_page_once(tmp_path: Path) -> None:
    g = make_app(tmp_path, host=HOST, restart={"action": "ask", "cooldown": "2s"})
    g.engine.add("db", health="unhealthy")
    g.healer.sweep()
    [incident] = g.store.open_incidents(HOST, "db")
    _, routes = page_of(g)
    cookie = sign_in(routes)
    body = html(get(routes, "/", cookie))
    assert f"Approve one restart of #{incident.id}" in body and "/actions/deny" in body
    r = post(routes, "/actions/approve", {"incident": str(incident.id)}, cookie)
    assert r.status == 303
    assert f"Incident #{incident.id}: one restart approved." in html(get(routes, "/", cookie))
    [approval] = g.store.approvals(incident.id or 0)
    assert approval.approved and approval.by == "alice"
    # Approved, not used yet: the button is gone, and a second approval is the CLI's refusal.
    assert "/actions/approve" not in html(get(routes, "/", cookie))
    post(routes, "/actions/approve", {"incident": str(incident.id)}, cookie)
    assert "already approved by alice" in html(get(routes, "/", cookie))
    g.healer.sweep()
    assert g.engine.restarts == [g.engine.id_of("db")]  # through decide(), once


def test_a_change_and_what_follows_it_at_once_reach_the_page_as_one_event(g: TestApp) -> None:
    """An engine event, then what Guardian writes about it: the stream lets them settle and
    reads once (the page still updates well within a second)."""
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    g.engine.add("db", health="healthy", labels={"guardian.enable": "true"})
    page, routes = page_of(g, public=True)
    page.feed.settle = 0.5
    stream = Served(get(routes, "/events"))
    stream.next(), stream.next()  # retry:, then every part
    wait_until(lambda: page.feed.joined == 1, 5)

    def burst() -> None:
        g.engine.set("web", health="unhealthy")
        g.app.changes.changed(["web"])
        threading.Event().wait(0.05)  # well within the stream's settling
        g.engine.set("db", health="unhealthy")
        g.app.changes.changed(["db"])

    fellow = threading.Thread(target=burst)
    fellow.start()
    doc = stream.event()
    fellow.join()
    assert "row:web" in doc["parts"] and "row:db" in doc["parts"]
    page.feed.close()


def test_one_thread_settles_a_change_for_every_open_page(g: TestApp) -> None:
    """Eight pages open: one thread (the feed's pump) waits on Changes and lets the burst
    settle, and every page gets the whole burst as one event."""
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    g.engine.add("db", health="healthy", labels={"guardian.enable": "true"})
    page, routes = page_of(g, public=True, streams=8, token=None)  # all eight for anyone
    page.feed.settle = 0.2
    settles: list[float] = []
    real_settle = g.app.changes.settle
    g.app.changes.settle = lambda quiet, rounds: (  # type: ignore[method-assign]
        settles.append(quiet) or real_settle(quiet, rounds)
    )
    streams = [Served(get(routes, "/events")) for _ in range(8)]
    for stream in streams:
        stream.next(), stream.next()  # retry:, then every part
    wait_until(lambda: page.feed.joined == 8, 5)  # each past its first event
    g.engine.set("web", health="unhealthy")
    g.app.changes.changed(["web"])
    g.engine.set("db", health="unhealthy")
    g.app.changes.changed(["db"])
    got = [stream.event() for stream in streams]
    assert len(got) == 8
    assert all("row:web" in doc["parts"] and "row:db" in doc["parts"] for doc in got)
    assert len(settles) == 1
    page.feed.close()


def test_settling_ends_when_nothing_more_comes_or_guardian_stops() -> None:
    from guardian.readside.changes import Changes

    now, waits = [0.0], []
    changes = Changes(monotonic=lambda: now[0])

    def wait(seconds: float, fellow: bool = False) -> bool:  # a wait on the fake clock
        waits.append(seconds)
        now[0] += seconds
        if fellow:
            changes.changed(["db"])
        return False

    changes._closed.wait = wait  # type: ignore[method-assign]  # noqa: SLF001
    changes.changed(["web"])
    now[0] = 0.004  # within a wait of 0.01 s: one wait lets fellows come
    assert changes.settle(0.01, 4) == 1 and waits == [0.01]  # then quiet: settled
    waits.clear()
    changes._closed.wait = lambda s: wait(s, fellow=True)  # type: ignore[method-assign]  # noqa: SLF001
    changes.changed(["web"])
    assert changes.settle(0.01, 4) == 6 and waits == [0.01] * 4  # fellows keep coming
    now[0] += 1.0  # the latest change a whole wait old already: no wait at all
    waits.clear()
    assert changes.settle(0.01, 4) == 6 and waits == []
    changes = Changes()
    changes.changed(["web"])
    changes.close()
    assert changes.settle(60.0, 4) == 1  # closed: at once


def test_the_parts_drawn_from_values_change_with_them_alone(tmp_path: Path) -> None:
    """Guardian's uptime and the summary's counts: the same HTML while they stay, the new one
    once they move."""
    from guardian.entrypoints.page.render import Renderer

    g = make_app(tmp_path)
    g.engine.add("web", health="healthy")
    seconds = [0.0]
    reader = PageReader(g.healer, g.app.operator, g.app.changes, monotonic=lambda: seconds[0])
    renderer = Renderer()
    first = renderer.parts(reader.read(True), True)
    g.app.changes.changed(["web"])
    again = renderer.parts(reader.read(True), True)
    assert again["part-meta"] is first["part-meta"]
    assert again["part-summary"] is first["part-summary"]
    seconds[0] = 150.0
    g.engine.set("web", health="unhealthy")
    g.app.changes.changed(["web"])
    moved = renderer.parts(reader.read(True), True)
    assert "up 0m" in first["part-meta"] and "up 2m" in moved["part-meta"]
    assert "<strong>0</strong> unhealthy" in first["part-summary"]
    assert "<strong>1</strong> unhealthy" in moved["part-summary"]
