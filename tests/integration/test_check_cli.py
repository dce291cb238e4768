"""`guardian check`: one sweep with a table of findings and decisions; dry run unless --apply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.integration.conftest import REPO, base_config


def check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(base_config(tmp_path, log={"level": "warning"})))
    return subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", "check", "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=dict(os.environ),
    )


def test_check_is_a_dry_run_table_by_default(containers, tmp_path):
    sick = containers.run("sick", health_cmd="false")
    fine = containers.run("fine", health_cmd="true")
    containers.wait_health(sick, "unhealthy")
    containers.wait_health(fine, "healthy")
    before = containers.started_at(sick)

    proc = check(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["CONTAINER", "STATE", "HEALTH", "FINDING", "DECISION"]
    row = {line.split()[0]: line for line in lines[1:]}
    assert "unhealthy" in row[sick] and "would restart (dry run)" in row[sick]
    assert row[fine].split()[3] == "ok"
    assert containers.started_at(sick) == before  # nothing was touched

    as_json = json.loads(check(tmp_path, "--json").stdout)
    assert as_json["dry_run"] is True
    by_name = {c["container"]: c for c in as_json["containers"]}
    assert by_name[sick]["decision"] == "would restart (dry run)"


def test_check_apply_restarts_and_waits_for_the_verdict(containers, tmp_path):
    name = containers.run("fixme", health_cmd="test ! -f /run/sick")
    containers.wait_health(name, "healthy")
    containers.make_unhealthy(name)
    containers.wait_health(name, "unhealthy")
    before = containers.started_at(name)

    proc = check(tmp_path, "--apply", "--json")
    assert proc.returncode == 0, proc.stderr
    assert containers.started_at(name) != before
    row = {c["container"]: c for c in json.loads(proc.stdout)["containers"]}[name]
    assert row["decision"] == "restart: allowed"
    assert containers.health(name) == "healthy"


def test_check_without_an_engine_fails_with_one_line(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        yaml.safe_dump(
            base_config(
                tmp_path, docker={"url": f"unix://{tmp_path}/nothing.sock", "timeout": "2s"}
            )
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", "check", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("guardian: docker engine at unix://")
    assert "Traceback" not in proc.stderr
