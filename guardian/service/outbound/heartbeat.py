"""Heartbeat: tells a push monitor (healthchecks.io, Uptime Kuma) that Guardian is alive, so
someone hears when it is not: the monitor alerts when the pings stop.

After each sweep the daemon calls swept(): a sweep that reached the engine asks for a ping, one
that found it unreachable for a failure ping; at most one per interval (measured on the monotonic
clock), and at once when the news changes. Pings go out on the heartbeat's own thread, one at a
time, bounded by the transport's timeout: healing never waits on one. A ping that fails is
counted and not retried: the next one falls due an interval later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from guardian.core.outbound.delivery import Result, Status
from guardian.core.redaction import Redactor
from guardian.logs import kv
from guardian.ports import Metrics

log = logging.getLogger("guardian.heartbeat")


class Pinger(Protocol):
    def ping(self, up: bool) -> Result:
        """One ping (up: all is well; else the failure ping); never raises."""


class Heartbeat:
    def __init__(
        self,
        pinger: Pinger,
        interval: timedelta,
        metrics: Metrics,
        redact: Redactor | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        threaded: bool = True,
    ) -> None:
        self._pinger = pinger
        self._interval = interval.total_seconds()
        self._metrics = metrics
        self._redact = redact or Redactor()
        self._monotonic = monotonic
        self._threaded = threaded  # False: the caller sends with flush() (tests)
        # When the last ping was asked, and up? The sweep job's alone: it runs one at a time.
        self._last: tuple[float, bool] | None = None
        # The ping waiting for the thread, one at most: a newer one replaces it, never queues
        # behind it. No lock: a deque's append and popleft are thread-safe (the documented
        # guarantee), and each side does one.
        self._wanted: deque[bool] = deque(maxlen=1)
        self._woken = threading.Event()
        self._thread: threading.Thread | None = None
        metrics.heartbeat_pinged(True, None)
        metrics.heartbeat_pinged(False, None)

    def swept(self, engine_reached: bool) -> None:
        """A sweep ended: called by the sweep job, one call at a time (the scheduler runs one
        instance of it); returns at once."""
        now = self._monotonic()
        if self._last is not None:
            at, up = self._last
            if up == engine_reached and now - at < self._interval:
                return
        self._last = (now, engine_reached)
        self._wanted.append(engine_reached)  # a ping not yet sent is replaced, never queued up
        if self._threaded:
            self._start()
            self._woken.set()

    def flush(self) -> Result | None:
        """Send the ping asked for, if any (the thread's work; tests call it directly)."""
        try:
            up = self._wanted.popleft()
        except IndexError:
            return None
        try:
            result = self._pinger.ping(up)
        except Exception as exc:  # noqa: BLE001 - a pinger bug must not end the thread
            result = Result(Status.TRANSIENT, f"ping error: {type(exc).__name__}")
        self._metrics.heartbeat_pinged(up, result.ok)
        if not result.ok:
            fields = kv(ping="up" if up else "fail", reason=self._redact(result.reason))
            log.warning("heartbeat ping failed; not retried", extra=fields)
        return result

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            self._woken.wait()
            self._woken.clear()
            self.flush()
