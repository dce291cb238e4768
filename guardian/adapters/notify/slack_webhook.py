"""SlackWebhookNotifier: Block Kit messages to a Slack incoming webhook.

Slack webhooks do not deduplicate, so a send with an unknown outcome is never repeated.
"""

from __future__ import annotations

from collections.abc import Sequence

from guardian.adapters.notify.slack_blocks import MAX_BLOCKS, message
from guardian.adapters.notify.transport import JsonWebhook, Reply, classify
from guardian.core.outbound.delivery import Result
from guardian.core.outbound.notifications import Notification


class SlackWebhookNotifier(JsonWebhook):
    max_batch = MAX_BLOCKS - 1
    default_name = "slack"

    def send(self, batch: Sequence[Notification]) -> Result:
        reply = self._post(message(batch))
        # Slack answers errors as text: invalid_payload (400), no_service (404),
        # channel_is_archived (410), ...: classify() makes every non-429 4xx permanent.
        return classify(reply) if isinstance(reply, Reply) else reply
