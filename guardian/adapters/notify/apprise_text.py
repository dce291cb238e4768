"""What an Apprise message says: a title and a body, in Markdown for the services that render it
and in plain text for the others. Container output is hostile input: in Markdown it only ever
appears inside a code span, so it can never become a link, an image or HTML.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from guardian.core.outbound.notifications import Kind, Notification

MAX_BATCH = 20  # notifications in one message: ~3,000 characters, under Telegram's 4,096
TITLE_MAX = 250

# Apprise's notify types (info, success, warning, failure): the colour, icon or priority that a
# service shows. A batch takes its gravest member's.
_TYPE = {
    Kind.OPENED: "warning",
    Kind.ATTEMPT: "warning",
    Kind.RESOLVED: "success",
    Kind.GAVE_UP: "failure",
    Kind.ACKNOWLEDGED: "info",
    Kind.REMINDER: "failure",
    Kind.TEST: "info",
    Kind.STARTED: "info",
    Kind.APPROVAL: "warning",
    Kind.CHANNEL_FAILED: "failure",
}
_GRAVITY = ("info", "success", "warning", "failure")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()#!|~>])")


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    notify_type: str  # info | success | warning | failure


def escape(text: str) -> str:
    """Guardian's own words in Markdown: punctuation escaped, no raw HTML."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("<", "&lt;")


def code(text: str) -> str:
    """Text from a container, shown literally: inside a code span it cannot become markup."""
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def _fields(n: Notification) -> list[tuple[str, str, bool]]:
    """(label, value, came from the container) for one notification."""
    if n.notice:
        return [("Host", n.host, False), ("About", n.detail, False), ("Next", n.next_step, False)]
    rows = [
        ("Container", n.container, True),
        ("Host", n.host, False),
        ("Incident", f"{n.incident_type}, {n.state}", False),
    ]
    if n.max_attempts:
        rows.append(("Attempt", f"{n.attempt} of {n.max_attempts}", False))
    if n.outcome:
        rows.append(("Outcome", n.outcome, False))
    if n.detail:
        rows.append(("Reason" if n.kind is Kind.RESOLVED else "Last output", n.detail, True))
    if n.next_step:
        rows.append(("Next", n.next_step, False))
    return rows


def render(batch: Sequence[Notification], markdown: bool) -> Message:
    """One message for a batch: every field of one notification, or one line per notification
    of a burst (grouped within group_wait, like the other channels)."""
    gravest = max((_TYPE[n.kind] for n in batch), key=_GRAVITY.index)
    if len(batch) == 1:
        n = batch[0]
        if markdown:
            lines = [
                f"- **{label}:** {code(value) if raw else escape(value)}"
                for label, value, raw in _fields(n)
            ]
        else:
            lines = [f"{label}: {value}" for label, value, _ in _fields(n)]
        return Message(n.headline[:TITLE_MAX], "\n".join(lines), gravest)
    hosts = ", ".join(sorted({n.host for n in batch}))
    title = f"{len(batch)} Guardian events on {hosts}"[:TITLE_MAX]
    if markdown:
        lines = [f"- **{escape(n.headline)}** — {escape(n.next_step)}" for n in batch]
    else:
        lines = [f"- {n.headline} — {n.next_step}" for n in batch]
    return Message(title, "\n".join(lines), gravest)
