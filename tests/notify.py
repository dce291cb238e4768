"""Stand-ins for systemd's notification socket: a real one that records every sd_notify datagram
it receives, and a supervisor that records what it would send, on a clock the test steps."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

from guardian.adapters.systemd import SystemdSupervisor
from tests.helpers import wait_until


class NotifySocket:
    """Binds a Unix datagram socket (a path, or an abstract name when `path` is None).

    `address` is what goes into NOTIFY_SOCKET. `received` holds (monotonic time, fields) per
    datagram, fields being the `KEY=value` lines.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if path is None:
            name = f"guardian-test-{uuid.uuid4().hex[:12]}"
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.sock.bind(str(path))
            self.address = str(path)
        self.received: list[tuple[float, list[str]]] = []
        self._thread = threading.Thread(target=self._read, daemon=True, name="notify-socket")
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = self.sock.recv(4096)
                self.received.append((time.monotonic(), data.decode().split("\n")))

    def times(self, field: str) -> list[float]:
        """When each datagram carrying `field` (e.g. "READY=1") arrived."""
        return [t for t, fields in list(self.received) if field in fields]

    def values(self, key: str) -> list[str]:
        """Every value sent for `key` (e.g. "STATUS"), in order."""
        prefix = key + "="
        return [
            f[len(prefix) :]
            for _, fields in list(self.received)
            for f in fields
            if f.startswith(prefix)
        ]

    def wait_for(self, field: str, timeout: float = 20) -> float:
        return wait_until(lambda: self.times(field), timeout, 0.02, f"sd_notify {field}")[0]

    def close(self) -> None:
        self.sock.close()


class Ticks:
    """A monotonic clock the test steps by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class RecordingNotifier(SystemdSupervisor):
    """Records (tick time, fields) instead of sending: the test reads what was sent when."""

    def __init__(self, ticks: Ticks, watchdog_s: float) -> None:
        super().__init__("/nonexistent", timedelta(seconds=watchdog_s))
        self.ticks = ticks
        self.sent: list[tuple[float, tuple[str, ...]]] = []

    def notify(self, *fields: str) -> bool:
        self.sent.append((self.ticks.t, fields))
        return True

    def at(self, field: str) -> list[float]:
        return [t - 1000 for t, fields in self.sent if field in fields]
