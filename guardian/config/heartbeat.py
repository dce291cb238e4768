"""The heartbeat's URLs (heartbeat.url_*, heartbeat.fail_url_*): secrets, read and checked
here, so a bad one refuses the start in one line that never quotes it."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from guardian.config.credentials import resolve_secret
from guardian.config.settings import ConfigError, Settings
from guardian.core.redaction import Redactor

MAX_PING_URL = 2048


def ping_url(key: str, url: str | None) -> str | None:
    """A heartbeat URL checked without quoting it (it is a secret)."""
    if url is None:
        return None
    try:
        parts = urlsplit(url) if len(url) <= MAX_PING_URL and url.isprintable() else None
        host = parts.hostname if parts is not None else None
    except ValueError:
        parts = host = None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ConfigError(
            f"{key}: expected an http:// or https:// URL of at most {MAX_PING_URL} characters"
            " (the value is not shown: it is a secret)"
        )
    return url


def heartbeat_urls(
    settings: Settings, redact: Redactor, env: Mapping[str, str] | None = None
) -> tuple[str, str | None] | None:
    """The heartbeat's URL and its failure URL (None: derived from the URL), registered with
    `redact`; None when no heartbeat is configured. Raises ConfigError."""
    url = ping_url("heartbeat.url", resolve_secret(settings, "heartbeat.url", redact, env))
    fail = resolve_secret(settings, "heartbeat.fail_url", redact, env)
    fail = ping_url("heartbeat.fail_url", fail)
    if url is None:
        if fail is not None:
            raise ConfigError("heartbeat.fail_url: needs heartbeat.url_env or heartbeat.url_file")
        return None
    return url, fail
