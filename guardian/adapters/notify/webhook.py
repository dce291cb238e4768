"""WebhookNotifier: a documented JSON document to any URL, HMAC-signed, with an Idempotency-Key.

Body (schema version 1): {"version": 1, "source": "guardian", "notifications": [Notification]}
(with `webhook_json_key`, docker-autoheal's {"<key>": "<the messages as text>"} instead),
where each notification has kind, incident_id, host, container, incident_type, state, at,
attempt, max_attempts, outcome, detail, next_step, actor, id. Headers: `Idempotency-Key` (the
same for every resend of the same notifications) and, with a secret,
`X-Guardian-Signature: sha256=<hex HMAC-SHA256 of the body>`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import timedelta

import requests

from guardian.adapters.notify.transport import Reply, classify, post
from guardian.core.outbound.delivery import Result
from guardian.core.outbound.notifications import Notification, to_dict

SCHEMA_VERSION = 1


def document(n: Notification) -> dict[str, object]:
    """One notification as schema version 1 has it (the routing Guardian did and whether the
    outbox held it are not in it)."""
    doc = to_dict(n)
    doc.pop("receivers", None)
    doc.pop("held", None)  # the outbox's, as routing is
    if not doc.get("channel"):
        doc.pop("channel", None)  # only a channel_failed notice names one
    return doc


def idempotency_key(batch: Sequence[Notification]) -> str:
    ids = ",".join(f"{n.host}/{n.id}" for n in batch)
    return "guardian-" + hashlib.sha256(ids.encode()).hexdigest()[:32]


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookNotifier:
    idempotent = True  # receivers deduplicate on Idempotency-Key
    max_batch = 100

    def __init__(
        self,
        url: str,
        secret: str | None,
        timeout: timedelta,
        session: requests.Session | None = None,
        name: str = "webhook",
        json_key: str | None = None,
    ) -> None:
        self.name = name
        self.min_interval = timedelta(0)
        self._url = url
        self._secret = secret
        self._timeout = timeout
        self._session = session or requests.Session()
        self._json_key = json_key  # docker-autoheal's form: {"<key>": "<text>"}

    def send(self, batch: Sequence[Notification]) -> Result:
        doc: dict[str, object] = {
            "version": SCHEMA_VERSION,
            "source": "guardian",
            "notifications": [document(n) for n in batch],
        }
        if self._json_key:
            doc = {self._json_key: "\n\n".join(n.text() for n in batch)}
        body = json.dumps(doc, sort_keys=True).encode()
        headers = {"Idempotency-Key": idempotency_key(batch)}
        if self._secret:
            headers["X-Guardian-Signature"] = signature(self._secret, body)
        reply = post(self._session, self._url, self._timeout, body=body, headers=headers)
        return classify(reply) if isinstance(reply, Reply) else reply
