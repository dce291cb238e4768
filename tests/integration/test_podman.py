"""The same containers on Docker and on Podman look the same to Guardian: `guardian check` prints
the same table, and `guardian status` says which engine it watches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import wait_until
from tests.integration.conftest import REPO, Containers, base_config


def cli(tmp: Path, url: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    tmp.mkdir(exist_ok=True)
    sections: dict[str, Any] = {"log": {"level": "warning"}}
    if url is not None:
        sections["docker"] = {"url": url}
    (tmp / "config.yaml").write_text(yaml.safe_dump(base_config(tmp, **sections)))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "guardian.entrypoints.cli",
            *args,
            "--config",
            str(tmp / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=dict(os.environ),
    )


def host_of_every_kind(c: Containers) -> None:
    """One container per row kind of the check table."""
    sick = c.run("sick", health_cmd="false")
    fine = c.run("fine", health_cmd="true")
    c.run("slow", health_cmd="true", health_interval=600)  # stays "starting"
    c.run("plain")  # no healthcheck
    quits = c.run("quits", ["sh", "-c", "exit 3"])
    done = c.run("done", ["sh", "-c", "exit 0"])
    paused = c.run("paused", health_cmd="true")
    c.wait_health(paused, "healthy")
    c.api.pause(paused)
    c.wait_health(sick, "unhealthy")
    c.wait_health(fine, "healthy")
    for name in (quits, done):
        wait_until(lambda n=name: c.inspect(n)["State"]["Status"] == "exited", 20, message=name)


def test_check_prints_the_same_table_on_docker_and_on_podman(
    docker_api, podman_service, tmp_path, request
):
    on_docker = Containers(docker_api, request.node.name)
    on_podman = Containers(podman_service.api, request.node.name, podman_service.healthchecks)
    try:
        host_of_every_kind(on_docker)
        host_of_every_kind(on_podman)
        tables = {}
        for kind, url in (("docker", None), ("podman", podman_service.url)):
            proc = cli(tmp_path / kind, url, "check")
            assert proc.returncode == 0, proc.stderr
            header, *body = proc.stdout.splitlines()
            tables[kind] = [header, *sorted(body)]
        assert len(tables["docker"]) == 1 + 7
        assert tables["podman"] == tables["docker"]
        assert any("unhealthy" in row and "would restart" in row for row in tables["podman"])
    finally:
        on_docker.remove_all()
        on_podman.remove_all()


def test_status_names_the_engine_it_watches(podman_service, tmp_path):
    for kind, url in (("podman", podman_service.url), ("docker", None)):
        assert cli(tmp_path / kind, url, "check").returncode == 0  # creates the store
    text = cli(tmp_path / "podman", podman_service.url, "status")
    assert text.returncode == 0, text.stderr
    last = text.stdout.strip().splitlines()[-1]  # after the tables, which scripts parse
    assert last.startswith("engine: podman 4.") and last.endswith(podman_service.url)
    doc = json.loads(cli(tmp_path / "podman", podman_service.url, "status", "--json").stdout)
    assert doc["engine"]["kind"] == "podman" and doc["engine"]["api_version"] == "1.41"
    docker = json.loads(cli(tmp_path / "docker", None, "status", "--json").stdout)
    assert docker["engine"]["kind"] == "docker"
