"""Secrets for the notification channels: read from environment variables or *_FILE paths named
in the config (never from the YAML itself), and redacted from every log line and error.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from guardian.config import ConfigError, Settings
from guardian.logs import FIELDS

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


class RedactingFilter(logging.Filter):
    """Applied to Guardian's log handlers: no secret reaches a log line, whoever logs it."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.msg, record.args = record.getMessage(), None
        record.msg = self.redact(str(record.msg))
        fields: dict[str, Any] | None = getattr(record, FIELDS, None)
        if fields:
            setattr(
                record,
                FIELDS,
                {k: self.redact(v) if isinstance(v, str) else v for k, v in fields.items()},
            )
        if record.exc_info and record.exc_info[1] is not None:
            # Tracebacks of HTTP libraries quote URLs; keep only the redacted one-line summary.
            exc = record.exc_info[1]
            record.msg = f"{record.msg}: {self.redact(type(exc).__name__ + ': ' + str(exc))}"
            record.exc_info, record.exc_text = None, None
        return True


def install_redaction(redact: Redactor, logger: str = "guardian") -> None:
    for handler in logging.getLogger(logger).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redact))


def resolve_secret(
    settings: Settings,
    name: str,
    redact: Redactor,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The secret `notify.<name>` from the env var named by `<name>_env` or the file named by
    `<name>_file`; None when neither is configured. Raises ConfigError naming the key (never
    the value) when the named source is missing or empty."""
    env = os.environ if env is None else env
    var, path = settings[f"notify.{name}_env"], settings[f"notify.{name}_file"]
    if var and path:
        raise ConfigError(f"notify.{name}_env and notify.{name}_file: set only one of them")
    value: str | None = None
    if var:
        value = env.get(var, "").strip()
        if not value:
            raise ConfigError(
                f"notify.{name}_env = {var!r}: that environment variable is not set or empty"
            )
    elif path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or type(exc).__name__
            raise ConfigError(f"notify.{name}_file = {path!r}: cannot read: {why}") from None
        if not value:
            raise ConfigError(f"notify.{name}_file = {path!r}: the file is empty")
    if value:
        redact.add(value)
    return value
