"""Namespace followers with real containers: an app in the vpn's network namespace reaches the
vpn's server again after Guardian restarted the vpn; an app whose vpn was recreated is an
orphan, reported with the command that fixes it and never restarted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta

import docker.errors

from guardian.adapters.engine.docker_engine import DockerEngine
from tests.helpers import wait_until
from tests.integration.conftest import REPO, RUN_ID
from tests.integration.see_more import HEALTH, WATCH, actions, incidents, watched

# The vpn serves on its loopback only: the app reaches it only from inside the vpn's namespace.
SERVE = ["sh", "-c", "echo up > /tmp/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp"]
# An HTTP GET with nc: this busybox's wget crashes.
REACH = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 1 127.0.0.1 8080 | grep -q '^up'"
COMPOSE = {"com.docker.compose.project": "media", "com.docker.compose.service": "app"}


def show(g, incident_id: int, *args: str) -> str:
    """`guardian incidents show ID` as a separate process, over the daemon's config."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "guardian.entrypoints.cli", "incidents", "show"),
            *(str(incident_id), *args, "--config", str(g.config_path)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout


def reaches(containers, app: str) -> bool:
    """The app's GET to the vpn's loopback succeeds (False while the app is being restarted)."""
    api = containers.api
    try:
        run = api.exec_create(app, ["sh", "-c", REACH])
        api.exec_start(run)
    except docker.errors.APIError:  # 409: not running, between the restart's stop and start
        return False
    return api.exec_inspect(run["Id"])["ExitCode"] == 0


def vpn_and_app(containers, app_labels: dict[str, str] | None = None) -> tuple[str, str]:
    vpn = containers.run("vpn", SERVE, health_cmd=HEALTH, enable=None, labels=watched())
    app = containers.run(
        "app",
        health_cmd=REACH,
        enable=None,
        labels=watched(**(app_labels or {})),
        network_mode=f"container:{vpn}",
    )
    containers.wait_health(vpn, "healthy")
    containers.wait_health(app, "healthy")
    return vpn, app


def test_the_list_tells_the_network_leader_and_an_inspect_the_pid_one_too(containers):
    """What this engine stores: the leader's full id, whatever name was given."""
    vpn = containers.run("vpn")
    app = containers.run("app", network_mode=f"container:{vpn}", pid_mode=f"container:{vpn}")
    leader = containers.inspect(vpn)["Id"]
    engine = DockerEngine("unix:///var/run/docker.sock", timedelta(seconds=10))
    try:
        [listed] = [
            s
            for s in engine.list_containers("guardian.enable", f"guardian.test.run={RUN_ID}")
            if s.name == app
        ]
        assert listed.namespaces == (("network", leader),)  # the list has no PidMode
        inspected = engine.inspect(app)
        assert inspected is not None
        assert inspected.namespaces == (("network", leader), ("pid", leader))
    finally:
        engine.close()


def test_the_app_reaches_the_vpn_again_after_guardian_restarted_the_vpn(
    containers, guardian, engine_events
):
    vpn, app = vpn_and_app(containers)
    assert reaches(containers, app)
    g = guardian(watch={"label": WATCH})
    store = g.store_path
    containers.make_unhealthy(vpn)
    restarted = wait_until(lambda: engine_events.count(vpn, "restart") >= 1, 30, message="vpn")
    assert restarted
    t0 = time.monotonic()
    # The vpn's new namespace cut the app off; Guardian restarts the app into it.
    wait_until(lambda: reaches(containers, app), 30, 0.2, "app reaches the vpn's server")
    assert time.monotonic() - t0 < 30
    wait_until(
        lambda: [a for a in actions(store, app) if a["outcome"] == "succeeded"],
        30,
        message="the app's restart verified",
    )
    [vpn_incident] = incidents(store, vpn)
    [follow] = [a for a in actions(store, app) if a["kind"] == "restart"]
    assert follow["reason"] == "namespace_follower"
    assert follow["incident_id"] == vpn_incident["id"]
    # In the vpn's incident timeline, named.
    timeline = json.loads(show(g, vpn_incident["id"], "--json"))["timeline"]
    assert any(
        e["reason"] == "namespace_follower" and e["event"].endswith(f"({app})") for e in timeline
    ), timeline
    # Each restarted once: the app's own incident (cut off, unhealthy) waited for the vpn.
    assert engine_events.count(vpn, "restart") == 1
    assert engine_events.count(app, "restart") == 1
    assert g.stop() == 0


def test_an_app_whose_vpn_was_recreated_is_an_orphan_and_never_restarted(
    containers, guardian, engine_events
):
    vpn, app = vpn_and_app(containers, app_labels=COMPOSE)
    old = containers.inspect(vpn)["Id"]
    containers.api.remove_container(vpn, force=True)  # docker compose up replaced the vpn
    containers.run("vpn", SERVE, health_cmd=HEALTH, enable=None, labels=watched())
    assert containers.inspect(vpn)["Id"] != old
    starts = engine_events.count(app, "start")  # its own, before Guardian
    g = guardian(watch={"label": WATCH})
    store = g.store_path

    def orphaned() -> list[dict]:
        return incidents(store, app, "orphaned_namespace")

    [incident] = wait_until(orphaned, 30, message="orphaned_namespace incident")
    assert "docker compose up -d --force-recreate app" in incident["detail"]
    assert old[:12] in incident["detail"]
    assert "next step: docker compose up -d --force-recreate app" in show(g, incident["id"])
    # Four sweeps later (2 s apart) it is still one incident and the app was never restarted.
    seen = _swept(g)
    wait_until(lambda: _swept(g) >= seen + 4, 30, message="four more sweeps")
    [again] = orphaned()
    assert again["id"] == incident["id"] and again["last_seen"] > incident["last_seen"]
    assert engine_events.count(app, "restart") == 0
    assert engine_events.count(app, "start") == starts
    assert [a for a in actions(store, app) if a["kind"] == "restart"] == []
    assert g.stop() == 0


def _swept(g) -> int:
    return len(g.lines("sweep done"))
