"""The main loop's alarm: it sleeps in poll() on a pipe that any thread, or a signal (through
signal.set_wakeup_fd), writes a byte to, with a timeout only when a timer is due. poll(), not
select(): a Guardian holding many connections gets a pipe past descriptor 1023, which select()
refuses."""

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
        self._poll = select.poll()
        self._poll.register(self._read, select.POLLIN)

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
        readable = self._poll.poll(None if timeout is None else max(0.0, timeout) * 1000)
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
