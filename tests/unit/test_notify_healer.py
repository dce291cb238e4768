"""What the loop queues in the outbox: state changes and escalations, never per detection."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.config import ConfigError, load_settings
from guardian.config.credentials import resolve_secret
from guardian.core.redaction import Redactor
from guardian.logs import LogfmtFormatter, RedactingFilter, kv
from guardian.service.operator import Operator
from tests.app import TestApp, make_world


@pytest.fixture
def w(tmp_path: Path) -> TestApp:
    return make_world(tmp_path)


def queued(w: TestApp) -> list[dict]:
    rows = w.store.db.query("SELECT payload FROM outbox ORDER BY id")
    return [json.loads(r["payload"]) for r in rows]


def test_a_healed_incident_queues_opened_attempt_resolved(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy", health_output="probe failed")
    w.healer.sweep()
    w.clock.advance(2)
    w.healer.verifier.verify()
    for _ in range(3):
        w.healer.sweep()  # healthy sweeps queue nothing more
        w.clock.advance(1)
    notes = queued(w)
    assert [n["kind"] for n in notes] == ["opened", "attempt", "resolved"]
    opened, attempt, resolved = notes
    assert opened["container"] == "app" and opened["detail"] == "probe failed"
    assert opened["next_step"] == "Guardian restarts it now (attempt 1 of 3)"
    assert (attempt["attempt"], attempt["max_attempts"], attempt["outcome"]) == (1, 3, "restarted")
    assert resolved["state"] == "resolved" and resolved["detail"] == "healthy after restart"
    assert {n["incident_id"] for n in notes} == {w.store.open_incidents("h")[0].id}


def test_an_incident_that_is_given_up_queues_one_opened_and_one_gave_up(w: TestApp) -> None:
    w.engine.add("app", health="unhealthy", labels={"guardian.enable": "true"})
    w.engine.after_restart_health = "unhealthy"
    for _ in range(30):
        w.healer.sweep()
        w.clock.advance(1)
        w.healer.verifier.verify()
    kinds = [n["kind"] for n in queued(w)]
    assert kinds.count("opened") == 1
    assert kinds.count("gave_up") == 1  # escalated once, not per sweep
    assert kinds.count("attempt") == 6  # per attempt: restarted, then unhealthy_after_restart


def test_guardian_notify_false_mutes_a_container(w: TestApp) -> None:
    w.engine.add(
        "quiet", health="unhealthy", labels={"guardian.enable": "true", "guardian.notify": "false"}
    )
    w.engine.add("loud", health="unhealthy")
    w.healer.sweep()
    w.clock.advance(2)
    w.healer.verifier.verify()
    assert {n["container"] for n in queued(w)} == {"loud"}


def test_a_person_acknowledging_or_resolving_queues_it_with_the_transition(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path, dry_run=True)  # the incidents stay active: nothing restarts them
    w.engine.add("app", health="unhealthy", labels={"guardian.enable": "true"})
    w.engine.add(
        "quiet", health="unhealthy", labels={"guardian.enable": "true", "guardian.notify": "false"}
    )
    w.healer.sweep()
    op = Operator(w.store, w.clock, "h")
    app, quiet = sorted(w.store.open_incidents("h"), key=lambda i: i.container)
    op.change(app.id or 0, "ack", "alice", "looking")
    last = queued(w)[-1]
    assert last["kind"] == "acknowledged" and last["actor"] == "alice"
    assert last["state"] == "acknowledged" and last["incident_id"] == app.id
    op.change(app.id or 0, "resolve", "alice", "fixed the db")
    last = queued(w)[-1]
    assert last["kind"] == "resolved" and last["detail"] == "resolved by alice: fixed the db"
    op.change(quiet.id or 0, "ack", "bob")  # muted: never told, so no ack message either
    assert {n["container"] for n in queued(w)} == {"app"}
    assert SqliteOutbox(w.store.db).queue_depth() == 3


def test_secrets_come_from_env_or_file_and_errors_never_show_them(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("file-secret-value\n")
    (tmp_path / "tok").chmod(0o600)
    settings = load_settings(
        None,
        env={
            "GUARDIAN_NOTIFY_SLACK_WEBHOOK_URL_ENV": "MY_URL",
            "GUARDIAN_NOTIFY_SLACK_BOT_TOKEN_FILE": str(tmp_path / "tok"),
        },
    )
    redact = Redactor()
    url = "https://hooks.slack.com/services/T1/B2/abcdefsecret"
    assert resolve_secret(settings, "slack_webhook_url", redact, {"MY_URL": url}) == url
    assert resolve_secret(settings, "slack_bot_token", redact, {}) == "file-secret-value"
    assert resolve_secret(settings, "discord_webhook_url", redact, {}) is None
    with pytest.raises(ConfigError, match=r"MY_URL.*not set") as err:
        resolve_secret(settings, "slack_webhook_url", redact, {})
    assert "hooks.slack" not in str(err.value)
    assert redact(f"POST {url} failed") == "POST *** failed"
    assert redact("GET /services/T1/B2/abcdefsecret") == "GET ***"


def test_a_webhook_url_in_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("notify:\n  slack_webhook_url: https://hooks.slack.com/x\n")
    with pytest.raises(ConfigError, match="unknown key notify"):
        load_settings(path, env={})


def test_the_log_filter_redacts_messages_fields_and_exceptions() -> None:
    redact = Redactor()
    redact.add("tok-123456")
    record = logging.LogRecord(
        "guardian", logging.ERROR, "", 0, "sent to %s", ("tok-123456",), None
    )
    record.__dict__.update(kv(url="http://x/tok-123456", n=3))
    try:
        raise ValueError("boom at http://x/tok-123456")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    assert RedactingFilter(redact).filter(record)
    line = LogfmtFormatter().format(record)
    assert "tok-123456" not in line and "***" in line and "boom" in line
