"""`guardian config show`: the effective configuration as YAML, secrets never shown."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from guardian.config import Settings
from guardian.entrypoints.cli import main
from guardian.entrypoints.cli.status import REDACTED, effective_config


def test_shows_every_key_with_file_and_environment_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "restart:\n  cooldown: 90s\ndocker:\n  url: tcp://ops:hunter2@dockerhost:2376\n"
        "notify:\n  alertmanager_url: https://am-user-token@am.lan:9093/?token=QUERYSECRET\n"
        "  slack_api_url: https://slack.example/api?key=K3YSECRET\n"
    )
    monkeypatch.setenv("GUARDIAN_RESTART_MAX_ATTEMPTS", "5")
    assert main(["config", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    for secret in ("hunter2", "am-user-token", "QUERYSECRET", "K3YSECRET"):
        assert secret not in out
    shown = yaml.safe_load(out)
    assert shown["restart"]["cooldown"] == "90s"
    assert shown["restart"]["max_attempts"] == 5
    assert shown["watch"]["start_grace"] == "0s"
    assert shown["docker"]["url"] == "tcp://***@dockerhost:2376"
    assert shown["notify"]["alertmanager_url"] == "https://***@am.lan:9093/?token=***"
    assert shown["notify"]["slack_api_url"] == "https://slack.example/api?key=***"
    assert shown["api"] == {
        "token_env": "GUARDIAN_API_TOKEN",
        "token_file": None,
        "public_reads": False,
    }


def test_secret_keys_are_redacted_but_where_they_come_from_is_shown() -> None:
    settings = Settings(
        {
            "notify": {
                "slack_webhook_url": "https://hooks.slack.com/services/T/B/XYZ",
                "smtp_password": "pw",
                "smtp_password_file": "/run/secrets/smtp",
                "api_token": "t",
                "timeout": timedelta(seconds=5),
            }
        }
    )
    shown = effective_config(settings)["notify"]
    assert shown == {
        "slack_webhook_url": REDACTED,
        "smtp_password": REDACTED,
        "smtp_password_file": "/run/secrets/smtp",
        "api_token": REDACTED,
        "timeout": "5s",
    }
