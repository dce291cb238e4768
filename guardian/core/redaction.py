"""Redaction: known secrets, secret-looking patterns and terminal control sequences taken out of
any text Guardian stores, logs, sends or prints (log lines, receiver answers, container output).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

MASK = "***"

# ESC-introduced sequences (CSI such as "\x1b[2J", OSC titles ending in BEL or ST, two-byte
# escapes), then any C0/C1 control but tab and newline, DEL, and the bidi overrides that make
# a line read differently from what it holds.
_CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
# A URL: scheme://, then anything up to white space or a quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s\"'<>`]+")
_USERINFO = re.compile(r"(://)[^/?#\s@]*@")
_QUERY_VALUE = re.compile(r"([?&;][^=&;#\s]*=)[^&;#\s]*")
# KEY=value or KEY: value whose key names a secret (DB_PASSWORD=..., "api_key": "...", token=...);
# a quoted value is masked whole.
_SECRET_KEY = (
    r"[A-Za-z0-9_.-]{0,64}?(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credential|auth(?:orization)?(?![a-z]))[A-Za-z0-9_.-]{0,64}"
)
_KEY_VALUE = re.compile(
    rf"(?i)((?<![A-Za-z0-9_.-]){_SECRET_KEY}[\"']?[ \t]{{0,8}}[=:][ \t]{{0,8}})"
    r"(?:\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|(?!\*\*\*|(?:bearer|basic)\s+\*\*\*)[^\s\"'&,;]+)"
)
# Credentials after an Authorization scheme: "Bearer eyJ...", "Basic dXNlcjpw..." (a token has
# a capital or a digit, so "Basic authentication failed" stays readable).
_SCHEME_TOKEN = re.compile(
    r"\b([Bb]earer|BEARER|Basic|BASIC)(\s+)(?=[A-Za-z0-9._~+/-]*[A-Z0-9])"
    r"[A-Za-z0-9._~+/-]{8,}=*"
)


def _mask_value(match: re.Match[str]) -> str:
    value = match.group(0)[len(match.group(1)) :]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group(1)}{quote}{MASK}{quote}"


def strip_controls(text: str) -> str:
    """`text` without terminal escape sequences or control characters (tab, newline kept)."""
    return _CONTROLS.sub("", text)


def scrub_url(url: str) -> str:
    """A URL without its userinfo or query values: `https://***@host/p?token=***`."""
    return _QUERY_VALUE.sub(rf"\1{MASK}", _USERINFO.sub(rf"\1{MASK}@", url))


def redact_patterns(text: str) -> str:
    """`text` with every URL scrubbed (scrub_url), the value of every KEY=value or KEY: value
    whose key names a secret masked, and bearer/basic credentials masked."""
    text = _URL.sub(lambda m: scrub_url(m.group(0)), text)
    text = _SCHEME_TOKEN.sub(rf"\1\2{MASK}", text)
    return _KEY_VALUE.sub(_mask_value, text)


def untrusted(text: str, limit: int) -> str:
    """What a container printed, made fit to store, log, send and show: control sequences
    stripped, secrets redacted by pattern, on one line, at most `limit` characters."""
    text = " ".join(redact_patterns(strip_controls(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Redactor:
    """Replaces every registered secret (with its URL's path, userinfo and query values) in
    text, then applies redact_patterns(): a secret nobody registered is still masked when it
    looks like one."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str) -> None:
        """Redact `secret`; a URL's path, userinfo and query values too (Slack and Discord
        put the credential in the path, others in userinfo or the query)."""
        if len(secret) >= 4:
            self._secrets.add(secret)
        self.add_credentials_of(secret, with_path=True)

    def add_credentials_of(self, url: str, with_path: bool = False) -> None:
        """Redact the userinfo and query values of `url` (and its path when `with_path`) but
        not the URL itself: the Docker URL is fine to show without its password."""
        if "://" not in url:
            return
        try:
            parts = urlsplit(url)
            pieces = [parts.username, parts.password] + [v for _, v in parse_qsl(parts.query)]
        except ValueError:
            return
        if with_path:
            pieces.append(parts.path)
        for piece in pieces:
            if piece and len(piece) >= 8:  # a short piece would mask ordinary words
                self._secrets.add(piece)

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def update(self, other: Redactor) -> None:
        """Also redact every secret `other` knows."""
        self._secrets |= other.secrets

    def __call__(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
            else:
                text = _cut_secret_masked(text, secret)
        return redact_patterns(text)


def _cut_secret_masked(text: str, secret: str) -> str:
    """`text` whose end, cut to a length limit (with or without "…"), is the start of `secret`:
    that start masked too, or the first characters of the secret would show."""
    body = text.removesuffix("…")
    for k in range(len(secret) - 1, 5, -1):
        if body.endswith(secret[:k]):
            return body[:-k] + MASK
    return text
