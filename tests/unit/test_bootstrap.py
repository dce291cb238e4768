"""Where the store goes (config/store.py) and how Guardian recognises its own container
(adapters/instance.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from guardian.adapters.instance import detect_self_id
from guardian.config import load_settings
from guardian.config.store import store_path
from guardian.logs import JsonFormatter, LogfmtFormatter, kv


def test_default_store_falls_back_to_the_xdg_state_dir_when_unwritable(tmp_path, monkeypatch):
    settings = load_settings(None, env={})
    monkeypatch.setattr("guardian.config.store.os.access", lambda *_: False)
    path = store_path(settings, env={"XDG_STATE_HOME": str(tmp_path)})
    assert path == tmp_path / "guardian" / "guardian.db"


def test_an_explicit_store_path_is_used_as_given(tmp_path, monkeypatch):
    settings = load_settings(None, env={"GUARDIAN_STORE_PATH": str(tmp_path / "x.db")})
    monkeypatch.setattr("guardian.config.store.os.access", lambda *_: False)
    assert store_path(settings, env={}) == tmp_path / "x.db"


def test_guardian_finds_its_own_container_id(tmp_path: Path):
    cid = "a" * 64
    (tmp_path / "cgroup").write_text(f"0::/system.slice/docker-{cid}.scope\n")
    assert detect_self_id(tmp_path) == cid
    (tmp_path / "cgroup").write_text("0::/\n")
    (tmp_path / "mountinfo").write_text(
        f"1 2 3:4 /var/lib/docker/containers/{cid}/hostname /etc/hostname rw\n"
    )
    assert detect_self_id(tmp_path) == cid
    (tmp_path / "mountinfo").write_text("1 2 3:4 / / rw\n")
    assert detect_self_id(tmp_path) is None


def record(msg: str, **fields: object) -> logging.LogRecord:
    r = logging.LogRecord("guardian", logging.WARNING, __file__, 1, msg, (), None)
    for k, v in kv(**fields).items():
        setattr(r, k, v)
    return r


def test_logs_are_one_line_key_value_or_json():
    r = record("restarting container", container="web 1", attempt=2, reason=None)
    line = LogfmtFormatter().format(r)
    assert 'msg="restarting container"' in line and 'container="web 1"' in line
    assert "attempt=2" in line and "reason" not in line and "\n" not in line
    doc = json.loads(JsonFormatter().format(r))
    assert doc["msg"] == "restarting container" and doc["attempt"] == 2
    assert doc["level"] == "warning"
