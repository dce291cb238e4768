"""SlackBotNotifier: one Slack thread per incident through the Web API (bot token + channel).

The incident's first message is the thread root (`chat.postMessage`); every later event is a
reply with `thread_ts`; a state change (resolved, acknowledged, gave up) also updates the root
(`chat.update`). The root's ts is kept in the store, so threads survive restarts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import requests

from guardian.adapters.notify.slack_blocks import message
from guardian.adapters.notify.transport import Reply, classify, post
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.core.outbound.delivery import DELIVERED, Result, Status
from guardian.core.outbound.notifications import Kind, Notification

# Web API errors worth a retry; every other error (channel_not_found, is_archived,
# invalid_auth, not_in_channel, ...) is permanent.
_TRANSIENT = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
_UPDATES_ROOT = frozenset({Kind.RESOLVED, Kind.ACKNOWLEDGED, Kind.GAVE_UP})


class SlackBotNotifier:
    idempotent = False
    max_batch = 1  # one thread per incident: events are never merged across incidents

    def __init__(
        self,
        token: str,
        channel: str,
        api_url: str,
        outbox: SqliteOutbox,
        timeout: timedelta,
        pacing: timedelta,
        session: requests.Session | None = None,
        name: str = "slack_bot",
    ) -> None:
        self.name = name
        self.min_interval = pacing
        self._token = token
        self._channel = channel
        self._api = api_url.rstrip("/")
        self._outbox = outbox
        self._timeout = timeout
        self._session = session or requests.Session()

    def _call(self, method: str, doc: dict[str, Any]) -> tuple[Result, dict[str, Any]]:
        reply = post(
            self._session,
            f"{self._api}/{method}",
            self._timeout,
            body=json.dumps(doc).encode(),
            headers={
                "Authorization": f"Bearer {self._token}",
                "Content-Type": "application/json; charset=utf-8",
            },
        )
        if not isinstance(reply, Reply):
            return reply, {}
        result = classify(reply)
        data = reply.json()
        if not result.ok or not isinstance(data, dict):
            return result, {}
        if data.get("ok") is True:
            return DELIVERED, data
        error = str(data.get("error", "unknown_error"))[:80]
        if error == "ratelimited":
            return Result(Status.RATE_LIMITED, f"{method}: {error}"), {}
        status = Status.TRANSIENT if error in _TRANSIENT else Status.PERMANENT
        return Result(status, f"{method}: {error}"), {}

    def send(self, batch: Sequence[Notification]) -> Result:
        n = batch[0]
        incident = n.incident_id or 0
        known = self._outbox.ref(self.name, incident)
        body = {"channel": self._channel, **message([n])}
        if known is None:
            result, data = self._call("chat.postMessage", body)
            if result.ok and data.get("ts"):
                self._outbox.set_ref(
                    self.name, incident, str(data["ts"]), str(data.get("channel", ""))
                )
            return result
        root, channel = known
        if n.kind in _UPDATES_ROOT:
            # chat.update is idempotent: repeating it after a failed reply below is harmless.
            update = {"channel": channel or self._channel, "ts": root, **message([n])}
            result, _ = self._call("chat.update", update)
            if not result.ok:
                return result
        result, _ = self._call("chat.postMessage", {**body, "thread_ts": root})
        return result
