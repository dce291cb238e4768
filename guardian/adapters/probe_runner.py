"""Runs a probe against a container: one TCP connect or one HTTP(S) GET, bounded by its timeout."""

from __future__ import annotations

import http.client
import socket
import ssl

from guardian.core.probes import NO_ADDRESS, ProbeSpec


class SocketProbeRunner:
    """The ProbeRunner port over the standard library's sockets and http.client."""

    def run(self, spec: ProbeSpec, address: str) -> tuple[bool, str]:
        """Run one probe: (passed, what was seen). Never raises for network errors."""
        return run_probe(spec, address)


def _unverified() -> ssl.SSLContext:
    # The container's own address never matches its certificate: check liveness only.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def run_probe(spec: ProbeSpec, address: str) -> tuple[bool, str]:
    """Run one probe: (passed, what was seen). Never raises for network errors."""
    host = spec.host or address or NO_ADDRESS
    where = spec.describe(address or NO_ADDRESS)
    timeout = spec.timeout.total_seconds()
    try:
        if spec.kind == "tcp":
            with socket.create_connection((host, spec.port), timeout=timeout):
                return True, f"{where} accepted a connection"
        conn: http.client.HTTPConnection
        if spec.scheme == "https":
            conn = http.client.HTTPSConnection(
                host, spec.port, timeout=timeout, context=_unverified()
            )
        else:
            conn = http.client.HTTPConnection(host, spec.port, timeout=timeout)
        try:
            conn.request("GET", spec.path, headers={"User-Agent": "guardian-probe"})
            response = conn.getresponse()
            response.read(4096)
            status = response.status
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as exc:
        return False, f"{where}: {str(exc) or type(exc).__name__}"[:200]
    if any(lo <= status <= hi for lo, hi in spec.expect):
        return True, f"{where} answered {status}"
    return False, f"{where} answered {status}"
