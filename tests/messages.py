"""What the notification tests read out of a channel's payload."""

from __future__ import annotations

from typing import Any


def slack_mrkdwn(doc: dict[str, Any]) -> list[str]:
    """The top-level text and every mrkdwn object of a Slack message."""
    texts = [doc["text"]]
    for block in doc["blocks"]:
        objects = [block.get("text") or {}, *block.get("fields", []), *block.get("elements", [])]
        texts += [o["text"] for o in objects if o.get("type") == "mrkdwn"]
    return texts


def unescaped(text: str) -> list[str]:
    """The Discord markdown characters of `text` that no backslash escapes."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] in "*_~`|>[]()<@#:":
            out.append(text[i])
        i += 1
    return out
