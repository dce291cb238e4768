"""Notifications end to end: real containers, a real `guardian run`, a fake Slack on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.helpers import wait_until
from tests.integration.notify_helpers import notifying, run
from tests.integration.see_more import rows
from tests.receiver import HANG, Answer, FakeReceiver

# The health output carries a marker so the message's "last health output" can be checked.
HEALTH = "test ! -f /run/sick || (echo disk-full-marker; exit 1)"
SLACK_PATH = "/services/T0GDT/B0GDT/gdtSecretWebhook0123456789"
ENV = "GDT_SLACK_WEBHOOK"


@pytest.fixture
def slack():
    r = FakeReceiver()
    yield r
    r.stop()


@pytest.fixture
def with_slack(guardian, slack):
    """guardian(...) with the fake Slack webhook configured through an env var; at teardown,
    the webhook URL must not appear anywhere in Guardian's log."""
    notify = {"slack_webhook_url_env": ENV, "group_wait": "0s", "retry_backoff": "200ms"}
    env = {ENV: slack.url(SLACK_PATH)}
    with notifying(guardian, notify, env, absent=(SLACK_PATH, "gdtSecret")) as make:
        yield make


def texts(receiver: FakeReceiver) -> list[str]:
    return [r.json["text"] for r in receiver.answered(200)]


def test_a_full_incident_is_told_opened_attempt_resolved(containers, with_slack, slack):
    name = run(containers, "app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    with_slack(watch={"interval": "30s"})
    containers.make_unhealthy(name)

    wait_until(lambda: len(slack.answered()) >= 3, 30, message="three slack messages")
    msgs = [r.json for r in slack.answered()]
    heads = [m["blocks"][0]["text"]["text"] for m in msgs]
    assert "Incident opened" in heads[0] and name in heads[0]
    assert "Restart attempt 1 of 3" in heads[1] and "restarted" in heads[1]
    assert "Resolved" in heads[2]
    host = socket.gethostname()
    opened = msgs[0]
    # The plain-text fallback carries everything the blocks do.
    for needle in (name, host, "unhealthy", "state: active", "disk-full-marker", "next:"):
        assert needle in opened["text"], needle
    fields = " ".join(f["text"] for f in opened["blocks"][1]["fields"])
    assert name in fields and host in fields and "unhealthy" in fields
    assert any("disk-full-marker" in b.get("text", {}).get("text", "") for b in opened["blocks"])
    assert "attempt 1 of 3" in msgs[1]["text"] and "verifying" in msgs[1]["text"]
    assert "state: resolved" in msgs[2]["text"]
    assert len(slack.requests) == 3  # nothing else: one message per state change, not per check


def test_give_up_is_told_once_with_what_happens_next(containers, with_slack, slack):
    name = run(containers, "stuck", health_cmd="echo db-unreachable-marker; false")
    g = with_slack(restart={"max_attempts": 1, "cooldown": "1s"})
    wait_until(lambda: any("Gave up" in t for t in texts(slack)), 40, message="give-up message")
    gave_up = next(r.json for r in slack.answered() if "Gave up" in r.json["text"])
    assert name in gave_up["text"] and "a human must look at it" in gave_up["text"]
    assert "db-unreachable-marker" in gave_up["text"]
    heads = [t.splitlines()[0] for t in texts(slack)]
    assert heads[0].startswith("Incident opened")
    assert heads[1].startswith("Restart attempt 1 of 1")
    assert sum("Gave up" in h for h in heads) == 1
    assert g.lines("giving up")


def test_429_retry_after_is_honoured_and_the_message_arrives_once(containers, with_slack, slack):
    slack.script = [Answer(429, "rate_limited", {"Retry-After": "2"})]
    name = run(containers, "limited", health_cmd="false")
    g = with_slack(restart={"dry_run": True})
    wait_until(lambda: slack.answered(200), 20, message="delivered after 429")
    first, second = slack.requests[0], slack.answered(200)[0]
    assert first.status == 429
    assert second.at - first.at >= 2.0
    assert second.body == first.body and name in second.json["text"]
    wait_until(
        lambda: rows(g.store_path, "SELECT * FROM deliveries WHERE state='delivered'"),
        5,
        message="delivery recorded",
    )
    assert len(slack.requests) == 2


def test_500_three_times_then_200_is_delivered_once(containers, with_slack, slack):
    slack.script = [Answer(500, "rollup_error")] * 3
    run(containers, "flaky", health_cmd="false")
    g = with_slack(restart={"dry_run": True})
    wait_until(lambda: slack.answered(200), 20, message="delivered after 500s")
    assert [r.status for r in slack.requests] == [500, 500, 500, 200]
    wait_until(
        lambda: rows(g.store_path, "SELECT * FROM deliveries WHERE state='delivered'"),
        5,
        message="delivery recorded",
    )
    assert len(slack.answered(200)) == 1


def test_404_no_service_is_dead_lettered_logged_once_and_not_retried(containers, with_slack, slack):
    slack.default = Answer(404, "no_service")
    name = run(containers, "gone", health_cmd="false")
    g = with_slack(restart={"dry_run": True})
    dead = wait_until(
        lambda: rows(g.store_path, "SELECT * FROM dead_letters"), 20, message="dead letter"
    )
    assert dead[0]["channel"] == "slack" and "no_service" in dead[0]["last_error"]
    assert g.stop() == 0
    assert len(slack.requests) == 1
    [line] = g.lines('reason="404 no_service"')  # the store path also holds "no_service"
    assert "refused by the channel; not retried" in line
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "guardian.entrypoints.cli",
            "notifications",
            "--json",
            "-c",
            g.config_path,
        ],
        capture_output=True,
        text=True,
        check=True,  # needs no secret: it only reads the store
    )
    doc = json.loads(listed.stdout)
    assert doc["queued"] == 0
    [row] = doc["dead_letters"]
    assert row["channel"] == "slack" and row["kind"] == "opened" and row["container"] == name
    assert row["error"] == "404 no_service"


def test_a_slack_that_never_answers_does_not_delay_restarts(
    containers, with_slack, slack, engine_events
):
    slack.default = HANG
    name = run(containers, "app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = with_slack(watch={"interval": "30s"}, notify={"timeout": "60s"})
    containers.make_unhealthy(name)
    # Judged by the engine's own record: the unhealthy state lasts milliseconds.
    unhealthy = engine_events.first(name, "health_status: unhealthy")
    restarted = engine_events.first(name, "restart", timeout=10)
    assert restarted - unhealthy < 2.0
    wait_until(
        lambda: rows(g.store_path, "SELECT * FROM incidents WHERE state='resolved'"),
        20,
        message="resolved while Slack hangs",
    )
    assert len(slack.requests) == 1 and slack.requests[0].status is None
