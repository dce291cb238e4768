"""Redaction rules: what a container prints and what a receiver echoes, made safe to keep."""

from __future__ import annotations

import time

import pytest

from guardian.core.redaction import Redactor, scrub_url, strip_controls, untrusted


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("DB_PASSWORD=hunter2 starting", "DB_PASSWORD=*** starting"),
        ('export API_KEY="two words" now', 'export API_KEY="***" now'),
        ('{"password": "s3cr3t", "user": "bob"}', '{"password": "***", "user": "bob"}'),
        ("X-Auth-Token: abc123", "X-Auth-Token: ***"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "Authorization: Bearer ***"),
        ("curl -H 'Basic dXNlcjpwYXNz'", "curl -H 'Basic ***'"),
        ("tcp://admin:Sup3rSecretPw@10.0.0.1:2376 refused", "tcp://***@10.0.0.1:2376 refused"),
        ("POST /hook?token=QUERYSECRET&x=1 -> 400", "POST /hook?token=***&x=1 -> 400"),
        (
            "see https://u-tok@git.example/r?sig=abc&v=2",
            "see https://***@git.example/r?sig=***&v=***",
        ),
        # Readable text stays readable.
        ("author=alice exit 1", "author=alice exit 1"),
        ("Basic authentication failed", "Basic authentication failed"),
        ("GET https://example.com/health: 503", "GET https://example.com/health: 503"),
    ],
)
def test_container_output_is_redacted_by_pattern(text: str, shown: str) -> None:
    assert untrusted(text, 500) == shown


def test_escape_sequences_never_reach_a_terminal() -> None:
    hostile = "\x1b[2J\x1b[1;31mALL-CLEAR\x1b[0m\x1b]0;owned\x07 \x9b31m\u202edone\x00\x7f"
    assert untrusted(hostile, 500) == "ALL-CLEAR done"
    assert strip_controls("a\tb\nc") == "a\tb\nc"


def test_output_is_one_bounded_line() -> None:
    shown = untrusted("line one\nline two " + "x" * 5000, 100)
    assert len(shown) == 100 and "\n" not in shown and shown.endswith("…")


def test_a_registered_url_is_redacted_in_pieces_wherever_they_are_echoed() -> None:
    redact = Redactor()
    redact.add("https://hooks.example/services/T0/B0/pathsecret1?token=QUERYSECRET1")
    echoed = "400 bad request: /services/T0/B0/pathsecret1?x=QUERYSECRET1"
    assert redact(echoed) == "400 bad request: ***?x=***"
    assert "QUERYSECRET1" not in redact("the token was QUERYSECRET1")


def test_a_secret_cut_by_a_length_limit_is_masked_from_its_first_characters() -> None:
    redact = Redactor()
    redact.add("https://hooks.example/services/T0/B0/pathsecret123456")
    assert redact("400 no such hook /services/T0/B0/pathsec") == "400 no such hook ***"
    assert redact("400 no such hook /services/T0/B0/pathsec…") == "400 no such hook ***"
    assert redact("400 bad request") == "400 bad request"


def test_scrub_url_keeps_host_and_path() -> None:
    assert scrub_url("tcp://admin:pw@docker.lan:2376") == "tcp://***@docker.lan:2376"
    assert scrub_url("unix:///var/run/docker.sock") == "unix:///var/run/docker.sock"


@pytest.mark.parametrize(
    "hostile", ["a." * 40_000, "token" * 16_000, "a://" * 20_000, "\x1b[" * 40_000, "x=" * 40_000]
)
def test_redaction_stays_linear_on_hostile_text(hostile: str) -> None:
    # A log line or a receiver's answer is bounded well below this; the rules must not blow up.
    started = time.process_time()
    Redactor()(hostile)
    untrusted(hostile, 300)
    assert time.process_time() - started < 2.0
