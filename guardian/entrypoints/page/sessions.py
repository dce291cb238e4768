"""Sign-in to the status page: the API token, posted once, buys a session cookie.

Sessions live in memory (a restart signs everyone out) and expire after `page.session_ttl`
on a monotonic clock. Wrong tokens go through the CredentialLimiter the API shares: a client
that keeps guessing gets 429, and the right token always signs in.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from guardian.entrypoints.credential_limiter import CredentialLimiter

COOKIE = "guardian_session"
MAX_SESSIONS = 1000  # beyond it the oldest session ends
MAX_NAME = 100


@dataclass
class Session:
    id: str
    name: str  # recorded as the actor of what this person does
    expires: float  # monotonic
    notice: str = ""  # the outcome of the last action, shown once
    notice_ok: bool = True


class SignInRefused(Exception):
    """A sign-in refused: str() is the message for the person; `retry_after` when limited."""

    def __init__(self, message: str, retry_after: int = 0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Sessions:
    """Who is signed in. `token` None: nobody can sign in.

    Safe from the HTTP threads without a lock: every step is one operation of an OrderedDict
    (get, item assignment, pop, popitem), each atomic in CPython, and no step reads a session
    and writes it back. A sign-in adds one session and, past MAX_SESSIONS, drops one, the
    oldest: each adds before it looks at the size, so two at once never drop more than they
    added."""

    def __init__(
        self,
        token: str | None,
        ttl: float,
        now: Callable[[], float] = time.monotonic,
        limiter: CredentialLimiter | None = None,
    ) -> None:
        self._token = token.encode() if token else None
        self.ttl = ttl
        self.now = now
        self.limiter = limiter or CredentialLimiter(now=now)
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # oldest first

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def sign_in(self, given: str, name: str, client: str) -> Session:
        """A new session for the right token; SignInRefused otherwise (counted)."""
        if self._token is None:
            raise SignInRefused("Signing in is off: no API token is configured.")
        right = hmac.compare_digest(given.strip().encode(), self._token)
        wait = self.limiter.attempt(client, right)
        if wait:
            raise SignInRefused(
                f"Too many wrong tokens; try again in {wait} seconds.", retry_after=wait
            )
        if not right:
            raise SignInRefused("That is not Guardian's API token. You are not signed in.")
        name = name.strip()[:MAX_NAME]
        if not name or any(ord(c) < 32 for c in name):
            name = "page"
        session = Session(secrets.token_urlsafe(32), name, self.now() + self.ttl)
        self._sessions[session.id] = session
        if len(self._sessions) > MAX_SESSIONS:
            with contextlib.suppress(KeyError):  # emptied meanwhile by sign-outs
                self._sessions.popitem(last=False)
        return session

    def get(self, cookie_header: str) -> Session | None:
        sid = session_id(cookie_header)
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None:
            return None
        if session.expires <= self.now():
            self._sessions.pop(sid, None)  # or another thread did
            return None
        return session

    def time_left(self, session_id: str) -> float:
        """Seconds the session has left: 0 once it was signed out, ended or expired. Asked
        before every write to a live stream, so a dict lookup and the clock, nothing more."""
        session = self._sessions.get(session_id)  # one atomic read: no lock to wait for
        return max(0.0, session.expires - self.now()) if session is not None else 0.0

    def sign_out(self, session: Session) -> None:
        self._sessions.pop(session.id, None)


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
