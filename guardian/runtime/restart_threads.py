"""Restart threads: each restart call, once decided and recorded, holds one until the engine has
stopped and started its container, which can take that container's whole stop timeout.

Daemon threads, so a stop never waits for a container's stop timeout: what is still running when
Guardian stops is left to the engine (concurrent.futures joins its workers at exit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime

from guardian.logs import kv
from guardian.ports import Metrics, StoreError
from guardian.runtime.wakeup import Wakeup

log = logging.getLogger("guardian.daemon")
Call = Callable[[], None]
MAX_RESTART_THREADS = 256


class RestartThreads:
    """Up to `limit` threads, started only when a call finds none idle; calls beyond wait in
    order. submit() after close() raises RuntimeError. The daemon's reactions to engine events
    run on threads of this kind too (`Daemon.react_soon`)."""

    def __init__(self, limit: int, name: str = "restart") -> None:
        self._limit = limit
        self._name = name
        self._queue: deque[Call] = deque()
        self._cond = threading.Condition()
        self._threads = 0
        self._idle = 0
        self._running = 0
        self._closed = False

    def submit(self, call: Call) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("restart threads closed: Guardian is stopping")
            self._queue.append(call)
            if self._idle == 0 and self._threads < self._limit:
                self._threads += 1
                threading.Thread(
                    target=self._work, name=f"{self._name}-{self._threads}", daemon=True
                ).start()
            else:
                self._cond.notify()

    def _work(self) -> None:
        while True:
            with self._cond:
                self._idle += 1
                while not self._queue and not self._closed:
                    self._cond.wait()
                self._idle -= 1
                if not self._queue:  # closed, nothing left
                    self._threads -= 1
                    self._cond.notify_all()
                    return
                call = self._queue.popleft()
                self._running += 1
            try:
                call()
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()

    def busy(self) -> int:
        """Calls running or waiting for a thread."""
        with self._cond:
            return self._running + len(self._queue)

    def close(self, wait: float, monotonic: Callable[[], float] = time.monotonic) -> int:
        """Refuse new calls, drop those not started, and wait up to `wait` seconds for the
        running ones; returns how many still run (left to the engine)."""
        deadline = monotonic() + wait
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
            while self._running:
                left = deadline - monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._running


# What a restart thread asks of the daemon's jobs: judge `container` (None: the container held
# back longest for a restart slot) again at `at` (None: now).
Ask = tuple[str | None, datetime | None]


class RestartRunner:
    """The RestartCalls and Rechecks ports of `guardian run`, built with the loop it serves.
    Until the daemon starts it (`start`), a call runs on the deciding thread and a recheck waits
    for a sweep, as in `guardian check`; then calls run on restart threads, and what each asks
    of the daemon's jobs (`asked`) wakes the daemon's main loop, which schedules it."""

    def __init__(self, metrics: Metrics, limit: int = MAX_RESTART_THREADS) -> None:
        # decide() keeps the calls within restart.max_concurrent (a reload may raise it: threads
        # start only when needed).
        self.threads = RestartThreads(limit)
        self._metrics = metrics
        self._lock = threading.Lock()
        self._asks: list[Ask] = []
        self._wakeup: Wakeup | None = None

    def start(self, wakeup: Wakeup) -> None:
        """From now on calls run on restart threads, and each ask wakes `wakeup`."""
        self._wakeup = wakeup

    def run(self, call: Call, slot_until: datetime | None) -> None:
        if self._wakeup is None:
            call()
            return
        self.threads.submit(lambda: self._call(call))
        if slot_until is not None:
            self._ask(None, slot_until)

    def recheck(self, container_id: str, at: datetime) -> None:
        if self._wakeup is not None:
            self._ask(container_id, at)

    def asked(self) -> list[Ask]:
        """What the calls asked since last time, oldest first."""
        with self._lock:
            asks, self._asks = self._asks, []
        return asks

    def close(self, wait: float) -> int:
        """Refuse new calls and wait up to `wait` seconds for the running ones: how many still
        run (left to the engine)."""
        return self.threads.close(wait)

    def _ask(self, container: str | None, at: datetime | None) -> None:
        with self._lock:
            self._asks.append((container, at))
        if self._wakeup is not None:
            self._wakeup.wake()

    def _call(self, call: Call) -> None:
        try:
            call()
        except StoreError as exc:
            self._metrics.store_failed()
            log.error(
                "store error; job abandoned until its next run", extra=kv(job="restart", reason=exc)
            )
        except Exception:
            log.exception("restart failed")
        finally:
            # A slot is free: the container held back longest for one need not wait for a sweep.
            self._ask(None, None)
