"""Text that goes into incidents, notifications and logs: one line, bounded."""

from __future__ import annotations


def trim(text: str, limit: int) -> str:
    """`text` on one line (runs of white space folded), at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
