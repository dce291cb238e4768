"""What the operator's terminal receives: container output never acts on it, never holds a
secret, whether Guardian cleaned it on the way in or an older version stored it raw."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.incidents import IncidentChange
from guardian.core.model import Incident, IncidentState, ProblemType
from guardian.entrypoints.cli import main
from tests.app import make_app

HOSTILE = "\x1b[2J\x1b[1;31mALL-CLEAR\x1b[0m\x1b]0;owned\x07 DB_PASSWORD=hunter2 \u202eevil"
AT = datetime(2026, 1, 2, tzinfo=UTC)


def test_health_output_is_stored_clean(tmp_path: Path) -> None:
    t = make_app(tmp_path, restart={"dry_run": True})
    t.engine.add("app", health="unhealthy", health_output=HOSTILE)
    t.healer.sweep()
    [incident] = t.store.list_incidents(t.host, None, "app")
    assert incident.detail == "ALL-CLEAR DB_PASSWORD=*** evil"


@pytest.mark.parametrize("json_out", [False, True])
def test_incidents_show_never_prints_escape_sequences_or_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_out: bool
) -> None:
    # Stored raw, as a Guardian before this one did.
    store = SqliteStore(tmp_path / "guardian.db")
    raw = Incident(
        None,
        socket.gethostname(),
        "app",
        "c" * 64,
        ProblemType.UNHEALTHY,
        IncidentState.ACTIVE,
        AT,
        AT,
        detail=HOSTILE,
        close_reason=HOSTILE,
    )
    saved = store.save_incident(IncidentChange(raw))
    store.close()
    config = tmp_path / "config.yaml"
    config.write_text(f"store:\n  path: {tmp_path / 'guardian.db'}\n")
    argv = ["incidents", "show", str(saved.id), "--config", str(config)]
    assert main(argv + (["--json"] if json_out else [])) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "hunter2" not in out
    if json_out:
        assert json.loads(out)["incident"]["detail"] == "ALL-CLEAR DB_PASSWORD=*** evil"
    else:
        assert "detail:       ALL-CLEAR DB_PASSWORD=*** evil" in out.splitlines()
    assert main(["incidents", "list", "--config", str(config)]) == 0
    assert "\x1b" not in capsys.readouterr().out
