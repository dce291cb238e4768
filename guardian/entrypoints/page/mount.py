"""The status page built from a Guardian app and mounted on its routes (the daemon's one call)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from guardian.entrypoints.credential_limiter import CredentialLimiter
from guardian.entrypoints.http_server import Routes
from guardian.entrypoints.page.handler import StatusPage
from guardian.entrypoints.page.sessions import Sessions
from guardian.readside.page import PageReader, no_dead_letters

if TYPE_CHECKING:
    from guardian.bootstrap import App


def mount_page(routes: Routes, app: App, limiter: CredentialLimiter | None = None) -> StatusPage:
    settings = app.settings
    outbox = app.delivery.outbox if app.delivery is not None else None
    dead: Any = getattr(outbox, "dead_letters", None) or no_dead_letters
    page = StatusPage(
        PageReader(app.healer, app.operator, app.changes, dead),
        app.operator,
        Sessions(app.api_token, settings["page.session_ttl"].total_seconds(), limiter=limiter),
        app.changes,
        public_reads=settings["api.public_reads"],
        max_streams=settings["page.streams"],
        streams_per_address=settings["page.streams_per_address"],
        trust_forwarded_proto=settings["page.trust_forwarded_proto"],
    )
    page.mount(routes)
    return page
