"""`guardian notify test` against fake receivers on 127.0.0.1, with the real transport: a 200, a
404 and a hang are each reported for their channel, within notify.timeout, with the right exit
code; the secrets stay out of what it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.receiver import HANG, Answer, FakeReceiver

SECRET = "gdtSecretNotifyTest0123456789"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def rx():
    r = FakeReceiver()

    def respond(rec: Any) -> Answer:
        if rec.path.startswith("/discord/"):  # a receiver that echoes the secret path back
            return Answer(404, f'{{"message": "Unknown Webhook {rec.path}", "code": 10015}}')
        if rec.path.startswith("/hook/"):
            return HANG
        return Answer(200, "ok")

    r.respond = respond
    yield r
    r.stop()


def notify_test(rx: FakeReceiver, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = {
        "store": {"path": str(tmp_path / "nowhere" / "guardian.db")},  # never opened
        "notify": {
            "channels": [
                {"name": "slack", "type": "slack", "url_env": "GDT_SLACK"},
                {"name": "discord", "type": "discord", "url_env": "GDT_DISCORD"},
                {"name": "webhook", "type": "webhook", "url_env": "GDT_HOOK"},
            ],
            "timeout": "1s",
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "GDT_SLACK": rx.url(f"/slack/{SECRET}"),
        "GDT_DISCORD": rx.url(f"/discord/{SECRET}"),
        "GDT_HOOK": rx.url(f"/hook/{SECRET}"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "guardian.entrypoints.cli",
            "notify",
            "test",
            "-c",
            str(path),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert SECRET not in done.stdout + done.stderr
    return done


def test_each_channel_is_reported_delivered_refused_or_unanswered(rx, tmp_path):
    started = time.monotonic()
    done = notify_test(rx, tmp_path, "--json")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    by = {r["channel"]: r for r in json.loads(done.stdout)["channels"]}
    assert list(by) == ["slack", "discord", "webhook"]
    assert by["slack"] == {**by["slack"], "delivered": True, "status": "delivered", "error": ""}
    assert by["discord"]["delivered"] is False and by["discord"]["status"] == "permanent"
    assert by["discord"]["error"].startswith("404") and "***" in by["discord"]["error"]
    assert by["webhook"]["delivered"] is False and by["webhook"]["status"] == "unknown"
    assert "no answer within 1s" in by["webhook"]["error"]
    assert 0.9 <= by["webhook"]["seconds"] < 3  # bounded by notify.timeout
    assert took < 10  # the channels are tried side by side
    slack = next(r for r in rx.requests if r.path.startswith("/slack/")).json
    assert slack["text"].startswith("[TEST] Guardian on ")
    assert len(rx.requests) == 3  # one message per channel, none retried


def test_one_channel_that_works_exits_0_and_prints_a_table(rx, tmp_path):
    done = notify_test(rx, tmp_path, "--channel", "slack")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split() == ["CHANNEL", "DELIVERED", "STATUS", "ERROR", "SECONDS"]
    assert row.split()[:4] == ["slack", "yes", "delivered", "-"]
    assert [r.path.split("/")[1] for r in rx.requests] == ["slack"]


def test_a_table_row_per_failing_channel_and_exit_1(rx, tmp_path):
    done = notify_test(rx, tmp_path, "--channel", "discord")
    assert done.returncode == 1
    [row] = done.stdout.splitlines()[1:]
    assert row.split()[:4] == ["discord", "no", "permanent", "404"]


def test_an_unknown_channel_is_one_line_naming_those_configured(rx, tmp_path):
    done = notify_test(rx, tmp_path, "--channel", "pager\nduty")
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "no such channel; channels: slack, discord, webhook" in line
    assert rx.requests == []
