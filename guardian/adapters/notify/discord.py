"""DiscordNotifier: embeds to a Discord webhook; its 429 carries `retry_after` in JSON."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from guardian.adapters.notify.transport import JsonWebhook, Reply, classify
from guardian.core.delivery import Result, Status
from guardian.core.notifications import Kind, Notification

_COLOR = {
    Kind.OPENED: 0xE6A23C,
    Kind.ATTEMPT: 0x409EFF,
    Kind.RESOLVED: 0x67C23A,
    Kind.GAVE_UP: 0xF56C6C,
    Kind.ACKNOWLEDGED: 0x909399,
    Kind.REMINDER: 0xF56C6C,
    Kind.APPROVAL: 0xE6A23C,
}


def embed(n: Notification) -> dict[str, Any]:
    fields = [
        {"name": "Container", "value": n.container, "inline": True},
        {"name": "Host", "value": n.host, "inline": True},
        {"name": "Type", "value": n.incident_type, "inline": True},
        {"name": "State", "value": n.state, "inline": True},
    ]
    if n.max_attempts:
        fields.append(
            {"name": "Attempt", "value": f"{n.attempt} of {n.max_attempts}", "inline": True}
        )
    if n.detail:
        fields.append({"name": "Detail", "value": n.detail[:1000], "inline": False})
    if n.next_step:
        fields.append({"name": "Next", "value": n.next_step[:1000], "inline": False})
    return {
        "title": n.headline[:256],
        "color": _COLOR[n.kind],
        "fields": fields,
        "timestamp": n.at.isoformat(),
    }


def message(batch: Sequence[Notification]) -> dict[str, Any]:
    """One embed for one event; a burst becomes one embed listing every event."""
    if len(batch) == 1:
        return {"content": batch[0].headline[:2000], "embeds": [embed(batch[0])]}
    title = f"{len(batch)} Guardian events on {', '.join(sorted({n.host for n in batch}))}"
    lines = [f"**{n.headline}** — {n.next_step}" for n in batch]
    summary = {"title": title[:256], "color": 0xE6A23C, "description": "\n".join(lines)[:4000]}
    return {"content": title[:2000], "embeds": [summary]}


class DiscordNotifier(JsonWebhook):
    max_batch = 50
    default_name = "discord"

    def send(self, batch: Sequence[Notification]) -> Result:
        reply = self._post(message(batch))
        if not isinstance(reply, Reply):
            return reply
        result = classify(reply)
        if result.status is Status.RATE_LIMITED:
            data = reply.json()
            seconds = data.get("retry_after") if isinstance(data, dict) else None
            if isinstance(seconds, int | float):
                return Result(Status.RATE_LIMITED, "429 rate limited", timedelta(seconds=seconds))
        return result
