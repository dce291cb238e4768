"""The sd_notify protocol: newline-separated `KEY=value` datagrams to systemd's NOTIFY_SOCKET.

A few lines of stdlib instead of a compiled dependency. One socket, opened at start-up, carries
every datagram: a process out of file descriptors still pings the watchdog. Outside systemd (no
NOTIFY_SOCKET) every call is a no-op, so the daemon can notify unconditionally.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping
from datetime import timedelta

from guardian.logs import kv

log = logging.getLogger("guardian.systemd")


def socket_address(value: str) -> str | bytes | None:
    """The address to send to: a path, or an abstract-namespace name ('@' becomes a NUL byte)."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None  # e.g. vsock: not spoken here


def watchdog_interval(env: Mapping[str, str], pid: int) -> timedelta | None:
    """systemd's watchdog timeout for this process, or None when the watchdog is off."""
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if owner and owner != str(pid):
        return None  # meant for another process (e.g. a parent that exec'd us differently)
    if not usec.isdigit() or int(usec) == 0:
        return None
    return timedelta(microseconds=int(usec))


class SystemdSupervisor:
    """Talks to the service manager over sd_notify. `address` None: systemd did not ask for it.

    Safe from any thread without a lock (the main loop pings and reloads while the sweep job
    sends STATUS): each datagram is one sendto() on one socket, which the kernel delivers
    whole, and the socket and address are each taken once per call. close() comes after the
    jobs that notify were joined (Daemon.stop); a datagram sent after it fails as any send
    does (logged once). Only where start-up could not open the socket may two threads each
    open one: the one not kept is closed by its finalizer."""

    def __init__(
        self, address: str | bytes | None = None, watchdog: timedelta | None = None
    ) -> None:
        self.address = address
        self.watchdog = watchdog
        self._failed = False  # a send failed: the next failure is not logged again
        self._sock: socket.socket | None = None
        if address is not None:
            self._sock = self._open()

    def _open(self) -> socket.socket | None:
        try:
            return socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        except OSError as exc:
            self._report(exc)
            return None

    def _report(self, exc: OSError) -> None:
        if not self._failed:  # log once; systemd may simply be gone during shutdown
            log.warning("sd_notify failed", extra=kv(reason=str(exc)))
        self._failed = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SystemdSupervisor:
        env = os.environ if env is None else env
        raw = env.get("NOTIFY_SOCKET", "")
        address = socket_address(raw) if raw else None
        if raw and address is None:
            log.warning("NOTIFY_SOCKET not supported; not notifying", extra=kv(address=raw))
        return cls(address, watchdog_interval(env, os.getpid()) if address else None)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *fields: str) -> bool:
        """Send one datagram with `fields` (e.g. "READY=1", "STATUS=..."); False if it failed."""
        address = self.address
        if address is None:
            return False
        message = "\n".join(f.replace("\n", " ") for f in fields).encode()
        sock = self._sock
        if sock is None:
            sock = self._sock = self._open()  # only when start-up could not open it
            if sock is None:
                return False
        try:
            sock.sendto(message, address)
        except OSError as exc:
            self._report(exc)
            return False
        self._failed = False
        return True

    def close(self) -> None:
        """Close the socket; every later call is a no-op."""
        self.address = None
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def ready(self, status: str) -> bool:
        return self.notify("READY=1", f"STATUS={status}")

    def status(self, status: str) -> bool:
        return self.notify(f"STATUS={status}")

    def reloading(self) -> bool:
        """A reload starts; READY=1 (ready()) ends it. MONOTONIC_USEC is what newer systemd's
        Type=notify-reload asks for; older versions ignore it."""
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def ping(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1", "STATUS=stopping")
