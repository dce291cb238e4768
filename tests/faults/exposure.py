"""The secrets check of the fault suite: every text Guardian shows the world, scanned for secrets.

Each fault test hands what a person or a scraper could see (every log line of every Guardian
run, /metrics scrapes, CLI output) to an `Exposure`; at the end of the test no configured secret
may appear in any of it.

The notification secrets the crash test configures (the Slack webhook URL, the generic webhook
URL and its HMAC secret, the Apprise URL) are in `SECRET_SOURCES` too, and every notification its
fake receiver got is handed to `Exposure.add` (notify_check.expose_received): no notification may
carry them.
"""

from __future__ import annotations

import secrets as _random
from dataclasses import dataclass, field


def _canary(kind: str) -> str:
    return f"gdt-secret-{kind}-{_random.token_hex(12)}"


# name -> value of every secret the fault suite configures. Today: a secret in Guardian's own
# environment (GUARDIAN_TEST_SECRET, as a webhook URL would be) and a password in the environment
# of every watched container (Guardian inspects them, so it sees Config.Env).
# The notification channels' secrets: the secret part of each webhook URL (the path, as in
# Slack's https://hooks.slack.com/services/T.../B.../<secret>) and the webhook's HMAC key.
SECRET_SOURCES: dict[str, str] = {
    "guardian environment": _canary("env"),
    "container environment": _canary("container"),
    "slack webhook url": _canary("slack"),
    "webhook url": _canary("hook"),
    "webhook hmac": _canary("hmac"),
    "apprise url": _canary("apprise"),
}


@dataclass
class Exposure:
    secrets: dict[str, str] = field(default_factory=lambda: dict(SECRET_SOURCES))
    texts: list[tuple[str, str]] = field(default_factory=list)

    def add(self, where: str, text: str | bytes) -> str:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        self.texts.append((where, text))
        return text

    def leaks(self) -> list[str]:
        """One line per (secret, place) where a secret value shows up."""
        found = []
        for name, value in self.secrets.items():
            for where, text in self.texts:
                if value in text:
                    found.append(f"{name} secret appears in {where}")
        return found
