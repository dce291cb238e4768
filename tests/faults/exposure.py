"""The secrets check of the fault suite: every text Guardian shows the world, scanned for secrets.

Each fault test hands what a person or a scraper could see (every log line of every Guardian
run, /metrics scrapes, CLI output) to an `Exposure`; at the end of the test no configured secret
may appear in any of it.

Issue 3 (notifications) adds its secrets to `SECRET_SOURCES` (webhook URLs, SMTP passwords,
tokens: whatever its fixtures configure) and passes each delivered notification body to
`Exposure.add("notification ...", body)`: the check itself needs no change.
"""

from __future__ import annotations

import secrets as _random
from dataclasses import dataclass, field


def _canary(kind: str) -> str:
    return f"gdt-secret-{kind}-{_random.token_hex(12)}"


# name -> value of every secret the fault suite configures. Today: a secret in Guardian's own
# environment (GUARDIAN_TEST_SECRET, as a webhook URL would be) and a password in the environment
# of every watched container (Guardian inspects them, so it sees Config.Env).
SECRET_SOURCES: dict[str, str] = {
    "guardian environment": _canary("env"),
    "container environment": _canary("container"),
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
