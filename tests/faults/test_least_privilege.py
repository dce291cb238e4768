"""Least privilege: Guardian through a socket proxy that passes only what it needs.

The allow-list below is exactly what Guardian uses, documented in docs/deployment.md: the SDK's
`GET /_ping` and `GET /version` (API version negotiation), `GET /containers/json` (list),
`GET /containers/{id}/json` (inspect), `POST /containers/{id}/restart` and `GET /events`.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import Factory, container_env, run_cli, sample, scrape
from tests.faults.exposure import Exposure
from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder
from tests.proxy import DockerProxy

ALLOWED = [
    ("GET", r"^/_ping$"),
    ("HEAD", r"^/_ping$"),
    ("GET", r"^/version$"),
    ("GET", r"^/containers/json$"),
    ("GET", r"^/containers/[^/]+/json$"),
    ("POST", r"^/containers/[^/]+/restart$"),
    ("POST", r"^/containers/[^/]+/stop$"),  # guardian.action=stop only
    ("GET", r"^/events$"),
]
RESTART = r"^/containers/[^/]+/restart$"


class Filter:
    """The proxy's rule: 403 for anything not on the allow-list (and, optionally, restarts)."""

    def __init__(self) -> None:
        self.denied: list[tuple[str, str]] = []
        self.forbid_restart = False

    def __call__(self, method: str, path: str) -> int | None:
        allowed = any(m == method and re.search(p, path) for m, p in ALLOWED)
        if self.forbid_restart and re.search(RESTART, path):
            allowed = False
        if not allowed:
            self.denied.append((method, path))
            return 403
        return None


@pytest.fixture
def proxy() -> Iterator[tuple[DockerProxy, Filter]]:
    rule = Filter()
    p = DockerProxy(Path(f"/tmp/gdt-lp-{uuid.uuid4().hex[:8]}.sock"), rule=rule).start()
    yield p, rule
    p.stop()


def test_guardian_heals_through_a_proxy_passing_only_list_inspect_restart_events(
    guardian: Factory,
    containers: Containers,
    engine_events: EventRecorder,
    proxy: tuple[DockerProxy, Filter],
    exposure: Exposure,
) -> None:
    p, rule = proxy
    name = containers.run("lp-ok", health_cmd="test ! -f /run/sick", environment=container_env())
    containers.wait_health(name, "healthy")
    g = guardian(docker={"url": p.url})
    wait_until(lambda: g.lines("sweep done"), 20, message="first sweep")
    containers.make_unhealthy(name)
    wait_until(lambda: g.lines("outcome=succeeded"), 60, message="verified restart")
    assert engine_events.count(name, "restart") == 1
    check = run_cli(exposure, "check", "--config", str(g.config_path), "--json")
    assert check.returncode == 0, check.stderr
    assert name in check.stdout
    samples = scrape(g.http_url, exposure)
    assert sample(samples, "guardian_docker_up") == 1
    assert p.count("POST", RESTART) == 1
    assert p.count("GET", r"^/events$") >= 1
    assert rule.denied == [], f"Guardian needed more than the allow-list: {rule.denied}"


def test_forbidden_restart_is_policy_denied_not_retried_and_reported_once(
    guardian: Factory,
    containers: Containers,
    engine_events: EventRecorder,
    proxy: tuple[DockerProxy, Filter],
    exposure: Exposure,
) -> None:
    p, rule = proxy
    rule.forbid_restart = True
    name = containers.run("lp-403", health_cmd="test ! -f /run/sick", environment=container_env())
    containers.wait_health(name, "healthy")
    g = guardian(docker={"url": p.url}, restart={"cooldown": "1s"})
    wait_until(lambda: g.lines("sweep done"), 20, message="first sweep")
    containers.make_unhealthy(name)
    wait_until(lambda: p.count("POST", RESTART) >= 1, 30, message="restart attempted")
    # Many sweeps and cooldowns later (interval 2s, cooldown 1s): still the single request.
    sweeps = len(g.lines("sweep done"))
    wait_until(lambda: len(g.lines("sweep done")) >= sweeps + 5, 30, message="five more sweeps")
    assert p.count("POST", RESTART) == 1, "a forbidden restart was retried"
    assert engine_events.count(name, "restart") == 0
    finished = g.lines("restart finished")
    assert len(finished) == 1 and "outcome=policy_denied" in finished[0]
    db = sqlite3.connect(f"file:{g.store_path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT kind, outcome, reason FROM actions WHERE container=?", (name,)
    ).fetchall()
    db.close()
    # The refused restart, and the decision not to ask again, recorded once.
    assert rows == [
        ("restart", "policy_denied", "allowed"),
        ("decision", "policy_denied", "engine_denied"),
    ]
    samples = scrape(g.http_url, exposure)
    assert sample(samples, "guardian_restarts_total", container=name, outcome="policy_denied") == 1
    assert g.proc is not None and g.proc.poll() is None
