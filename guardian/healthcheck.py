"""`guardian healthcheck`: ask a running Guardian's /healthz, for Docker's HEALTHCHECK.

Stdlib only (the image carries no curl). Exit 0 when /healthz answers 200, 1 otherwise; Docker
reserves every other exit code, so even a bad configuration reports 1.
"""

from __future__ import annotations

import urllib.error
import urllib.request

# An address that listens everywhere is reached through the loopback interface.
_ANY = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}


def healthz_url(listen: str) -> str:
    """The /healthz URL of a Guardian whose `http.listen` is `listen` (host:port)."""
    host, _, port = listen.rpartition(":")
    host = _ANY.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/healthz"


def probe(url: str, timeout: float) -> tuple[bool, str]:
    """(healthy, one line saying why)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read(512).decode(errors="replace").strip()
            return response.status == 200, body or f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        body = exc.read(512).decode(errors="replace").strip()
        return False, f"unhealthy (HTTP {exc.code}): {body}" if body else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"cannot reach {url}: {reason}"
