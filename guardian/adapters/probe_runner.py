"""Runs a probe against a container: one TCP connect or one HTTP(S) GET, all of it within its
timeout. The target is hostile: a server that accepts and trickles one byte at a time gets no
more time than one that never answers, so every step waits only for what is left of the timeout.
"""

from __future__ import annotations

import socket
import ssl
import time

from guardian.core.detection.probes import ProbeSpec

MAX_STATUS_LINE = 4096  # bytes read while looking for "HTTP/1.1 200 OK\r\n"


class ProbeTimeout(OSError):
    """The probe's timeout passed before it had its answer."""


class SocketProbeRunner:
    """The ProbeRunner port over the standard library's sockets."""

    def run(self, spec: ProbeSpec, address: str) -> tuple[bool, str]:
        """Run one probe: (passed, what was seen). Never raises for network errors."""
        return run_probe(spec, address)


def _unverified() -> ssl.SSLContext:
    # The container's own address never matches its certificate: check liveness only.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise ProbeTimeout("timed out")
        return left


def run_probe(spec: ProbeSpec, address: str) -> tuple[bool, str]:
    """Run one probe against `spec.host` or else `address`: (passed, what was seen)."""
    host = spec.host or address
    where = spec.describe(address)
    deadline = _Deadline(spec.timeout.total_seconds())
    try:
        with socket.create_connection((host, spec.port), timeout=deadline.left()) as sock:
            if spec.kind == "tcp":
                return True, f"{where} accepted a connection"
            status = _http_status(sock, spec, host, deadline)
    except (OSError, ValueError) as exc:
        return False, f"{where}: {str(exc) or type(exc).__name__}"[:200]
    if any(lo <= status <= hi for lo, hi in spec.expect):
        return True, f"{where} answered {status}"
    return False, f"{where} answered {status}"


def _http_status(raw: socket.socket, spec: ProbeSpec, host: str, deadline: _Deadline) -> int:
    """Send the GET and read the status line only: the status is all a probe judges."""
    sock = raw
    if spec.scheme == "https":
        sock = _unverified().wrap_socket(raw, do_handshake_on_connect=False)
        # CPython bounds a whole TLS operation by the socket timeout (a deadline, not per read).
        sock.settimeout(deadline.left())
        sock.do_handshake()
    name = f"[{host}]" if ":" in host else host
    request = (
        f"GET {spec.path} HTTP/1.1\r\nHost: {name}:{spec.port}\r\n"
        "User-Agent: guardian-probe\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    )
    sock.settimeout(deadline.left())
    sock.sendall(request.encode("ascii"))
    data = b""
    while b"\r\n" not in data:
        if len(data) > MAX_STATUS_LINE:
            raise ValueError("no HTTP status line in the first 4 KiB")
        sock.settimeout(deadline.left())
        chunk = sock.recv(1024)
        if not chunk:
            raise ValueError("connection closed before an HTTP status line")
        data += chunk
    parts = data.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ValueError("not an HTTP status line")
    return int(parts[1])
