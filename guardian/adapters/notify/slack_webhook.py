"""SlackWebhookNotifier: Block Kit messages to a Slack incoming webhook.

Slack webhooks do not deduplicate, so a send with an unknown outcome is never repeated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

import requests

from guardian.adapters.notify.http import Reply, classify, post
from guardian.adapters.notify.slack_blocks import MAX_BLOCKS, message
from guardian.core.delivery import Result
from guardian.core.notifications import Notification


class SlackWebhookNotifier:
    idempotent = False
    max_batch = MAX_BLOCKS - 1

    def __init__(
        self,
        url: str,
        timeout: timedelta,
        pacing: timedelta,
        session: requests.Session | None = None,
        name: str = "slack",
    ) -> None:
        self.name = name
        self.min_interval = pacing
        self._url = url
        self._timeout = timeout
        self._session = session or requests.Session()

    def send(self, batch: Sequence[Notification]) -> Result:
        body = json.dumps(message(batch)).encode()
        reply = post(self._session, self._url, self._timeout, body=body)
        # Slack answers errors as text: invalid_payload (400), no_service (404),
        # channel_is_archived (410), ...: classify() makes every non-429 4xx permanent.
        return classify(reply) if isinstance(reply, Reply) else reply
