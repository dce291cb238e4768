"""AppriseNotifier: one Apprise URL (ntfy, Gotify, Telegram, Teams, Matrix, ...) is one delivery
target. Apprise only says sent or not, so its log lines are read to tell a timeout (maybe
delivered: never resent) from a failure (retried). `apprise` is an extra, imported when used.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from guardian.adapters.notify.apprise_text import MAX_BATCH, render
from guardian.core.outbound.delivery import DELIVERED, Result, Status
from guardian.core.outbound.notifications import Notification
from guardian.core.redaction import Redactor

MAX_TARGETS = 20
EXTRA_MISSING = (
    "the apprise channel needs the apprise package: pip install 'container-guardian[apprise]'"
)
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]{0,31})://", re.IGNORECASE)
_HOST_PORT = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:.]+\](:\d{1,5})?$")
# What requests (under Apprise's plugins) says when the request never left: safe to resend.
_NOT_SENT = re.compile(
    r"NewConnectionError|Connection refused|Failed to establish|Name or service not known"
    r"|Temporary failure in name resolution|Failed to resolve|connect timeout",
    re.IGNORECASE,
)
# ... and when it left but no answer came: it may have been delivered.
_NO_ANSWER = re.compile(
    r"read timeout|Read timed out|Connection aborted|RemoteDisconnected|Connection reset"
    r"|IncompleteRead|ChunkedEncodingError|timed out",
    re.IGNORECASE,
)
_HTTP_STATUS = re.compile(r"error=(\d{3})\b")


class AppriseConfigError(ValueError):
    """A configured Apprise URL list Guardian cannot use; the message quotes no URL."""


def parse_urls(text: str) -> list[str]:
    """The URLs of an apprise_urls secret: one per line (or separated by white space); blank
    lines and lines starting with # are skipped."""
    urls = []
    for line in text.splitlines():
        if not line.strip().startswith("#"):
            urls.extend(line.split())
    return urls


def scheme(url: str) -> str:
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else ""


def channel_names(urls: Sequence[str]) -> list[str]:
    """`apprise:<scheme>` per URL, `apprise:<scheme>:<n>` for the n-th URL of a scheme: the
    metric label and the outbox's name of the target, never the URL."""
    seen: dict[str, int] = {}
    names = []
    for url in urls:
        s = scheme(url)
        seen[s] = seen.get(s, 0) + 1
        names.append(f"apprise:{s}" if seen[s] == 1 else f"apprise:{s}:{seen[s]}")
    return names


def secret_parts(url: str) -> list[str]:
    """The URL and the parts of it that carry credentials in Apprise's formats: user info, and a
    "host" that is no host name (tgram://<bot token>/..., pover://<user key>@<app token>)."""
    parts = [url]
    netloc = urlsplit(url).netloc
    userinfo, _, host = netloc.rpartition("@")
    if userinfo:
        parts += [netloc, userinfo, userinfo.partition(":")[2]]
    if not _HOST_PORT.match(host) or (userinfo and "." not in host and host != "localhost"):
        parts.append(host)
    return [p for p in parts if len(p) >= 6]


def judge(sent: bool, lines: Sequence[str], elapsed: float, read_timeout: float) -> Result:
    """The typed outcome of one Apprise send from what it returned, what it logged and how long
    it took. A send that ran out its read timeout is unknown: it may have been delivered."""
    if sent:
        return DELIVERED
    text = "\n".join(lines)
    if _NOT_SENT.search(text):
        return Result(Status.TRANSIENT, "apprise: connection failed before sending")
    if _NO_ANSWER.search(text) or elapsed >= read_timeout:
        return Result(Status.UNKNOWN, f"apprise: no answer within {read_timeout:g}s after sending")
    codes = _HTTP_STATUS.findall(text)
    if codes:
        code = int(codes[-1])
        if code == 429:
            return Result(Status.RATE_LIMITED, "apprise: 429 rate limited")
        if 400 <= code < 500 and code != 408:
            return Result(Status.PERMANENT, f"apprise: the service refused it ({code})")
        return Result(Status.TRANSIENT, f"apprise: the service failed ({code})")
    return Result(Status.TRANSIENT, "apprise: not sent (the service reported a failure)")


def renders_markdown(service: Any) -> bool:
    """Whether the service shows Markdown (natively, or as HTML that Apprise renders from it);
    the others get plain text, not Markdown's asterisks."""
    resolve = getattr(service, "resolve_format", None)  # Apprise 2.x: several formats each
    fmt = resolve("markdown") if callable(resolve) else getattr(service, "notify_format", "text")
    return str(getattr(fmt, "value", fmt)) in ("markdown", "html")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(record.getMessage()[:2000])
        except Exception:  # noqa: BLE001 - a malformed record of Apprise's is not ours to raise
            self.lines.append(str(record.msg)[:2000])


@contextmanager
def _apprise_log() -> Iterator[list[str]]:
    """Apprise's log lines during one send. They quote URLs and tokens, so they never reach
    Guardian's log: Apprise's logger stops at this capture (propagate off)."""
    logger = logging.getLogger("apprise")
    capture = _Capture()
    logger.addHandler(capture)
    try:
        yield capture.lines
    finally:
        logger.removeHandler(capture)


class AppriseNotifier:
    """One Apprise URL. Not idempotent: Apprise's services do not deduplicate."""

    idempotent = False
    max_batch = MAX_BATCH

    def __init__(self, name: str, service: Any, client: Any, pacing: timedelta) -> None:
        self.name = name
        self.min_interval = pacing
        self._client = client  # an apprise.Apprise holding only that plugin
        self._markdown = renders_markdown(service)
        self._read_timeout = float(getattr(service, "socket_read_timeout", 0) or 0)

    def send(self, batch: Sequence[Notification]) -> Result:
        message = render(batch, self._markdown)
        started = time.monotonic()
        with _apprise_log() as lines:
            try:
                sent = bool(
                    self._client.notify(
                        body=message.body,
                        title=message.title,
                        notify_type=message.notify_type,
                        body_format="markdown" if self._markdown else "text",
                    )
                )
            except Exception as exc:  # noqa: BLE001 - its text may quote the URL: the type only
                return Result(Status.TRANSIENT, f"apprise raised {type(exc).__name__}")
        elapsed = time.monotonic() - started
        return judge(sent, lines, elapsed, self._read_timeout or float("inf"))


def _import() -> Any:
    try:
        import apprise
    except ImportError:
        raise AppriseConfigError(EXTRA_MISSING) from None
    return apprise


def apprise_channels(
    text: str,
    timeout: timedelta,
    pacing: timedelta,
    redact: Redactor,
    receiver: str | None = None,
) -> list[AppriseNotifier]:
    """One AppriseNotifier per URL of the apprise_urls secret `text`, every credential-bearing
    part registered with `redact`; named by channel_names(), or `receiver`, `receiver:2`, ...
    for a named receiver. Raises AppriseConfigError naming the URL by its position."""
    urls = parse_urls(text)
    for url in urls:
        for part in secret_parts(url):
            redact.add(part)
    if not urls:
        raise AppriseConfigError("no URL in it (one Apprise URL per line)")
    if len(urls) > MAX_TARGETS:
        raise AppriseConfigError(f"{len(urls)} URLs; at most {MAX_TARGETS}")
    logger = logging.getLogger("apprise")
    logger.propagate = False  # its lines quote URLs: only _apprise_log() reads them ...
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())  # ... and Python's last-resort stderr never
    logger.setLevel(logging.DEBUG)  # the socket errors that tell a timeout are debug lines
    apprise = _import()
    asset = apprise.AppriseAsset(storage_mode="memory", async_mode=False)
    channels = []
    names = channel_names(urls)
    if receiver is not None:
        names = [receiver if i == 1 else f"{receiver}:{i}" for i in range(1, len(urls) + 1)]
    for i, (url, name) in enumerate(zip(urls, names, strict=True), start=1):
        if not scheme(url):
            raise AppriseConfigError(f"URL {i}: not a URL (expected scheme://...)")
        with _apprise_log():
            service = apprise.Apprise.instantiate(url, asset=asset)
        if service is None:
            raise AppriseConfigError(
                f"URL {i} ({scheme(url)}://...): Apprise does not support it or cannot parse it"
            )
        query = urlsplit(url).query
        if "rto=" not in query:
            service.socket_read_timeout = timeout.total_seconds()
        if "cto=" not in query:
            service.socket_connect_timeout = min(timeout.total_seconds(), 5.0)
        if getattr(service, "retry", 0):
            service.retry = 0  # the outbox retries; Apprise's own would resend after a timeout
        client = apprise.Apprise(asset=asset)
        client.add(service)
        channels.append(AppriseNotifier(name, service, client, pacing))
    return channels
