"""Guardian on a swarm node: it observes and reports Swarm's tasks and never restarts them.

A single-node swarm on a PRIVATE dockerd (bench/engine.py: its own socket, data root and
bridge under /tmp), never on the shared engine; the swarm is left with the engine afterwards.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.types
import pytest

from bench.engine import PrivateEngine
from tests.helpers import require_tool, wait_until
from tests.integration.conftest import RUN_ID, EventRecorder

SERVICE = f"gdt-{RUN_ID}-web"
SICK = "/tmp/sick"


@pytest.fixture(scope="module")
def swarm(docker_api) -> Iterator[PrivateEngine]:
    """A private dockerd that is a single-node swarm manager (listening on 127.0.0.1 only)."""
    require_tool("dockerd", "docker.io")
    engine = PrivateEngine().start()
    try:
        api = docker.APIClient(base_url=engine.url, version="auto", timeout=60)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        api.init_swarm(advertise_addr="127.0.0.1", listen_addr=f"127.0.0.1:{port}")
        api.close()
        yield engine
    finally:
        engine.stop()


class RunningCount:
    """Samples how many containers of the service run at once, every 100 ms, in a thread."""

    def __init__(self, api: docker.APIClient) -> None:
        self.api = api
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        selector = f"com.docker.swarm.service.name={SERVICE}"
        while not self._stop.wait(0.1):
            with contextlib.suppress(Exception):
                running = self.api.containers(filters={"label": selector, "status": "running"})
                self.most = max(self.most, len(running))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.most


def rows(db: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


def task_containers(api: docker.APIClient, status: str = "running") -> list[dict]:
    selector = f"com.docker.swarm.service.name={SERVICE}"
    return api.containers(filters={"label": selector, "status": status})  # type: ignore[no-any-return]


def test_an_unhealthy_swarm_task_is_reported_and_left_to_swarm(swarm, guardian):
    client = docker.DockerClient(base_url=swarm.url, version="auto", timeout=60)
    api = client.api
    events = EventRecorder(api)
    client.services.create(
        "guardian-test-busybox:latest",
        ["sleep", "86400"],
        name=SERVICE,
        container_labels={"guardian.enable": "true", "guardian.test.run": RUN_ID},
        healthcheck=docker.types.Healthcheck(
            test=["CMD-SHELL", f"test ! -f {SICK}"], interval=int(1e9), retries=1
        ),
        # PID 1 ignores SIGTERM: Swarm stops the unhealthy task only after 15 s, so a Guardian
        # slowed by a loaded host still sees it unhealthy and running (and could restart it).
        stop_signal="SIGTERM",
        stop_grace_period=int(15e9),
    )
    [task] = wait_until(
        lambda: [c for c in task_containers(api) if "(healthy)" in c["Status"]],
        90,
        message="the service's task runs healthy",
    )
    g = guardian(docker={"url": swarm.url})
    wait_until(lambda: g.lines("sweep done"), 30, message="first sweep")
    count = RunningCount(api)

    api.exec_start(api.exec_create(task["Id"], ["touch", SICK]))
    db = g.store_path
    wait_until(
        lambda: rows(db, "SELECT * FROM actions WHERE reason='orchestrator_managed'"),
        60,
        message="Guardian decided Swarm owns it",
    )
    replacement = wait_until(
        lambda: [
            c for c in task_containers(api) if c["Id"] != task["Id"] and "(healthy)" in c["Status"]
        ],
        120,
        message="Swarm replaced the task",
    )
    # Give Guardian a few more sweeps (2 s each) to do anything it should not.
    sweeps = len(g.lines("sweep done"))
    wait_until(lambda: len(g.lines("sweep done")) >= sweeps + 3, 30, message="three more sweeps")
    most = count.stop()
    events.close()

    names = {c["Names"][0].lstrip("/") for c in (task, *replacement)}
    restarts = [(n, a) for n in names for a, _ in events.of(n) if a == "restart"]
    assert restarts == [], restarts  # the engine's own event stream: Guardian restarted none
    assert most == 1, f"{most} containers of one replica ran at once"
    assert len(task_containers(api)) == 1

    [incident] = rows(db, "SELECT * FROM incidents WHERE type='unhealthy'")
    assert incident["container_id"] == task["Id"]
    [held] = rows(db, "SELECT * FROM actions WHERE reason='orchestrator_managed'")
    assert held["kind"] == "decision" and held["outcome"] == "policy_denied"
    assert f"Docker Swarm (service {SERVICE}) owns it" in held["detail"]
    assert rows(db, "SELECT * FROM actions WHERE kind='restart'") == []
    opened = [
        json.loads(r["payload"])
        for r in rows(db, "SELECT payload FROM outbox WHERE kind='opened'")
        if json.loads(r["payload"])["incident_id"] == incident["id"]
    ]
    assert len(opened) == 1
    assert f"Docker Swarm (service {SERVICE}) owns it" in opened[0]["next_step"]
    assert g.stop() == 0
    client.close()
