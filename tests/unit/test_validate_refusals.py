"""`guardian config validate` refuses what `guardian run` refuses at load, in the same words
and with the same exit code: under systemd, validate is the reload step (ExecReload), so a
config it passes must start."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from guardian.entrypoints.cli import main


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "store": {"path": str(tmp_path / "state" / "guardian.db")},
                "http": {"listen": "127.0.0.1:0"},
                "docker": {"url": f"unix://{tmp_path}/no-engine.sock"},
            }
        )
    )
    return path


def both(config: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str]]:
    said = []
    for command in (["config", "validate"], ["run"]):
        code = main([*command, "--config", str(config)])
        said.append((code, capsys.readouterr().err.strip()))
    return said


@pytest.mark.parametrize(
    ("token", "words"),
    [
        ("a1b2c3d4e5f6g", "the token is 13 characters; expected at least 32"),
        ("x" * 40, "the token has 1 distinct characters; expected at least 8"),
        ("abcabcabc" * 5, "the token has 3 distinct characters; expected at least 8"),
    ],
)
def test_validate_refuses_a_token_run_refuses_in_the_same_words(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    token: str, words: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("GUARDIAN_API_TOKEN", token)
    validate, run = both(config, capsys)
    assert validate == run, (validate, run)
    code, line = validate
    assert code == 2 and line == (
        f"guardian: config error: api.token_env = 'GUARDIAN_API_TOKEN': {words} (make one with "
        "`guardian token new` or `openssl rand -hex 32`)"
    )
    assert token not in line


def test_validate_refuses_a_receiver_run_refuses_in_the_same_words(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = yaml.safe_load(config.read_text())
    values["notify"] = {"channels": [{"name": "ops", "type": "webhook", "url_env": "OPS_URL"}]}
    config.write_text(yaml.safe_dump(values))
    monkeypatch.delenv("OPS_URL", raising=False)
    validate, run = both(config, capsys)
    assert validate == run and validate[0] == 2, (validate, run)
    assert validate[1].startswith("guardian: config error: notify.channels (ops).url"), validate


def test_validate_refuses_a_heartbeat_run_refuses_in_the_same_words(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = yaml.safe_load(config.read_text())
    values["heartbeat"] = {"url_env": "PING_URL"}
    config.write_text(yaml.safe_dump(values))
    monkeypatch.setenv("PING_URL", "ftp://monitor.example/ping")
    validate, run = both(config, capsys)
    assert validate == run and validate[0] == 2, (validate, run)
    assert "heartbeat.url: expected an http:// or https:// URL" in validate[1]


def test_validate_passes_a_good_token(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUARDIAN_API_TOKEN", "0123456789abcdef" * 4)
    assert main(["config", "validate", "--config", str(config)]) == 0
    assert capsys.readouterr().out.startswith("config ok (")
