"""DiscordNotifier: embeds to a Discord webhook; its 429 carries `retry_after` in JSON.

Every value is escaped where it enters the message: Discord's markdown (masked links
`[label](url)`, mentions `<@id>`, `@everyone`, emphasis) is backslash-escaped in the content,
field values and description, and `allowed_mentions` parses nothing, so no text pings anyone.
Titles and field names render no links or mentions: they only lose control characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from guardian.adapters.notify.transport import JsonWebhook, Reply, classify
from guardian.core.outbound.delivery import Result, Status
from guardian.core.outbound.notifications import Kind, Notification
from guardian.core.redaction import strip_controls

_COLOR = {
    Kind.OPENED: 0xE6A23C,
    Kind.ATTEMPT: 0x409EFF,
    Kind.RESOLVED: 0x67C23A,
    Kind.GAVE_UP: 0xF56C6C,
    Kind.ACKNOWLEDGED: 0x909399,
    Kind.REMINDER: 0xF56C6C,
    Kind.TEST: 0x909399,
    Kind.STARTED: 0x909399,
    Kind.APPROVAL: 0xE6A23C,
    Kind.CHANNEL_FAILED: 0xF56C6C,
}

# Discord's limits: content, an embed's title, a field's value, a description; the short fields
# are cut shorter, so that one embed stays within Discord's 6,000 characters.
CONTENT_MAX, TITLE_MAX, VALUE_MAX, DESCRIPTION_MAX = 2000, 256, 1024, 4096
SHORT_MAX = 256
_SPECIAL = re.compile(r"([\\*_~`|>\[\]()<@#:])")
NO_MENTIONS: dict[str, list[str]] = {"parse": []}


def escape(text: str, limit: int) -> str:
    """`text` as Discord markdown that shows literally (no link, mention or emphasis), at most
    `limit` characters, never ending in half an escape."""
    out = _SPECIAL.sub(r"\\\1", strip_controls(text))
    if len(out) <= limit:
        return out
    cut = out[: limit - 1]
    trailing = len(cut) - len(cut.rstrip("\\"))
    return cut[: len(cut) - trailing % 2] + "…"


def plain(text: str, limit: int) -> str:
    text = " ".join(strip_controls(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _field(name: str, value: str, inline: bool) -> dict[str, Any]:
    limit = SHORT_MAX if inline else VALUE_MAX
    return {"name": name, "value": escape(value, limit) or "-", "inline": inline}


def embed(n: Notification) -> dict[str, Any]:
    if n.notice:
        return {
            "title": plain(n.headline, TITLE_MAX),
            "color": _COLOR[n.kind],
            "description": escape(n.detail, DESCRIPTION_MAX),
            "fields": [_field("Next", n.next_step, False)],
            "timestamp": n.at.isoformat(),
        }
    fields = [
        _field("Container", n.container, True),
        _field("Host", n.host, True),
        _field("Type", n.incident_type, True),
        _field("State", n.state, True),
    ]
    if n.max_attempts:
        fields.append(_field("Attempt", f"{n.attempt} of {n.max_attempts}", True))
    if n.detail:
        fields.append(_field("Detail", n.detail, False))
    if n.next_step:
        fields.append(_field("Next", n.next_step, False))
    return {
        "title": plain(n.headline, TITLE_MAX),
        "color": _COLOR[n.kind],
        "fields": fields,
        "timestamp": n.at.isoformat(),
    }


def message(batch: Sequence[Notification]) -> dict[str, Any]:
    """One embed for one event; a burst becomes one embed listing every event."""
    if len(batch) == 1:
        n = batch[0]
        content = escape(n.headline, CONTENT_MAX)
        return {"content": content, "embeds": [embed(n)], "allowed_mentions": NO_MENTIONS}
    title = f"{len(batch)} Guardian events on {', '.join(sorted({n.host for n in batch}))}"
    each = max(DESCRIPTION_MAX // len(batch) - 8, 16)  # max_batch keeps the sum in bounds
    lines = [
        f"**{escape(' '.join(f'{n.headline} — {n.next_step}'.split()), each)}**" for n in batch
    ]
    description = "\n".join(lines)
    summary = {"title": plain(title, TITLE_MAX), "color": 0xE6A23C, "description": description}
    content = escape(title, CONTENT_MAX)
    return {"content": content, "embeds": [summary], "allowed_mentions": NO_MENTIONS}


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
