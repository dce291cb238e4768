"""Block Kit rendering shared by the Slack webhook and bot channels, with a plain-text fallback.

Every value (container names, health output, reasons, anything a label said) is escaped where
it enters the message: in Slack's mrkdwn `&`, `<` and `>` are markup (`<!channel>`, `<@U1>`,
`<https://x|label>`), also inside a code fence and in the top-level `text` that Slack parses for
mentions and shows in push previews. Guardian's own markup is written around escaped values,
never taken from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guardian.core.outbound.notifications import Kind, Notification
from guardian.core.redaction import strip_controls

_EMOJI = {
    Kind.OPENED: ":warning:",
    Kind.ATTEMPT: ":arrows_counterclockwise:",
    Kind.RESOLVED: ":white_check_mark:",
    Kind.GAVE_UP: ":rotating_light:",
    Kind.ACKNOWLEDGED: ":eyes:",
    Kind.REMINDER: ":alarm_clock:",
    Kind.TEST: ":test_tube:",
    Kind.STARTED: ":shield:",
    Kind.APPROVAL: ":raised_hand:",
    Kind.CHANNEL_FAILED: ":no_entry:",
}
MAX_BLOCKS = 50
# Slack's limits: a header's plain text, a field, a section's or context's text, the fallback.
HEADER_MAX, FIELD_MAX, SECTION_MAX, TEXT_MAX = 150, 2000, 3000, 4000
FENCE = "`" * 3


def escape(text: str) -> str:
    """`text` as mrkdwn that Slack shows literally: no mention, link, control character or
    code fence (which would swallow the markup Guardian writes after it)."""
    text = strip_controls(text).replace(FENCE, "'" * 3)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(mrkdwn: str, limit: int) -> str:
    """`mrkdwn` cut to `limit` characters without splitting an entity (`&lt;`) in two."""
    if len(mrkdwn) <= limit:
        return mrkdwn
    cut = mrkdwn[: limit - 1]
    amp = cut.rfind("&", max(0, len(cut) - 4))
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def plain(text: str, limit: int) -> str:
    """A plain_text object's text (Slack parses no markup there): controls out, bounded."""
    text = " ".join(strip_controls(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _code(text: str, limit: int) -> str:
    return FENCE + fit(escape(text), limit - 6) + FENCE


def _field(label: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": fit(f"*{label}*\n{escape(value)}", FIELD_MAX)}


def _notice(n: Notification) -> list[dict[str, Any]]:
    header = plain(f"{_EMOJI[n.kind]} {n.headline}", HEADER_MAX)
    text = fit(escape(n.detail), SECTION_MAX) or "-"
    after = fit(escape(n.next_step), SECTION_MAX - 8)
    return [
        {"type": "header", "text": {"type": "plain_text", "text": header}},
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"*Next:* {after}"}]},
    ]


def blocks_for(n: Notification) -> list[dict[str, Any]]:
    if n.notice:
        return _notice(n)
    fields = [
        _field("Container", n.container),
        _field("Host", n.host),
        _field("Incident type", n.incident_type),
        _field("State", n.state),
    ]
    if n.max_attempts:
        fields.append(_field("Attempt", f"{n.attempt} of {n.max_attempts}"))
    if n.outcome:
        fields.append(_field("Outcome", n.outcome))
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": plain(f"{_EMOJI[n.kind]} {n.headline}", HEADER_MAX),
            },
        },
        {"type": "section", "fields": fields},
    ]
    if n.detail:
        label = "Reason" if n.kind is Kind.RESOLVED else "Last health output"
        text = f"*{label}*\n" + _code(n.detail, SECTION_MAX - len(label) - 3)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    if n.next_step:
        text = fit(f"*Next:* {escape(n.next_step)}", SECTION_MAX)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": text}]})
    return blocks


def _message(text: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    # Previews of a link a container printed are not Guardian's to show.
    return {"text": text, "blocks": blocks, "unfurl_links": False, "unfurl_media": False}


def message(batch: Sequence[Notification]) -> dict[str, Any]:
    """One Slack message for a batch: the full layout for one, a grouped list for several."""
    if len(batch) == 1:
        return _message(fit(escape(batch[0].text()), TEXT_MAX), blocks_for(batch[0]))
    hosts = sorted({n.host for n in batch})
    title = f"{len(batch)} Guardian events on {', '.join(hosts)}"
    lines = [
        fit(f"{_EMOJI[n.kind]} *{escape(n.headline)}*\n{escape(n.next_step)}", SECTION_MAX)
        for n in batch
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": plain(title, HEADER_MAX)}}
    ]
    blocks += [{"type": "section", "text": {"type": "mrkdwn", "text": line}} for line in lines]
    fallback = title + "\n" + "\n".join(f"- {n.headline} (next: {n.next_step})" for n in batch)
    return _message(fit(escape(fallback), TEXT_MAX), blocks[:MAX_BLOCKS])
