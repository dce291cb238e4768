"""Restart threads: each restart call, once decided and recorded, holds one until the engine has
stopped and started its container, which can take that container's whole stop timeout.

Daemon threads, so a stop never waits for a container's stop timeout: what is still running when
Guardian stops is left to the engine (concurrent.futures joins its workers at exit).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

Call = Callable[[], None]


class RestartThreads:
    """Up to `limit` threads, started only when a call finds none idle; calls beyond wait in
    order. submit() after close() raises RuntimeError."""

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
