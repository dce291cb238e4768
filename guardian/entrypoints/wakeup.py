"""The main loop's alarm: it sleeps in select() on a pipe that any thread, or a signal (through
signal.set_wakeup_fd), writes a byte to, with a timeout only when a timer is due."""

from __future__ import annotations

import contextlib
import os
import select
import threading


class Wakeup:
    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    @property
    def signal_fd(self) -> int:
        """For signal.set_wakeup_fd: a signal then ends the wait."""
        return self._write

    def wake(self) -> None:
        """End the current or next wait (any thread). A full pipe is already a wake-up."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._write, b"\0")

    def wait(self, timeout: float | None) -> None:
        """Sleep until woken, or `timeout` seconds (None: no timeout)."""
        readable, _, _ = select.select([self._read], [], [], timeout)
        if readable:
            with contextlib.suppress(BlockingIOError, OSError):
                while os.read(self._read, 512):
                    pass

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


class WakingEvent(threading.Event):
    """A threading.Event whose set() also wakes a Wakeup: `stopping`, set by any thread."""

    def __init__(self, wakeup: Wakeup) -> None:
        super().__init__()
        self._wakeup = wakeup

    def set(self) -> None:
        super().set()
        self._wakeup.wake()
