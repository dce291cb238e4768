"""HTTP for the channels: one POST, classified into a typed delivery Result.

Error reasons are built here and never quote the URL: webhook URLs are secrets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from urllib3.exceptions import MaxRetryError, NewConnectionError

from guardian.core.outbound.delivery import DELIVERED, Result, Status


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            return None


def post(
    session: requests.Session,
    url: str,
    timeout: timedelta,
    *,
    body: bytes,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> Reply | Result:
    """Send one request; a Reply when the server answered, else a TRANSIENT (never sent) or
    UNKNOWN (sent, no answer) Result."""
    seconds = timeout.total_seconds()
    try:
        r = session.request(
            method,
            url,
            data=body,
            headers={"Content-Type": "application/json", **(headers or {})},
            timeout=(min(seconds, 5.0), seconds),
            allow_redirects=False,
        )
    except requests.exceptions.ConnectTimeout:
        return Result(Status.TRANSIENT, "connect timed out")
    except requests.exceptions.ReadTimeout:
        return Result(Status.UNKNOWN, f"no answer within {seconds:g}s after sending")
    except requests.exceptions.ConnectionError as exc:
        cause = exc.args[0] if exc.args else None
        if isinstance(cause, MaxRetryError) and isinstance(cause.reason, NewConnectionError):
            return Result(Status.TRANSIENT, "connection refused")
        return Result(Status.UNKNOWN, "connection lost after sending")
    except requests.exceptions.RequestException as exc:
        return Result(Status.TRANSIENT, f"request failed: {type(exc).__name__}")
    return Reply(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.text[:2000])


class JsonWebhook:
    """The shared half of the channels that POST one JSON document to a secret URL (Slack
    incoming webhooks, Discord): no deduplication there, so an unknown outcome is not resent."""

    idempotent = False
    default_name = "webhook"

    def __init__(
        self,
        url: str,
        timeout: timedelta,
        pacing: timedelta,
        session: requests.Session | None = None,
        name: str | None = None,
    ) -> None:
        self.name = name or self.default_name
        self.min_interval = pacing
        self._url = url
        self._timeout = timeout
        self._session = session or requests.Session()

    def _post(self, doc: Any) -> Reply | Result:
        return post(self._session, self._url, self._timeout, body=json.dumps(doc).encode())


def retry_after(value: str | None, now: datetime | None = None) -> timedelta | None:
    """Retry-After as seconds or an HTTP date."""
    if not value:
        return None
    try:
        return timedelta(seconds=max(0.0, float(value)))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(timedelta(0), when - (now or datetime.now(UTC)))


def short(text: str, limit: int = 120) -> str:
    return " ".join(text.split())[:limit]


def classify(reply: Reply) -> Result:
    """The common taxonomy: 2xx delivered, 429 wait, 5xx retry, other 4xx permanent."""
    if 200 <= reply.status < 300:
        return DELIVERED
    if reply.status == 429:
        return Result(
            Status.RATE_LIMITED, "429 rate limited", retry_after(reply.headers.get("retry-after"))
        )
    if reply.status >= 500 or reply.status == 408:
        return Result(Status.TRANSIENT, f"{reply.status} {short(reply.text, 60)}".strip())
    return Result(Status.PERMANENT, f"{reply.status} {short(reply.text)}".strip())
