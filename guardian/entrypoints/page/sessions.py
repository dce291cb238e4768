"""Sign-in to the status page: the API token, posted once, buys a session cookie.

Sessions live in memory (a restart signs everyone out) and expire after `page.session_ttl`
on a monotonic clock. Wrong tokens are rate-limited per client address and overall, so the
token cannot be guessed at the port's speed.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

COOKIE = "guardian_session"
MAX_SESSIONS = 1000  # beyond it the oldest session ends
MAX_NAME = 100
FAILURE_WINDOW = 60.0  # seconds
FAILURES_PER_CLIENT = 5  # wrong tokens per window from one address
FAILURES_OVERALL = 20  # from every address together (a proxy makes them all one)
MAX_CLIENTS = 10_000  # addresses remembered; beyond it the overall limit still holds


@dataclass
class Session:
    id: str
    name: str  # recorded as the actor of what this person does
    expires: float  # monotonic
    notice: str = ""  # the outcome of the last action, shown once
    notice_ok: bool = True


@dataclass
class _Failures:
    overall: deque[float] = field(default_factory=deque)
    by_client: dict[str, deque[float]] = field(default_factory=dict)


class SignInRefused(Exception):
    """A sign-in refused: str() is the message for the person; `retry_after` when limited."""

    def __init__(self, message: str, retry_after: int = 0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Sessions:
    """Who is signed in. `token` None: nobody can sign in."""

    def __init__(
        self, token: str | None, ttl: float, now: Callable[[], float] = time.monotonic
    ) -> None:
        self._token = token.encode() if token else None
        self.ttl = ttl
        self.now = now
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._failures = _Failures()

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def sign_in(self, given: str, name: str, client: str) -> Session:
        """A new session for the right token; SignInRefused otherwise (counted)."""
        if self._token is None:
            raise SignInRefused("Signing in is off: no API token is configured.")
        now = self.now()
        with self._lock:
            wait = self._limited(client, now)
            if wait:
                raise SignInRefused(
                    f"Too many wrong tokens; try again in {wait} seconds.", retry_after=wait
                )
            if not hmac.compare_digest(given.strip().encode(), self._token):
                self._failed(client, now)
                raise SignInRefused("That is not Guardian's API token. You are not signed in.")
            name = name.strip()[:MAX_NAME]
            if not name or any(ord(c) < 32 for c in name):
                name = "page"
            session = Session(secrets.token_urlsafe(32), name, now + self.ttl)
            self._sessions[session.id] = session
            while len(self._sessions) > MAX_SESSIONS:
                del self._sessions[next(iter(self._sessions))]
            return session

    def get(self, cookie_header: str) -> Session | None:
        sid = session_id(cookie_header)
        if not sid:
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is None:
                return None
            if session.expires <= self.now():
                del self._sessions[sid]
                return None
            return session

    def time_left(self, session_id: str) -> float:
        """Seconds the session has left: 0 once it was signed out, ended or expired. Asked
        before every write to a live stream, so a dict lookup and the clock, nothing more."""
        session = self._sessions.get(session_id)  # one atomic read: no lock to wait for
        return max(0.0, session.expires - self.now()) if session is not None else 0.0

    def sign_out(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)

    # -- rate limit -------------------------------------------------------------------------

    def _limited(self, client: str, now: float) -> int:
        """Seconds to wait before this client may try again (0: now)."""
        f = self._failures
        horizon = now - FAILURE_WINDOW
        for times in (f.overall, f.by_client.get(client, deque())):
            while times and times[0] <= horizon:
                times.popleft()
        mine = f.by_client.get(client)
        if mine is not None and not mine:
            del f.by_client[client]
        limits = [(f.overall, FAILURES_OVERALL)]
        if mine:
            limits.append((mine, FAILURES_PER_CLIENT))
        for times, limit in limits:
            if len(times) >= limit:
                return max(1, int(times[0] - horizon + 0.999))
        return 0

    def _failed(self, client: str, now: float) -> None:
        f = self._failures
        f.overall.append(now)
        if client not in f.by_client and len(f.by_client) >= MAX_CLIENTS:
            return
        f.by_client.setdefault(client, deque()).append(now)


def session_id(cookie_header: str) -> str:
    """The session cookie's value in a Cookie header ("" when absent)."""
    for part in cookie_header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == COOKIE:
            return value.strip()[:100]
    return ""


def set_cookie(session: Session, ttl: int, secure: bool) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={session.id}; Path=/; Max-Age={ttl}; HttpOnly; SameSite=Strict{flags}"


def clear_cookie(secure: bool) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{flags}"
