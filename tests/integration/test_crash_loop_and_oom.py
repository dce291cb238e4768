"""Crash loops and OOM kills of real containers, judged by a real `guardian run`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers import wait_until
from tests.integration.conftest import ENGINES
from tests.integration.see_more import WATCH, actions, incidents, watched


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_container_docker_keeps_restarting_is_one_crash_loop_incident(containers, guardian):
    name = containers.run(
        "crasher",
        ["sh", "-c", "echo cannot reach the database; exit 3"],
        enable=None,
        labels=watched(),
        restart_policy={"Name": "always"},
    )
    g = guardian(watch={"label": WATCH}, crash_loop={"restarts": 3, "window": "60s"})
    db = g.store_path
    wait_until(lambda: incidents(db, name, "crash_loop"), 30, message="crash_loop incident")
    # Let Docker restart it a few more times: still one incident, never a restart by Guardian.
    seen = containers.inspect(name)["RestartCount"]
    wait_until(lambda: containers.inspect(name)["RestartCount"] >= seen + 2, 30)
    first = incidents(db, name)[0]["last_seen"]
    wait_until(lambda: incidents(db, name)[0]["last_seen"] > first, 15, message="re-detected")

    [incident] = incidents(db, name)
    assert incident["type"] == "crash_loop" and incident["state"] == "active"
    assert incident["occurrences"] == 1  # one loop, however often it was seen
    assert "last exit codes: 3" in incident["detail"]
    assert "log tail: cannot reach the database" in incident["detail"]
    assert [a for a in actions(db, name) if a["kind"] == "restart"] == []
    assert not [line for line in g.lines("restarting container") if name in line]
    assert g.stop() == 0


def test_a_container_allocating_past_its_memory_limit_is_an_oom_killed_incident(
    containers, guardian
):
    t0 = datetime.now(UTC)
    g = guardian(watch={"label": WATCH}, restart={"max_attempts": 1})
    name = containers.run(
        "hog",
        # One 64 MiB buffer, filled at once: far past the limit before the kernel can thrash
        # (a shell doubling a string can crawl along at the limit on a busy host). The second of
        # sleep lets the engine attach its OOM monitor first: a kill in the first milliseconds
        # of a container is reported by neither State.OOMKilled nor an oom event.
        ["sh", "-c", "sleep 1; exec dd if=/dev/zero of=/dev/null bs=64M count=1"],
        enable=None,
        labels=watched(),
        mem_limit="8m",
        memswap_limit="8m",
    )
    db = g.store_path
    wait_until(lambda: incidents(db, name, "oom_killed"), 60, message="oom_killed incident")
    # The engine's own event log confirms the kernel killed it (Guardian may have restarted it).
    # `until` counts whole seconds: reach past the current one so its events are included.
    until = datetime.now(UTC) + timedelta(seconds=2)
    events = containers.api.events(
        since=t0, until=until, filters={"container": name, "event": "oom"}, decode=True
    )
    assert sum(1 for _ in events) >= 1
    [incident] = incidents(db, name)
    assert "killed by the kernel OOM killer (exit 137)" in incident["detail"]
    assert "memory limit 8.0 MiB, usage reached the limit" in incident["detail"]
    assert g.stop() == 0
