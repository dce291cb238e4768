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
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path


def _canary(kind: str) -> str:
    return f"gdt-secret-{kind}-{_random.token_hex(12)}"


# name -> value of every secret the fault suite configures. Today: a secret in Guardian's own
# environment (GUARDIAN_TEST_SECRET, as a webhook URL would be) and a password in the environment
# of every watched container (Guardian inspects them, so it sees Config.Env).
# The notification channels' secrets: the secret part of each webhook URL (the path, as in
# Slack's https://hooks.slack.com/services/T.../B.../<secret>) and the webhook's HMAC key.
# The exposure test (test_exposure.py) adds what a container prints in its log and its health
# output, a password in the Docker URL, a token in a channel URL's query, and the API token.
SECRET_SOURCES: dict[str, str] = {
    "guardian environment": _canary("env"),
    "container environment": _canary("container"),
    "slack webhook url": _canary("slack"),
    "webhook url": _canary("hook"),
    "webhook hmac": _canary("hmac"),
    "apprise url": _canary("apprise"),
    "container log": _canary("log"),
    "container log bearer": _canary("bearer"),
    "health output": _canary("health"),
    "docker url password": _canary("dockerpw"),
    "channel url query": _canary("query"),
    "api token": _canary("api"),
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
            # A secret cut by a length limit leaks its start: half its random part is enough.
            start = value[: len(value) - 12]
            for where, text in self.texts:
                if start in text:
                    found.append(f"{name} secret appears in {where}")
        return found

    def add_store(self, path: Path) -> None:
        """Every column of every row of the store at `path` (its SQL dump), to the check."""
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            self.add(f"store {path.parent.name}/{path.name}", "\n".join(db.iterdump()))
        finally:
            db.close()
