"""What the HTTP port serves beside the API: /metrics, /healthz (the watchdog's liveness rule)
and /readyz, then the API and the status page mounted on the same routes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from guardian.bootstrap import App
from guardian.entrypoints.api import api_handler
from guardian.entrypoints.badge import mount_badges
from guardian.entrypoints.credential_limiter import CredentialLimiter
from guardian.entrypoints.http_server import Routes, check_handler, metrics_handler
from guardian.entrypoints.page.mount import mount_page
from guardian.ports import EngineUnavailable
from guardian.readside.badges import Badges
from guardian.runtime.watchdog import SweepLiveness


def healthz(
    liveness: SweepLiveness, last_turn_at: datetime | None, engine_error: str | None
) -> tuple[bool, str]:
    """The watchdog's rule (SweepLiveness, on the monotonic clock): healthy while the sweep
    job shows progress within its limit (3 x interval plus the longest engine call, plus the
    stop timeout of a restart in progress). A sweep that found the engine unreachable turned:
    restarting Guardian would not help. Not healthy before the first sweep."""
    if last_turn_at is None:
        return False, "no sweep completed yet"
    age, limit = liveness.stalled_for(), liveness.limit_now()
    if not liveness.alive():
        return False, f"sweep stalled for {age:.0f}s (limit {limit:.0f}s)"
    engine = "; docker engine unreachable" if engine_error else ""
    return True, f"ok: last sweep {age:.1f}s ago{engine}"


def readyz(app: App) -> tuple[bool, str]:
    """Ready when the store answers and keeps Guardian's record (not while it refuses writes
    and holds intents in memory only: degraded, with the reason), and the engine is reachable."""
    try:
        app.store.open_incidents(app.loop.host, "-")
    except Exception as exc:  # noqa: BLE001 - any store failure means not ready
        return False, f"store not usable: {exc}"
    degraded = app.store_degraded()
    if degraded:
        return False, degraded
    try:
        app.engine.ping()
    except EngineUnavailable as exc:
        return False, str(exc)
    return True, "ok"


Check = Callable[[], tuple[bool, str]]


def routes(app: App, health: Check, ready: Check) -> Routes:
    """The port's routes: the checks, the API, the status page and its badges."""
    out = Routes()
    out.add("/metrics", metrics_handler(app.metrics.registry))
    out.add("/healthz", check_handler(health))
    out.add("/readyz", check_handler(ready))
    # Who may read what is decided here and in the API, never by the server underneath. One
    # limiter counts every wrong token, whether it came as a bearer or through the sign-in form.
    limiter = CredentialLimiter()
    api = api_handler(
        app.healer,
        app.operator,
        app.api_token,
        public_reads=app.settings["api.public_reads"],
        limiter=limiter,
    )
    out.mount("/api/v1", api)
    mount_page(out, app, limiter)
    badges = Badges(app.healer, app.operator, app.changes, app.settings["page.badges"])
    mount_badges(out, badges)
    return out
