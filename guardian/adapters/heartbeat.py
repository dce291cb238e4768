"""HttpPinger: the heartbeat's GET to a push monitor (healthchecks.io, Uptime Kuma), classified
like a notification's POST. Its reasons never quote the URL: the URL is the monitor's secret.

Without a failure URL of its own, the failure ping is derived from the ping URL: Uptime Kuma's
push URL (`/api/push/<token>`) with `status=down`, any other with `/fail` appended
(healthchecks.io's signal that the job failed).
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests

from guardian.adapters.notify.transport import Reply, classify, post
from guardian.core.outbound.delivery import Result

DOWN_MESSAGE = "Guardian cannot reach the Docker engine"


def failure_url(url: str) -> str:
    """The failure ping for a push monitor's ping URL (see the module's docstring)."""
    parts = urlsplit(url)
    if "/api/push/" in parts.path:
        query = [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k not in ("status", "msg", "ping")
        ]
        query += [("status", "down"), ("msg", DOWN_MESSAGE)]
        return urlunsplit(parts._replace(query=urlencode(query)))
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/fail"))


class HttpPinger:
    def __init__(
        self,
        url: str,
        fail_url: str | None,
        timeout: timedelta,
        session: requests.Session | None = None,
    ) -> None:
        self._url = url
        self._fail_url = fail_url or failure_url(url)
        self._timeout = timeout
        self._session = session or requests.Session()

    def ping(self, up: bool) -> Result:
        """One ping: the ping URL while the engine answers, the failure URL while it does not."""
        url = self._url if up else self._fail_url
        reply = post(self._session, url, self._timeout, body=b"", method="GET")
        return classify(reply) if isinstance(reply, Reply) else reply
