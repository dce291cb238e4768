"""A real `guardian run` whose store another connection holds for writing (a CLI command, a
backup) while containers break: /healthz keeps answering at once, and once the store is free
again the containers are healed."""

from __future__ import annotations

import sqlite3
import time
import urllib.error
import urllib.request

from tests.helpers import wait_until
from tests.integration.conftest import RUN_ID

HEALTH = "test ! -f /run/sick"
HOLD = 12.0  # seconds: longer than the store's busy timeout (10 s), so writes fail meanwhile


def healthz_seconds(url: str) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(url + "/healthz", timeout=30) as response:
        response.read()
    return time.monotonic() - started


def swept(url: str) -> bool:
    """/healthz answers 200: a sweep completed (503 "no sweep completed yet" before the first)."""
    try:
        return healthz_seconds(url) < 5
    except urllib.error.HTTPError as exc:
        if exc.code == 503:
            return False
        raise


def test_a_held_store_stalls_neither_healthz_nor_the_healing(containers, guardian, request):
    label = f"gdt.watch.{RUN_ID}.{request.node.name[:30]}"
    names = [
        containers.run(short, health_cmd=HEALTH, enable=None, labels={label: "true"})
        for short in ("held-a", "held-b")
    ]
    for name in names:
        containers.wait_health(name, "healthy")
    g = guardian(watch={"interval": "30s", "label": label})
    wait_until(lambda: swept(g.http_url), 20, message="first sweep")
    before = {name: containers.started_at(name) for name in names}
    other = sqlite3.connect(g.store_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock, as `guardian incidents ack` would
    try:
        for name in names:
            containers.make_unhealthy(name)
        slowest, until = 0.0, time.monotonic() + HOLD
        while time.monotonic() < until:
            slowest = max(slowest, healthz_seconds(g.http_url))
            time.sleep(0.2)  # a poller's pace for the whole hold, not a wait for an effect
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert slowest < 2, f"/healthz took {slowest:.1f}s while the store was held"
    for name in names:
        wait_until(
            lambda name=name: containers.started_at(name) != before[name],
            60,
            message=f"{name} restarted",
        )
        containers.wait_health(name, "healthy", 30)
    assert g.stop() == 0
