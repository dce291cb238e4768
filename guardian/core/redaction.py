"""Redaction of known secrets from any text: log lines, errors, stored receiver answers."""

from __future__ import annotations

from urllib.parse import urlsplit

MASK = "***"


class Redactor:
    """Replaces every registered secret (and its URL path, which carries Slack's token) in text."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str) -> None:
        if len(secret) >= 4:
            self._secrets.add(secret)
        path = urlsplit(secret).path if "://" in secret else ""
        if len(path) > 8:  # Slack and Discord put the credential in the path
            self._secrets.add(path)

    def __call__(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
        return text
