"""The apprise channel: real Apprise URLs (json://, ntfy://) sent to a fake receiver on 127.0.0.1,
typed outcomes, hostile container output, secrets, and the channel's config errors."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.notify.apprise import (
    EXTRA_MISSING,
    AppriseConfigError,
    apprise_channels,
    channel_names,
    judge,
    parse_urls,
    secret_parts,
)
from guardian.adapters.notify.apprise_text import render
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_delivery
from guardian.config import ConfigError, load_settings
from guardian.core.model import Incident, IncidentState, Outcome, ProblemType
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import Status
from guardian.core.redaction import Redactor
from tests.fakes import T0, FakeClock
from tests.receiver import HANG, Answer, FakeReceiver, free_port

S = timedelta(seconds=1)
UNKNOWN, PERMANENT = Status.UNKNOWN, Status.PERMANENT
HOSTILE = "[click me](http://evil.example/x) <img src=x onerror=alert(1)> `rm -rf` **bold**"
INCIDENT = Incident(
    7, "vm1", "web", "c" * 64, ProblemType.UNHEALTHY, IncidentState.ACTIVE, T0, T0, detail=HOSTILE
)


def opened(nid: int = 1) -> notifications.Notification:
    return replace(notifications.opened(INCIDENT, None, T0), id=nid)


def attempt() -> notifications.Notification:
    return notifications.attempt(INCIDENT, 1, 3, Outcome.RESTARTED, "restarted", T0)


@pytest.fixture
def rx():
    r = FakeReceiver()
    yield r
    r.stop()


def channel(url: str, timeout: timedelta = 2 * S, redact: Redactor | None = None):
    [c] = apprise_channels(url, timeout, 0 * S, redact or Redactor())
    return c


def json_url(rx: FakeReceiver, path: str = "/hook", query: str = "") -> str:
    return rx.url(path).replace("http://", "json://", 1) + query


# -- what arrives ---------------------------------------------------------------------------


def test_json_url_delivers_title_body_and_type(rx):
    result = channel(json_url(rx)).send([opened()])
    assert result.ok
    doc = rx.requests[0].json
    assert doc["title"] == "Incident opened: web on vm1: unhealthy"
    assert doc["type"] == "warning"
    # JSON carries Markdown: Apprise's json:// accepts it as it is.
    for needle in ("**Container:** `web`", "**Host:** vm1", "unhealthy, active", "**Next:**"):
        assert needle in doc["message"], needle


def test_ntfy_url_reaches_a_local_ntfy_with_the_topic_in_plain_text(rx):
    ntfy = rx.url("/").replace("http://", "ntfy://", 1) + "gdt-topic"
    assert channel(ntfy).send([attempt()]).ok
    doc = rx.requests[0].json
    assert doc["topic"] == "gdt-topic"
    assert doc["title"].startswith("Restart attempt 1 of 3: web on vm1")
    assert "Attempt: 1 of 3" in doc["message"] and "**" not in doc["message"]


def test_a_burst_is_one_message_listing_every_event(rx):
    other = replace(INCIDENT, id=8, container="api")
    batch = [opened(1), replace(notifications.opened(other, None, T0), id=2)]
    assert channel(json_url(rx)).send(batch).ok
    doc = rx.requests[0].json
    assert doc["title"] == "2 Guardian events on vm1"
    assert "Incident opened: web on vm1" in doc["message"]
    assert "Incident opened: api on vm1" in doc["message"]


def test_markdown_services_get_markdown_and_container_output_stays_literal(rx):
    as_html = channel(json_url(rx, query="?format=html"))  # Apprise renders Markdown to HTML
    assert as_html.send([opened()]).ok
    body = rx.requests[0].json["message"]
    assert "<strong>Container:</strong>" in body or "<b>Container:</b>" in body
    assert "<a " not in body and "<img" not in body  # the output is text, never markup
    assert "click me" in html.unescape(body) and "onerror" in html.unescape(body)


def test_the_markdown_body_puts_container_output_in_a_code_span():
    body = render([opened()], markdown=True).body
    line = next(x for x in body.splitlines() if "Last output" in x)
    assert line.endswith("`" + HOSTILE.replace("`", "'") + "`")
    assert line.count("`") == 2


# -- typed outcomes -------------------------------------------------------------------------


def test_500_is_retried_and_404_is_permanent(rx):
    c = channel(json_url(rx))
    rx.script = [Answer(500, "boom"), Answer(404, "no such hook")]
    first, second = c.send([opened()]), c.send([opened()])
    assert (first.status, first.reason) == (Status.TRANSIENT, "apprise: the service failed (500)")
    assert second.status is Status.PERMANENT and "404" in second.reason


def test_a_refused_connection_is_transient():
    result = channel(f"json://127.0.0.1:{free_port()}/x").send([opened()])
    assert result.status is Status.TRANSIENT and "before sending" in result.reason


def test_a_send_that_times_out_is_unknown_and_so_never_resent(rx):
    rx.default = HANG
    result = channel(json_url(rx), timeout=timedelta(milliseconds=500)).send([opened()])
    assert result.status is Status.UNKNOWN
    assert len(rx.requests) == 1  # Apprise did not retry on its own either


def test_a_retry_in_the_url_is_ignored_the_outbox_retries(rx):
    rx.default = Answer(500)
    assert channel(json_url(rx, query="?retry=3")).send([opened()]).status is Status.TRANSIENT
    assert len(rx.requests) == 1


@pytest.mark.parametrize(
    ("sent", "line", "elapsed", "status"),
    [
        (True, "", 0.1, Status.DELIVERED),
        (False, "Socket Exception: ... [Errno 111] Connection refused", 0.1, Status.TRANSIENT),
        (False, "Socket Exception: ... (connect timeout=5.0)", 5.0, Status.TRANSIENT),
        (False, "Socket Exception: ... Read timed out. (read timeout=10)", 10.0, Status.UNKNOWN),
        (False, "Socket Exception: ('Connection aborted.', RemoteDisconnected())", 1, UNKNOWN),
        (False, "Failed to send ntfy notification: error=503.", 0.1, Status.TRANSIENT),
        (False, "Failed to send Gotify notification: Unauthorized - error=401.", 0.1, PERMANENT),
        (False, "Failed to send: error=429.", 0.1, Status.RATE_LIMITED),
        (False, "an SMTP server that never answered", 10.0, Status.UNKNOWN),  # took the timeout
        (False, "something Apprise did not explain", 0.1, Status.TRANSIENT),
    ],
)  # fmt: skip
def test_judge_types_every_apprise_failure(sent, line, elapsed, status):
    assert judge(sent, [line], elapsed, read_timeout=10.0).status is status


# -- names, secrets, config -----------------------------------------------------------------


def test_each_url_is_its_own_target_named_by_its_scheme_never_its_url():
    urls = ["ntfy://ntfy.sh/a", "json://h/x", "ntfy://ntfy.sh/b", "ntfy://ntfy.sh/c"]
    names = ["apprise:ntfy", "apprise:json", "apprise:ntfy:2", "apprise:ntfy:3"]
    assert channel_names(urls) == names


def test_urls_one_per_line_with_comments_and_blank_lines():
    text = "# ops\nntfy://ntfy.sh/a\n\n  tgram://1:x/2  \n# json://old\n"
    assert parse_urls(text) == ["ntfy://ntfy.sh/a", "tgram://1:x/2"]


def test_credentials_in_any_position_of_the_url_are_redacted():
    tgram = "tgram://123456789:AAHgdtSecretBotToken/12345"
    pover = "pover://gdtSecretUserKey@gdtSecretAppToken"
    ntfy = "ntfys://admin:gdtSecretPassword@ntfy.example.org/topic"
    redact = Redactor()
    for url in (tgram, pover, ntfy, "json://127.0.0.1:8080/x"):
        for part in secret_parts(url):
            redact.add(part)
    text = redact(
        "bot 123456789:AAHgdtSecretBotToken user gdtSecretUserKey app gdtSecretAppToken"
        " pass gdtSecretPassword at ntfy.example.org and 127.0.0.1:8080"
    )
    assert "gdtSecret" not in text
    assert "ntfy.example.org" in text and "127.0.0.1:8080" in text  # host names are no secret


LEAK_PROBE = """
import logging, sys
from datetime import timedelta
from guardian.adapters.notify.apprise import apprise_channels
from guardian.core.outbound.notifications import Kind, Notification
from guardian.core.redaction import Redactor
from guardian.logs import setup_logging
from tests.fakes import T0
setup_logging("debug")
logging.basicConfig(level=logging.DEBUG)  # whatever a host process sets up at the root
[c] = apprise_channels(sys.argv[1], timedelta(seconds=2), timedelta(0), Redactor())
print(c.send([Notification(Kind.OPENED, 1, "h", "web", "unhealthy", "active", T0)]).status)
"""


def test_apprise_logs_never_reach_guardians_log_or_stderr(rx):
    """Apprise logs every URL it loads and posts to (its path may be the token) and the host of
    every failed send: none of it may reach a log, even with a handler at the root."""
    rx.default = Answer(500)
    url = json_url(rx, "/gdtSecretPath0123")
    probe = subprocess.run(
        [sys.executable, "-c", LEAK_PROBE, url], capture_output=True, text=True, timeout=60
    )
    assert probe.stdout.strip() == "transient", probe.stderr
    apprise_lines = [x for x in probe.stderr.splitlines() if ":apprise:" in x]
    assert apprise_lines == []  # (urllib3's own debug lines are every HTTP channel's matter)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "no URL in it"),
        ("gdtSecretNoScheme", "URL 1: not a URL (expected scheme://...)"),
        ("json://h/x\nnosuchservice://gdtSecret/x", "URL 2 (nosuchservice://...): Apprise does"),
        ("\n".join(f"json://h/{i}" for i in range(21)), "21 URLs; at most 20"),
    ],
)
def test_a_bad_url_list_is_one_line_naming_the_url_by_position(text, error):
    with pytest.raises(AppriseConfigError) as exc:
        apprise_channels(text or "# nothing", S, S, Redactor())
    assert error in str(exc.value) and "gdtSecret" not in str(exc.value)


def build(tmp_path, env):
    settings = load_settings(None, env={"GUARDIAN_NOTIFY_APPRISE_URLS_ENV": "GDT_APPRISE"})
    store = SqliteStore(tmp_path / "g.db")
    metrics = PrometheusMetrics(CollectorRegistry())
    return build_delivery(settings, store, FakeClock(), metrics, "vm1", env=env), metrics


def test_bootstrap_builds_one_channel_per_url_and_counts_each(tmp_path):
    urls = "ntfy://127.0.0.1:1/a\njson://127.0.0.1:1/b\nntfy://127.0.0.1:1/c"
    worker, metrics = build(tmp_path, {"GDT_APPRISE": urls})
    names = [c.name for c in worker.channels]
    assert names == ["apprise:ntfy", "apprise:json", "apprise:ntfy:2"]
    labels = {"channel": "apprise:ntfy:2", "outcome": "dead_letter"}
    assert metrics.registry.get_sample_value("guardian_notifications_total", labels) == 0


def test_a_bad_url_stops_the_start_with_the_key_named(tmp_path):
    with pytest.raises(ConfigError) as exc:
        build(tmp_path, {"GDT_APPRISE": "json://h/x\ngdtSecretOops"})
    assert str(exc.value) == "notify.apprise_urls: URL 2: not a URL (expected scheme://...)"


def test_without_the_extra_the_error_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "apprise", None)  # what `import apprise` meets uninstalled
    with pytest.raises(ConfigError) as exc:
        build(tmp_path, {"GDT_APPRISE": "ntfy://ntfy.sh/gdtSecretTopic"})
    assert str(exc.value) == f"notify.apprise_urls: {EXTRA_MISSING}"
    assert "pip install 'container-guardian[apprise]'" in str(exc.value)


def test_json_body_is_valid_for_every_kind(rx):
    c = channel(json_url(rx))
    gave_up = replace(opened(), kind=notifications.Kind.GAVE_UP)
    resolved = notifications.resolved(INCIDENT, "healthy again", T0)
    for n in (opened(), attempt(), resolved, gave_up):
        assert c.send([n]).ok
    types = [json.loads(r.body)["type"] for r in rx.requests]
    assert types == ["warning", "warning", "success", "failure"]
