"""Block Kit rendering shared by the Slack webhook and bot channels, with a plain-text fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guardian.core.notifications import Kind, Notification

_EMOJI = {
    Kind.OPENED: ":warning:",
    Kind.ATTEMPT: ":arrows_counterclockwise:",
    Kind.RESOLVED: ":white_check_mark:",
    Kind.GAVE_UP: ":rotating_light:",
    Kind.ACKNOWLEDGED: ":eyes:",
    Kind.REMINDER: ":alarm_clock:",
    Kind.APPROVAL: ":raised_hand:",
}
MAX_BLOCKS = 50


def _code(text: str) -> str:
    return "```" + text.replace("```", "'''") + "```"


def blocks_for(n: Notification) -> list[dict[str, Any]]:
    fields = [
        f"*Container*\n{n.container}",
        f"*Host*\n{n.host}",
        f"*Incident type*\n{n.incident_type}",
        f"*State*\n{n.state}",
    ]
    if n.max_attempts:
        fields.append(f"*Attempt*\n{n.attempt} of {n.max_attempts}")
    if n.outcome:
        fields.append(f"*Outcome*\n{n.outcome}")
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": f"{_EMOJI[n.kind]} {n.headline}"[:150]},
        },
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
    ]
    if n.detail:
        label = "Reason" if n.kind is Kind.RESOLVED else "Last health output"
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{label}*\n{_code(n.detail)}"}}
        )
    if n.next_step:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"*Next:* {n.next_step}"}]}
        )
    return blocks


def message(batch: Sequence[Notification]) -> dict[str, Any]:
    """One Slack message for a batch: the full layout for one, a grouped list for several."""
    if len(batch) == 1:
        return {"text": batch[0].text(), "blocks": blocks_for(batch[0])}
    hosts = sorted({n.host for n in batch})
    title = f"{len(batch)} Guardian events on {', '.join(hosts)}"
    lines = [f"{_EMOJI[n.kind]} *{n.headline}*\n{n.next_step}" for n in batch]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}}
    ]
    blocks += [{"type": "section", "text": {"type": "mrkdwn", "text": line}} for line in lines]
    fallback = title + "\n" + "\n".join(f"- {n.headline} (next: {n.next_step})" for n in batch)
    return {"text": fallback, "blocks": blocks[:MAX_BLOCKS]}
