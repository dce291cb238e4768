"""The status page's routes: the page at /, sign-in and sign-out, the operator actions, the live
stream (/events), its polling fallback (/parts) and the packaged assets (/static/).

Who may read: a signed-in session, or anyone with `api.public_reads: true` (then nothing a
container printed is shown). Every POST must come from the page itself: the session cookie is
SameSite=Strict and the Origin (or Referer) must be this host's. A token never travels in a URL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from importlib import resources
from urllib.parse import urlsplit

from markupsafe import Markup

from guardian.core.incidents import InvalidTransition
from guardian.entrypoints.http_server import Handler, Request, Response, Routes
from guardian.entrypoints.page.actions import VERBS, act, form
from guardian.entrypoints.page.feed import RETRY_AFTER, Feed
from guardian.entrypoints.page.render import Renderer
from guardian.entrypoints.page.sessions import (
    Session,
    Sessions,
    SignInRefused,
    clear_cookie,
    set_cookie,
)
from guardian.entrypoints.page.slots import StreamRefused, StreamSlots
from guardian.entrypoints.page.stream import Parts
from guardian.logs import kv
from guardian.readside.changes import Changes
from guardian.readside.page import PageData, PageReader
from guardian.service.operator import BadRequest, NotFound, Operator, Refused

log = logging.getLogger("guardian.page")

CSP = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
HTML = "text/html; charset=utf-8"
STATIC = {
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
}
READ_MAX_AGE = 5.0  # seconds a read serves while nothing changes (the clock moves on)


class StatusPage:
    """The page over the loop's reader, the operator actions, the sessions and the live feed."""

    def __init__(
        self,
        reader: PageReader,
        operator: Operator,
        sessions: Sessions,
        changes: Changes,
        *,
        public_reads: bool = False,
        max_streams: int = 8,
        streams_per_address: int | None = None,
        trust_forwarded_proto: bool = False,
    ) -> None:
        self.reader = reader
        self.op = operator
        self.sessions = sessions
        self.public_reads = public_reads
        self.trust_forwarded_proto = trust_forwarded_proto
        self.renderer = Renderer()
        # A quarter of the streams is kept for signed sessions while anyone may read.
        slots = StreamSlots.shared(
            max_streams, public_reads and sessions.enabled, streams_per_address
        )
        self.feed = Feed(changes, self._read_parts, slots, sessions.time_left)
        # By audience: (the version read at, when, what was read), replaced whole; read and
        # written under the feed's reading lock, as every read of the page (_data's callers).
        self._read_cache: dict[bool, tuple[int, float, PageData]] = {}
        self._static = {
            name: resources.files("guardian.entrypoints.page").joinpath("static", name).read_bytes()
            for name in STATIC
        }

    def mount(self, routes: Routes) -> None:
        routes.add("/", self._guarded(self.index))
        routes.add("/signin", self._guarded(self.signin))
        routes.add("/signout", self._guarded(self.signout))
        routes.add("/events", self._guarded(self.events))
        routes.add("/parts", self._guarded(self.parts))
        for verb in VERBS:
            routes.add(f"/actions/{verb}", self._guarded(self._action(verb)))
        routes.mount("/static", self._guarded(self.static))
        routes.on_stop.append(self.feed.close)

    # -- who is asking ----------------------------------------------------------------------

    def _secure(self, request: Request) -> bool:
        if not self.trust_forwarded_proto:
            return False
        return request.headers.get("x-forwarded-proto", "").strip().lower() == "https"

    def _same_origin(self, request: Request) -> bool:
        """A POST made by this page: its Origin (else its Referer) names this host and port.
        The server answered only a Host in http.allowed_hosts (http_front), so a rebound
        name never gets here; the port counts, as another local port's page is same-site."""
        host = request.headers.get("host", "")
        origin = request.headers.get("origin") or request.headers.get("referer") or ""
        if not host or not origin or origin == "null":
            return False
        parts = urlsplit(origin)
        return parts.netloc == host and parts.scheme in ("http", "https")

    def _session(self, request: Request) -> Session | None:
        return self.sessions.get(request.headers.get("cookie", ""))

    def _guarded(self, handler: Callable[[Request], Response]) -> Handler:
        def handle(request: Request) -> Response:
            response = handler(request)
            headers = {**SECURITY_HEADERS, **response.headers}
            if response.content_type.startswith(("text/html", "application/json")):
                headers.setdefault("Cache-Control", "no-store")
            return Response(
                response.status, response.body, response.content_type, headers, response.stream
            )

        return handle

    # -- pages ------------------------------------------------------------------------------

    def _html(
        self, status: int, name: str, headers: dict[str, str] | None = None, **ctx: object
    ) -> Response:
        return Response(status, self.renderer.page(name, **ctx), HTML, headers or {})

    def _signin_page(
        self, status: int = 200, notice: str = "", headers: dict[str, str] | None = None
    ) -> Response:
        return self._html(
            status,
            "signin.html",
            headers,
            enabled=self.sessions.enabled,
            notice=notice,
            notice_ok=not notice,
        )

    def index(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response.error(405, "method not allowed; use GET", {"Allow": "GET, HEAD"})
        session = self._session(request)
        if session is None and not self.public_reads:
            return self._signin_page()
        signed = session is not None
        with self.feed.reading:  # the reader reads for one caller at a time
            data = self._data(signed)
        notice, ok = "", True
        if session is not None and session.notice:
            notice, ok, session.notice = session.notice, session.notice_ok, ""
        return self._html(
            200,
            "page.html",
            d=data,
            signed=signed,
            session=session,
            signin=self.sessions.enabled,
            notice=notice,
            notice_ok=ok,
            event_id=self.feed.event_id(self.feed.changes.version, signed),
            p={
                k: Markup(v)
                for k, v in self.renderer.parts(data, signed).items()
                if k.startswith("part-")
            },
        )

    def signin(self, request: Request) -> Response:
        if request.method == "GET":
            if self._session(request) is not None:
                return Response(303, headers={"Location": "/"})
            return self._signin_page()
        if request.method != "POST":
            return Response.error(
                405, "method not allowed; use GET or POST", {"Allow": "GET, POST"}
            )
        if not self._same_origin(request):
            return self._signin_page(403, "Refused: a sign-in must come from this page.")
        fields = form(request.body)
        try:
            session = self.sessions.sign_in(
                fields.get("token", ""), fields.get("name", ""), request.client
            )
        except SignInRefused as exc:
            if exc.retry_after:  # the limiter's 429s are not logged one by one: a guesser's flood
                return self._signin_page(429, str(exc), {"Retry-After": str(exc.retry_after)})
            log.warning("page sign-in refused", extra=kv(client=request.client, reason=str(exc)))
            status = 403 if self.sessions.enabled else 404
            return self._signin_page(status, str(exc))
        log.info("page sign-in", extra=kv(client=request.client, name=session.name))
        ttl = int(self.sessions.ttl)
        cookie = set_cookie(session, ttl, self._secure(request))
        return Response(303, headers={"Location": "/", "Set-Cookie": cookie})

    def signout(self, request: Request) -> Response:
        if request.method != "POST":
            return Response.error(405, "method not allowed; use POST", {"Allow": "POST"})
        if not self._same_origin(request):
            return Response.error(403, "cross-site request refused")
        session = self._session(request)
        if session is not None:
            self.sessions.sign_out(session)
            ended = self.feed.end_session(session.id)  # before the answer: nothing after it
            log.info(
                "page sign-out",
                extra=kv(client=request.client, name=session.name, streams_ended=ended),
            )
        cookie = clear_cookie(self._secure(request))
        return Response(303, headers={"Location": "/", "Set-Cookie": cookie})

    # -- actions ----------------------------------------------------------------------------

    def _action(self, verb: str) -> Callable[[Request], Response]:
        def handle(request: Request) -> Response:
            if request.method != "POST":
                return Response.error(405, "method not allowed; use POST", {"Allow": "POST"})
            if not self._same_origin(request):
                return Response.error(403, "cross-site request refused")
            session = self._session(request)
            if session is None:
                return Response.error(401, "sign in on the status page first")
            try:
                session.notice = act(self.op, verb, form(request.body), session.name)
                session.notice_ok = True
            except (InvalidTransition, BadRequest, NotFound, Refused) as exc:
                session.notice, session.notice_ok = str(exc), False
            return Response(303, headers={"Location": "/"})

        return handle

    # -- live -------------------------------------------------------------------------------

    def _reader_of(self, request: Request) -> bool | None:
        """True: signed in; False: a public reader; None: may not read."""
        if self._session(request) is not None:
            return True
        return False if self.public_reads else None

    def _data(self, signed: bool) -> PageData:
        """What the page shows, read again only after a change (or READ_MAX_AGE, for what the
        clock alone moves): any number of reloads and streams cost one read per change, and
        that read reads what the change was about (PageReader). Under the feed's reading lock."""
        version = self.feed.changes.version
        cached = self._read_cache.get(signed)
        if cached is not None:
            at_version, read_at, data = cached
            if at_version == version and time.monotonic() - read_at < READ_MAX_AGE:
                return data
        data = self.reader.read(signed)
        self._read_cache[signed] = (version, time.monotonic(), data)
        return data

    def _read_parts(self, signed: bool) -> tuple[str, Parts]:
        data = self._data(signed)
        return str(data.summary["updated"]), self.renderer.parts(data, signed)

    def events(self, request: Request) -> Response:
        if request.method != "GET":
            return Response.error(405, "method not allowed; use GET", {"Allow": "GET"})
        session = self._session(request)
        if session is None and not self.public_reads:
            return Response.error(401, "sign in on the status page first")
        try:
            slot = self.feed.claim(session is not None, request.client)
        except StreamRefused as exc:
            return Response.error(
                503, f"{exc}; this page polls instead", {"Retry-After": str(RETRY_AFTER)}
            )
        last = request.headers.get("last-event-id", "")
        if not last:
            values = request.query.get("since")
            last = values[-1][:40] if values else ""
        return Response(
            200,
            content_type="text/event-stream; charset=utf-8",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            stream=self.feed.stream(slot, session.id if session is not None else None, last),
        )

    def parts(self, request: Request) -> Response:
        """The fallback when no stream can be had: every part, as the stream's first event."""
        if request.method != "GET":
            return Response.error(405, "method not allowed; use GET", {"Allow": "GET"})
        signed = self._reader_of(request)
        if signed is None:
            return Response.error(401, "sign in on the status page first")
        snap = self.feed.snapshot(signed)
        doc = {"id": self.feed.event_id(snap.version, signed), "updated": snap.updated}
        return Response.json(200, {**doc, "parts": snap.parts})

    def static(self, request: Request) -> Response:
        name = request.path.removeprefix("/static/")
        body = self._static.get(name)
        if body is None or request.method not in ("GET", "HEAD"):
            return Response.error(404, "no such path")
        return Response(200, body, STATIC[name], {"Cache-Control": "max-age=300"})
