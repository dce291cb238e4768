"""EmailNotifier: plain-text mail over SMTP (smtplib) with STARTTLS or TLS and optional auth.

SMTP does not deduplicate: a failure after the message data was sent is an unknown outcome
and is never resent. What a container wrote reaches the Subject header only through header():
no line break can start a header of its own, and no `=?charset?...?=` encoded-word in it is
decoded by the reader's mail program into text Guardian never wrote.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from datetime import timedelta
from email import policy
from email.message import EmailMessage

from guardian.core.outbound.delivery import DELIVERED, Result, Status
from guardian.core.outbound.notifications import Notification
from guardian.core.redaction import strip_controls

SUBJECT_MAX = 200
# The Subject's UTF-8 bytes: encoded (base64 at worst) it still fits one line of RFC 5322's 998.
SUBJECT_BYTES = 600
# No folding below RFC 5322's hard limit: the standard library's folder can cut an encoded-word
# in the middle of an escape, and the reader then sees `=?utf-8?q?...` instead of the text.
MAIL = policy.default.clone(max_line_length=998)


def header(text: str, limit: int = SUBJECT_MAX) -> str:
    """`text` fit for a header: one line, no control character, no encoded-word opener, at
    most `limit` characters and SUBJECT_BYTES bytes."""
    text = " ".join(strip_controls(text).split()).replace("=?", "= ?")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    while len(text.encode()) > SUBJECT_BYTES:
        text = text[:-2] + "…"
    return text


def compose(batch: Sequence[Notification], sender: str, to: Sequence[str]) -> EmailMessage:
    msg = EmailMessage(policy=MAIL)
    if len(batch) == 1:
        subject = f"[guardian] {batch[0].headline}"
        body = batch[0].text()
    else:
        hosts = ", ".join(sorted({n.host for n in batch}))
        subject = f"[guardian] {len(batch)} events on {hosts}"
        body = "\n\n".join(n.text() for n in batch)
    msg["Subject"] = header(subject)
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg.set_content(strip_controls(body) + "\n")
    return msg


class EmailNotifier:
    idempotent = False
    max_batch = 50

    def __init__(
        self,
        host: str,
        port: int,
        security: str,
        sender: str,
        to: Sequence[str],
        timeout: timedelta,
        username: str | None = None,
        password: str | None = None,
        name: str = "email",
    ) -> None:
        self.name = name
        self.min_interval = timedelta(0)
        self._host, self._port, self._security = host, port, security
        self._sender, self._to = sender, list(to)
        self._timeout = timeout.total_seconds()
        self._username, self._password = username, password

    def _connect(self) -> smtplib.SMTP:
        if self._security == "tls":
            return smtplib.SMTP_SSL(
                self._host, self._port, timeout=self._timeout, context=ssl.create_default_context()
            )
        smtp = smtplib.SMTP(self._host, self._port, timeout=self._timeout)
        if self._security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        return smtp

    def send(self, batch: Sequence[Notification]) -> Result:
        msg = compose(batch, self._sender, self._to)
        try:
            smtp = self._connect()
        except (OSError, smtplib.SMTPException) as exc:
            return Result(Status.TRANSIENT, f"smtp connect failed: {type(exc).__name__}")
        sent = False
        try:
            with smtp:
                if self._username:
                    smtp.login(self._username, self._password or "")
                try:
                    smtp.send_message(msg)
                except (TimeoutError, smtplib.SMTPServerDisconnected):
                    return Result(Status.UNKNOWN, "smtp connection lost while sending")
                sent = True
        except smtplib.SMTPAuthenticationError as exc:
            return Result(Status.PERMANENT, f"smtp authentication failed ({exc.smtp_code})")
        except smtplib.SMTPRecipientsRefused:
            return Result(Status.PERMANENT, "smtp recipients refused")
        except smtplib.SMTPResponseException as exc:
            if sent:
                return DELIVERED  # only the QUIT failed
            status = Status.TRANSIENT if 400 <= exc.smtp_code < 500 else Status.PERMANENT
            return Result(status, f"smtp {exc.smtp_code}")
        except (OSError, smtplib.SMTPException) as exc:
            if sent:
                return DELIVERED
            return Result(Status.TRANSIENT, f"smtp failed: {type(exc).__name__}")
        return DELIVERED
