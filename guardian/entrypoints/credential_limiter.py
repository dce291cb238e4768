"""The one limiter of wrong credentials: the API's bearer token and the page's sign-in form.

Failures are counted per client (the address the server resolved, a trusted proxy's
X-Forwarded-For client included) over a sliding window on a monotonic clock. A client past its
own limit is answered 429 for its wrong tokens; while every client together is past the overall
limit, so is a client with any failure of its own. Neither limit refuses the right token, nor a
client with no failures of its own: a guesser cannot lock the operator out, even from behind
the same proxy. What makes guessing hopeless is the token's length (at least 32 characters);
the limit makes it loud, and tells an honest script to wait.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from guardian.logs import kv

log = logging.getLogger("guardian.http")

WINDOW = 60.0  # seconds a failure counts
PER_CLIENT = 10  # wrong credentials per window from one client before its 429s
OVERALL = 100  # from every client together: then a client's second failure is refused too
MAX_CLIENTS = 10_000  # clients remembered; a new one past it takes the quietest one's place


class CredentialLimiter:
    """Counts wrong credentials and says when to answer 429. Thread-safe."""

    def __init__(
        self,
        per_client: int = PER_CLIENT,
        overall: int = OVERALL,
        window: float = WINDOW,
        now: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.per_client = per_client
        self.overall = overall
        self.window = window
        self.now = now
        self.max_clients = max_clients
        self._lock = threading.Lock()
        # Only the newest failures matter: a full deque's oldest says when room comes back.
        self._overall: deque[float] = deque(maxlen=overall)
        # Ordered by each client's latest failure, so expired clients are dropped from the front.
        self._clients: OrderedDict[str, deque[float]] = OrderedDict()
        self._told: set[str] = set()  # clients refused since their failures last all expired

    def attempt(self, client: str, right: bool) -> int:
        """Record one credential check whose outcome (`right`, compared in constant time by the
        caller) is known. Returns 0 to answer as usual (pass the right token, refuse a wrong
        one with 403), else the seconds to put in the 429's Retry-After. A wrong credential
        is counted either way: a guesser that keeps going stays refused."""
        if right:
            return 0
        now = self.now()
        with self._lock:
            self._expire(now)
            mine = self._mine(client, now)
            wait = 0.0
            if mine and len(mine) >= self.per_client:
                wait = mine[0] + self.window - now
            elif mine and len(self._overall) >= self.overall:
                wait = self._overall[0] + self.window - now
            self._overall.append(now)
            if mine is None:
                mine = self._clients[client] = self._room(client)
            mine.append(now)
            self._clients.move_to_end(client)
            seconds = max(1, math.ceil(wait)) if wait > 0 else 0
            if seconds and client not in self._told and len(self._told) < self.max_clients:
                # One line per client and streak, not one per guess: a guesser's flood of
                # refusals never floods the log.
                self._told.add(client)
                log.warning(
                    "wrong credentials limited",
                    extra=kv(client=client, retry_after=seconds, overall=len(self._overall)),
                )
        return seconds

    def failures(self, client: str) -> int:
        """Wrong credentials from `client` within the window (at most `per_client`)."""
        now = self.now()
        with self._lock:
            self._expire(now)
            return len(self._mine(client, now) or ())

    def _expire(self, now: float) -> None:
        horizon = now - self.window
        while self._overall and self._overall[0] <= horizon:
            self._overall.popleft()
        while self._clients:
            client, times = next(iter(self._clients.items()))
            if times[-1] > horizon:
                break
            del self._clients[client]
            self._told.discard(client)

    def _room(self, client: str) -> deque[float]:
        """A count for a new `client`; a full table forgets the client quiet the longest.

        Eviction rather than one shared count for whoever finds the table full: every client
        keeps a count of its own (a shared one would let a flood of addresses set a newcomer's
        wait, or, were it never stored, let it guess for ever). The table is only full after
        `max_clients` failures within the window, far past the overall limit, so a forgotten
        client that comes back is refused from its second wrong token: forgetting costs it at
        most one 403, and a guesser that keeps going is never the one forgotten."""
        if len(self._clients) >= self.max_clients:
            quiet, _ = self._clients.popitem(last=False)
            self._told.discard(quiet)
        return deque(maxlen=self.per_client)

    def _mine(self, client: str, now: float) -> deque[float] | None:
        """`client`'s failures within the window (trimmed when asked: a listed client has
        its newest failure within it, and older ones that may not be)."""
        times = self._clients.get(client)
        horizon = now - self.window
        while times and times[0] <= horizon:
            times.popleft()
        return times
