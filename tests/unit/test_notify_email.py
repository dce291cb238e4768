"""The email channel against a real SMTP conversation on 127.0.0.1: plain, STARTTLS and
implicit TLS with certificate checks, AUTH only over TLS, and typed outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardian.adapters.notify.email import EmailNotifier
from guardian.core.outbound.delivery import Status
from tests.helpers import require_tool
from tests.receiver import free_port
from tests.samples import S, opened
from tests.smtp import SmtpServer, make_ca_and_cert

HEADLINE = "Subject: [guardian] Incident opened: web on vm1: unhealthy"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    require_tool("openssl", "openssl")
    return make_ca_and_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def trusted(certs, monkeypatch):
    """The test CA is what this process trusts (as SSL_CERT_FILE makes OpenSSL do)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certs[0]))
    return certs


def mailer(port: int, security: str, **kw) -> EmailNotifier:
    return EmailNotifier("127.0.0.1", port, security, "g@x", ["ops@x"], 5 * S, **kw)


def test_email_is_sent_over_smtp_and_a_refusal_is_permanent():
    smtp = SmtpServer()
    mail = mailer(smtp.port, "none")
    assert mail.send([opened()]).ok
    assert HEADLINE in smtp.messages[0].text
    smtp.reply_to_data = "554 rejected"
    assert mail.send([opened()]).status is Status.PERMANENT
    smtp.reply_to_data = "451 try later"
    assert mail.send([opened()]).status is Status.TRANSIENT
    smtp.close()
    assert mailer(free_port(), "none").send([opened()]).status is Status.TRANSIENT


@pytest.mark.parametrize("security", ["starttls", "tls"])
def test_the_password_and_the_message_only_travel_over_tls(trusted, security):
    smtp = SmtpServer(security, cert=(trusted[1], trusted[2]))
    mail = mailer(smtp.port, security, username="guardian", password="s3cret")
    result = mail.send([opened()])
    smtp.close()
    assert result.ok, result.reason
    assert [(x.user, x.password, x.tls) for x in smtp.logins] == [("guardian", "s3cret", True)]
    assert [(HEADLINE in m.text, m.tls) for m in smtp.messages] == [(True, True)]


@pytest.mark.parametrize("security", ["starttls", "tls"])
def test_a_certificate_nobody_vouches_for_gets_nothing(certs, security, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(certs[1].parent / "nobody.pem"))  # trusts no one
    smtp = SmtpServer(security, cert=(certs[1], certs[2]))
    result = mailer(smtp.port, security, username="guardian", password="s3cret").send([opened()])
    smtp.close()
    assert result.status is Status.TRANSIENT
    assert "SSLCertVerificationError" in result.reason
    assert smtp.logins == [] and smtp.messages == []


def test_a_server_that_does_not_offer_starttls_gets_nothing_in_plain_text(trusted):
    smtp = SmtpServer("starttls", cert=(trusted[1], trusted[2]), offer_starttls=False)
    result = mailer(smtp.port, "starttls", username="guardian", password="s3cret").send([opened()])
    smtp.close()
    assert result.status is Status.TRANSIENT
    assert smtp.logins == [] and smtp.messages == []
