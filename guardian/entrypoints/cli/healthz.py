"""`guardian healthcheck`: ask a running Guardian's /healthz, for Docker's HEALTHCHECK.

Stdlib only (the image carries no curl). Exit 0 when /healthz answers 200, 1 otherwise; Docker
reserves every other exit code, so even a bad configuration reports 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_UNHEALTHY = 0, 1

# An address that listens everywhere is reached through the loopback interface.
_ANY = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}


def healthz_url(listen: str) -> str:
    """The /healthz URL of a Guardian whose `http.listen` is `listen` (host:port)."""
    host, _, port = listen.rpartition(":")
    host = _ANY.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/healthz"


def ask_healthz(url: str, timeout: float) -> tuple[bool, str]:
    """(healthy, one line saying why)."""
    import urllib.error  # urllib.request is slow to import: only for the command that asks
    import urllib.request

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


def cmd_healthcheck(args: argparse.Namespace) -> int:
    from guardian.config import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:  # Docker reserves exit code 2: unhealthy is 1
        print(f"guardian: config error: {exc}", file=sys.stderr)
        return EXIT_UNHEALTHY
    healthy, why = ask_healthz(healthz_url(settings["http.listen"]), args.timeout)
    if healthy:
        print(why)
        return EXIT_OK
    print(f"guardian: {why}", file=sys.stderr)
    return EXIT_UNHEALTHY


def register(sub: Any, cfg: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]) -> None:
    health = cfg(
        sub.add_parser("healthcheck", help="exit 0 if a running Guardian's /healthz is ok")
    )
    health.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    health.set_defaults(handler=cmd_healthcheck)
